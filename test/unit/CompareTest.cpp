//===- CompareTest.cpp - the unit tests' comparison can fail ---------------===//
//
// Compare.h is what ForwardTest and ReferenceTest rely on: it must reject a
// NaN or an infinity facing a finite value, a length mismatch, and kitchen's
// outputs scaled by 1.03 (the bf16 bound of every format), while accepting
// the unmodified fixtures.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Safetensors.h"
#include "comfyquant/runtime/TensorAccess.h"

#include "Compare.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

using namespace comfyquant;
using comfyquant::test::CompareOptions;
using comfyquant::test::compareValues;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

TEST(Compare, NaNAndInfinityFailAgainstFiniteValues) {
  CompareOptions loose;
  loose.tol = {1e6, 1e6};
  std::vector<double> s = {1, 1, 1};
  loose.sAbs = &s;
  EXPECT_TRUE(compareValues({1, 2, 3}, {1, 2, 3}, rt::DType::F32, loose).ok());
  EXPECT_FALSE(compareValues({1, kNaN, 3}, {1, 2, 3}, rt::DType::F32, loose).ok());
  EXPECT_FALSE(compareValues({1, 2, 3}, {kNaN, 2, 3}, rt::DType::F32, loose).ok());
  EXPECT_FALSE(compareValues({1, kInf, 3}, {1, 2, 3}, rt::DType::F32, loose).ok());
  EXPECT_FALSE(compareValues({1, -kInf, 3}, {1, kInf, 3}, rt::DType::F32, loose).ok());
  EXPECT_TRUE(compareValues({1, kInf, 3}, {1, kInf, 3}, rt::DType::F32, loose).ok());
  // NaN vs NaN only where the caller expects it.
  EXPECT_FALSE(compareValues({kNaN}, {kNaN}, rt::DType::F32).ok());
  CompareOptions nanAt0;
  nanAt0.nanExpected = [](size_t i) { return i == 0; };
  EXPECT_TRUE(compareValues({kNaN, 1}, {kNaN, 1}, rt::DType::F32, nanAt0).ok());
  EXPECT_FALSE(compareValues({1, kNaN}, {1, kNaN}, rt::DType::F32, nanAt0).ok());
  // S that is not finite cannot excuse anything.
  std::vector<double> badS = {kInf};
  CompareOptions withBadS = loose;
  withBadS.sAbs = &badS;
  EXPECT_FALSE(compareValues({1}, {1}, rt::DType::F32, withBadS).ok());
}

TEST(Compare, CountsAreCheckedBeforeValues) {
  EXPECT_FALSE(compareValues({1, 2}, {1, 2, 3}, rt::DType::F32).ok());
  EXPECT_FALSE(compareValues({1, 2, 3}, {1, 2}, rt::DType::F32).ok());
}

TEST(Compare, UlpBoundsAreInTheOutputDtype) {
  CompareOptions oneUlp;
  oneUlp.tol = {1, 0};
  // 1 + 2^-7 is one bf16 ulp above 1, 2^16 f32 ulps.
  EXPECT_TRUE(compareValues({1 + std::ldexp(1.0, -7)}, {1}, rt::DType::BF16, oneUlp).ok());
  EXPECT_FALSE(compareValues({1 + std::ldexp(1.0, -6)}, {1}, rt::DType::BF16, oneUlp).ok());
  EXPECT_FALSE(compareValues({1 + std::ldexp(1.0, -7)}, {1}, rt::DType::F32, oneUlp).ok());
  EXPECT_FALSE(compareValues({1}, {0}, rt::DType::F32).ok());
}

TEST(Compare, BitsMeansBits) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  using comfyquant::test::compareBits;
  EXPECT_TRUE(compareBits({1.0f, -0.0f, nan}, {1.0f, -0.0f, nan}).ok());
  EXPECT_FALSE(compareBits({0.0f}, {-0.0f}).ok());
  EXPECT_FALSE(compareBits({nan}, {1.0f}).ok());
  EXPECT_FALSE(compareBits({1.0f}, {std::nextafter(1.0f, 2.0f)}).ok());
  EXPECT_FALSE(compareBits({1.0f}, {1.0f, 2.0f}).ok());
}

/// Every forward fixture, its y scaled by 1.03 (rounded to the dtype), must
/// fail its own bound; unmodified, it must pass (y vs itself). (The spacing
/// at y - bias is left out here; the lit mutation tests include it.)
TEST(Compare, KitchenOutputsScaledBy103FailTheirBound) {
  const std::string dir = COMFYQUANT_FIXTURES_DIR;
  std::ifstream in(dir + "/forward.json");
  nlohmann::json cases = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto &fx : cases) {
    auto file = rt::SafetensorsFile::open(dir + "/" + fx.at("file").get<std::string>());
    const rt::TensorInfo &y = *file->find("y");
    const rt::TensorInfo &sAbs = *file->find("s_abs");
    std::vector<double> want, scaled, s;
    for (int64_t i = 0; i < y.numel(); ++i) {
      float v = rt::loadF32(y, i);
      want.push_back(v);
      // Round v * 1.03 to the output dtype.
      float w = static_cast<float>(v * 1.03);
      if (y.dtype == rt::DType::BF16) {
        uint32_t u;
        std::memcpy(&u, &w, 4);
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
        std::memcpy(&w, &u, 4);
      }
      scaled.push_back(w);
      s.push_back(rt::loadF32(sAbs, i));
    }
    CompareOptions opts;
    opts.tol = comfyquant::test::tolerance(
        "vs_kitchen", fx.at("format"), y.dtype, fx.at("has_bias").get<bool>(),
        fx.at("kind") == "embedding");
    opts.sAbs = &s;
    SCOPED_TRACE(fx.at("file").get<std::string>());
    EXPECT_TRUE(compareValues(want, want, y.dtype, opts).ok());
    EXPECT_FALSE(compareValues(scaled, want, y.dtype, opts).ok());
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(cases.size()));
  EXPECT_GT(checked, 200);
}

} // namespace
