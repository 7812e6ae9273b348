//===- NumericsTest.cpp - Tests of the reference scalar primitives --------===//
//
// Every check compares against an independently written computation: value
// formulas evaluated with std::pow in double, brute-force nearest-code search
// for the encoders, the classic bit trick / _Float16 for half and bfloat16,
// a literal emulation of kitchen's to_blocked for the swizzle, and a literal
// Kronecker product for the Hadamard matrix.
//===----------------------------------------------------------------------===//

#include "comfyquant/runtime/Numerics.h"

#include "comfyquant/runtime/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

using namespace comfyquant::rt;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Independent value formula: (-1)^s * 2^(e-bias) * (1 + m/2^M) for normal,
/// (-1)^s * 2^(1-bias) * (m/2^M) for subnormal, evaluated with pow in double.
double formulaValue(bool neg, unsigned e, unsigned m, int manBits, int bias) {
  double frac = static_cast<double>(m) / std::pow(2.0, manBits);
  double v = (e == 0) ? std::pow(2.0, 1 - bias) * frac
                      : std::pow(2.0, static_cast<int>(e) - bias) * (1.0 + frac);
  return neg ? -v : v;
}

/// Exactly equal as float, including the sign of zero.
void expectSameFloat(float expected, float actual, unsigned code) {
  EXPECT_EQ(bitsOf(expected), bitsOf(actual))
      << "code 0x" << std::hex << code << ": expected " << expected << " got "
      << actual;
}

/// Brute-force RNE oracle for an 8-bit format: the finite code nearest to v
/// (distance in double); on an exact tie the code with an even mantissa LSB;
/// magnitudes above the finite max saturate. Only codes of the same sign as v
/// are considered (so -0.0 and tiny negatives give the negative zero code).
uint8_t nearestCode(float (*decode)(uint8_t), float v, double maxFinite) {
  const bool neg = std::signbit(v);
  double a = std::fabs(static_cast<double>(v));
  if (a > maxFinite)
    a = maxFinite;
  int best = -1;
  double bestDist = 0.0;
  for (int c = 0; c < 128; ++c) {
    float d = decode(static_cast<uint8_t>(c));
    if (!std::isfinite(d))
      continue;
    double dist = std::fabs(static_cast<double>(d) - a);
    if (best < 0 || dist < bestDist ||
        (dist == bestDist && (c & 1) == 0 && (best & 1) != 0)) {
      best = c;
      bestDist = dist;
    }
  }
  return static_cast<uint8_t>(best | (neg ? 0x80 : 0));
}

/// Sorted list of (value, code) for all finite non-negative codes (code < 128).
std::vector<std::pair<double, int>> positiveCodes(float (*decode)(uint8_t)) {
  std::vector<std::pair<double, int>> v;
  for (int c = 0; c < 128; ++c) {
    float d = decode(static_cast<uint8_t>(c));
    if (std::isfinite(d))
      v.emplace_back(static_cast<double>(d), c);
  }
  std::sort(v.begin(), v.end());
  return v;
}

} // namespace

//===----------------------------------------------------------------------===//
// FP8 decoding
//===----------------------------------------------------------------------===//

