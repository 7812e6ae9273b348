//===- EncodeInteger.cpp - INT8 and ConvRot W4A4 weight encoders ----------===//
//
// comfy-kitchen's eager quantizers (docs/Quantize.md §3), x in its dtype:
//   INT8   s = max(f32(amax) / 127, 1e-30) (per tensor, or per row [N, 1]);
//          q = clamp(RNE(dtype(x / dtype(s))), -128, 127), dtype(s) == 0
//          replaced by the dtype's smallest normal. ConvRot: x is first
//          rotated per group in its dtype; then per row.
//   W4A4   x rotated in its dtype; a = dtype(max(amax_row, 1e-10));
//          s = dtype(a / 7); q = clamp(RNE(dtype(x / s)), -7, 7); signed
//          nibbles, even column low; s stored as f32 [N].
//===----------------------------------------------------------------------===//

#include "Encoders.h"

#include "comfyquant/runtime/Numerics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace comfyquant::rt {
namespace {

float smallestNormal(DType t) {
  switch (t) {
  case DType::BF16:
    return bitsFloat(0x00800000u); // same exponent range as f32
  case DType::F16:
    return 0x1p-14f;
  default:
    return std::numeric_limits<float>::min();
  }
}

/// RNE to an integer, as torch.round.
inline float roundHalfEven(float v) { return std::nearbyint(v); }

class Int8Encoder final : public WeightEncoder {
public:
  Int8Encoder(const EncodeOptions &o, int64_t n, int64_t k, DType s)
      : WeightEncoder(o, n, k, s) {
    addOutput("weight", DType::I8, {n, k});
    if (o.perRow || o.rotationGroup)
      addOutput("weight_scale", DType::F32, {n, 1});
    else
      addOutput("weight_scale", DType::F32, {});
  }
  std::string marker() const override {
    if (opts_.rotationGroup)
      return R"({"convrot":true,"convrot_groupsize":)" +
             std::to_string(opts_.rotationGroup) +
             R"(,"format":"int8_tensorwise"})";
    return R"({"format":"int8_tensorwise"})";
  }
  bool needsObserve() const override { return !perRow(); }
  void observe(const SourceBand &b) override {
    for (int64_t i = 0; i < b.rows * b.cols; ++i) {
      float a = std::fabs(b.data[i]);
      amax_ = (a != a || amax_ != amax_) ? NAN : std::max(amax_, a);
    }
  }
  void finishObserve() override { scale_ = scaleFor(amax_); }
  void encode(const SourceBand &b,
              std::vector<std::vector<uint8_t>> &out) const override {
    std::vector<float> row(k_);
    for (int64_t r = 0; r < b.rows; ++r) {
      std::copy_n(b.data + r * b.cols, k_, row.data());
      if (opts_.rotationGroup)
        rotateRowInDType(row.data(), k_, opts_.rotationGroup, source_);
      float s = scale_;
      if (perRow()) {
        float amax = 0.f;
        for (float v : row)
          amax = std::max(amax, std::fabs(v));
        s = scaleFor(amax);
        storeF32(out[1], b.rowBegin + r, s);
      }
      float sm = roundToDType(source_, s);
      if (sm == 0.f)
        sm = smallestNormal(source_);
      auto *q = reinterpret_cast<int8_t *>(out[0].data()) +
                (b.rowBegin + r) * k_;
      for (int64_t c = 0; c < k_; ++c) {
        float v = roundHalfEven(roundToDType(source_, row[c] / sm));
        q[c] = int8_t(std::clamp(v, -128.f, 127.f));
      }
    }
  }
  void finish(std::vector<std::vector<uint8_t>> &out) const override {
    if (!perRow())
      storeF32(out[1], 0, scale_);
  }

private:
  bool perRow() const { return opts_.perRow || opts_.rotationGroup; }
  float scaleFor(float amax) const {
    return std::max(amax / 127.0f * opts_.scaleMultiplier, 1e-30f);
  }
  float amax_ = 0.f, scale_ = 1.f;
};

class W4A4Encoder final : public WeightEncoder {
public:
  W4A4Encoder(const EncodeOptions &o, int64_t n, int64_t k, DType s)
      : WeightEncoder(o, n, k, s) {
    addOutput("weight", DType::I8, {n, k / 2});
    addOutput("weight_scale", DType::F32, {n});
  }
  std::string marker() const override {
    std::string m = R"({"convrot_groupsize":)" +
                    std::to_string(opts_.rotationGroup) +
                    R"(,"format":"convrot_w4a4")";
    if (!opts_.linearDtype.empty() && opts_.linearDtype != "int4")
      m += R"(,"linear_dtype":")" + opts_.linearDtype + "\"";
    return m + "}";
  }
  void encode(const SourceBand &b,
              std::vector<std::vector<uint8_t>> &out) const override {
    std::vector<float> row(k_);
    for (int64_t r = 0; r < b.rows; ++r) {
      std::copy_n(b.data + r * b.cols, k_, row.data());
      rotateRowInDType(row.data(), k_, opts_.rotationGroup, source_);
      float amax = 0.f;
      for (float v : row)
        amax = std::max(amax, std::fabs(v));
      float a = roundToDType(source_, std::max(amax, 1e-10f));
      float s = roundToDType(source_, a / 7.0f * opts_.scaleMultiplier);
      storeF32(out[1], b.rowBegin + r, s);
      uint8_t *q = out[0].data() + (b.rowBegin + r) * (k_ / 2);
      for (int64_t c = 0; c < k_; c += 2) {
        int lo = code(row[c], s), hi = code(row[c + 1], s);
        q[c / 2] = uint8_t((lo & 0xF) | ((hi & 0xF) << 4));
      }
    }
  }

private:
  int code(float x, float s) const {
    // An f16 row of zeros has s == 0 (1e-10 underflows): kitchen's 0/0; the
    // codes stay 0 here.
    if (s == 0.f)
      return 0;
    float v = roundHalfEven(roundToDType(source_, x / s));
    return int(std::clamp(v, -7.f, 7.f));
  }
};

} // namespace

void rotateRowInDType(float *row, int64_t k, int64_t group, DType dtype) {
  rotateRowF32(row, k, group);
  if (dtype != DType::F32)
    for (int64_t i = 0; i < k; ++i)
      row[i] = roundToDType(dtype, row[i]);
}

std::unique_ptr<WeightEncoder> createInt8Encoder(const EncodeOptions &opts,
                                                 int64_t n, int64_t k,
                                                 DType source) {
  return std::make_unique<Int8Encoder>(opts, n, k, source);
}
std::unique_ptr<WeightEncoder> createW4A4Encoder(const EncodeOptions &opts,
                                                 int64_t n, int64_t k,
                                                 DType source) {
  return std::make_unique<W4A4Encoder>(opts, n, k, source);
}

} // namespace comfyquant::rt
