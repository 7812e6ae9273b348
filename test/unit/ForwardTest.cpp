//===- ForwardTest.cpp - reference forward vs comfy-kitchen ---------------===//
//
// test/fixtures/forward.json (generate_forward.py, comfy-kitchen 0.2.40
// eager on CPU): for every case the reference forward must
//   * reproduce kitchen's activation codes bit for bit, and its activation
//     scales bit for bit (ConvRot rows: within 2 f32 ulp, since kitchen's
//     rotation is an f32 matmul that is not correctly rounded);
//   * match y per element within the "vs_kitchen" bound of
//     test/tools/tolerances.json (Compare.h, docs/Testing.md): roundings
//     to the output dtype (kitchen adds the bias after one) plus
//     c·2^-24·S, S = Σ|terms| (+|bias|) of that output (the fixture's s_abs).
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Forward.h"
#include "comfyquant/runtime/Numerics.h"
#include "comfyquant/runtime/Reference.h"
#include "comfyquant/runtime/TensorAccess.h"

#include "Compare.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

using namespace comfyquant::rt;

namespace {

const std::string kDir = COMFYQUANT_FIXTURES_DIR;

const nlohmann::json &forwardCases() {
  static const nlohmann::json j = [] {
    std::ifstream in(kDir + "/forward.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

int64_t ulpDiff(float a, float b) {
  int32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  auto ord = [](int32_t i) {
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
  };
  return std::llabs(ord(x) - ord(y));
}

class ForwardFixture : public ::testing::TestWithParam<size_t> {};

TEST_P(ForwardFixture, MatchesKitchen) {
  const nlohmann::json &fx = forwardCases().at(GetParam());
  const std::string module = fx.at("module");
  SCOPED_TRACE(fx.at("file").get<std::string>());
  auto data = SafetensorsFile::open(kDir + "/" + fx.at("file").get<std::string>());
  auto ckpt = Checkpoint::open(kDir + "/" + fx.at("checkpoint").get<std::string>());
  const TensorInfo &y = *data->find("y");
  const TensorInfo &sAbs = *data->find("s_abs");
  const TensorInfo *x = data->find("x");
  const int64_t M = y.shape[0], N = y.shape[1];

  ResolveOptions opts;
  if (x) // padded NVFP4/MXFP8 storage needs the logical shape
    opts.shapes[module] = {N, x->shape[1]};
  else
    opts.kinds[module] = ModuleKind::Embedding;
  ResolvedCheckpoint r = resolveCheckpoint(*ckpt, opts);
  const ResolvedModule *m = r.find(module);
  ASSERT_NE(m, nullptr);

  const DType T = y.dtype;
  std::vector<uint8_t> got;
  ForwardTrace trace;
  if (!x) {
    const TensorInfo &idx = *data->find("indices");
    std::vector<int64_t> ids(static_cast<size_t>(idx.numel()));
    std::memcpy(ids.data(), idx.data, idx.nbytes());
    got = referenceEmbedding(*m, ids.data(), M, T);
  } else {
    int64_t expert = 0;
    if (const TensorInfo *e = data->find("expert"))
      std::memcpy(&expert, e->data, 8);
    ActivationView view{x->dtype, x->shape[0], x->shape[1], x->data};
    got = referenceLinear(*m, view, expert, &trace);
  }
  ASSERT_EQ(got.size(), y.nbytes());

  // Output within the format's bound.
  const bool bf16 = T == DType::BF16;
  TensorInfo gotView = y;
  gotView.data = got.data();
  std::vector<double> have(M * N), want(M * N), s(M * N), bias;
  for (int64_t i = 0; i < M * N; ++i) {
    have[i] = loadF32(gotView, i);
    want[i] = loadF32(y, i);
    s[i] = loadF32(sAbs, i);
  }
  const bool hasBias = fx.at("has_bias").get<bool>();
  comfyquant::test::CompareOptions cmpOpts;
  cmpOpts.tol = comfyquant::test::tolerance("vs_kitchen", fx.at("format"), T,
                                            hasBias, x == nullptr);
  cmpOpts.sAbs = &s;
  if (hasBias) {
    // kitchen adds the bias, cast to x's dtype, after rounding the product.
    const TensorInfo *b = m->tensor("bias");
    ASSERT_NE(b, nullptr);
    int64_t expert = 0;
    if (const TensorInfo *e = data->find("expert"))
      std::memcpy(&expert, e->data, 8);
    const int64_t base = b->numel() > N ? expert * N : 0;
    std::vector<float> row(N);
    for (int64_t n = 0; n < N; ++n)
      row[n] = loadF32(*b, base + n);
    if (bf16) {
      std::vector<uint16_t> r16 = toBFloat16(row);
      for (int64_t n = 0; n < N; ++n) {
        uint32_t u = static_cast<uint32_t>(r16[n]) << 16;
        std::memcpy(&row[n], &u, 4);
      }
    }
    for (int64_t i = 0; i < M * N; ++i)
      bias.push_back(row[i % N]);
    cmpOpts.bias = &bias;
  }
  comfyquant::test::CompareResult cr =
      comfyquant::test::compareValues(have, want, T, cmpOpts);
  EXPECT_TRUE(cr.ok()) << cr.summary() << " (bound " << cmpOpts.tol.ulps
                       << " ulp + " << cmpOpts.tol.c << "·2^-24·S)";

  if (!fx.at("has_codes").get<bool>())
    return;
  // Activation codes and scales.
  const std::string format = fx.at("format");
  const TensorInfo &codes = *data->find("x_codes");
  const TensorInfo &scales = *data->find("x_scales");
  const int64_t K = x->shape[1];
  ASSERT_EQ(static_cast<int64_t>(trace.codes.size()), M * K);
  ASSERT_EQ(static_cast<int64_t>(trace.scales.size()), scales.numel());
  int64_t codeMismatch = 0, scaleMismatch = 0;
  for (int64_t row = 0; row < M; ++row)
    for (int64_t col = 0; col < K; ++col) {
      int32_t want;
      if (format == "nvfp4") {
        uint8_t b = codes.data[row * codes.shape[1] + col / 2];
        want = col % 2 == 0 ? b >> 4 : b & 0xF;
      } else if (codes.dtype == DType::I8) {
        want = static_cast<int8_t>(codes.data[row * codes.shape[1] + col]);
      } else {
        want = codes.data[row * codes.shape[1] + col];
      }
      codeMismatch += want != trace.codes[row * K + col];
    }
  EXPECT_EQ(codeMismatch, 0);
  // f32 ConvRot rows: kitchen's rotation (an f32 matmul) and ours (the FWHT
  // butterfly) each stay within a few u·S_row of the exact rotated values,
  // S_row = max over groups of Σ|x|/sqrt(G) (|H| = 1/sqrt(G)), so their amax
  // and s_x = amax/127 may differ by 16·u·S_row/127 plus the division's ulp
  // (measured: at most 7 ulp of s_x). Everything else is bit-exact.
  const int64_t G = m->desc.rotationGroup;
  const bool rotatedF32 = G != 0 && !bf16 && format != "nvfp4" &&
                          format != "mxfp8" && format.rfind("float8", 0) != 0;
  for (int64_t i = 0; i < scales.numel(); ++i) {
    float want = format == "mxfp8" ? decodeE8M0(scales.data[i])
                                   : loadF32(scales, i);
    float have = trace.scales.at(i);
    if (rotatedF32) {
      double sRow = 0;
      for (int64_t g0 = 0; g0 < K; g0 += G) {
        double sum = 0;
        for (int64_t c = g0; c < g0 + G; ++c)
          sum += std::fabs(static_cast<double>(loadF32(*x, i * K + c)));
        sRow = std::max(sRow, sum / std::sqrt(static_cast<double>(G)));
      }
      double allowed = 16 * std::ldexp(1.0, -24) * sRow / 127 +
                       std::ldexp(std::fabs(want), -23);
      // Written so that a NaN on either side counts as a mismatch.
      scaleMismatch += !(std::fabs(static_cast<double>(want) - have) <= allowed);
    } else {
      scaleMismatch += ulpDiff(want, have) != 0;
    }
  }
  EXPECT_EQ(scaleMismatch, 0);
  if (const TensorInfo *g = data->find("x_global_scale"))
    EXPECT_EQ(loadF32(*g, 0), trace.globalScale);
}

std::vector<size_t> indices() {
  std::vector<size_t> v(forwardCases().size());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = i;
  return v;
}

std::string caseName(const ::testing::TestParamInfo<size_t> &info) {
  std::string n = forwardCases().at(info.param).at("file");
  n = n.substr(n.find('/') + 1);
  n = n.substr(0, n.rfind('.'));
  for (char &ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch)))
      ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Kitchen, ForwardFixture, ::testing::ValuesIn(indices()),
                         caseName);

} // namespace