TEST(Numerics, DecodeE4M3Exhaustive) {
  int nans = 0;
  for (unsigned b = 0; b < 256; ++b) {
    bool neg = b & 0x80;
    unsigned e = (b >> 3) & 0xF, m = b & 7;
    float got = decodeE4M3(static_cast<uint8_t>(b));
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(got)) << b;
      ++nans;
      continue;
    }
    EXPECT_TRUE(std::isfinite(got)) << b; // E4M3FN has no infinities
    expectSameFloat(static_cast<float>(formulaValue(neg, e, m, 3, 7)), got, b);
  }
  EXPECT_EQ(nans, 2); // 0x7F and 0xFF only
  EXPECT_EQ(decodeE4M3(0x7E), 448.0f);
  EXPECT_EQ(decodeE4M3(0xFE), -448.0f);
  EXPECT_EQ(decodeE4M3(0x78), 256.0f); // S.1111.000 is finite
  EXPECT_EQ(decodeE4M3(0x38), 1.0f);
  EXPECT_EQ(decodeE4M3(0x01), std::ldexp(1.0f, -9)); // smallest subnormal
  EXPECT_EQ(decodeE4M3(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(decodeE4M3(0x08), std::ldexp(1.0f, -6)); // smallest normal
  EXPECT_TRUE(std::signbit(decodeE4M3(0x80)));
  EXPECT_EQ(decodeE4M3(0x80), 0.0f);
}

TEST(Numerics, DecodeE5M2Exhaustive) {
  int nans = 0, infs = 0;
  for (unsigned b = 0; b < 256; ++b) {
    bool neg = b & 0x80;
    unsigned e = (b >> 2) & 0x1F, m = b & 3;
    float got = decodeE5M2(static_cast<uint8_t>(b));
    if (e == 31) {
      if (m == 0) {
        EXPECT_TRUE(std::isinf(got)) << b;
        EXPECT_EQ(std::signbit(got), neg) << b;
        ++infs;
      } else {
        EXPECT_TRUE(std::isnan(got)) << b;
        ++nans;
      }
      continue;
    }
    expectSameFloat(static_cast<float>(formulaValue(neg, e, m, 2, 15)), got,
                    b);
  }
  EXPECT_EQ(nans, 6);
  EXPECT_EQ(infs, 2);
  EXPECT_EQ(decodeE5M2(0x7B), 57344.0f);
  EXPECT_EQ(decodeE5M2(0x3C), 1.0f);
  EXPECT_EQ(decodeE5M2(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(decodeE5M2(0x04), std::ldexp(1.0f, -14));
  // E5M2 is the top byte of an IEEE half: cross-check against halfToFloat.
  for (unsigned b = 0; b < 256; ++b) {
    float a = decodeE5M2(static_cast<uint8_t>(b));
    float h = halfToFloat(static_cast<uint16_t>(b << 8));
    if (std::isnan(a))
      EXPECT_TRUE(std::isnan(h));
    else
      expectSameFloat(h, a, b);
  }
}

TEST(Numerics, DecodeE8M0Exhaustive) {
  for (unsigned e = 0; e < 255; ++e) {
    float got = decodeE8M0(static_cast<uint8_t>(e));
    float want = static_cast<float>(std::pow(2.0, static_cast<int>(e) - 127));
    expectSameFloat(want, got, e);
    EXPECT_GT(got, 0.0f);
  }
  EXPECT_TRUE(std::isnan(decodeE8M0(255)));
  // e = 0 is 2^-127: an f32 subnormal, bit pattern 0x00400000, not flushed.
  float z = decodeE8M0(0);
  EXPECT_EQ(std::fpclassify(z), FP_SUBNORMAL);
  EXPECT_EQ(bitsOf(z), 0x00400000u);
  EXPECT_EQ(bitsOf(decodeE8M0(1)), 0x00800000u); // 2^-126, smallest normal
  EXPECT_EQ(decodeE8M0(127), 1.0f);
  EXPECT_EQ(decodeE8M0(254), std::ldexp(1.0f, 127));
}

TEST(Numerics, DecodeE2M1Table) {
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (unsigned c = 0; c < 16; ++c) {
    // Independent formula: sign bit 3, exponent bits 2..1 (bias 1), mantissa 0.
    bool neg = c & 8;
    unsigned e = (c >> 1) & 3, m = c & 1;
    float want = static_cast<float>(formulaValue(neg, e, m, 1, 1));
    expectSameFloat(want, decodeE2M1(static_cast<uint8_t>(c)), c);
    EXPECT_EQ(std::fabs(decodeE2M1(static_cast<uint8_t>(c))), mags[c & 7]);
    // Only the low nibble counts.
    expectSameFloat(want, decodeE2M1(static_cast<uint8_t>(c | 0xA0)), c);
  }
  EXPECT_TRUE(std::signbit(decodeE2M1(8))); // code 8 = -0
  EXPECT_EQ(decodeE2M1(0xF), -6.0f);
}

//===----------------------------------------------------------------------===//
// FP8 encoding
//===----------------------------------------------------------------------===//

TEST(Numerics, EncodeRoundTripAllFiniteCodes) {
  for (unsigned b = 0; b < 256; ++b) {
    float v4 = decodeE4M3(static_cast<uint8_t>(b));
    if (std::isnan(v4))
      EXPECT_EQ(encodeE4M3(v4), 0x7F); // canonical NaN code, sign dropped
    else
      EXPECT_EQ(encodeE4M3(v4), b) << b; // includes 0x80 = -0
    float v5 = decodeE5M2(static_cast<uint8_t>(b));
    if (std::isnan(v5))
      EXPECT_EQ(encodeE5M2(v5), 0x7F);
    else if (std::isinf(v5)) // satfinite: +-inf -> +-57344
      EXPECT_EQ(encodeE5M2(v5), (b & 0x80) | 0x7B) << b;
    else
      EXPECT_EQ(encodeE5M2(v5), b) << b;
  }
}

TEST(Numerics, EncodeSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(encodeE4M3(nan), 0x7F);
  EXPECT_EQ(encodeE4M3(-nan), 0x7F);
  EXPECT_EQ(encodeE4M3(inf), 0x7E);
  EXPECT_EQ(encodeE4M3(-inf), 0xFE);
  EXPECT_EQ(encodeE4M3(1e30f), 0x7E);
  EXPECT_EQ(encodeE4M3(-1e30f), 0xFE);
  EXPECT_EQ(encodeE4M3(464.0f), 0x7E); // would be the NaN code without satfinite
  EXPECT_EQ(encodeE4M3(480.0f), 0x7E);
  EXPECT_EQ(encodeE4M3(449.0f), 0x7E);
  EXPECT_EQ(encodeE4M3(0.0f), 0x00);
  EXPECT_EQ(encodeE4M3(-0.0f), 0x80);
  EXPECT_EQ(encodeE4M3(1.0f), 0x38);
  EXPECT_EQ(encodeE5M2(nan), 0x7F);
  EXPECT_EQ(encodeE5M2(inf), 0x7B);
  EXPECT_EQ(encodeE5M2(-inf), 0xFB);
  EXPECT_EQ(encodeE5M2(61440.0f), 0x7B); // halfway to 2^16 still saturates
  EXPECT_EQ(encodeE5M2(1e10f), 0x7B);
  EXPECT_EQ(encodeE5M2(-1e10f), 0xFB);
  EXPECT_EQ(encodeE5M2(-0.0f), 0x80);
}

TEST(Numerics, EncodeTiesToEven) {
  // E4M3, normal: 1.0 (0x38) and 1.125 (0x39); midpoint 1.0625 -> 0x38 (even).
  EXPECT_EQ(encodeE4M3(1.0625f), 0x38);
  // 1.125 (0x39) and 1.25 (0x3A); midpoint 1.1875 -> 0x3A (even).
  EXPECT_EQ(encodeE4M3(1.1875f), 0x3A);
  EXPECT_EQ(encodeE4M3(-1.1875f), 0xBA);
  // Just off the tie goes to the nearer neighbour.
  EXPECT_EQ(encodeE4M3(std::nextafter(1.0625f, 2.0f)), 0x39);
  EXPECT_EQ(encodeE4M3(std::nextafter(1.1875f, 0.0f)), 0x39);
  // Carry into the next binade: 1.9375 (between 1.875 = 0x3F and 2.0 = 0x40).
  EXPECT_EQ(encodeE4M3(1.9375f), 0x40);
  // Subnormals: half of the smallest subnormal ties to zero, 1.5 ulp to 2 ulp.
  const float s = std::ldexp(1.0f, -9);
  EXPECT_EQ(encodeE4M3(0.5f * s), 0x00);
  EXPECT_EQ(encodeE4M3(-0.5f * s), 0x80);
  EXPECT_EQ(encodeE4M3(std::nextafter(0.5f * s, 1.0f)), 0x01);
  EXPECT_EQ(encodeE4M3(1.5f * s), 0x02);
  EXPECT_EQ(encodeE4M3(2.5f * s), 0x02);
  EXPECT_EQ(encodeE4M3(7.5f * s), 0x08); // largest subnormal -> smallest normal
  EXPECT_EQ(encodeE4M3(std::ldexp(1.0f, -20)), 0x00);
  // Top of the range: 416 (0x7D) / 448 (0x7E), midpoint 432 -> 448 (even).
  EXPECT_EQ(encodeE4M3(432.0f), 0x7E);
  // 384 (0x7C) / 416 (0x7D), midpoint 400 -> 384 (even).
  EXPECT_EQ(encodeE4M3(400.0f), 0x7C);
  // E5M2: 1.0 (0x3C) / 1.25 (0x3D), midpoint 1.125 -> 0x3C.
  EXPECT_EQ(encodeE5M2(1.125f), 0x3C);
  EXPECT_EQ(encodeE5M2(1.375f), 0x3E);
  EXPECT_EQ(encodeE5M2(std::ldexp(1.0f, -17)), 0x00);
  EXPECT_EQ(encodeE5M2(std::ldexp(3.0f, -17)), 0x02);

  // Every midpoint between adjacent finite codes, both formats.
  struct Fmt {
    float (*decode)(uint8_t);
    uint8_t (*encode)(float);
  } fmts[] = {{decodeE4M3, encodeE4M3}, {decodeE5M2, encodeE5M2}};
  for (const Fmt &f : fmts) {
    auto codes = positiveCodes(f.decode);
    for (size_t k = 0; k + 1 < codes.size(); ++k) {
      double lo = codes[k].first, hi = codes[k + 1].first;
      float mid = static_cast<float>((lo + hi) / 2); // exact in f32
      ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
      int even = (codes[k].second & 1) == 0 ? codes[k].second
                                            : codes[k + 1].second;
      EXPECT_EQ(f.encode(mid), even) << mid;
      EXPECT_EQ(f.encode(-mid), even | 0x80) << -mid;
      EXPECT_EQ(f.encode(std::nextafter(mid, 0.0f)), codes[k].second) << mid;
      EXPECT_EQ(f.encode(std::nextafter(mid, 1e9f)), codes[k + 1].second)
          << mid;
    }
  }
}

TEST(Numerics, EncodeMatchesBruteForceNearest) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> expDist(-30, 20);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (int n = 0; n < 20000; ++n) {
    float v = std::ldexp(mant(rng), expDist(rng));
    if (n & 1)
      v = -v;
    EXPECT_EQ(encodeE4M3(v), nearestCode(decodeE4M3, v, 448.0)) << v;
    EXPECT_EQ(encodeE5M2(v), nearestCode(decodeE5M2, v, 57344.0)) << v;
  }
  // Dense sweep over f32 patterns in the interesting range (every ~4000th).
  for (uint32_t u = 0; u < 0x48000000u; u += 3989) {
    float v = fromBits(u);
    ASSERT_EQ(encodeE4M3(v), nearestCode(decodeE4M3, v, 448.0)) << v;
  }
  for (uint32_t u = 0; u < 0x48000000u; u += 4001) {
    float v = fromBits(u);
    ASSERT_EQ(encodeE5M2(v), nearestCode(decodeE5M2, v, 57344.0)) << v;
  }
}

//===----------------------------------------------------------------------===//
// half / bfloat16
//===----------------------------------------------------------------------===//

TEST(Numerics, HalfExhaustive) {
  for (uint32_t h = 0; h < 65536; ++h) {
    bool neg = h & 0x8000;
    unsigned e = (h >> 10) & 0x1F, m = h & 0x3FF;
    float got = halfToFloat(static_cast<uint16_t>(h));
    if (e == 31) {
      if (m == 0) {
        EXPECT_TRUE(std::isinf(got)) << h;
        EXPECT_EQ(std::signbit(got), neg) << h;
        EXPECT_EQ(floatToHalf(got), h);
      } else {
        EXPECT_TRUE(std::isnan(got)) << h;
        uint16_t back = floatToHalf(got);
        EXPECT_EQ(back & 0x7C00, 0x7C00) << h;
        EXPECT_NE(back & 0x03FF, 0) << h;
        EXPECT_NE(back & 0x0200, 0) << h; // quiet
        EXPECT_EQ(back & 0x8000, h & 0x8000) << h;
        if (m & 0x200) { // a quiet NaN keeps its payload exactly
          EXPECT_EQ(back, h);
        }
      }
      continue;
    }
    expectSameFloat(static_cast<float>(formulaValue(neg, e, m, 10, 15)), got,
                    h);
    EXPECT_EQ(floatToHalf(got), h) << h;
#ifdef __FLT16_MAX__
    _Float16 hf;
    uint16_t hb = static_cast<uint16_t>(h);
    std::memcpy(&hf, &hb, 2);
    expectSameFloat(static_cast<float>(hf), got, h);
#endif
  }
}

TEST(Numerics, BFloat16Exhaustive) {
  for (uint32_t h = 0; h < 65536; ++h) {
    bool neg = h & 0x8000;
    unsigned e = (h >> 7) & 0xFF, m = h & 0x7F;
    float got = bfloat16ToFloat(static_cast<uint16_t>(h));
    if (e == 255) {
      if (m == 0) {
        EXPECT_TRUE(std::isinf(got)) << h;
        EXPECT_EQ(floatToBFloat16(got), h);
      } else {
        EXPECT_TRUE(std::isnan(got)) << h;
        uint16_t back = floatToBFloat16(got);
        EXPECT_EQ(back & 0x7F80, 0x7F80) << h;
        EXPECT_NE(back & 0x0040, 0) << h; // quiet
        EXPECT_EQ(back & 0x8000, h & 0x8000) << h;
        if (m & 0x40) {
          EXPECT_EQ(back, h);
        }
      }
      continue;
    }
    expectSameFloat(static_cast<float>(formulaValue(neg, e, m, 7, 127)), got,
                    h);
    EXPECT_EQ(floatToBFloat16(got), h) << h;
  }
}

TEST(Numerics, BFloat16RoundingTiesAndOverflow) {
  EXPECT_EQ(floatToBFloat16(fromBits(0x3F808000)), 0x3F80); // tie -> even
  EXPECT_EQ(floatToBFloat16(fromBits(0x3F818000)), 0x3F82); // tie -> even
  EXPECT_EQ(floatToBFloat16(fromBits(0x3F808001)), 0x3F81);
  EXPECT_EQ(floatToBFloat16(fromBits(0x3F807FFF)), 0x3F80);
  EXPECT_EQ(floatToBFloat16(fromBits(0xBF818000)), 0xBF82);
  // Subnormal f32 ties.
  EXPECT_EQ(floatToBFloat16(fromBits(0x00008000)), 0x0000);
  EXPECT_EQ(floatToBFloat16(fromBits(0x00018000)), 0x0002);
  EXPECT_EQ(floatToBFloat16(fromBits(0x80008000)), 0x8000);
  // Largest bf16 stays; beyond the midpoint to 2^128 goes to inf.
  EXPECT_EQ(floatToBFloat16(fromBits(0x7F7F0000)), 0x7F7F);
  EXPECT_EQ(floatToBFloat16(fromBits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(floatToBFloat16(fromBits(0x7F7F8000)), 0x7F80);
  EXPECT_EQ(floatToBFloat16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(floatToBFloat16(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(floatToBFloat16(-0.0f), 0x8000);
  // Against the classic integer RNE trick, on a sweep of non-NaN patterns.
  for (uint64_t u = 0; u < 0x100000000ull; u += 40009) {
    uint32_t b = static_cast<uint32_t>(u);
    float f = fromBits(b);
    if (std::isnan(f))
      continue;
    uint16_t want =
        static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
    ASSERT_EQ(floatToBFloat16(f), want) << std::hex << b;
  }
}

TEST(Numerics, HalfRoundingTiesAndOverflow) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00); // tie with 2^16 -> even -> inf
  EXPECT_EQ(floatToHalf(-65520.0f), 0xFC00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00); // tie -> even
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Subnormals: 2^-24 is the smallest half subnormal.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000); // tie -> 0
  EXPECT_EQ(floatToHalf(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002); // 1.5 ulp -> 2
  EXPECT_EQ(floatToHalf(std::ldexp(1023.5f, -24)), 0x0400); // -> min normal
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  // Every midpoint between adjacent positive finite halves ties to even.
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    double lo = halfToFloat(static_cast<uint16_t>(h));
    double hi = halfToFloat(static_cast<uint16_t>(h + 1));
    float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1)
                            : static_cast<uint16_t>(h);
    ASSERT_EQ(floatToHalf(mid), even) << h;
    ASSERT_EQ(floatToHalf(-mid), even | 0x8000) << h;
    ASSERT_EQ(floatToHalf(std::nextafter(mid, 0.0f)), h) << h;
    ASSERT_EQ(floatToHalf(std::nextafter(mid, 1e9f)), h + 1) << h;
  }
#ifdef __FLT16_MAX__
  // Against the compiler's _Float16 conversion (RNE) on a sweep of patterns.
  for (uint64_t u = 0; u < 0x100000000ull; u += 40009) {
    uint32_t b = static_cast<uint32_t>(u);
    float f = fromBits(b);
    if (std::isnan(f))
      continue;
    _Float16 hf = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &hf, 2);
    ASSERT_EQ(floatToHalf(f), want) << std::hex << b;
  }
#endif
}

//===----------------------------------------------------------------------===//
// Swizzled block-scale layout
//===----------------------------------------------------------------------===//

namespace {

/// Literal emulation of kitchen's to_blocked (comfy_kitchen/float_utils.py):
///   padded -> view(nRB,128,nCB,4) -> permute(0,2,1,3)
///          -> reshape(-1,4,32,4) -> transpose(1,2) -> reshape(-1,32,16)
/// Returns, for each flat storage position, the logical (row, col) it holds.
std::vector<std::pair<uint64_t, uint64_t>> toBlockedSources(uint64_t rows,
                                                            uint64_t cols) {
  uint64_t nRB = (rows + 127) / 128, nCB = (cols + 3) / 4;
  // After view + permute(0,2,1,3): A[rb][cb][i][j] = padded[rb*128+i][cb*4+j].
  // reshape(-1,4,32,4): B[b][a][d][j] = A[b / nCB][b % nCB][a*32+d][j].
  // transpose(1,2): T[b][d][a][j] = B[b][a][d][j]; flattened row-major.
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t b = 0; b < nRB * nCB; ++b)
    for (uint64_t d = 0; d < 32; ++d)
      for (uint64_t a = 0; a < 4; ++a)
        for (uint64_t j = 0; j < 4; ++j) {
          uint64_t rb = b / nCB, cb = b % nCB;
          out.emplace_back(rb * 128 + a * 32 + d, cb * 4 + j);
        }
  return out;
}

} // namespace

TEST(Numerics, SwizzleCount) {
  EXPECT_EQ(swizzledScaleCount(300, 33), 384u * 36u);
  EXPECT_EQ(swizzledScaleCount(1, 1), 512u);
  EXPECT_EQ(swizzledScaleCount(128, 4), 512u);
  EXPECT_EQ(swizzledScaleCount(129, 5), 256u * 8u);
  EXPECT_EQ(swizzledScaleCount(3072, 3072 / 16), 3072u * 192u);
}

TEST(Numerics, SwizzleBijection300x33) {
  const uint64_t rows = 300, cols = 33;
  const uint64_t count = swizzledScaleCount(rows, cols);
  std::vector<int> hit(count, 0);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) {
      uint64_t o = swizzledScaleOffset(r, c, cols);
      ASSERT_LT(o, count);
      ++hit[o];
    }
  // Injective on logical entries.
  EXPECT_EQ(*std::max_element(hit.begin(), hit.end()), 1);
  EXPECT_EQ(static_cast<uint64_t>(std::count(hit.begin(), hit.end(), 1)),
            rows * cols);
  // Extended to the padded extent, it is a permutation of [0, count).
  std::fill(hit.begin(), hit.end(), 0);
  for (uint64_t r = 0; r < 384; ++r)
    for (uint64_t c = 0; c < 36; ++c)
      ++hit[swizzledScaleOffset(r, c, cols)];
  EXPECT_EQ(std::count(hit.begin(), hit.end(), 1),
            static_cast<long>(count));
}

