// The DPU's operations as Halide pipelines, compiled when vpuc is built (add_halide_library in
// vpu_target/CMakeLists.txt) and called by the simulator (src/sim_dpu.cpp). The arithmetic is
// dpu_arith.h's, written once more in Halide: the scalar functions there stay the definition,
// and tests/dpu_emulation_test.cpp holds these pipelines to them bit for bit.
//
// A call computes one output box: the output buffer's region, in the coordinates of the task's
// output tensor, at least kTileChannels x (the op's tile columns) in size. Activations arrive
// as raw bits (u8/i8 as uint8, fp16 as uint16) with element strides; weights arrive packed
// per output channel by the simulator, their zero point subtracted (int32) or as float.
// Float sums keep dpu_arith.h's order (kernel rows, columns, then channels): float work is
// vectorized across outputs only, and the target carries strict_float (no fused multiply-add,
// no reassociation, NaN, infinities and -0.0 kept).
#include <cmath>

#include "Halide.h"

#include "dpu_kernel_abi.h"
#include "vpu_target/dpu_arith.h"

using namespace Halide;
using namespace vpuc::dpu_kernels;
namespace dpu = vpuc::dpu;

namespace {

// ---- Numbers ---------------------------------------------------------------------------

Expr float_of_bits(Expr bits) {
    return reinterpret<float>(cast<uint32_t>(bits));
}

// fp16::to_float. A subnormal's sign is set as a bit: Halide negates as 0 - x, which would
// make -0.0 +0.0.
Expr half_to_float(Expr half) {
    Expr h = cast<uint32_t>(half);
    Expr sign = (h & 0x8000) << 16;
    Expr exponent = (h >> 10) & 0x1f;
    Expr mantissa = h & 0x3ff;
    Expr inf_or_nan = reinterpret<float>(sign | 0x7f800000 | (mantissa << 13));
    Expr subnormal_magnitude = cast<float>(mantissa) * std::ldexp(1.0f, -24); // exact
    Expr subnormal = reinterpret<float>(reinterpret<uint32_t>(subnormal_magnitude) | sign);
    Expr normal = reinterpret<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
    return select(exponent == 0x1f, inf_or_nan, exponent == 0, subnormal, normal);
}

// dpu::fp16_output (fp16::from_float but for NaN): round to nearest even; every NaN is the
// quiet NaN 0x7e00.
Expr float_to_half(Expr value) {
    Expr u = reinterpret<uint32_t>(value);
    Expr sign = (u >> 16) & 0x8000;
    Expr abs = u & 0x7fffffff;
    Expr overflow = sign | 0x7c00; // and infinities
    Expr inf_or_nan = select(abs > 0x7f800000, cast<uint32_t>(0x7e00), overflow);
    // A subnormal half: adding 2^23 in float rounds abs * 2^24 to an integer, ties to even.
    Expr rounded = reinterpret<float>(abs) * 16777216.0f + 8388608.0f;
    Expr subnormal = sign | (reinterpret<uint32_t>(rounded) - 0x4b000000);
    Expr rebased = abs - (112 << 23);
    Expr lsb = (rebased >> 13) & 1;
    Expr normal = sign | ((rebased + 0xfff + lsb) >> 13);
    return cast<uint16_t>(select(abs >= 0x7f800000, inf_or_nan, abs >= 0x477ff000, overflow,
                                 abs < 0x38800000, subnormal, normal));
}

// dpu::round_shift on int64. The addition wraps (in uint64): Halide leaves signed overflow
// undefined, and no input should be.
Expr round_shift(Expr value, Expr shift) {
    Expr half = cast<uint64_t>(1) << cast<uint64_t>(max(shift - 1, 0));
    Expr sum = reinterpret<int64_t>(reinterpret<uint64_t>(value) + half);
    return select(shift > 0, sum >> cast<uint64_t>(shift), value);
}

// a < b on float32, as IEEE 754 orders them (false with a NaN; -0.0 equals +0.0), from their
// bits. Halide's float comparisons can carry LLVM's no-NaN and no-infinity flags even under
// strict_float (when a comparison is lifted out of its strict expression into a variable of
// its own), and LLVM then turns selects on them into min and max instructions that treat NaN
// otherwise.
Expr less(Expr a, Expr b) {
    auto is_nan = [](Expr bits) { return (bits & 0x7fffffff) > 0x7f800000; };
    auto order = [](Expr bits) { // int32 in the floats' order
        Expr s = reinterpret<int32_t>(bits);
        return select(s >= 0, s, 0 - (s & 0x7fffffff));
    };
    Expr ua = reinterpret<uint32_t>(a), ub = reinterpret<uint32_t>(b);
    return !is_nan(ua) && !is_nan(ub) && order(ua) < order(ub);
}

// std::max, std::min and std::clamp on floats, NaNs included (Halide's max and min promise
// nothing about NaN).
Expr std_max(Expr a, Expr b) {
    return select(less(a, b), b, a);
}
Expr std_min(Expr a, Expr b) {
    return select(less(b, a), b, a);
}
Expr std_clamp(Expr v, Expr lo, Expr hi) {
    return select(less(v, lo), lo, less(hi, v), hi, v);
}

Expr i64(Expr e) {
    return cast<int64_t>(e);
}

Expr f64(double value) {
    return Internal::make_const(Float(64), value);
}

// dpu::round_shift(value * mult, shift) saturated to int32, for an int32 value and a uint16
// multiplier, exactly in double precision (vectors of int64 are slow on x86): the product is
// below 2^47 in magnitude, so it and, for shifts up to 53, the rounding term and their sum are
// exact; from 48 on the result is 0, in int64 and in double alike (the sum stays inside
// (0, 2^shift)). The powers of two are built from their bits.
Expr scale_and_saturate(Expr value, Expr mult, Expr shift) {
    Expr s = cast<uint64_t>(shift);
    Expr half = reinterpret<double>((cast<uint64_t>(1022) + s) << 52); // 2^(shift - 1)
    Expr unit = reinterpret<double>((cast<uint64_t>(1023) - s) << 52); // 2^-shift
    Expr scaled = floor((cast<double>(value) * cast<double>(mult) + half) * unit);
    return cast<int32_t>(clamp(scaled, f64(INT32_MIN), f64(INT32_MAX)));
}

// The task's post-processing parameters: the activation, which chooses a code path (each
// pipeline is specialized on it), and the `ppe` buffer's fields.
class Ppe {
  public:
    Ppe(Expr activation, Func fields) : activation(activation), fields_(std::move(fields)) {}
    Expr operator[](PpeField f) const { return fields_(int(f)); }
    Expr real(PpeField f) const { return float_of_bits(fields_(int(f))); }
    Expr is(dpu::Activation a) const { return activation == int(a); }

