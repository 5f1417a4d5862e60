// ONNX's comparisons, logical ops, BitShift, Pow, Mod, Where and PRelu: the layers' CPU
// reference against plain loops written from the definitions (numpy's), on random real values
// and exact small fractions (equal elements, negative bases, zero divisors, NaN), broadcast both
// ways over odd extents; their folding of constants; constant_eltwise's forms with a constant;
// and the backend node tests, imported, compiled and run on the simulator.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <tuple>

#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "dsl/constant_values.h"
#include "frontend/onnx_import.h"
#include "onnx_node_test.h"

using namespace vpuc;
using dsl::ElemType;
using Halide::Buffer;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// [1, c, h, w], row-major: a buffer of dims (c, x, y).
dsl::Layer input(const std::string &name, int64_t c, int64_t h, int64_t w, ElemType type) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape{1, c, h, w};
    t.type = type;
    return dsl::Layer::input(t);
}

dsl::Layer build(const std::string &op, const std::vector<dsl::Layer> &inputs,
                 const dsl::Attrs &attrs = {}) {
    return algorithms::layer_registry().build(op, op, inputs, attrs);
}

double get(const Buffer<> &b, int c, int x, int y) {
    if (b.type() == Halide::Float(16)) return double(b.as<Halide::float16_t>()(c, x, y));
    if (b.type() == Halide::Float(32)) return b.as<float>()(c, x, y);
    if (b.type() == Halide::UInt(8)) return b.as<uint8_t>()(c, x, y);
    if (b.type() == Halide::Int(8)) return b.as<int8_t>()(c, x, y);
    return b.as<int32_t>()(c, x, y);
}

void put(Buffer<> &b, int c, int x, int y, double v) {
    if (b.type() == Halide::Float(16))
        b.as<Halide::float16_t>()(c, x, y) = Halide::float16_t(v);
    else if (b.type() == Halide::Float(32))
        b.as<float>()(c, x, y) = float(v);
    else if (b.type() == Halide::UInt(8))
        b.as<uint8_t>()(c, x, y) = uint8_t(v);
    else if (b.type() == Halide::Int(8))
        b.as<int8_t>()(c, x, y) = int8_t(v);
    else
        b.as<int32_t>()(c, x, y) = int32_t(v);
}

// A buffer for `layer` of values from `draw`.
Buffer<> values(const dsl::Layer &layer, const std::function<double()> &draw) {
    Buffer<> b = algorithms::make_buffer(layer.output());
    for (int y = 0; y < b.dim(2).extent(); ++y)
        for (int x = 0; x < b.dim(1).extent(); ++x)
            for (int c = 0; c < b.dim(0).extent(); ++c) put(b, c, x, y, draw());
    return b;
}

// Half the values exact small fractions (so that elements of two inputs are often equal), half
// random reals in [-4, 4].
std::function<double()> fractions_and_reals(std::mt19937 &rng) {
    return [&rng] {
        static const double exact[] = {-2, -1.5, -1, -0.5, 0, 0.25, 0.5, 1, 1.5, 3};
        if (rng() % 2) return exact[rng() % 10];
        return double(Halide::float16_t(std::uniform_real_distribution<double>(-4, 4)(rng)));
    };
}

// The element of `in` that output element (c, x, y) reads: index 0 where `in` has extent 1.
double read(const Buffer<> &in, int c, int x, int y) {
    return get(in, in.dim(0).extent() == 1 ? 0 : c, in.dim(1).extent() == 1 ? 0 : x,
               in.dim(2).extent() == 1 ? 0 : y);
}

// Every element of `out` against `expect(c, x, y)`: integers equal, floats within an fp16
// rounding (NaN only for NaN).
void expect_each(const Buffer<> &out, const std::function<double(int, int, int)> &expect) {
    int mismatches = 0;
    for (int y = 0; y < out.dim(2).extent(); ++y)
        for (int x = 0; x < out.dim(1).extent(); ++x)
            for (int c = 0; c < out.dim(0).extent(); ++c) {
                const double got = get(out, c, x, y), want = expect(c, x, y);
                const bool close =
                    out.type().is_float()
                        ? (std::isnan(want)
                               ? std::isnan(got)
                               : got == want || std::abs(got - want) <= 1e-3 * std::abs(want))
                        : got == want;
                if (!close && ++mismatches <= 5)
                    ADD_FAILURE() << "at (c, x, y) = (" << c << ", " << x << ", " << y << "): got "
                                  << got << ", expected " << want;
            }
    EXPECT_EQ(mismatches, 0);
}

// a [1, 5, 3, 1] and b [1, 1, 3, 7] broadcast both ways to [1, 5, 3, 7].
struct Pair {
    dsl::Layer a, b;
    Buffer<> va, vb;
};