TEST(Numerics, SwizzleMatchesTextualDescription) {
  // docs/Numerics.md §1.4: each 128x4 tile is one contiguous 512-byte
  // chunk, tiles row-tile-major; inside a chunk, byte d3*16 + d4*4 + d5 holds
  // row d4*32 + d3 and column d5 of the tile.
  const uint64_t rows = 300, cols = 33, nCB = 9;
  const uint64_t count = swizzledScaleCount(rows, cols);
  for (uint64_t o = 0; o < count; ++o) {
    uint64_t tile = o / 512, in = o % 512;
    uint64_t d3 = in / 16, d4 = (in % 16) / 4, d5 = in % 4;
    uint64_t r = (tile / nCB) * 128 + d4 * 32 + d3;
    uint64_t c = (tile % nCB) * 4 + d5;
    ASSERT_EQ(swizzledScaleOffset(r, c, cols), o) << r << "," << c;
  }
  // All 512 entries of one tile land in one chunk.
  for (uint64_t rb = 0; rb < 3; ++rb)
    for (uint64_t cb = 0; cb < nCB; ++cb) {
      std::set<uint64_t> offs;
      for (uint64_t i = 0; i < 128; ++i)
        for (uint64_t j = 0; j < 4; ++j)
          offs.insert(swizzledScaleOffset(rb * 128 + i, cb * 4 + j, cols));
      EXPECT_EQ(offs.size(), 512u);
      EXPECT_EQ(*offs.begin(), (rb * nCB + cb) * 512);
      EXPECT_EQ(*offs.rbegin(), (rb * nCB + cb) * 512 + 511);
    }
}