    const Expr activation;

  private:
    Func fields_;
};

// The output zero point and both clamps on an int32 value, in int32: the value is clamped to
// the clamp bounds minus the zero point first (saturated to int32, which changes nothing for
// an int32 value), so adding the zero point cannot overflow.
Expr clamp_to_output_32(Expr y, const Ppe &ppe) {
    Expr zero_point = i64(ppe[kOutZeroPoint]);
    auto shifted = [&](PpeField bound) {
        return cast<int32_t>(clamp(i64(ppe[bound]) - zero_point, i64(INT32_MIN), i64(INT32_MAX)));
    };
    y = clamp(y, shifted(kClampLow), shifted(kClampHigh)) + ppe[kOutZeroPoint];
    return cast<uint8_t>(clamp(y, ppe[kOutMin], ppe[kOutMax]));
}

// The same on an int64 value (a leaky ReLU's can exceed 32 bits), as dpu_arith.h writes it.
Expr clamp_to_output_64(Expr y, const Ppe &ppe) {
    y = clamp(y + i64(ppe[kOutZeroPoint]), i64(ppe[kClampLow]), i64(ppe[kClampHigh]));
    return cast<uint8_t>(clamp(y, i64(ppe[kOutMin]), i64(ppe[kOutMax])));
}

// dpu::requantize to the output byte: acc (bias included) times mult, round-shifted, saturated
// to 32 bits, then dpu::apply_int_ppe.
Expr requantize(Expr acc, Expr mult, Expr shift, const Ppe &ppe) {
    Expr y = scale_and_saturate(acc, mult, shift);
    Expr leaky = round_shift(i64(y) * i64(ppe[kLeakyMult]), ppe[kLeakyShift]);
    return select(
        ppe.is(dpu::Activation::LeakyRelu), clamp_to_output_64(select(y < 0, leaky, i64(y)), ppe),
        clamp_to_output_32(select(ppe.is(dpu::Activation::Relu), max(y, 0),
                                  ppe.is(dpu::Activation::ReluX), clamp(y, 0, ppe[kReluxMax]), y),
                           ppe));
}

// dpu::apply_float_ppe, then the fp16 output's bits.
Expr float_ppe(Expr y, const Ppe &ppe) {
    Expr relu = std_max(y, 0.0f);
    Expr relux = std_clamp(y, 0.0f, ppe.real(kFpReluxMax));
    Expr leaky = select(less(y, 0.0f), y * ppe.real(kFpLeakyAlpha), y);
    y = select(ppe.is(dpu::Activation::Relu), relu, ppe.is(dpu::Activation::ReluX), relux,
               ppe.is(dpu::Activation::LeakyRelu), leaky, y);
    return float_to_half(std_clamp(y, ppe.real(kFpClampLow), ppe.real(kFpClampHigh)));
}

// An accumulator (bias not included) to the output's bits, scaled as channel c says:
//   int accumulator: acc + bias wraps at 32 bits, then is requantized (8-bit output), or
//   float(acc + bias) * scale (fp16 output);
//   float accumulator: (acc + bias) * scale.
Expr output_stage(Expr acc, Expr c, const Func &channels, const Ppe &ppe, Type output_bits) {
    Expr bias = channels(c, int(kBias)), scale = float_of_bits(channels(c, int(kScale)));
    if (acc.type().is_float()) return float_ppe((acc + float_of_bits(bias)) * scale, ppe);
    Expr total = reinterpret<int32_t>(acc + reinterpret<uint32_t>(bias));
    if (output_bits == UInt(16)) return float_ppe(cast<float>(total) * scale, ppe);
    return requantize(total, channels(c, int(kMult)), channels(c, int(kShift)), ppe);
}

// Each activation its own copy of `output`'s loops, in which the PPE's selects fold to one
// path; the verifier admits no other activation.
void specialize_on_activation(Stage output, const Ppe &ppe) {
    for (auto a : {dpu::Activation::None, dpu::Activation::Relu, dpu::Activation::ReluX,
                   dpu::Activation::LeakyRelu})
        output.specialize(ppe.is(a));
    output.specialize_fail("unknown activation");
}

// ---- Activations -----------------------------------------------------------------------

Type bits_type(bool fp16) {
    return fp16 ? UInt(16) : UInt(8);
}

// An activation's element as arithmetic sees it: an 8-bit value minus its zero point (int32;
// `sign_flip` 0x80 reads i8 bits as u8 + 128, and `zero_point` then includes the 128), or
// fp16 as float.
Expr element(Expr bits, Expr sign_flip, Expr zero_point) {
    if (bits.type() == UInt(16)) return half_to_float(bits);
    return cast<int32_t>(bits ^ cast<uint8_t>(sign_flip)) - zero_point;
}

// The base of the generators that read a window of one input (conv, depthwise, pools): the
// input as elements over any coordinates, `outside` beyond its edges (padding taps), and the
// schedule they share.
template <typename T> class WindowGenerator : public Generator<T> {
  protected:
    template <typename In>
    Func padded_input(const In &input, Expr sign_flip, Expr zero_point, Expr outside) {
        Expr width = input.dim(1).extent(), height = input.dim(2).extent();
        Var c("c"), x("x"), y("y");
        Func padded("padded");
        Expr value = element(input(c, clamp(x, 0, width - 1), clamp(y, 0, height - 1)), sign_flip,
                             zero_point);
        padded(c, x, y) = select(inside(input, x, y), value, outside);
        return padded;
    }

    template <typename In> static Expr inside(const In &input, Expr x, Expr y) {
        return x >= 0 && x < input.dim(1).extent() && y >= 0 && y < input.dim(2).extent();
    }

    // Output tiles of kTileChannels x `columns`, the accumulator of a tile in registers
    // (vectorized across channels, unrolled across columns) while the reduction `r` runs
    // inside; the padded input computed per output row.
    void schedule_window(Func output, Func acc, Func padded, const std::vector<RVar> &r,
                         int columns) {
        const int lanes = this->template natural_vector_size<int32_t>();
        Var c = output.args()[0], x = output.args()[1], y = output.args()[2];
        Var co("co"), ci("ci"), xo("xo"), xi("xi");
        output.split(c, co, ci, kTileChannels, TailStrategy::ShiftInwards)
            .split(x, xo, xi, columns, TailStrategy::ShiftInwards)
            .reorder(ci, xi, xo, co, y)
            .vectorize(ci, lanes)
            .unroll(ci)
            .unroll(xi);
        acc.compute_at(output, xo).vectorize(c, lanes).unroll(c).unroll(x);
        std::vector<VarOrRVar> order = {c, x};
        order.insert(order.end(), r.begin(), r.end());
        order.push_back(y);
        acc.update().reorder(order).vectorize(c, lanes).unroll(c).unroll(x);
        padded.compute_at(output, y).vectorize(padded.args()[0], lanes, TailStrategy::GuardWithIf);
    }
};

// ---- Convolutions ----------------------------------------------------------------------

// Conv and MatMul (a 1x1 conv):
//   acc(c, x, y) = sum over ky, kx, ic of
//       input(ic, x * stride_x - pad_left + kx, y * stride_y - pad_top + ky) * w(c, ic, kx, ky)
// with padding taps skipped. Depthwise: the input channel is c (the weights' ic extent is 1).
class DpuConv : public WindowGenerator<DpuConv> {
  public:
    GeneratorParam<bool> fp16{"fp16", false}; // fp16 input and weights; else 8-bit
    GeneratorParam<bool> fp16_output{"fp16_output", false};
    GeneratorParam<bool> depthwise{"depthwise", false};

