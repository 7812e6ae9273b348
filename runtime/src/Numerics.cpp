//===- Numerics.cpp - Scalar decoders and rounding (reference path) -------===//
//
// Reference implementations of the scalar primitives of docs/Formats.md §4.0
// and docs/Numerics.md §1. Everything here favours clarity over speed:
// decoding is done from bit fields, encoding is one explicit
// round-to-nearest-even step carried out in double (where every intermediate
// is exact).
//===----------------------------------------------------------------------===//

#include "comfyquant/runtime/Numerics.h"

#include "comfyquant/runtime/Error.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace comfyquant::rt {

namespace {

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Value of a finite, non-negative binary floating-point number given by its
/// biased exponent field and mantissa field (manBits fraction bits, exponent
/// bias `bias`). Field value 0 is the subnormal range. Exact in double for all
/// formats used here.
double finiteMagnitude(uint32_t expField, uint32_t manField, int manBits,
                       int bias) {
  if (expField == 0) // subnormal: m * 2^(1 - bias - M)
    return std::ldexp(static_cast<double>(manField), 1 - bias - manBits);
  // normal: (2^M + m) * 2^(e - bias - M)
  return std::ldexp(static_cast<double>((1u << manBits) + manField),
                    static_cast<int>(expField) - bias - manBits);
}

/// Round-half-to-even of a non-negative double to an integer-valued double.
double roundHalfEven(double q) {
  double fl = std::floor(q);
  double frac = q - fl; // exact: q and fl are close and share an exponent range
  if (frac > 0.5)
    return fl + 1.0;
  if (frac < 0.5)
    return fl;
  // Exact tie: pick the even neighbour.
  return std::fmod(fl, 2.0) == 0.0 ? fl : fl + 1.0;
}

struct Encoded {
  bool overflow;       // rounded magnitude exceeds the largest finite value
  uint32_t magnitude;  // (expField << manBits) | manField when !overflow
};

/// Rounds the finite, non-negative magnitude `a` to the format with `manBits`
/// fraction bits and exponent bias `bias` (round to nearest, ties to even,
/// gradual underflow) and returns its exponent/mantissa fields. `maxFinite`
/// is the largest finite value of the format; a rounded result above it is
/// reported as overflow (the caller picks inf or saturation).
Encoded encodeMagnitude(double a, int manBits, int bias, double maxFinite) {
  if (a == 0.0)
    return {false, 0};
  const int eMin = 1 - bias; // exponent of the smallest normal
  int e;                     // a = frac * 2^e with frac in [0.5, 1)
  std::frexp(a, &e);
  int unbiased = e - 1; // a in [2^unbiased, 2^(unbiased+1))
  if (unbiased < eMin)
    unbiased = eMin; // subnormal range shares the smallest normal's quantum
  // Spacing of representable values around a.
  const int quantumExp = unbiased - manBits;
  const double q = std::ldexp(a, -quantumExp); // exact (power-of-two scaling)
  const double r = std::ldexp(roundHalfEven(q), quantumExp); // rounded value
  if (r > maxFinite)
    return {true, 0};
  if (r == 0.0)
    return {false, 0};
  // Re-derive the fields of the (exactly representable) rounded value; this
  // handles a carry into the next binade and subnormal -> normal promotion.
  std::frexp(r, &e);
  const int rExp = e - 1;
  if (rExp < eMin) {
    const double m = std::ldexp(r, -(eMin - manBits)); // integer < 2^M
    return {false, static_cast<uint32_t>(m)};
  }
  const uint32_t expField = static_cast<uint32_t>(rExp + bias);
  const double sig = std::ldexp(r, -(rExp - manBits)); // integer in [2^M, 2^(M+1))
  const uint32_t manField = static_cast<uint32_t>(sig) - (1u << manBits);
  return {false, (expField << manBits) | manField};
}

// Format constants.
constexpr int kE4M3Man = 3, kE4M3Bias = 7;
constexpr int kE5M2Man = 2, kE5M2Bias = 15;
constexpr int kHalfMan = 10, kHalfBias = 15;
constexpr int kBf16Man = 7, kBf16Bias = 127;
constexpr double kHalfMax = 65504.0;
// bfloat16 max = (2 - 2^-7) * 2^127.
const double kBf16Max = std::ldexp(255.0, 120);

} // namespace