Pair pair(ElemType type, const std::function<double()> &draw) {
    Pair p{input("a", 5, 3, 1, type), input("b", 1, 3, 7, type), {}, {}};
    p.va = values(p.a, draw);
    p.vb = values(p.b, draw);
    return p;
}

TEST(Comparisons, BroadcastBothWaysOverRandomValuesEqualOnesAndNaN) {
    std::mt19937 rng(61);
    // Mostly a few exact fractions, so that about one pair in six is equal.
    Pair p = pair(ElemType::F16, [&] {
        static const double exact[] = {-1, 0, 0.5, 1.5};
        return rng() % 4
                   ? exact[rng() % 4]
                   : double(Halide::float16_t(std::uniform_real_distribution<double>(-4, 4)(rng)));
    });
    put(p.va, 2, 0, 1, kNaN);
    const std::vector<std::pair<std::string, std::function<bool(double, double)>>> ops = {
        {"equal", std::equal_to<>()},
        {"greater", std::greater<>()},
        {"greater_or_equal", std::greater_equal<>()},
        {"less", std::less<>()},
        {"less_or_equal", std::less_equal<>()}};
    int equal_pairs = 0;
    for (const auto &[op, compare] : ops) {
        const dsl::Layer layer = build(op, {p.a, p.b});
        EXPECT_EQ(layer.output().type, ElemType::U8) << op;
        EXPECT_EQ(layer.output().shape, (dsl::Shape{1, 5, 3, 7}));
        const Buffer<> out = algorithms::run_reference(layer, {p.va, p.vb});
        expect_each(out, [&](int c, int x, int y) {
            const double a = read(p.va, c, x, y), b = read(p.vb, c, x, y);
            equal_pairs += a == b;
            return compare(a, b) ? 1.0 : 0.0;
        });
        // NaN compares false (and unequal) with everything.
        for (int x = 0; x < 7; ++x) EXPECT_EQ(get(out, 2, x, 1), 0) << op;
    }
    EXPECT_GT(equal_pairs, 25); // the test sees equal elements
}

TEST(Comparisons, IntegersCompareExactlyInTheirType) {
    std::mt19937 rng(67);
    for (ElemType type : {ElemType::I32, ElemType::U8, ElemType::I8}) {
        const int32_t lo = type == ElemType::U8 ? 0 : type == ElemType::I8 ? -128 : INT32_MIN;
        const int32_t hi = type == ElemType::U8 ? 255 : type == ElemType::I8 ? 127 : INT32_MAX;
        // The extremes and their neighbours, so that equal, one above and one below all occur.
        Pair p = pair(type, [&] {
            const int64_t anchors[] = {lo, lo + 1, 0, 1, hi - 1, hi};
            return double(rng() % 2 ? anchors[rng() % 6]
                                    : std::uniform_int_distribution<int64_t>(lo, hi)(rng));
        });
        for (const char *op : {"equal", "greater", "less_or_equal"}) {
            const Buffer<> out = algorithms::run_reference(build(op, {p.a, p.b}), {p.va, p.vb});
            expect_each(out, [&](int c, int x, int y) {
                const double a = read(p.va, c, x, y), b = read(p.vb, c, x, y);
                const std::string o = op;
                return (o == "equal" ? a == b : o == "greater" ? a > b : a <= b) ? 1.0 : 0.0;
            });
        }
    }
}

TEST(Logical, BoolsAreNonzeroBytes) {
    std::mt19937 rng(71);
    Pair p = pair(ElemType::U8, [&] {
        static const double bytes[] = {0, 0, 1, 2, 255};
        return bytes[rng() % 5];
    });
    const std::vector<std::pair<std::string, std::function<bool(bool, bool)>>> ops = {
        {"and", std::logical_and<>()}, {"or", std::logical_or<>()}, {"xor", std::not_equal_to<>()}};
    for (const auto &[op, combine] : ops)
        expect_each(algorithms::run_reference(build(op, {p.a, p.b}), {p.va, p.vb}),
                    [&](int c, int x, int y) {
                        return combine(read(p.va, c, x, y) != 0, read(p.vb, c, x, y) != 0) ? 1.0
                                                                                           : 0.0;
                    });
}

TEST(BitShift, U8LeftDropsHighBitsAndShiftsOf8OrMoreGiveZero) {
    std::mt19937 rng(73);
    Pair p = pair(ElemType::U8, [&] { return double(rng() % 256); });
    p.vb = values(p.b, [&] { return double(rng() % 10); });
    for (const std::string direction : {"LEFT", "RIGHT"}) {
        dsl::Attrs attrs;
        attrs.set("direction", direction);
        expect_each(algorithms::run_reference(build("bit_shift", {p.a, p.b}, attrs), {p.va, p.vb}),
                    [&](int c, int x, int y) {
                        const uint32_t a = uint32_t(read(p.va, c, x, y)),
                                       by = uint32_t(read(p.vb, c, x, y));
                        return by >= 8 ? 0.0
                                       : double(uint8_t(direction == "LEFT" ? a << by : a >> by));
                    });
    }
    EXPECT_THROW(build("bit_shift", {input("f", 5, 3, 1, ElemType::F16), p.b},
                       dsl::Attrs().set("direction", std::string("LEFT"))),
                 dsl::LayerError);
}