    Input<Buffer<void, 3>> input{"input"};          // (c, x, y)
    Input<Buffer<void, 4>> weights{"weights"};      // (c, ic, kx, ky): int32 or float
    Input<Buffer<int32_t, 2>> channels{"channels"}; // (c, ChannelField)
    Input<Buffer<int32_t, 1>> ppe{"ppe"};           // PpeField
    Input<int32_t> activation{"activation"};        // dpu::Activation
    Input<int32_t> input_sign_flip{"input_sign_flip"};
    Input<int32_t> input_zero_point{"input_zero_point"};
    Input<int32_t> stride_x{"stride_x"}, stride_y{"stride_y"};
    Input<int32_t> pad_left{"pad_left"}, pad_top{"pad_top"};
    // fp16: every weight is finite. A padding tap then reads 0 and adds +-0, which changes no
    // sum (a sum from +0 is never -0); else each tap is tested (0 * inf is NaN).
    Input<bool> finite_weights{"finite_weights"};
    Output<Buffer<void, 3>> output{"output"}; // (c, x, y)

    void configure() {
        input.set_type(bits_type(fp16));
        weights.set_type(fp16 ? Float(32) : Int(32));
        output.set_type(bits_type(fp16_output));
    }

    void generate() {
        Var c("c"), x("x"), y("y");
        const Type acc_type = fp16 ? Float(32) : UInt(32);
        Func padded = padded_input(input, input_sign_flip, input_zero_point,
                                   Internal::make_zero(fp16 ? Float(32) : Int(32)));
        RDom r(0, weights.dim(1).extent(), 0, weights.dim(2).extent(), 0, weights.dim(3).extent(),
               "r");
        Expr ix = x * stride_x - pad_left + r[1], iy = y * stride_y - pad_top + r[2];
        Expr product =
            padded(depthwise ? Expr(c) : Expr(r[0]), ix, iy) * weights(c, r[0], r[1], r[2]);
        Func acc("acc");
        acc(c, x, y) = Internal::make_zero(acc_type);
        if (fp16)
            acc(c, x, y) += select(finite_weights || inside(input, ix, iy), product, 0.0f);
        else // |product| <= 255 * 255: the int32 product is exact, the sum wraps
            acc(c, x, y) += reinterpret<uint32_t>(product);
        const Ppe post(activation, ppe);
        output(c, x, y) = output_stage(acc(c, x, y), c, channels, post, output.type());

        input.dim(0).set_stride(1);
        output.dim(0).set_stride(1);
        schedule_window(output, acc, padded, {r[0], r[1], r[2]}, kConvTileColumns);
        specialize_on_activation(output, post);
        if (fp16) acc.update().specialize(finite_weights);
    }
};

// ---- Pools -----------------------------------------------------------------------------

// MaxPool and AvgPool over each channel's window. A max starts from the window's first tap
// inside the input (there always is one: padding is smaller than the kernel) and pads read as
// the lowest value; a sum starts from 0 and pads read as 0 (+0.0: a float sum from +0 is never
// -0, so adding it changes nothing).
class DpuPool : public WindowGenerator<DpuPool> {
  public:
    GeneratorParam<bool> fp16{"fp16", false};
    GeneratorParam<bool> fp16_output{"fp16_output", false};
    GeneratorParam<bool> max_pool{"max_pool", true};