TEST(Numerics, SwizzleMatchesToBlockedEmulation) {
  const std::pair<uint64_t, uint64_t> shapes[] = {
      {1, 1}, {130, 7}, {256, 12}, {300, 33}, {128, 4}};
  for (auto [rows, cols] : shapes) {
    auto src = toBlockedSources(rows, cols);
    ASSERT_EQ(src.size(), swizzledScaleCount(rows, cols));
    for (uint64_t o = 0; o < src.size(); ++o)
      ASSERT_EQ(swizzledScaleOffset(src[o].first, src[o].second, cols), o)
          << rows << "x" << cols << " offset " << o;
  }
}

//===----------------------------------------------------------------------===//
// Regular Hadamard / ConvRot
//===----------------------------------------------------------------------===//

TEST(Numerics, IsPowerOf4) {
  for (int64_t g : {4, 16, 64, 256, 1024, 4096, 65536})
    EXPECT_TRUE(isPowerOf4(g)) << g;
  EXPECT_TRUE(isPowerOf4(int64_t(1) << 62));
  for (int64_t g : {-4, -1, 0, 1, 2, 3, 5, 8, 12, 32, 128, 255, 257, 512})
    EXPECT_FALSE(isPowerOf4(g)) << g;
  EXPECT_FALSE(isPowerOf4(int64_t(1) << 61));
}