// The values of a wider unsigned type in i32 shift at that type's width (`bits`): a left shift
// drops the bits past it, a shift by the width or more gives 0; in i32 a u32 of 2^31 or more is
// negative (its bits), a u64 past 2^31 - 1 is -2^31. Constants (i64) fold alike.
TEST(BitShift, WiderUnsignedTypesShiftAtTheirWidthInI32) {
    std::mt19937 rng(83);
    for (int64_t bits : {16, 32, 64}) {
        const double top = bits == 16 ? 65535 : 2147483647;
        Pair p = pair(ElemType::I32, [&] {
            static const double anchors[] = {0, 1, 3, 255, 32768, 65535};
            return rng() % 2 ? anchors[rng() % 6]
                             : double(std::uniform_int_distribution<int64_t>(0, int64_t(top))(rng));
        });
        p.vb = values(p.b, [&] { return double(rng() % (bits + 3)); });
        for (const std::string direction : {"LEFT", "RIGHT"}) {
            dsl::Attrs attrs;
            attrs.set("direction", direction).set("bits", bits);
            expect_each(
                algorithms::run_reference(build("bit_shift", {p.a, p.b}, attrs), {p.va, p.vb}),
                [&](int c, int x, int y) {
                    const uint64_t a = uint64_t(read(p.va, c, x, y)),
                                   by = uint64_t(read(p.vb, c, x, y));
                    if (by >= uint64_t(bits)) return 0.0;
                    uint64_t moved = direction == "LEFT" ? a << by : a >> by;
                    if (bits < 64) moved &= (uint64_t(1) << bits) - 1;
                    if (bits == 64 && moved > uint64_t(INT32_MAX)) return double(INT32_MIN);
                    return double(int32_t(uint32_t(moved)));
                });
        }
    }
    const auto constant = [](std::vector<int64_t> v) {
        return dsl::LayerRegistry::constant(
            "c", dsl::const_buffer({ElemType::I64, {int64_t(v.size())}, std::move(v), {}}));
    };
    dsl::Attrs left;
    left.set("direction", std::string("LEFT")).set("bits", int64_t(16));
    EXPECT_EQ(dsl::const_values(
                  build("bit_shift", {constant({65535, 1, 3}), constant({1, 15, 16})}, left))
                  .ints,
              (std::vector<int64_t>{65534, 32768, 0}));
    left.set("bits", int64_t(64));
    EXPECT_EQ(
        dsl::const_values(build("bit_shift", {constant({1, 3}), constant({40, 64})}, left)).ints,
        (std::vector<int64_t>{int64_t(1) << 40, 0}));
    // bits 8 is u8's; the wider widths take i32 (i64 constants).
    EXPECT_THROW(build("bit_shift",
                       {input("a", 5, 3, 1, ElemType::I32), input("b", 1, 3, 7, ElemType::I32)},
                       dsl::Attrs().set("direction", std::string("LEFT"))),
                 dsl::LayerError);
    EXPECT_THROW(build("bit_shift",
                       {input("a", 5, 3, 1, ElemType::U8), input("b", 1, 3, 7, ElemType::U8)},
                       dsl::Attrs().set("direction", std::string("LEFT")).set("bits", int64_t(32))),
                 dsl::LayerError);
}

