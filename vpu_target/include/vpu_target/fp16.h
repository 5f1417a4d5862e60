// IEEE 754 binary16 conversions, exact and portable (round to nearest, ties to even).
#pragma once

#include <cstdint>
#include <cstring>

namespace vpuc::fp16 {

inline uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

inline float bits_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exponent = (h >> 10) & 0x1f;
    uint32_t mantissa = h & 0x3ff;
    if (exponent == 0x1f) return bits_float(sign | 0x7f800000 | (mantissa << 13)); // inf/NaN
    if (exponent == 0) {
        // Subnormal (or zero): value = mantissa * 2^-24, exact in float.
        float magnitude = float(mantissa) * bits_float(0x33800000);
        return sign ? -magnitude : magnitude;
    }
    return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    uint16_t sign = uint16_t((u >> 16) & 0x8000);
    uint32_t abs = u & 0x7fffffff;
    if (abs >= 0x7f800000) // inf or NaN (NaN stays quiet NaN)
        return uint16_t(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
    if (abs >= 0x477ff000) return uint16_t(sign | 0x7c00); // rounds to >= 65520: inf
    if (abs < 0x38800000) {
        // Subnormal in half: round abs * 2^24 to an integer, ties to even. Adding 2^23 in
        // float arithmetic does exactly that, and the integer is then the low mantissa bits.
        float scaled = bits_float(abs) * 16777216.0f;
        float rounded = scaled + 8388608.0f;
        return uint16_t(sign | uint16_t(float_bits(rounded) - 0x4b000000));
    }
    // Normal: drop 13 mantissa bits with round to nearest even.
    uint32_t rebased = abs - (112u << 23);
    uint32_t lsb = (rebased >> 13) & 1;
    rebased += 0xfff + lsb;
    return uint16_t(sign | (rebased >> 13));
}

} // namespace vpuc::fp16