namespace {

/// Literal Kronecker power (left-to-right kron(h, H4)), unnormalised, in int.
std::vector<int> kronHadamard(int64_t g) {
  const int h4[4][4] = {
      {1, 1, 1, -1}, {1, 1, -1, 1}, {1, -1, 1, 1}, {-1, 1, 1, 1}};
  std::vector<int> h = {1};
  int64_t n = 1;
  while (n < g) {
    std::vector<int> next(static_cast<size_t>(n * 4 * n * 4));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int a = 0; a < 4; ++a)
          for (int b = 0; b < 4; ++b)
            next[static_cast<size_t>((i * 4 + a) * (n * 4) + (j * 4 + b))] =
                h[static_cast<size_t>(i * n + j)] * h4[a][b];
    h = std::move(next);
    n *= 4;
  }
  return h;
}

} // namespace

TEST(Numerics, HadamardProperties) {
  for (int64_t g : {4, 16, 64, 256}) {
    const double scale = std::sqrt(static_cast<double>(g));
    auto k = kronHadamard(g);
    std::vector<double> h(static_cast<size_t>(g * g));
    for (int64_t i = 0; i < g; ++i)
      for (int64_t j = 0; j < g; ++j) {
        float e = hadamardEntry(g, i, j);
        h[static_cast<size_t>(i * g + j)] = e;
        ASSERT_EQ(static_cast<double>(e) * scale,
                  static_cast<double>(k[static_cast<size_t>(i * g + j)]))
            << g << " " << i << " " << j;
      }
    for (int64_t i = 0; i < g; ++i) {
      double rowSum = 0;
      for (int64_t j = 0; j < g; ++j) {
        EXPECT_EQ(h[static_cast<size_t>(i * g + j)],
                  h[static_cast<size_t>(j * g + i)]); // symmetric
        rowSum += h[static_cast<size_t>(i * g + j)];
      }
      EXPECT_EQ(rowSum, 1.0) << g << " row " << i; // regular
      for (int64_t j = 0; j < g; ++j) {
        double s = 0;
        for (int64_t l = 0; l < g; ++l)
          s += h[static_cast<size_t>(i * g + l)] *
               h[static_cast<size_t>(l * g + j)];
        ASSERT_EQ(s, i == j ? 1.0 : 0.0) << g << " " << i << " " << j;
      }
    }
  }
  // H4 itself, normalised by 1/2.
  EXPECT_EQ(hadamardEntry(4, 0, 3), -0.5f);
  EXPECT_EQ(hadamardEntry(4, 1, 2), -0.5f);
  EXPECT_EQ(hadamardEntry(4, 0, 0), 0.5f);
  EXPECT_EQ(hadamardEntry(256, 0, 0), 1.0f / 16);
}