TEST(Pow, NegativeBasesTakeIntegerPowersElseNaN) {
    std::mt19937 rng(79);
    Pair p = pair(ElemType::F16, fractions_and_reals(rng));
    p.vb = values(p.b, [&] {
        static const double exponents[] = {-2, -1, 0, 1, 2, 3, 0.5, 1.5, 2.25};
        return rng() % 3
                   ? exponents[rng() % 9]
                   : double(Halide::float16_t(std::uniform_real_distribution<double>(-2, 2)(rng)));
    });
    const dsl::Layer layer = build("pow", {p.a, p.b});
    EXPECT_EQ(layer.output().type, ElemType::F16);
    int negative_integer_powers = 0;
    expect_each(algorithms::run_reference(layer, {p.va, p.vb}), [&](int c, int x, int y) {
        const double a = read(p.va, c, x, y), b = read(p.vb, c, x, y);
        negative_integer_powers += a < 0 && std::floor(b) == b;
        return double(Halide::float16_t(std::pow(a, b)));
    });
    EXPECT_GT(negative_integer_powers, 5);
    // NaN: x^0 and 1^y are 1, other powers of or to NaN are NaN.
    put(p.va, 0, 0, 0, kNaN);
    put(p.va, 1, 0, 0, 1);
    put(p.vb, 0, 0, 0, 0);
    put(p.vb, 0, 1, 0, kNaN);
    expect_each(algorithms::run_reference(layer, {p.va, p.vb}), [&](int c, int x, int y) {
        return double(Halide::float16_t(std::pow(read(p.va, c, x, y), read(p.vb, c, x, y))));
    });
    // Integers: the power of an integer base, exact, in its type; a float exponent too.
    const dsl::Layer base = input("base", 4, 1, 1, ElemType::I32);
    const dsl::Layer exponent = input("e", 4, 1, 1, ElemType::I32);
    Buffer<int32_t> vbase(4, 1, 1), vexp(4, 1, 1);
    const int32_t bases[] = {3, -2, 7, -5}, exps[] = {5, 3, 0, 4};
    for (int i = 0; i < 4; ++i) vbase(i, 0, 0) = bases[i], vexp(i, 0, 0) = exps[i];
    const dsl::Layer integer = build("pow", {base, exponent});
    EXPECT_EQ(integer.output().type, ElemType::I32);
    expect_each(algorithms::run_reference(integer, {vbase, vexp}),
                [&](int c, int, int) { return std::pow(bases[c], exps[c]); });
}

TEST(Mod, TheSignOfTheDivisorOrOfTheDividend) {
    std::mt19937 rng(83);
    for (ElemType type : {ElemType::I32, ElemType::I8, ElemType::U8}) {
        const int lo = type == ElemType::U8 ? 0 : -50;
        Pair p =
            pair(type, [&] { return double(std::uniform_int_distribution<int>(lo, 50)(rng)); });
        put(p.vb, 0, 3, 1, 0); // numpy: x mod 0 is 0
        for (int64_t fmod : {0, 1}) {
            const Buffer<> out = algorithms::run_reference(
                build("mod", {p.a, p.b}, dsl::Attrs().set("fmod", fmod)), {p.va, p.vb});
            expect_each(out, [&](int c, int x, int y) {
                const int64_t a = int64_t(read(p.va, c, x, y)), b = int64_t(read(p.vb, c, x, y));
                if (b == 0) return 0.0;
                const int64_t r = a % b; // C's: the sign of the dividend
                return double(fmod || r == 0 || (r < 0) == (b < 0) ? r : r + b);
            });
        }
    }
    Pair p = pair(ElemType::F16, fractions_and_reals(rng));
    p.vb = values(p.b, [&] {
        static const double divisors[] = {-2, -1.5, -0.5, 0.25, 0.75, 3};
        return divisors[rng() % 6];
    });
    for (int64_t fmod : {0, 1})
        expect_each(
            algorithms::run_reference(build("mod", {p.a, p.b}, dsl::Attrs().set("fmod", fmod)),
                                      {p.va, p.vb}),
            [&](int c, int x, int y) {
                const double a = read(p.va, c, x, y), b = read(p.vb, c, x, y);
                const double r = std::fmod(a, b);
                return double(Halide::float16_t(fmod || r == 0 || (r < 0) == (b < 0) ? r : r + b));
            });
}

// Div of two computed tensors: floats divided in float32 and rounded once (random reals and
// exact fractions, a zero divisor giving an infinity or NaN); integers truncated toward zero, as
// C and ONNX Runtime divide them, x / 0 = 0. Folded at compile time alike.
TEST(Div, FloatQuotientsRoundOnceIntegersTruncate) {
    std::mt19937 rng(84);
    Pair f = pair(ElemType::F16, fractions_and_reals(rng));
    put(f.vb, 0, 1, 2, 0);
    expect_each(algorithms::run_reference(build("div", {f.a, f.b}), {f.va, f.vb}), [&](int c, int x,
                                                                                       int y) {
        return double(Halide::float16_t(float(read(f.va, c, x, y)) / float(read(f.vb, c, x, y))));
    });
    for (ElemType type : {ElemType::I32, ElemType::I8, ElemType::U8}) {
        const int lo = type == ElemType::U8 ? 0 : -60;
        Pair p =
            pair(type, [&] { return double(std::uniform_int_distribution<int>(lo, 60)(rng)); });
        put(p.vb, 0, 3, 1, 0);
        expect_each(algorithms::run_reference(build("div", {p.a, p.b}), {p.va, p.vb}),
                    [&](int c, int x, int y) {
                        const double a = read(p.va, c, x, y), b = read(p.vb, c, x, y);
                        return b == 0 ? 0.0 : std::trunc(a / b);
                    });
    }
    const auto ints = [](std::vector<int64_t> values) {
        const int64_t n = int64_t(values.size());
        return dsl::LayerRegistry::constant(
            "k", dsl::const_buffer({ElemType::I64, {n}, std::move(values), {}}));
    };
    EXPECT_EQ(dsl::const_values(build("div", {ints({7, -7, 224, 5}), ints({2, 2, 32, 0})})).ints,
              (std::vector<int64_t>{3, -3, 7, 0}));
}

