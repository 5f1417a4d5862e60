// The layer registry, layers' attributes as data, the graph's text form and graph edits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "algorithms/registry.h"
#include "dsl/graph_text.h"
#include "examples/small_net.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

using algorithms::layer_registry;
using dsl::AttrValue;

AttrValue read_back(const AttrValue &v) {
    const std::string text = dsl::to_string(v, true);
    size_t pos = 0;
    AttrValue back = dsl::parse_attr_value(text, pos, "test");
    EXPECT_EQ(pos, text.size()) << text;
    return back;
}

TEST(Attrs, EveryValueTypeReadsBackExactly) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> real(-1e6, 1e6);
    for (int i = 0; i < 200; ++i) {
        const double d = real(rng) / (1 + (rng() % 1000));
        EXPECT_EQ(std::get<double>(read_back(d)), d);
        const float f = float(d);
        EXPECT_EQ(float(std::get<double>(read_back(double(f)))), f);
    }
    for (double special : {0.1, -0.0, 1e-300, 3.0, std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()}) {
        const AttrValue back = read_back(special);
        ASSERT_EQ(dsl::type_of(back), dsl::AttrType::Float) << "a whole float stays a float";
        EXPECT_EQ(std::get<double>(back), special);
        EXPECT_EQ(std::signbit(std::get<double>(back)), std::signbit(special));
    }
    EXPECT_TRUE(std::isnan(std::get<double>(read_back(std::nan("")))));
    EXPECT_EQ(std::get<int64_t>(read_back(int64_t(-9007199254740993))), -9007199254740993);
    EXPECT_EQ(std::get<std::vector<int64_t>>(read_back(std::vector<int64_t>{3, -1, 0})),
              (std::vector<int64_t>{3, -1, 0}));
    EXPECT_EQ(std::get<std::vector<double>>(read_back(std::vector<double>{0.5, 2.0, -1e-7})),
              (std::vector<double>{0.5, 2.0, -1e-7}));
    EXPECT_EQ(std::get<std::string>(read_back(std::string("a \"q\" \\ b"))), "a \"q\" \\ b");

    Halide::Buffer<Halide::float16_t> t(3, 5, 2);
    t.for_each_value([&](Halide::float16_t &v) { v = Halide::float16_t(real(rng) / 1e5); });
    dsl::Attrs a, b;
    a.set("w", Halide::Buffer<>(t));
    b.set("w", read_back(Halide::Buffer<>(t)));
    EXPECT_EQ(a, b);
    EXPECT_EQ(dsl::to_string(a.at("w")), "tensor<f16:3x5x2>");
}

TEST(Attrs, MalformedTextIsAnErrorNamingTheColumn) {
    for (const char *bad : {"", "[1,", "tensor<i8:2x2>(00)", "tensor<q8:1>(00)", "tensor<i8:0>()",
                            "tensor<i8:2>(zz11)", "99999999999999999999", "\"open", "[1,x]"}) {
        size_t pos = 0;
        EXPECT_THROW(dsl::parse_attr_value(bad, pos, "attr"), dsl::AttrError) << bad;
    }
}