TEST(Numerics, HadamardRejectsBadArguments) {
  EXPECT_THROW(hadamardEntry(8, 0, 0), Error);
  EXPECT_THROW(hadamardEntry(16, 16, 0), Error);
  EXPECT_THROW(hadamardEntry(16, 0, -1), Error);
  std::vector<float> row(48, 1.0f);
  EXPECT_THROW(rotateRowF32(row.data(), 48, 32), Error);
  EXPECT_THROW(rotateRowF32(row.data(), 40, 16), Error);
}

TEST(Numerics, RotateOneHotGivesHadamardRow) {
  for (int64_t g : {4, 16, 64, 256}) {
    const int64_t groups = 3, k = g * groups;
    for (int64_t grp = 0; grp < groups; ++grp)
      for (int64_t i : {int64_t(0), int64_t(1), g / 2 + 1, g - 1}) {
        std::vector<float> row(static_cast<size_t>(k), 0.0f);
        row[static_cast<size_t>(grp * g + i)] = 1.0f;
        rotateRowF32(row.data(), k, g);
        for (int64_t c = 0; c < k; ++c) {
          float want = (c / g == grp) ? hadamardEntry(g, i, c % g) : 0.0f;
          ASSERT_EQ(row[static_cast<size_t>(c)], want)
              << g << " " << grp << " " << i << " " << c;
        }
      }
  }
}