TEST(Where, BroadcastsConditionAndBothValues) {
    std::mt19937 rng(89);
    const dsl::Layer cond = input("cond", 1, 3, 7, ElemType::U8);
    const Buffer<> vcond = values(cond, [&] { return double(rng() % 3); });
    for (ElemType type : {ElemType::F16, ElemType::I32}) {
        const dsl::Layer x = input("x", 5, 3, 1, type), y = input("y", 5, 1, 7, type);
        const Buffer<> vx = values(x, fractions_and_reals(rng));
        const Buffer<> vy = values(y, [&] { return double(int(rng() % 200) - 100); });
        const dsl::Layer where = build("where", {cond, x, y});
        EXPECT_EQ(where.output().type, type);
        EXPECT_EQ(where.output().shape, (dsl::Shape{1, 5, 3, 7}));
        expect_each(algorithms::run_reference(where, {vcond, vx, vy}), [&](int c, int px, int py) {
            return read(vcond, c, px, py) != 0 ? read(vx, c, px, py) : read(vy, c, px, py);
        });
        EXPECT_THROW(build("where", {cond, x, input("i", 5, 1, 7, ElemType::I8)}), dsl::LayerError);
    }
}

// squared_difference broadcasts both ways, (a - b)^2 in float32 rounded once: random reals and
// exact fractions against that product; floats only.
TEST(SquaredDifference, BroadcastsBothWaysInFloat32) {
    std::mt19937 rng(101);
    for (ElemType type : {ElemType::F16, ElemType::F32}) {
        Pair p = pair(type, fractions_and_reals(rng));
        const dsl::Layer layer = build("squared_difference", {p.a, p.b});
        EXPECT_EQ(layer.output().shape, (dsl::Shape{1, 5, 3, 7}));
        expect_each(algorithms::run_reference(layer, {p.va, p.vb}), [&](int c, int x, int y) {
            const float d = float(read(p.va, c, x, y)) - float(read(p.vb, c, x, y));
            return type == ElemType::F16 ? double(Halide::float16_t(d * d)) : double(d * d);
        });
    }
    EXPECT_THROW(build("squared_difference",
                       {input("a", 5, 3, 1, ElemType::I32), input("b", 1, 3, 7, ElemType::I32)}),
                 dsl::LayerError);
}

TEST(PRelu, ASlopePerChannelBroadcastsToX) {
    std::mt19937 rng(97);
    const dsl::Layer x = input("x", 5, 3, 7, ElemType::F16);
    const dsl::Layer slope = input("slope", 5, 1, 1, ElemType::F16);
    const Buffer<> vx = values(x, fractions_and_reals(rng)),
                   vs = values(slope, fractions_and_reals(rng));
    expect_each(algorithms::run_reference(build("prelu", {x, slope}), {vx, vs}),
                [&](int c, int px, int py) {
                    const double v = read(vx, c, px, py);
                    return double(Halide::float16_t(v < 0 ? v * read(vs, c, px, py) : v));
                });
    // The slope broadcasts to x, never x to the slope.
    EXPECT_THROW(build("prelu", {slope, x}), dsl::LayerError);
}

TEST(ConstantEltwise, PowPReluAndComparisonsWithAConstant) {
    std::mt19937 rng(101);
    const dsl::Layer x = input("x", 5, 3, 7, ElemType::F16);
    Buffer<> vx = values(x, fractions_and_reals(rng));
    put(vx, 1, 2, 0, kNaN);
    // A constant of one value, or one per channel ([5, 1, 1]).
    auto with = [&](const std::string &op, std::vector<double> constant, bool first = false) {
        const std::vector<int64_t> shape =
            constant.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{5, 1, 1};
        dsl::Attrs a;
        a.set("op", op);
        a.set("constant", dsl::const_buffer({ElemType::F32, shape, {}, constant}));
        a.set("constant_first", int64_t(first));
        return algorithms::run_reference(build("constant_eltwise", {x}, a), {vx});
    };
    auto fp16 = [](double v) { return double(Halide::float16_t(v)); };
    expect_each(with("pow", {2}),
                [&](int c, int px, int py) { return fp16(std::pow(read(vx, c, px, py), 2)); });
    expect_each(with("pow", {0.5}), [&](int c, int px, int py) {
        return fp16(std::pow(read(vx, c, px, py), 0.5)); // NaN for a negative base
    });
    expect_each(with("pow", {2}, true),
                [&](int c, int px, int py) { return fp16(std::pow(2, read(vx, c, px, py))); });
    const std::vector<double> slopes = {0.25, -1, 0, 3, 0.5};
    expect_each(with("prelu", slopes), [&](int c, int px, int py) {
        const double v = read(vx, c, px, py);
        return fp16(v < 0 ? v * slopes[size_t(c)] : v);
    });
    const Buffer<> greater = with("greater", {0.5});
    EXPECT_EQ(greater.type(), Halide::UInt(8));
    expect_each(greater, [&](int c, int px, int py) { return read(vx, c, px, py) > 0.5 ? 1 : 0; });
    expect_each(with("less_or_equal", {0.5}, true),
                [&](int c, int px, int py) { return 0.5 <= read(vx, c, px, py) ? 1 : 0; });
}