    Input<Buffer<void, 3>> input{"input"};
    Input<Buffer<int32_t, 2>> channels{"channels"};
    Input<Buffer<int32_t, 1>> ppe{"ppe"};
    Input<int32_t> activation{"activation"};
    Input<int32_t> input_sign_flip{"input_sign_flip"};
    Input<int32_t> input_zero_point{"input_zero_point"};
    Input<int32_t> kernel_w{"kernel_w"}, kernel_h{"kernel_h"};
    Input<int32_t> stride_x{"stride_x"}, stride_y{"stride_y"};
    Input<int32_t> pad_left{"pad_left"}, pad_top{"pad_top"};
    Output<Buffer<void, 3>> output{"output"};

    void configure() {
        input.set_type(bits_type(fp16));
        output.set_type(bits_type(fp16_output));
    }

    void generate() {
        Var c("c"), x("x"), y("y");
        const Type value_type = fp16 ? Float(32) : Int(32);
        Expr pad = !max_pool ? Internal::make_zero(value_type)
                   : fp16    ? Expr(-INFINITY)
                             : value_type.min();
        Func padded = padded_input(input, input_sign_flip, input_zero_point, pad);
        RDom r(0, kernel_w, 0, kernel_h, "r");
        Expr x0 = x * stride_x - pad_left, y0 = y * stride_y - pad_top;
        Expr value = padded(c, x0 + r[0], y0 + r[1]);
        Func acc("acc");
        if (max_pool) {
            acc(c, x, y) = padded(c, max(x0, 0), max(y0, 0));
            acc(c, x, y) = fp16 ? std_max(acc(c, x, y), value) : max(acc(c, x, y), value);
        } else {
            acc(c, x, y) = Internal::make_zero(value_type);
            acc(c, x, y) += value;
        }
        Expr total = fp16 ? acc(c, x, y) : reinterpret<uint32_t>(acc(c, x, y));
        const Ppe post(activation, ppe);
        output(c, x, y) = output_stage(total, c, channels, post, output.type());

        input.dim(0).set_stride(1);
        output.dim(0).set_stride(1);
        schedule_window(output, acc, padded, {r[0], r[1]}, kPoolTileColumns);
        specialize_on_activation(output, post);
    }
};

// ---- Eltwise ---------------------------------------------------------------------------

// Two inputs of the output's shape, element by element. 8-bit: each operand minus its zero
// point times its multiplier saturates to 32 bits, and the result wraps to 32 bits (as the
// int64 arithmetic of sim_dpu's reference does).
class DpuEltwise : public Generator<DpuEltwise> {
  public:
    GeneratorParam<bool> fp16{"fp16", false};
    GeneratorParam<bool> fp16_output{"fp16_output", false};

