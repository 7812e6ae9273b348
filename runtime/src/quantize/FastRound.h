//===- FastRound.h - branch-free forms of the reference roundings -*- C++ -*-===//
//
// The quantizer's inner loops need Numerics.h's conversions per element and
// vectorised. These are the same functions written branch-free (selects and
// integer bit operations, no calls), for finite inputs; QuantizeTest checks
// each equal to its Numerics.h statement over every exponent and the
// rounding-critical low bits. The statement of each rounding stays there.
//===----------------------------------------------------------------------===//

#ifndef COMFYQUANT_RUNTIME_QUANTIZE_FASTROUND_H
#define COMFYQUANT_RUNTIME_QUANTIZE_FASTROUND_H

#include <cstdint>
#include <cstring>

namespace comfyquant::rt::fast {

inline uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float absf(float v) { return fromBits(bits(v) & 0x7FFFFFFFu); }

/// RNE to an integer for |v| < 2^22 (the default rounding mode does it).
inline float rintSmall(float v) {
  const float magic = 0x1.8p23f;
  return (v + magic) - magic;
}

/// bfloat16ToFloat(floatToBFloat16(v)) for finite v.
inline float roundBF16(float v) {
  uint32_t u = bits(v);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  return fromBits(u);
}

/// halfToFloat(floatToHalf(v)) for finite v: 10 mantissa bits, subnormals
/// below 2^-14 on a 2^-24 grid, overflow (>= 65520) to infinity.
inline float roundF16(float v) {
  const uint32_t u = bits(v);
  const float a = absf(v);
  const float normal =
      fromBits((u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u);
  const float sub = fromBits(bits(rintSmall(a * 0x1p24f) * 0x1p-24f) |
                             (u & 0x80000000u));
  const float r = a < 0x1p-14f ? sub : normal;
  const float inf = fromBits((u & 0x80000000u) | 0x7F800000u);
  return a >= 65520.0f ? inf : r;
}

/// encodeE2M1(v) for finite v: the code of the nearest E2M1 magnitude, ties
/// to the even code, saturating at 6; sign kept (also of -0).
inline uint8_t encodeE2M1(float v) {
  const float a = absf(v);
  const uint8_t code = uint8_t((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) +
                               (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) +
                               (a > 5.0f));
  return uint8_t(code | ((bits(v) >> 28) & 0x8u));
}

/// encodeE4M3(v) for finite v: RNE (subnormals on a 2^-9 grid), saturating
/// at 448, sign kept.
inline uint8_t encodeE4M3(float v) {
  const uint32_t u = bits(v);
  const uint32_t au = u & 0x7FFFFFFFu;
  const float a = fromBits(au);
  const uint32_t r = au + 0x7FFFFu + ((au >> 20) & 1u);
  const int32_t e = int32_t(r >> 23) - 127 + 7;
  const uint32_t normal = (uint32_t(e < 0 ? 0 : e) << 3) | ((r >> 20) & 7u);
  // Both forms are computed; the subnormal one only from values it can
  // hold (a larger a would make the float-to-integer conversion overflow).
  const float small = a < 0x1p-6f ? a : 0.0f;
  const uint32_t sub = uint32_t(rintSmall(small * 512.0f));
  uint32_t code = a < 0x1p-6f ? sub : normal;
  code = code > 0x7Eu ? 0x7Eu : code;
  return uint8_t(code | ((u >> 24) & 0x80u));
}

} // namespace comfyquant::rt::fast

#endif // COMFYQUANT_RUNTIME_QUANTIZE_FASTROUND_H