// Integers without a quantization compute exactly in int32 with an integer constant: i32 values
// beyond fp16's integers (4097, 70000) and near int32's ends, sums and products wrapping at 32
// bits, quotients truncated toward zero (x / 0 = 0), comparisons giving bools, powers rounded;
// u8 and i8 wrap to their own type. A float constant, or one outside int32, is refused.
TEST(ConstantEltwise, IntegersComputeExactlyInTheirType) {
    std::mt19937 rng(103);
    const dsl::Layer x = input("x", 5, 3, 7, ElemType::I32);
    Buffer<> vx = values(x, [&] {
        const int64_t anchors[] = {0, 1, -1, 4097, -4097, 70000, INT32_MAX, INT32_MIN};
        return double(rng() % 2 ? anchors[rng() % 8]
                                : std::uniform_int_distribution<int64_t>(-100000, 100000)(rng));
    });
    // One value per channel ([5, 1, 1]), a zero divisor among them, or one value.
    const std::vector<int64_t> per_channel = {4097, -3, 0, 70000, 7};
    auto with = [&](const dsl::Layer &in, const Buffer<> &v, const std::string &op,
                    std::vector<int64_t> constant, bool first = false) {
        const std::vector<int64_t> shape =
            constant.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{5, 1, 1};
        dsl::Attrs a;
        a.set("op", op);
        a.set("constant", dsl::const_buffer({ElemType::I64, shape, constant, {}}));
        a.set("constant_first", int64_t(first));
        return algorithms::run_reference(build("constant_eltwise", {in}, a), {v});
    };
    auto wrap32 = [](int64_t v) { return double(int32_t(uint32_t(uint64_t(v)))); };
    auto truncated = [](int64_t a, int64_t b) { return b == 0 ? 0.0 : double(a / b); };
    auto k = [&](int c) { return per_channel[size_t(c)]; };
    auto at = [&](int c, int px, int py) { return int64_t(read(vx, c, px, py)); };
    const Buffer<> sum = with(x, vx, "add", per_channel);
    EXPECT_EQ(sum.type(), Halide::Int(32));
    expect_each(sum, [&](int c, int px, int py) { return wrap32(at(c, px, py) + k(c)); });
    expect_each(with(x, vx, "sub", per_channel, true),
                [&](int c, int px, int py) { return wrap32(k(c) - at(c, px, py)); });
    expect_each(with(x, vx, "mul", per_channel),
                [&](int c, int px, int py) { return wrap32(at(c, px, py) * k(c)); });
    expect_each(with(x, vx, "div", per_channel),
                [&](int c, int px, int py) { return truncated(at(c, px, py), k(c)); });
    expect_each(with(x, vx, "div", {-7}, true),
                [&](int c, int px, int py) { return truncated(-7, at(c, px, py)); });
    expect_each(with(x, vx, "max", per_channel),
                [&](int c, int px, int py) { return double(std::max(at(c, px, py), k(c))); });
    const Buffer<> equal = with(x, vx, "equal", {70000});
    EXPECT_EQ(equal.type(), Halide::UInt(8));
    expect_each(equal, [&](int c, int px, int py) { return at(c, px, py) == 70000 ? 1 : 0; });
    expect_each(with(x, vx, "greater", {4097}, true),
                [&](int c, int px, int py) { return 4097 > at(c, px, py) ? 1 : 0; });
    // Pow is the float32 power rounded: exact cubes of small integers.
    const Buffer<> small = values(x, [&] { return double(int(rng() % 101) - 50); });
    expect_each(with(x, small, "pow", {3}),
                [&](int c, int px, int py) { return std::pow(read(small, c, px, py), 3); });
    // u8 and i8 wrap to their own type.
    for (ElemType type : {ElemType::U8, ElemType::I8}) {
        const dsl::Layer b = input("b", 5, 3, 7, type);
        const Buffer<> vb = values(b, [&] { return double(rng() % 128); });
        const Buffer<> out = with(b, vb, "add", {200});
        EXPECT_EQ(out.type(), dsl::halide_type(type));
        expect_each(out, [&](int c, int px, int py) {
            const int64_t v = int64_t(read(vb, c, px, py)) + 200;
            return type == ElemType::U8 ? double(uint8_t(v)) : double(int8_t(uint8_t(v)));
        });
    }
    dsl::Attrs real;
    real.set("op", std::string("add"));
    real.set("constant", dsl::const_buffer({ElemType::F32, {}, {}, {0.5}}));
    EXPECT_THROW(build("constant_eltwise", {x}, real), dsl::LayerError);
    dsl::Attrs huge;
    huge.set("op", std::string("add"));
    huge.set("constant", dsl::const_buffer({ElemType::I64, {}, {int64_t(1) << 40}, {}}));
    EXPECT_THROW(build("constant_eltwise", {x}, huge), dsl::LayerError);
}

