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

#include "comfyquant/runtime/Forward.h"
#include "FastRound.h"

#include "comfyquant/runtime/Numerics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace comfyquant::rt {
namespace {

float smallestNormal(DType t) {
  switch (t) {
  case DType::BF16:
    return fast::fromBits(0x00800000u); // same exponent range as f32
  case DType::F16:
    return 0x1p-14f;
  default:
    return std::numeric_limits<float>::min();
  }
}

/// x rounded to the source dtype as torch holds an f32 result.
template <DType T> inline float toSource(float v) {
  if constexpr (T == DType::BF16)
    return fast::roundBF16(v);
  else if constexpr (T == DType::F16)
    return fast::roundF16(v);
  else
    return v;
}

template <DType T>
inline void int8CodesIn(const float *row, int64_t k, float sm, int8_t *q) {
  for (int64_t c = 0; c < k; ++c) {
    // clamp(RNE(dtype(x / sm)), -128, 127); clamping to [-129, 128] first
    // keeps RNE's argument small and changes no result.
    float v = std::min(std::max(toSource<T>(row[c] / sm), -129.f), 128.f);
    v = fast::rintSmall(v);
    q[c] = int8_t(std::min(std::max(v, -128.f), 127.f));
  }
}

/// INT8 codes of one row (docs/Quantize.md §3.4).
CQ_VECTOR_CLONES
void int8Codes(const float *row, int64_t k, float sm, DType t, int8_t *q) {
  if (t == DType::BF16)
    int8CodesIn<DType::BF16>(row, k, sm, q);
  else if (t == DType::F16)
    int8CodesIn<DType::F16>(row, k, sm, q);
  else
    int8CodesIn<DType::F32>(row, k, sm, q);
}

template <DType T>
inline void int4CodesIn(const float *row, int64_t k, float s, uint8_t *q) {
  for (int64_t c = 0; c < k; c += 2) {
    float lo = std::min(std::max(toSource<T>(row[c] / s), -8.f), 8.f);
    float hi = std::min(std::max(toSource<T>(row[c + 1] / s), -8.f), 8.f);
    int l = int(std::min(std::max(fast::rintSmall(lo), -7.f), 7.f));
    int h = int(std::min(std::max(fast::rintSmall(hi), -7.f), 7.f));
    q[c / 2] = uint8_t((l & 0xF) | ((h & 0xF) << 4));
  }
}

/// Signed int4 codes of one ConvRot W4A4 row, low nibble first (§3.5). An
/// f16 row of zeros has s == 0 (1e-10 underflows): kitchen's 0/0; the codes
/// stay 0 here.
CQ_VECTOR_CLONES
void int4Codes(const float *row, int64_t k, float s, DType t, uint8_t *q) {
  if (s == 0.f) {
    std::fill_n(q, k / 2, uint8_t(0));
    return;
  }
  if (t == DType::BF16)
    int4CodesIn<DType::BF16>(row, k, s, q);
  else if (t == DType::F16)
    int4CodesIn<DType::F16>(row, k, s, q);
  else
    int4CodesIn<DType::F32>(row, k, s, q);
}

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
    float a = amaxOf(b.data, b.rows * b.cols);
    amax_ = (a != a || amax_ != amax_) ? NAN : std::max(amax_, a);
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
        s = scaleFor(amaxOf(row.data(), k_));
        storeF32(out[1], b.rowBegin + r, s);
      }
      float sm = roundToActivation(s, source_);
      if (sm == 0.f)
        sm = smallestNormal(source_);
      int8Codes(row.data(), k_, sm, source_,
                reinterpret_cast<int8_t *>(out[0].data()) +
                    (b.rowBegin + r) * k_);
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
      float amax = amaxOf(row.data(), k_);
      float a = roundToActivation(std::max(amax, 1e-10f), source_);
      float s = roundToActivation(a / 7.0f * opts_.scaleMultiplier, source_);
      storeF32(out[1], b.rowBegin + r, s);
      int4Codes(row.data(), k_, s, source_,
                out[0].data() + (b.rowBegin + r) * (k_ / 2));
    }
  }

};
} // namespace

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