TEST(Attrs, TypedReadsNameTheAttribute) {
    dsl::Attrs a;
    a.set("k", int64_t(3));
    EXPECT_EQ(a.get_float("k"), 3.0);
    try {
        a.get_string("k");
        FAIL();
    } catch (const dsl::AttrError &e) {
        EXPECT_NE(std::string(e.what()).find("'k' is int, not string"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(a.get_int("missing"), Error) << "AttrError is a vpuc::Error";
}

TEST(LayerRegistry, HoldsTheLibraryWithSchemasAndDocs) {
    const auto all = layer_registry().all();
    std::vector<std::string> ops;
    for (const auto *def : all) {
        ops.push_back(def->op);
        EXPECT_FALSE(def->doc.empty()) << def->op;
        EXPECT_TRUE(!def->inputs.empty() || def->op == "constant") << def->op;
        EXPECT_TRUE(def->build || def->fold) << def->op;
    }
    for (const char *op :
         {"conv2d", "depthwise_conv2d", "matmul", "max_pool", "avg_pool", "add", "sub", "mul",
          "max", "min", "relu", "clamp", "leaky_relu", "sigmoid", "softmax"})
        EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
    EXPECT_THROW(layer_registry().at("no_such_op"), dsl::AttrError);
}

// A network using every registered op, int8 or fp16.
dsl::Graph every_op(dsl::ElemType type) {
    const bool int8 = type == dsl::ElemType::U8;
    auto in = dsl::Layer::input(test::activation("in", 19, 11, 9, type));
    algorithms::Conv2dParams p;
    p.stride_w = 2;
    p.pad_left = p.pad_top = 1;
    p.pad_right = p.pad_bottom = 2;
    p.dilation_h = 2;
    p.activation = algorithms::Activation::leaky_relu(0.125f);
    std::mt19937 rng(5);
    auto fp_weights = [&](int a, int k, int oc) {
        algorithms::FloatWeights w;
        w.weights = Halide::Buffer<Halide::float16_t>(a, k, k, oc);
        w.weights.for_each_value([&](Halide::float16_t &v) {
            v = Halide::float16_t(float(int(rng() % 200) - 100) / 317);
        });
        for (int c = 0; c < oc; ++c) {
            w.bias.push_back(float(c) / 7);
            w.scale.push_back(1 + float(c) / 64);
        }
        return w;
    };
    dsl::Layer conv, dw;
    if (int8) {
        conv = algorithms::conv2d("conv", in, test::weights(19, 3, 21, 1), p);
        algorithms::QuantWeights dww = test::weights(1, 3, 21, 2);
        dw = algorithms::depthwise_conv2d("dw", conv, dww, {});
    } else {
        conv = algorithms::conv2d("conv", in, fp_weights(19, 3, 21), p);
        dw = algorithms::depthwise_conv2d("dw", conv, fp_weights(1, 3, 21), {});
    }
    algorithms::PoolParams pool;
    pool.kernel_w = pool.kernel_h = 3;
    pool.pad_left = pool.pad_top = pool.pad_right = pool.pad_bottom = 1;
    dsl::Layer mp = algorithms::max_pool("mp", dw, pool);
    dsl::Layer ap = algorithms::avg_pool("ap", mp, pool);
    std::optional<algorithms::QuantEltwise> q;
    if (int8)
        q = algorithms::quant_eltwise(algorithms::EltwiseOp::Add, ap.output().quant,
                                      mp.output().quant, dsl::ElemType::U8,
                                      dsl::Quant::per_tensor(0.1f, 7));
    dsl::Layer sum = algorithms::eltwise("sum", algorithms::EltwiseOp::Add, ap, mp, {}, q);
    dsl::Layer biggest =
        algorithms::eltwise("biggest", algorithms::EltwiseOp::Max, sum, mp, {},
                            int8 ? std::optional(algorithms::quant_eltwise(
                                       algorithms::EltwiseOp::Max, sum.output().quant,
                                       mp.output().quant, dsl::ElemType::U8, sum.output().quant))
                                 : std::nullopt);
    dsl::Layer r = algorithms::relu("r", biggest);
    dsl::Layer c = algorithms::clamp("c", r, 0.5f, 6.0f);
    dsl::Layer lr = algorithms::leaky_relu("lr", c, 0.25f);
    dsl::Layer sg = algorithms::sigmoid("sg", lr);
    dsl::Layer sm = algorithms::softmax("sm", sg, dsl::dims::W);
    return dsl::Graph(int8 ? "every_op_int8" : "every_op_fp16", {sm, biggest});
}

std::vector<Halide::Buffer<>> inputs_for(const dsl::Graph &g) {
    std::vector<Halide::Buffer<>> inputs;
    uint32_t seed = 11;
    for (const auto &in : g.inputs()) inputs.push_back(test::random_input(in.output(), seed++));
    return inputs;
}

void expect_same_results(const dsl::Graph &a, const dsl::Graph &b) {
    const auto inputs = inputs_for(a);
    const auto ra = algorithms::run_reference(a, inputs), rb = algorithms::run_reference(b, inputs);
    ASSERT_EQ(ra.size(), rb.size());
    for (size_t i = 0; i < ra.size(); ++i)
        EXPECT_EQ(test::bytes_of(ra[i]), test::bytes_of(rb[i])) << a.name() << " output " << i;
}

TEST(LayerRegistry, EveryLayerRebuildsFromItsAttributes) {
    for (auto type : {dsl::ElemType::U8, dsl::ElemType::F16}) {
        const dsl::Graph g = every_op(type);
        for (const auto &layer : g.layers()) {
            ASSERT_NE(layer_registry().find(layer.op()), nullptr) << layer.op();
            for (const auto &spec : layer_registry().at(layer.op()).attrs)
                EXPECT_TRUE(spec.optional || layer.attrs().has(spec.name))
                    << layer.name() << " " << spec.name;
            const dsl::Layer again =
                layer_registry().build(layer.op(), layer.name(), layer.inputs(), layer.attrs());
            EXPECT_EQ(again.attrs(), layer.attrs()) << layer.name();
            EXPECT_EQ(dsl::tensor_text(again.output()), dsl::tensor_text(layer.output()));
        }
        g.verify(&layer_registry());
    }
}

TEST(LayerRegistry, AttributeErrorsNameTheLayerAndAttribute) {
    auto in = dsl::Layer::input(test::activation("in", 16, 8, 8));
    auto expect_error = [&](const std::string &op, const dsl::Attrs &attrs,
                            const std::string &says) {
        try {
            layer_registry().build(op, "L", {in}, attrs);
            ADD_FAILURE() << "no error for " << says;
        } catch (const dsl::AttrError &e) {
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("'L'"), std::string::npos) << e.what();
        }
    };
    dsl::Attrs pool;
    pool.set("kernel_shape", std::vector<int64_t>{2, 2});
    expect_error("max_pool", dsl::Attrs(pool).set("stride", std::vector<int64_t>{2, 2}),
                 "unknown attribute 'stride'");
    expect_error("max_pool", dsl::Attrs(pool).set("strides", std::vector<int64_t>{0, 2}),
                 "'strides' = [0,2]");
    expect_error("max_pool", dsl::Attrs(pool).set("pads", std::vector<int64_t>{1, 1}),
                 "expected 4 values");
    expect_error("max_pool", dsl::Attrs(pool).set("strides", std::string("2")),
                 "'strides' is string, expected ints");
    expect_error("max_pool", {}, "missing required attribute 'kernel_shape'");
    expect_error("leaky_relu", dsl::Attrs().set("alpha", -1.0), "'alpha'");
    expect_error("conv2d", {}, "missing required attribute 'weights'");
    // Integers read where floats are expected become floats.
    const dsl::Layer c = layer_registry().build(
        "clamp", "L", {in}, dsl::Attrs().set("low", int64_t(0)).set("high", int64_t(6)));
    EXPECT_EQ(dsl::type_of(c.attrs().at("low")), dsl::AttrType::Float);
}

TEST(LayerRegistry, SoftmaxMayNotSplitItsAxis) {
    auto in = dsl::Layer::input(test::activation("in", 16, 8, 8));
    const dsl::Layer sm = algorithms::softmax("sm", in, dsl::dims::H);
    const auto dims = layer_registry().unsplittable_dims(sm);
    ASSERT_EQ(dims.size(), 1u);
    EXPECT_EQ(dims[0], dsl::dims::H);
    EXPECT_TRUE(layer_registry().unsplittable_dims(algorithms::relu("r", in)).empty());
}

TEST(GraphText, ReadsBackIntoTheSameGraph) {
    std::vector<dsl::Graph> graphs = {every_op(dsl::ElemType::U8), every_op(dsl::ElemType::F16),
                                      examples::small_net(1).graph};
    graphs[0].find("conv").schedule().split("y", "yo", "yi", 4).on_dpu();
    for (const dsl::Graph &g : graphs) {
        const std::string text = dsl::print_graph(g, {true, true});
        const dsl::Graph back = dsl::read_graph(text, layer_registry());
        EXPECT_EQ(dsl::print_graph(back, {true, true}), text);
        ASSERT_EQ(back.layers().size(), g.layers().size());
        for (size_t i = 0; i < g.layers().size(); ++i) {
            EXPECT_EQ(back.layers()[i].attrs(), g.layers()[i].attrs());
            EXPECT_EQ(back.layers()[i].schedule(), g.layers()[i].schedule());
        }
        expect_same_results(g, back);
    }
}

TEST(GraphText, OneLinePerLayerWithOpTensorsAttributesAndSchedule) {
    dsl::Graph g = examples::small_net(1).graph;
    g.find("pool1").schedule().on_shave();
    const std::string text = dsl::print_graph(g);
    EXPECT_NE(text.find("graph \"small_net\"\n"), std::string::npos) << text;
    EXPECT_NE(text.find("input %image : 1x32x28x28 u8 NHWC q(0.00392156886,0)\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("%pool1 = max_pool(%conv1) {kernel_shape=[2,2], strides=[2,2], "
                        "pads=[0,0,0,0], activation=\"none\""),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("weights=tensor<i8:32x3x3x64>, weight_zero_point=0, "
                        "bias=tensor<i32:64>"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find(": 1x64x14x14 u8 NHWC q(0.0500000007,0) schedule on_shave()\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("\noutput %prob\n"), std::string::npos) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 1 + 4 + 1);
}

TEST(GraphText, NamesWithOtherCharactersAreQuoted) {
    const std::string odd = std::string("conv/1 \"a\"\0b\n\\n", 16);
    auto in = dsl::Layer::input(test::activation("in put", 16, 4, 4));
    const dsl::Graph g("g", {algorithms::relu(odd, in)});
    const std::string text = dsl::print_graph(g, {true, true});
    EXPECT_NE(text.find("input %\"in put\" :"), std::string::npos) << text;
    const dsl::Graph back = dsl::read_graph(text, layer_registry());
    EXPECT_EQ(back.outputs()[0].name(), odd);
    EXPECT_EQ(back.inputs()[0].name(), "in put");
}

TEST(GraphText, ErrorsNameTheLine) {
    const std::string good = dsl::print_graph(examples::small_net(1).graph, {true, true});
    auto expect_error = [&](const std::string &text, const std::string &says) {
        try {
            dsl::read_graph(text, layer_registry());
            ADD_FAILURE() << "no error for " << says;
        } catch (const dsl::GraphError &e) {
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
    };
    auto replaced = [&](const std::string &from, const std::string &to) {
        std::string t = good;
        const size_t at = t.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        return at == std::string::npos ? t : t.replace(at, from.size(), to);
    };
    expect_error("", "empty");
    expect_error(replaced("max_pool(", "maxpool("), "line 4");
    expect_error(replaced("max_pool(", "maxpool("), "no layer op 'maxpool'");
    expect_error(replaced("max_pool(%conv1)", "max_pool(%conv9)"), "reads 'conv9'");
    expect_error(replaced("kernel_shape=[2,2]", "kernel_shape=[3,3]"), "produces 1x64x13x13");
    expect_error(replaced("\noutput %prob", "\noutput %nothing"), "'nothing' is not defined");
    expect_error(replaced("1x32x28x28 u8", "1x32x28x28 q8"), "unknown element type 'q8'");
    expect_error(good + "junk\n", "line 8");
    expect_error(replaced("strides=[2,2]", "strides=[2,2"), "line 4");
}

TEST(GraphEdit, InsertReplaceRemoveAndRenameKeepItVerified) {
    dsl::Graph g = examples::small_net(1).graph;
    const dsl::Graph original = examples::small_net(1).graph;
    const dsl::Layer conv2 = g.find("conv2");

    // A relu after conv1: pool1 now reads it.
    g.insert_after("conv1", algorithms::relu("conv1_relu", g.find("conv1")));
    EXPECT_TRUE(g.find("pool1").inputs()[0].same_as(g.find("conv1_relu")));
    EXPECT_EQ(g.layers().size(), 5u);
    expect_same_results(original, g); // conv1 already ends in ReLU

    // Removing it again.
    g.remove("conv1_relu");
    EXPECT_TRUE(g.find("pool1").inputs()[0].same_as(g.find("conv1")));
    EXPECT_THROW(g.find("conv1_relu"), dsl::GraphError);

    // Replacing the pool by a rebuilt one with other attributes but the same output.
    const dsl::Layer pool1 = g.find("pool1");
    dsl::Attrs avg = pool1.attrs();
    const dsl::Layer avg_pool =
        layer_registry().build("avg_pool", "pool1_avg", pool1.inputs(), avg);
    g.replace("pool1", avg_pool);
    EXPECT_TRUE(conv2.inputs()[0].same_as(avg_pool));
    g.verify(&layer_registry());

    // A replacement of another shape: refused, and nothing changed.
    dsl::Attrs bigger = avg;
    bigger.set("strides", std::vector<int64_t>{1, 1});
    const dsl::Layer wrong =
        layer_registry().build("avg_pool", "pool1_wrong", pool1.inputs(), bigger);
    try {
        g.replace("pool1_avg", wrong);
        FAIL();
    } catch (const dsl::GraphError &e) {
        EXPECT_NE(std::string(e.what()).find("layer 'conv2'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("built for 1x64x14x14"), std::string::npos)
            << e.what();
    }
    EXPECT_TRUE(conv2.inputs()[0].same_as(avg_pool));
    g.verify();

    // Renaming: names stay unique.
    g.rename("pool1_avg", "pool");
    EXPECT_EQ(g.find("pool").output().name, "pool");
    EXPECT_THROW(g.rename("pool", "conv1"), dsl::GraphError);

    // The output can be replaced too; a layer inserted that does not read the producer is refused.
    EXPECT_THROW(g.insert_after("conv1", algorithms::relu("x", g.find("conv2"))), dsl::GraphError);
    g.insert_after("prob", algorithms::relu("prob_relu", g.find("prob")));
    EXPECT_EQ(g.outputs()[0].name(), "prob_relu");

    // The edited graph still compiles and matches its reference.
    test::compile_and_check(g, "vpu27");
}

TEST(GraphEdit, ACloneIsEditedAndScheduledApart) {
    dsl::Graph g = examples::small_net(1).graph;
    g.find("conv2").schedule().on_dpu();
    const std::string before = dsl::print_graph(g);
    dsl::Graph copy = g.clone();
    EXPECT_FALSE(copy.find("conv2").same_as(g.find("conv2")));
    EXPECT_TRUE(copy.find("image").same_as(g.find("image"))) << "graph inputs stay shared";
    EXPECT_EQ(copy.find("conv2").attrs(), g.find("conv2").attrs());
    EXPECT_EQ(copy.find("conv2").schedule(), g.find("conv2").schedule());
    copy.find("conv2").schedule().prefetch(2);
    copy.insert_after("conv1", algorithms::relu("extra", copy.find("conv1")));
    copy.rename("prob", "probabilities");
    EXPECT_EQ(g.find("conv2").schedule().to_string(), "on_dpu()");
    EXPECT_EQ(g.layers().size(), 4u);
    EXPECT_EQ(g.outputs()[0].name(), "prob");
    EXPECT_EQ(dsl::print_graph(g), before);
    expect_same_results(g, copy);
}

TEST(ElementTypes, GraphTypesMapOntoDeviceTypesAtOneCheckedPoint) {
    EXPECT_EQ(dsl::device_type(dsl::ElemType::I64), dsl::ElemType::I32);
    EXPECT_EQ(dsl::device_type(dsl::ElemType::Bool), dsl::ElemType::U8);
    EXPECT_EQ(dsl::device_type(dsl::ElemType::F64), dsl::ElemType::F32);
    EXPECT_EQ(dsl::device_type(dsl::ElemType::F16), dsl::ElemType::F16);
    EXPECT_FALSE(dsl::is_device_type(dsl::ElemType::I64));
    EXPECT_TRUE(dsl::is_device_type(dsl::ElemType::I32));
    EXPECT_EQ(dsl::bytes_of(dsl::ElemType::I64), 8);
    EXPECT_EQ(dsl::bytes_of(dsl::ElemType::Bool), 1);

    dsl::TensorDesc idx;
    idx.name = "indices";
    idx.shape = dsl::Shape({5});
    idx.type = dsl::ElemType::I64;
    idx.order = dsl::DimsOrder::identity(1);
    Halide::Buffer<int64_t> values(5);
    for (int i = 0; i < 5; ++i) values(i) = int64_t(i) * 1000000000 - 2000000000;
    Halide::Buffer<int32_t> fits(dsl::to_device(idx, values));
    EXPECT_EQ(fits(0), -2000000000);
    EXPECT_EQ(fits(4), 2000000000);
    values(3) = int64_t(INT32_MAX) + 1;
    try {
        dsl::to_device(idx, values);
        FAIL();
    } catch (const dsl::LayerError &e) {
        EXPECT_STREQ(e.what(), "tensor 'indices': element 3 (2147483648) does not fit in i32");
    }

    dsl::TensorDesc mask = idx;
    mask.name = "mask";
    mask.type = dsl::ElemType::Bool;
    Halide::Buffer<bool> bits(5);
    for (int i = 0; i < 5; ++i) bits(i) = i % 2;
    Halide::Buffer<uint8_t> bytes(dsl::to_device(mask, bits));
    EXPECT_EQ(bytes(0), 0);
    EXPECT_EQ(bytes(1), 1);

    dsl::TensorDesc real = idx;
    real.name = "scale";
    real.type = dsl::ElemType::F64;
    Halide::Buffer<double> doubles(5);
    doubles.fill(0.1);
    EXPECT_EQ(Halide::Buffer<float>(dsl::to_device(real, doubles))(2), 0.1f);
    doubles(4) = 1e300;
    EXPECT_THROW(dsl::to_device(real, doubles), dsl::LayerError);
    EXPECT_THROW(dsl::to_device(real, values), dsl::LayerError) << "values of another type";
}

TEST(ElementTypes, TheLoweringRefusesATypeTheDeviceLacks) {
    dsl::TensorDesc t = test::activation("flags", 16, 4, 4, dsl::ElemType::Bool);
    const dsl::Graph g(
        "g", {algorithms::relu("r", dsl::Layer::input(test::activation("in", 16, 4, 4)))});
    try {
        codegen::lower(dsl::Graph("g", {dsl::Layer::input(t)}), target::load_target("vpu27"));
        FAIL();
    } catch (const codegen::LoweringError &e) {
        EXPECT_NE(std::string(e.what()).find("graph input 'flags' is bool, which the device does "
                                             "not have"),
                  std::string::npos)
            << e.what();
    }
    // The text form names the wider types too.
    dsl::TensorDesc wide = t;
    wide.type = dsl::ElemType::I64;
    EXPECT_EQ(dsl::tensor_text(wide), "1x16x4x4 i64 NHWC");
}

TEST(GraphEdit, ACycleIsRefused) {
    auto in = dsl::Layer::input(test::activation("in", 16, 8, 8));
    dsl::Layer a = algorithms::relu("a", in);
    dsl::Layer b = algorithms::relu("b", a);
    dsl::Graph g("cycle", {b});
    // a reads b, which reads a.
    EXPECT_THROW(g.replace("in", b), dsl::GraphError);
    EXPECT_TRUE(a.inputs()[0].same_as(in));
    g.verify();
}

} // namespace
} // namespace vpuc