//===----------------------------------------------------------------------===//
// Decoders
//===----------------------------------------------------------------------===//

namespace {
/// The 256 values of a byte decoder, computed once from its definition
/// (decoding is then a load: the reference path decodes every weight).
template <float (*Decode)(uint8_t)> const float *byteTable() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b)
      t[size_t(b)] = Decode(uint8_t(b));
    return t;
  }();
  return table.data();
}

float decodeE4M3Definition(uint8_t bits) {
  const bool neg = (bits & 0x80) != 0;
  const uint32_t exp = (bits >> 3) & 0xF;
  const uint32_t man = bits & 0x7;
  if (exp == 0xF && man == 0x7) // S.1111.111: the only NaN; no infinities
    return std::numeric_limits<float>::quiet_NaN();
  const float v =
      static_cast<float>(finiteMagnitude(exp, man, kE4M3Man, kE4M3Bias));
  return neg ? -v : v;
}

float decodeE5M2Definition(uint8_t bits) {
  const bool neg = (bits & 0x80) != 0;
  const uint32_t exp = (bits >> 2) & 0x1F;
  const uint32_t man = bits & 0x3;
  if (exp == 0x1F) {
    if (man != 0)
      return std::numeric_limits<float>::quiet_NaN();
    return neg ? -std::numeric_limits<float>::infinity()
               : std::numeric_limits<float>::infinity();
  }
  const float v =
      static_cast<float>(finiteMagnitude(exp, man, kE5M2Man, kE5M2Bias));
  return neg ? -v : v;
}

float decodeE8M0Definition(uint8_t bits) {
  if (bits == 0xFF)
    return std::numeric_limits<float>::quiet_NaN();
  // e = 0 gives 2^-127, an f32 subnormal; ldexpf produces it exactly.
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}
} // namespace

float decodeE4M3(uint8_t bits) { return byteTable<decodeE4M3Definition>()[bits]; }
float decodeE5M2(uint8_t bits) { return byteTable<decodeE5M2Definition>()[bits]; }
float decodeE8M0(uint8_t bits) { return byteTable<decodeE8M0Definition>()[bits]; }

float decodeE2M1(uint8_t code) {
  static const float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f,
                                      2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kMagnitude[code & 0x7];
  return (code & 0x8) ? -v : v;
}

float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exp = (bits >> 10) & 0x1F;
  const uint32_t man = bits & 0x3FF;
  if (exp == 0x1F) // inf / NaN: keep the payload (left-aligned)
    return bitsToFloat(sign | 0x7F800000u | (man << 13));
  const float v =
      static_cast<float>(finiteMagnitude(exp, man, kHalfMan, kHalfBias));
  return sign ? -v : v;
}