    Input<Buffer<void, 3>> input{"input"};
    Input<Buffer<void, 3>> input2{"input2"};
    Input<Buffer<int32_t, 2>> channels{"channels"};
    Input<Buffer<int32_t, 1>> ppe{"ppe"};
    Input<int32_t> activation{"activation"};
    Input<int32_t> op{"op"}; // numbered as blob::EltwiseOp (kEltwiseOps)
    Input<int32_t> input_sign_flip{"input_sign_flip"};
    Input<int32_t> input_zero_point{"input_zero_point"};
    Input<int32_t> input2_zero_point{"input2_zero_point"};
    Output<Buffer<void, 3>> output{"output"};

    void configure() {
        input.set_type(bits_type(fp16));
        input2.set_type(bits_type(fp16));
        output.set_type(bits_type(fp16_output));
    }

    void generate() {
        Var c("c"), x("x"), y("y");
        const Ppe post(activation, ppe);
        Expr a = element(input(c, x, y), input_sign_flip, input_zero_point);
        Expr b = element(input2(c, x, y), input_sign_flip, input2_zero_point);
        Expr total;
        if (fp16) {
            total = select(op == 0, a + b, op == 1, a - b, op == 2, a * b, op == 3, std_max(a, b),
                           std_min(a, b));
        } else {
            // (v - zero point) * mult saturated to int32, in double: exact below 2^40.
            auto operand = [](Expr v, Expr mult) {
                Expr scaled = cast<double>(v) * cast<double>(mult);
                return cast<int32_t>(clamp(scaled, f64(INT32_MIN), f64(INT32_MAX)));
            };
            Expr sa = operand(a, post[kIn1Mult]), sb = operand(b, post[kIn2Mult]);
            Expr ua = reinterpret<uint32_t>(sa), ub = reinterpret<uint32_t>(sb);
            total = select(op == 0, ua + ub, op == 1, ua - ub, op == 2, ua * ub, op == 3,
                           reinterpret<uint32_t>(max(sa, sb)), reinterpret<uint32_t>(min(sa, sb)));
        }
        output(c, x, y) = output_stage(total, c, channels, post, output.type());

        for (auto *in : {&input, &input2}) in->dim(0).set_stride(1);
        output.dim(0).set_stride(1);
        const int lanes = natural_vector_size<int32_t>();
        Var co("co"), ci("ci");
        output.split(c, co, ci, kTileChannels, TailStrategy::ShiftInwards)
            .vectorize(ci, lanes)
            .unroll(ci);
        // Each op and activation a copy of the loops with one path.
        for (int k = 0; k < kEltwiseOps; ++k)
            specialize_on_activation(output.specialize(op == k), post);
        output.specialize_fail("unknown eltwise op");
    }
};

} // namespace

HALIDE_REGISTER_GENERATOR(DpuConv, dpu_conv)
HALIDE_REGISTER_GENERATOR(DpuPool, dpu_pool)
HALIDE_REGISTER_GENERATOR(DpuEltwise, dpu_eltwise)