// Shape arithmetic: comparisons, Where and Mod of constants fold at compile time.
TEST(ElementwiseFolding, ConstantsFold) {
    auto constant = [](ElemType type, std::vector<int64_t> shape, std::vector<int64_t> ints) {
        return dsl::LayerRegistry::constant("k", dsl::const_buffer({type, shape, ints, {}}));
    };
    const dsl::Layer shape = constant(ElemType::I64, {3}, {2, -1, 4});
    const dsl::Layer minus_one = constant(ElemType::I64, {1}, {-1});
    const dsl::Layer equal = build("equal", {shape, minus_one});
    ASSERT_TRUE(dsl::is_constant(equal));
    dsl::ConstValues v = dsl::const_values(equal);
    EXPECT_EQ(v.type, ElemType::Bool);
    EXPECT_EQ(v.ints, (std::vector<int64_t>{0, 1, 0}));
    const dsl::Layer where =
        build("where", {equal, constant(ElemType::I64, {3}, {7, 7, 7}), shape});
    EXPECT_EQ(dsl::const_values(where).ints, (std::vector<int64_t>{2, 7, 4}));
    const dsl::Layer mod =
        build("mod", {constant(ElemType::I64, {2}, {-7, 7}), constant(ElemType::I64, {1}, {3})});
    EXPECT_EQ(dsl::const_values(mod).ints, (std::vector<int64_t>{2, 1}));
}

// And(x, k) of a bool graph input x [2, 3] and a bool initializer k [3]: x is u8 on the device
// (the device's bools), and a constant beside a computed tensor is an error naming the node.
TEST(ElementwiseImport, ABoolGraphInputIsU8AndAConstantOperandOfAndIsNamed) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("and");
    for (const char *name : {"x", "y"}) {
        onnx::ValueInfoProto &v = name == std::string("x") ? *g.add_input() : *g.add_output();
        v.set_name(name);
        v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
        for (int64_t d : {2, 3})
            v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    }
    onnx::NodeProto &node = *g.add_node();
    node.set_name("and1");
    node.set_op_type("And");
    node.add_input("x");
    node.add_input("x");
    node.add_output("y");
    const std::string computed = m.SerializeAsString();
    const frontend::ImportedModel model =
        frontend::import_onnx_bytes({computed.begin(), computed.end()}, "and.onnx");
    ASSERT_EQ(model.graph.inputs().size(), 1u);
    EXPECT_EQ(model.graph.inputs()[0].output().type, ElemType::U8);
    EXPECT_EQ(model.graph.outputs()[0].output().type, ElemType::U8);

    onnx::TensorProto &k = *g.add_initializer();
    k.set_name("k");
    k.set_data_type(onnx::TensorProto::BOOL);
    k.add_dims(3);
    for (int v : {1, 0, 1}) k.add_int32_data(v);
    node.set_input(1, "k");
    const std::string mixed = m.SerializeAsString();
    try {
        frontend::import_onnx_bytes({mixed.begin(), mixed.end()}, "and.onnx");
        ADD_FAILURE() << "a constant operand of And imported";
    } catch (const frontend::ModelError &e) {
        EXPECT_NE(std::string(e.what()).find("node 'and1' (And): has constant and computed inputs"),
                  std::string::npos)
            << e.what();
    }
}

