//===- QuantizeTest.cpp - the quantizer's building blocks -----------------===//
//
// FastRound.h's branch-free forms equal Numerics.h's statements; the
// rotation the encoders use equals the reference dense rotation; TorchSum
// folds in torch's documented order.
//===----------------------------------------------------------------------===//

#include "../../runtime/src/quantize/Encoders.h"
#include "../../runtime/src/quantize/FastRound.h"
#include "../../runtime/src/quantize/TorchSum.h"

#include "comfyquant/runtime/DType.h"
#include "comfyquant/runtime/Numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace comfyquant::rt;

namespace {

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Every sign and exponent, the top mantissa bits, and the low-bit patterns
/// where rounding decides (ties, one below and above), plus random words.
std::vector<uint32_t> roundingCriticalPatterns() {
  std::vector<uint32_t> out;
  const uint32_t lows[] = {0x0,     0x1,     0xFFF,   0x1000,  0x1001,
                           0x7FFF,  0x8000,  0x8001,  0xFFFF,  0x7FFFF,
                           0x80000, 0x80001, 0xFFFFF, 0x3FFFFF};
  for (uint32_t hi = 0; hi < (1u << 12); ++hi) // sign, exponent, 3 mantissa bits
    for (uint32_t lowIndex = 0; lowIndex < 14; ++lowIndex)
      for (uint32_t mid : {0u, 0x100000u, 0x80000u})
        out.push_back((hi << 20) | ((mid | lows[lowIndex]) & 0xFFFFFu));
  std::mt19937 gen(7);
  for (int i = 0; i < 2000000; ++i)
    out.push_back(gen());
  return out;
}

TEST(QuantizeFastRound, EqualsTheReferenceConversions) {
  int64_t checked = 0;
  for (uint32_t u : roundingCriticalPatterns()) {
    float v = fromBits(u);
    if (!std::isfinite(v))
      continue;
    ++checked;
    ASSERT_EQ(fast::bits(fast::roundBF16(v)),
              fast::bits(bfloat16ToFloat(floatToBFloat16(v))))
        << std::hex << u;
    ASSERT_EQ(fast::bits(fast::roundF16(v)),
              fast::bits(halfToFloat(floatToHalf(v))))
        << std::hex << u;
    ASSERT_EQ(fast::encodeE4M3(v), encodeE4M3(v)) << std::hex << u;
    ASSERT_EQ(fast::encodeE2M1(v), encodeE2M1(v)) << std::hex << u;
  }
  EXPECT_GT(checked, 2000000);
}

TEST(QuantizeFastRound, RintSmallIsRoundHalfEven) {
  for (float v : {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 127.5f, -128.5f, 0.49999997f,
                  3.75f, -7.5f})
    EXPECT_EQ(fast::rintSmall(v), std::nearbyint(v)) << v;
}

// The encoders' rotation (a double butterfly) rounds like the dense
// reference rotation (a double sum rounded once).
TEST(QuantizeRotation, EqualsTheDenseReferenceRotation) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int64_t g : {4, 16, 64, 256, 1024}) {
    const int64_t k = g * 3;
    std::vector<float> a(size_t(k * 8)), b;
    for (auto &v : a)
      v = normal(gen) * std::exp2(float(int(gen() % 12) - 6));
    b = a;
    int64_t mismatches = 0;
    for (int64_t r = 0; r < 8; ++r) {
      rotateRowInDType(a.data() + r * k, k, g, DType::F32);
      rotateRowF32(b.data() + r * k, k, g);
    }
    for (size_t i = 0; i < a.size(); ++i)
      mismatches += fast::bits(a[i]) != fast::bits(b[i]);
    EXPECT_EQ(mismatches, 0) << "group " << g;
  }
}

TEST(QuantizeTorchSum, FoldsInTorchsOrder) {
  // 16 values: lane i holds x[i] + x[i+8], then the lanes in order. With
  // these values another order gives another f32 result.
  std::vector<float> x(16, 0.f);
  x[0] = 1.0f;
  x[8] = 0x1p-24f;
  x[1] = 0x1p-24f;
  const float got = torchSumF32(16, [&](int64_t i) { return x[size_t(i)]; });
  // (1 + 2^-24) rounds to 1, then + 2^-24 rounds to 1 again.
  EXPECT_EQ(got, 1.0f);
  // Four values: ((x0 + x1) + x2) + x3.
  std::vector<float> y = {1.0f, 0x1p-24f, 0x1p-24f, 0x1p-23f};
  EXPECT_EQ(torchSumF32(4, [&](int64_t i) { return y[size_t(i)]; }),
            ((1.0f + 0x1p-24f) + 0x1p-24f) + 0x1p-23f);
}

} // namespace
