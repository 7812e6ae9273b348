//===- FloatFormats.h - the emulator's own float encoders/decoders -*- C++ -*-===//
//
// Written apart from the runtime's reference numerics on purpose: the
// emulator checks the kernels against the reference path, so it must not
// share that path's decoders. Rounding to a format is done on doubles, where
// every value of these formats and every product of two of them is exact.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_PTXEMU_FLOATFORMATS_H
#define COMFYQUANT_PTXEMU_FLOATFORMATS_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace comfyquant::ptxemu {

inline float bitsToF32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint32_t f32ToBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline double bitsToF64(uint64_t b) {
  double f;
  std::memcpy(&f, &b, 8);
  return f;
}
inline uint64_t f64ToBits(double f) {
  uint64_t b;
  std::memcpy(&b, &f, 8);
  return b;
}

/// A binary float format: `mant` stored fraction bits, exponent `bias`,
/// `expBits` exponent bits; `ieee` formats reserve the top exponent for
/// Inf/NaN; `fnNan` formats (e4m3) keep only S.1111.111 as NaN; formats with
/// neither have no NaN/Inf (e2m1).
struct FloatFormat {
  int mant, expBits, bias;
  bool ieee, fnNan;
};
constexpr FloatFormat kF16{10, 5, 15, true, false};
constexpr FloatFormat kBF16{7, 8, 127, true, false};
constexpr FloatFormat kE4M3{3, 4, 7, false, true};
constexpr FloatFormat kE5M2{2, 5, 15, true, false};
constexpr FloatFormat kE2M1{1, 2, 1, false, false};

inline double decode(const FloatFormat &f, uint32_t bits) {
  const int total = 1 + f.expBits + f.mant;
  const bool neg = (bits >> (total - 1)) & 1;
  const uint32_t e = (bits >> f.mant) & ((1u << f.expBits) - 1);
  const uint32_t m = bits & ((1u << f.mant) - 1);
  double v;
  if (f.ieee && e == (1u << f.expBits) - 1)
    v = m ? NAN : INFINITY;
  else if (f.fnNan && e == (1u << f.expBits) - 1 && m == (1u << f.mant) - 1)
    v = NAN;
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mant);
  else
    v = std::ldexp(static_cast<double>(m | (1u << f.mant)),
                   static_cast<int>(e) - f.bias - f.mant);
  return neg ? -v : v;
}

/// The largest finite value of `f`.
inline double maxFinite(const FloatFormat &f) {
  int emax = (1 << f.expBits) - 1 - f.bias - (f.ieee ? 1 : 0);
  uint32_t mmax = (1u << f.mant) - 1 - (f.fnNan ? 1 : 0);
  return std::ldexp(static_cast<double>(mmax | (1u << f.mant)), emax - f.mant);
}

/// Rounds `x` (exact in double) to `f`: round to nearest even, or toward zero
/// when `truncate`. Overflow gives Inf (IEEE formats) or NaN (fn formats)
/// unless `satfinite`, which clamps to the largest finite value (NaN stays
/// NaN where the format has one).
inline uint32_t encode(const FloatFormat &f, double x, bool satfinite,
                       bool truncate = false) {
  const int total = 1 + f.expBits + f.mant;
  const uint32_t sign = std::signbit(x) ? 1u << (total - 1) : 0;
  const uint32_t expMask = (1u << f.expBits) - 1;
  if (std::isnan(x)) {
    if (f.ieee)
      return (expMask << f.mant) | ((1u << f.mant) - 1); // canonical NaN
    if (f.fnNan)
      return sign | (expMask << f.mant) | ((1u << f.mant) - 1);
    return sign | (expMask << f.mant) | ((1u << f.mant) - 1); // e2m1: max
  }
  double a = std::fabs(x);
  const double maxv = maxFinite(f);
  const int emin = 1 - f.bias;
  if (!std::isinf(a) && a != 0) {
    int e;
    std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
    int exp = e - 1;
    if (exp < emin)
      exp = emin;
    double ulp = std::ldexp(1.0, exp - f.mant);
    double q = a / ulp;
    q = truncate ? std::trunc(q) : std::nearbyint(q);
    a = q * ulp;
  }
  if (std::isinf(a) || a > maxv) {
    if (satfinite || (!f.ieee && !f.fnNan))
      a = maxv;
    else if (truncate && !std::isinf(a))
      a = maxv;
    else if (f.ieee)
      return sign | (expMask << f.mant);
    else
      return sign | (expMask << f.mant) | ((1u << f.mant) - 1);
  }
  if (a == 0)
    return sign;
  int e;
  std::frexp(a, &e);
  int exp = e - 1;
  if (exp < emin) // subnormal
    return sign | static_cast<uint32_t>(std::ldexp(a, f.bias - 1 + f.mant));
  uint32_t m = static_cast<uint32_t>(std::ldexp(a, f.mant - exp)) &
               ((1u << f.mant) - 1);
  return sign | (static_cast<uint32_t>(exp + f.bias) << f.mant) | m;
}

inline float halfToF32(uint16_t h) {
  return static_cast<float>(decode(kF16, h));
}
inline float bf16ToF32(uint16_t h) { return bitsToF32(uint32_t(h) << 16); }

/// ue8m0: 2^(x-127), 0xFF is NaN.
inline double decodeUE8M0(uint8_t x) {
  return x == 0xFF ? NAN : std::ldexp(1.0, int(x) - 127);
}
/// ue4m3: e4m3 without a sign bit (the top bit is ignored).
inline double decodeUE4M3(uint8_t x) { return decode(kE4M3, x & 0x7F); }

} // namespace comfyquant::ptxemu

#endif // COMFYQUANT_PTXEMU_FLOATFORMATS_H
