// Reference DPU operations for tests, written from the definitions in dpu_arith.h on plain
// NHWC arrays (batch 1), independently of the simulator's strided loops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "vpu_target/dpu_arith.h"

namespace vpuc::test {

struct ConvShape {
    int c = 16, w = 8, h = 8; // input
    int oc = 16;
    int k = 3, stride = 1, pad = 1;
    int out_w() const { return (w + 2 * pad - k) / stride + 1; }
    int out_h() const { return (h + 2 * pad - k) / stride + 1; }
};

// out[(y * OW + x) * OC + oc]; input zero point zp_in, weights OC x K x K x C (or C x K x K
// for depthwise), one requantization per output channel.
inline std::vector<int32_t>
reference_conv(const ConvShape &s, const std::vector<uint8_t> &in, bool in_signed, int32_t zp_in,
               const std::vector<int8_t> &weights, const std::vector<int32_t> &bias,
               const std::vector<uint16_t> &mult, const std::vector<uint8_t> &shift,
               const dpu::IntPpe &ppe, bool depthwise) {
    std::vector<int32_t> out(size_t(s.out_w() * s.out_h() * s.oc));
    for (int y = 0; y < s.out_h(); ++y)
        for (int x = 0; x < s.out_w(); ++x)
            for (int oc = 0; oc < s.oc; ++oc) {
                int32_t acc = bias[size_t(oc)];
                for (int ky = 0; ky < s.k; ++ky)
                    for (int kx = 0; kx < s.k; ++kx) {
                        int iy = y * s.stride - s.pad + ky, ix = x * s.stride - s.pad + kx;
                        if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                        for (int ic = depthwise ? oc : 0; ic < (depthwise ? oc + 1 : s.c); ++ic) {
                            uint8_t raw = in[size_t((iy * s.w + ix) * s.c + ic)];
                            int32_t xv = in_signed ? int32_t(int8_t(raw)) : int32_t(raw);
                            size_t wi = depthwise ? size_t((oc * s.k + ky) * s.k + kx)
                                                  : size_t(((oc * s.k + ky) * s.k + kx) * s.c + ic);
                            acc += (xv - zp_in) * weights[wi];
                        }
                    }
                out[size_t((y * s.out_w() + x) * s.oc + oc)] =
                    dpu::requantize(acc, mult[size_t(oc)], shift[size_t(oc)], ppe);
            }
    return out;
}

} // namespace vpuc::test