// Where(c, 0.25, y) and Where(c, 0.25, 1.5) (NLL's masks) of a bool graph input c [2, 3]: the
// constants are fp16 tensors beside the computed ones, copied from the blob's constants, on
// vpu27 as on the reference, and each element is the one its condition picks.
TEST(ElementwiseImport, WhereTakesConstantValuesBesideComputedOnes) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("where");
    auto tensor = [](onnx::ValueInfoProto &v, const char *name, int32_t type) {
        v.set_name(name);
        v.mutable_type()->mutable_tensor_type()->set_elem_type(type);
        for (int64_t d : {2, 3})
            v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    };
    tensor(*g.add_input(), "c", onnx::TensorProto::BOOL);
    tensor(*g.add_input(), "y", onnx::TensorProto::FLOAT);
    tensor(*g.add_output(), "w1", onnx::TensorProto::FLOAT);
    tensor(*g.add_output(), "w2", onnx::TensorProto::FLOAT);
    for (const auto &[name, value] :
         {std::pair<const char *, float>{"quarter", 0.25f}, {"one", 1.5f}}) {
        onnx::TensorProto &k = *g.add_initializer();
        k.set_name(name);
        k.set_data_type(onnx::TensorProto::FLOAT);
        k.add_float_data(value);
    }
    for (const auto &[name, x, y] :
         {std::tuple<const char *, const char *, const char *>{"w1", "quarter", "y"},
          {"w2", "quarter", "one"}}) {
        onnx::NodeProto &node = *g.add_node();
        node.set_name(name);
        node.set_op_type("Where");
        node.add_input("c");
        node.add_input(x);
        node.add_input(y);
        node.add_output(name);
    }
    const std::string bytes = m.SerializeAsString();
    const frontend::ImportedModel model =
        frontend::import_onnx_bytes({bytes.begin(), bytes.end()}, "where.onnx");
    std::vector<std::string> layers;
    for (const dsl::Layer &layer : model.graph.layers())
        if (dsl::is_constant(layer))
            layers.push_back(layer.name() + " " + dsl::to_string(layer.output().type));
    // The scalars, given the inputs' rank (numpy's leading unit dimensions).
    EXPECT_EQ(layers, (std::vector<std::string>{"w1.input1_rank f16", "w2.input1_rank f16",
                                                "w2.input2_rank f16"}));
    ASSERT_EQ(model.graph.inputs().size(), 2u);
    std::mt19937 rng(107);
    Buffer<> c = values(model.graph.inputs()[0], [&] { return double(rng() % 2); });
    Buffer<> y = values(model.graph.inputs()[1], fractions_and_reals(rng));
    codegen::CheckOptions options;
    options.inputs = {c, y};
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"), options);
    EXPECT_TRUE(r.ok()) << r.report();
    const std::vector<Buffer<>> out = algorithms::run_reference(model.graph, {c, y});
    ASSERT_EQ(out.size(), 2u);
    expect_each(out[0], [&](int ch, int px, int py) {
        return get(c, ch, px, py) != 0 ? 0.25 : get(y, ch, px, py);
    });
    expect_each(out[1],
                [&](int ch, int px, int py) { return get(c, ch, px, py) != 0 ? 0.25 : 1.5; });
}

class ElementwiseNodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ElementwiseNodeTest, MatchesTheExpectedOutputs) {
    vpuc::testing::expect_node_test_passes(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Onnx, ElementwiseNodeTest,
    ::testing::Values("test_equal", "test_equal_bcast", "test_greater_bcast",
                      "test_greater_equal_expanded", "test_less_equal_bcast", "test_and4d",
                      "test_or_bcast4v3d", "test_xor_bcast3v1d", "test_bitshift_left_uint8",
                      "test_bitshift_right_uint8", "test_pow", "test_pow_bcast_scalar",
                      "test_pow_bcast_array", "test_pow_types_int32_int32",
                      "test_pow_types_float32_int32", "test_mod_mixed_sign_float32",
                      "test_mod_mixed_sign_int8", "test_mod_broadcast", "test_mod_uint8",
                      "test_where_example", "test_prelu_example", "test_prelu_broadcast",
                      "test_div", "test_div_bcast", "test_div_uint8"),
    [](const ::testing::TestParamInfo<std::string> &info) { return info.param.substr(5); });

// PyTorch's Add of an int64 input and an int64 initializer (constant_eltwise, exact in i32),
// then Mul of two computed int64 tensors.
TEST(ElementwiseBackendTest, IntegersWithAConstantOperand) {
    vpuc::testing::expect_backend_test_passes("pytorch-operator", "test_operator_non_float_params");
}

// PyTorch's PReLU of one constant slope, on inputs of rank 3 to 5; and of one slope per
// channel (opset 6's form, [C], upgraded to broadcast along axis 1).
TEST(ElementwiseBackendTest, PReluOfAConstantSlope) {
    for (const char *test :
         {"test_PReLU_1d", "test_PReLU_2d", "test_PReLU_3d", "test_PReLU_1d_multiparam",
          "test_PReLU_2d_multiparam", "test_PReLU_3d_multiparam"})
        vpuc::testing::expect_backend_test_passes("pytorch-converted", test);
}

} // namespace