TEST(Numerics, RotateTwiceIsIdentity) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t g : {4, 16, 64, 256}) {
    const int64_t k = g * 4;
    std::vector<float> x(static_cast<size_t>(k));
    for (float &v : x)
      v = nd(rng);
    std::vector<float> y = x;
    rotateRowF32(y.data(), k, g);
    // Once: matches a double-precision dense product closely.
    for (int64_t base = 0; base < k; base += g)
      for (int64_t j = 0; j < g; ++j) {
        double s = 0;
        for (int64_t i = 0; i < g; ++i)
          s += static_cast<double>(x[static_cast<size_t>(base + i)]) *
               hadamardEntry(g, i, j);
        EXPECT_NEAR(y[static_cast<size_t>(base + j)], s, 1e-5 * 3 * 4);
      }
    rotateRowF32(y.data(), k, g);
    double err = 0, norm = 0;
    for (int64_t c = 0; c < k; ++c) {
      double d = static_cast<double>(y[static_cast<size_t>(c)]) -
                 x[static_cast<size_t>(c)];
      err += d * d;
      norm += static_cast<double>(x[static_cast<size_t>(c)]) *
              x[static_cast<size_t>(c)];
    }
    EXPECT_LE(std::sqrt(err / norm), 1e-6) << g;
  }
}