float bfloat16ToFloat(uint16_t bits) {
  // bfloat16 is the upper half of an f32; widening is exact for every pattern.
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

//===----------------------------------------------------------------------===//
// Encoders
//===----------------------------------------------------------------------===//

uint16_t floatToHalf(float f) {
  const uint32_t u = floatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  if (std::isnan(f)) // quiet NaN, keep the sign and the top payload bits
    return static_cast<uint16_t>(sign | 0x7E00 | ((u >> 13) & 0x3FF));
  if (std::isinf(f))
    return static_cast<uint16_t>(sign | 0x7C00);
  const Encoded e =
      encodeMagnitude(std::fabs(static_cast<double>(f)), kHalfMan, kHalfBias,
                      kHalfMax);
  if (e.overflow) // IEEE RNE: overflow goes to infinity
    return static_cast<uint16_t>(sign | 0x7C00);
  return static_cast<uint16_t>(sign | e.magnitude);
}

uint16_t floatToBFloat16(float f) {
  const uint32_t u = floatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  if (std::isnan(f)) // quiet NaN, keep the sign and the top payload bits
    return static_cast<uint16_t>((u >> 16) | 0x0040);
  if (std::isinf(f))
    return static_cast<uint16_t>(sign | 0x7F80);
  const Encoded e =
      encodeMagnitude(std::fabs(static_cast<double>(f)), kBf16Man, kBf16Bias,
                      kBf16Max);
  if (e.overflow)
    return static_cast<uint16_t>(sign | 0x7F80);
  return static_cast<uint16_t>(sign | e.magnitude);
}

uint8_t encodeE4M3(float f) {
  if (std::isnan(f))
    return 0x7F; // canonical NaN (S.1111.111 with S = 0)
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  if (std::isinf(f)) // satfinite: infinities saturate too
    return static_cast<uint8_t>(sign | 0x7E);
  const Encoded e = encodeMagnitude(std::fabs(static_cast<double>(f)),
                                    kE4M3Man, kE4M3Bias, kE4M3Max);
  if (e.overflow)
    return static_cast<uint8_t>(sign | 0x7E); // +-448
  return static_cast<uint8_t>(sign | e.magnitude);
}

uint8_t encodeE5M2(float f) {
  if (std::isnan(f))
    return 0x7F; // canonical NaN (S.11111.11 with S = 0)
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  if (std::isinf(f)) // satfinite: infinities saturate too
    return static_cast<uint8_t>(sign | 0x7B);
  const Encoded e = encodeMagnitude(std::fabs(static_cast<double>(f)),
                                    kE5M2Man, kE5M2Bias, kE5M2Max);
  if (e.overflow)
    return static_cast<uint8_t>(sign | 0x7B); // +-57344
  return static_cast<uint8_t>(sign | e.magnitude);
}

//===----------------------------------------------------------------------===//
// Swizzled block-scale layout
//===----------------------------------------------------------------------===//

uint64_t swizzledScaleOffset(uint64_t r, uint64_t c, uint64_t cols) {
  const uint64_t nCB = (cols + 3) / 4; // number of 4-column tiles
  return ((r / 128) * nCB + (c / 4)) * 512 // 128x4 tile -> 512 contiguous
         + (r % 32) * 16                   // d3
         + ((r % 128) / 32) * 4            // d4
         + (c % 4);                        // d5
}

uint64_t swizzledScaleCount(uint64_t rows, uint64_t cols) {
  const uint64_t paddedRows = (rows + 127) / 128 * 128;
  const uint64_t paddedCols = (cols + 3) / 4 * 4;
  return paddedRows * paddedCols;
}

//===----------------------------------------------------------------------===//
// Regular Hadamard (ConvRot)
//===----------------------------------------------------------------------===//

bool isPowerOf4(int64_t g) {
  if (g < 4)
    return false;
  while (g % 4 == 0)
    g /= 4;
  return g == 1;
}

float hadamardEntry(int64_t g, int64_t i, int64_t j) {
  if (!isPowerOf4(g))
    throw Error("", "hadamard",
                "group size " + std::to_string(g) +
                    " is not a power of 4 >= 4");
  if (i < 0 || i >= g || j < 0 || j >= g)
    throw Error("", "hadamard",
                "entry (" + std::to_string(i) + ", " + std::to_string(j) +
                    ") is outside a " + std::to_string(g) + "x" +
                    std::to_string(g) + " matrix");
  int digits = 0; // log4(g)
  int minusOnes = 0;
  for (int64_t n = g; n > 1; n /= 4) {
    if ((i % 4) + (j % 4) == 3)
      ++minusOnes;
    i /= 4;
    j /= 4;
    ++digits;
  }
  const float mag = std::ldexp(1.0f, -digits); // 1/sqrt(g) = 2^-log4(g)
  return (minusOnes % 2) ? -mag : mag;
}

void rotateRowF32(float *row, int64_t k, int64_t g) {
  if (!isPowerOf4(g))
    throw Error("", "rotation",
                "group size " + std::to_string(g) +
                    " is not a power of 4 >= 4");
  if (k < 0 || k % g != 0)
    throw Error("", "rotation",
                "row length " + std::to_string(k) +
                    " is not a multiple of the group size " +
                    std::to_string(g));
  // Dense matrix, built once per thread and size (rows are rotated one at a
  // time).
  thread_local std::vector<float> h;
  thread_local int64_t built = 0;
  if (built != g) {
    h.assign(static_cast<size_t>(g * g), 0.0f);
    for (int64_t i = 0; i < g; ++i)
      for (int64_t j = 0; j < g; ++j)
        h[static_cast<size_t>(i * g + j)] = hadamardEntry(g, i, j);
    built = g;
  }
  std::vector<float> y(static_cast<size_t>(g));
  for (int64_t base = 0; base < k; base += g) {
    const float *x = row + base;
    for (int64_t j = 0; j < g; ++j) {
      // Each product x·H is exact (H entries are powers of two); the double
      // sum of at most a few thousand such terms is exact to far below an
      // f32 ulp, so the one rounding below gives the correctly rounded sum.
      double acc = 0.0;
      for (int64_t i = 0; i < g; ++i)
        acc += static_cast<double>(x[i]) * h[static_cast<size_t>(i * g + j)];
      y[static_cast<size_t>(j)] = static_cast<float>(acc);
    }
    for (int64_t j = 0; j < g; ++j)
      row[base + j] = y[static_cast<size_t>(j)];
  }
}

uint8_t encodeE2M1(float f) {
  // Magnitudes of codes 0..7; choose the nearest, ties to the even code.
  static const float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  uint8_t sign = std::signbit(f) ? 0x8 : 0x0;
  float a = std::fabs(f);
  if (std::isnan(a))
    return sign | 0x7; // saturate; E2M1 has no NaN
  uint8_t best = 7;
  for (uint8_t c = 0; c < 7; ++c) {
    float mid = 0.5f * (kMag[c] + kMag[c + 1]); // exact in f32
    if (a < mid || (a == mid && c % 2 == 0)) {
      best = c;
      break;
    }
  }
  return sign | best;
}

void fwhtRowF32(float *row, int64_t k, int64_t g) {
  if (!isPowerOf4(g))
    throw Error("", "rotation",
                "group size " + std::to_string(g) + " is not a power of 4 >= 4");
  if (k < 0 || k % g != 0)
    throw Error("", "rotation",
                "row length " + std::to_string(k) +
                    " is not a multiple of the group size " + std::to_string(g));
  static const int kH4[4][4] = {
      {1, 1, 1, -1}, {1, 1, -1, 1}, {1, -1, 1, 1}, {-1, 1, 1, 1}};
  auto term = [](int h, float v) { return h > 0 ? v : -v; };
  for (int64_t base = 0; base < k; base += g) {
    float *x = row + base;
    for (int64_t s = 1; s < g; s *= 4) {
      for (int64_t i = 0; i < g; ++i) {
        if ((i / s) % 4 != 0)
          continue; // i is the first of its 4 butterfly inputs
        float a = x[i], b = x[i + s], c = x[i + 2 * s], d = x[i + 3 * s];
        for (int r = 0; r < 4; ++r) {
          float sum = term(kH4[r][0], a) + term(kH4[r][1], b);
          sum = sum + term(kH4[r][2], c);
          sum = sum + term(kH4[r][3], d);
          x[i + r * s] = 0.5f * sum;
        }
      }
    }
  }
}

} // namespace comfyquant::rt