TEST(Numerics, RotateIsCorrectlyRounded) {
  // A cancellation-prone input: the result is the exact sum rounded once.
  const int64_t g = 16;
  std::vector<float> x(g);
  for (int64_t i = 0; i < g; ++i)
    x[static_cast<size_t>(i)] = (i % 2 ? 1.0f : -1.0f) * std::ldexp(1.0f + i / 64.0f, static_cast<int>(3 * i % 20) - 5);
  std::vector<float> y = x;
  rotateRowF32(y.data(), g, g);
  for (int64_t j = 0; j < g; ++j) {
    long double exact = 0; // every term is exact; 64-bit mantissa is ample
    for (int64_t i = 0; i < g; ++i)
      exact += static_cast<long double>(x[static_cast<size_t>(i)]) * hadamardEntry(g, i, j);
    EXPECT_EQ(bitsOf(y[static_cast<size_t>(j)]), bitsOf(static_cast<float>(exact))) << j;
  }
}

TEST(Numerics, EncodeE2M1RoundsHalfToEvenCode) {
  // Ties from docs/Numerics.md §1.2.
  EXPECT_EQ(encodeE2M1(0.25f), 0x0);
  EXPECT_EQ(encodeE2M1(0.75f), 0x2); // 1.0
  EXPECT_EQ(encodeE2M1(1.25f), 0x2); // 1.0
  EXPECT_EQ(encodeE2M1(1.75f), 0x4); // 2.0
  EXPECT_EQ(encodeE2M1(2.5f), 0x4);  // 2.0
  EXPECT_EQ(encodeE2M1(3.5f), 0x6);  // 4.0
  EXPECT_EQ(encodeE2M1(5.0f), 0x6);  // 4.0
  EXPECT_EQ(encodeE2M1(-0.0f), 0x8);
  EXPECT_EQ(encodeE2M1(100.0f), 0x7); // saturates to 6
  EXPECT_EQ(encodeE2M1(-100.0f), 0xF);
  for (uint8_t c = 0; c < 16; ++c)
    EXPECT_EQ(encodeE2M1(decodeE2M1(c)), c) << int(c);
}

TEST(Numerics, FastHadamardMatchesDenseRotation) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int64_t g : {4, 16, 64, 256}) {
    const int64_t k = 2 * g;
    // One-hot inputs give Hadamard rows exactly (every step is exact).
    for (int64_t i : {int64_t(0), g - 1, g + 3}) {
      std::vector<float> row(static_cast<size_t>(k), 0.0f);
      row[static_cast<size_t>(i)] = 1.0f;
      fwhtRowF32(row.data(), k, g);
      for (int64_t c = 0; c < k; ++c)
        ASSERT_EQ(row[static_cast<size_t>(c)],
                  c / g == i / g ? hadamardEntry(g, i % g, c % g) : 0.0f);
    }
    // Random rows: within f32 rounding of the correctly rounded dense sum.
    std::vector<float> x(static_cast<size_t>(k));
    for (float &v : x)
      v = nd(rng);
    std::vector<float> fast = x, dense = x;
    fwhtRowF32(fast.data(), k, g);
    rotateRowF32(dense.data(), k, g);
    for (int64_t c = 0; c < k; ++c)
      EXPECT_NEAR(fast[static_cast<size_t>(c)], dense[static_cast<size_t>(c)],
                  1e-5f * 8)
          << g << " " << c;
  }
  std::vector<float> bad(48, 1.0f);
  EXPECT_THROW(fwhtRowF32(bad.data(), 48, 32), Error);
}
