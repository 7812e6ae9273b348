//===- EncodeFloat.cpp - FP8, NVFP4 and MXFP8 weight encoders -------------===//
//
// comfy-kitchen's eager quantizers (docs/Quantize.md §3):
//   FP8    s = dtype(amax / FMAX) as f32; q = fp8(clamp(dtype(x · dtype(1/s)),
//          ±FMAX)) — the reciprocal and the product rounded to x's dtype.
//   NVFP4  s_g = dtype(amax / 2688); per 16-block d8 = e4m3(min(f32(amax_b)/6
//          / s_g, 448)); code = e2m1(clamp(f32(x) / (s_g·d8), ±6)), 0 where
//          s_g·d8 == 0; hi-first nibbles; scales swizzled.
//   MXFP8  per 32-block e = clamp(ceil(log2(max(amax_b/448, 2^-127))) + 127,
//          0, 254); q = e4m3(clamp(f32(x) / 2^(e−127), ±448)); zero blocks
//          e = 0, q = 0.
//===----------------------------------------------------------------------===//

#include "Encoders.h"

#include "comfyquant/runtime/Forward.h"
#include "FastRound.h"

#include "comfyquant/runtime/Numerics.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace comfyquant::rt {
namespace {

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/// amax of |x| over a band, as torch's amax: exact, NaN propagates.
float bandAmax(const SourceBand &b) { return amaxOf(b.data, b.rows * b.cols); }

/// The same from the stored 16-bit values: |x| orders like its bits with the
/// sign cleared (both are sign-magnitude); the caller has checked finiteness.
CQ_VECTOR_CLONES
uint16_t rawMaxMagnitude16(const uint8_t *raw, int64_t count) {
  uint16_t m = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, raw + 2 * i, 2);
    h &= 0x7FFF;
    m = h > m ? h : m;
  }
  return m;
}

/// table[x] for each stored 16-bit value x.
CQ_VECTOR_CLONES
void lookup16(const uint8_t *raw, int64_t count, const uint8_t *table,
              uint8_t *q) {
  for (int64_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, raw + 2 * i, 2);
    q[i] = table[h];
  }
}

//===----------------------------------------------------------------------===//
// FP8 (per-tensor scale)
//===----------------------------------------------------------------------===//

class FP8Encoder final : public WeightEncoder {
  float rawAmax16(const SourceBand &b) const {
    uint16_t m = rawMaxMagnitude16(b.raw, b.rows * b.cols);
    return source_ == DType::BF16 ? bfloat16ToFloat(m) : halfToFloat(m);
  }

public:
  FP8Encoder(const EncodeOptions &o, int64_t n, int64_t k, DType s)
      : WeightEncoder(o, n, k, s) {
    e5m2_ = o.format == Format::Float8E5M2;
    addOutput("weight", e5m2_ ? DType::F8_E5M2 : DType::F8_E4M3, {n, k});
    addOutput("weight_scale", DType::F32, {});
  }
  std::string marker() const override {
    return e5m2_ ? R"({"format":"float8_e5m2"})"
                 : R"({"format":"float8_e4m3fn"})";
  }
  bool needsObserve() const override { return true; }
  bool rawOnly() const override { return source_ != DType::F32; }
  void observe(const SourceBand &b) override {
    float m = b.raw && source_ != DType::F32 ? rawAmax16(b) : bandAmax(b);
    amax_ = (m != m || amax_ != amax_) ? NAN : std::max(amax_, m);
  }
  void finishObserve() override {
    const float fmax = e5m2_ ? float(kE5M2Max) : float(kE4M3Max);
    // torch: amax (x's dtype) / FMAX, computed in f32, rounded to x's dtype.
    scale_ = roundToActivation(amax_ / fmax, source_) * opts_.scaleMultiplier;
    // Kitchen's 1/0 makes every code NaN (all-zero or, in f16, an amax whose
    // quotient underflows); the f32 quotient, else 1, keeps the file finite.
    if (!(scale_ > 0.f) || !std::isfinite(1.0f / scale_))
      scale_ = amax_ > 0.f ? amax_ / fmax : 1.0f;
    recip_ = roundToActivation(1.0f / scale_, source_);
    // In F16, 1/s above 65504 rounds to infinity (e5m2: any amax below
    // 0.875): kitchen's x·inf saturates every code and makes 0 NaN. The f32
    // reciprocal keeps the codes (docs/Quantize.md §3.7).
    if (!std::isfinite(recip_))
      recip_ = 1.0f / scale_;
    if (source_ != DType::F32) {
      // A 16-bit source has 65536 values: one table per tensor.
      table_.resize(65536);
      for (uint32_t u = 0; u < 65536; ++u) {
        float x = source_ == DType::BF16 ? bfloat16ToFloat(uint16_t(u))
                                         : halfToFloat(uint16_t(u));
        table_[u] = code(x);
      }
    }
  }
  void encode(const SourceBand &b,
              std::vector<std::vector<uint8_t>> &out) const override {
    uint8_t *q = out[0].data() + b.rowBegin * k_;
    const int64_t count = b.rows * b.cols;
    if (!table_.empty()) {
      // A 16-bit source value indexes the table directly.
      lookup16(b.raw, count, table_.data(), q);
      return;
    }
    for (int64_t i = 0; i < count; ++i)
      q[i] = code(b.data[i]);
  }
  void finish(std::vector<std::vector<uint8_t>> &out) const override {
    storeF32(out[1], 0, scale_);
  }

private:
  uint8_t code(float x) const {
    float t = roundToActivation(x * recip_, source_);
    if (e5m2_)
      return encodeE5M2(t);
    // Saturating: kitchen clamps to ±448 before its (saturating) cast.
    return std::isfinite(t) ? fast::encodeE4M3(t) : encodeE4M3(t);
  }
  bool e5m2_ = false;
  float amax_ = 0.f, scale_ = 1.f, recip_ = 1.f;
  std::vector<uint8_t> table_;
};

//===----------------------------------------------------------------------===//
// NVFP4
//===----------------------------------------------------------------------===//

class NVFP4Encoder final : public WeightEncoder {
public:
  NVFP4Encoder(const EncodeOptions &o, int64_t n, int64_t k, DType s)
      : WeightEncoder(o, n, k, s) {
    np_ = roundUp(n, 16);
    kp_ = roundUp(k, 16);
    addOutput("weight", DType::U8, {np_, kp_ / 2});
    addOutput("weight_scale", DType::F8_E4M3,
              {roundUp(np_, 128), roundUp(kp_ / 16, 4)});
    addOutput("weight_scale_2", DType::F32, {});
  }
  std::string marker() const override { return R"({"format":"nvfp4"})"; }
  int64_t bandAlign() const override { return 128; }
  bool needsObserve() const override { return true; }
  void observe(const SourceBand &b) override {
    float m = bandAmax(b);
    amax_ = (m != m || amax_ != amax_) ? NAN : std::max(amax_, m);
  }
  void finishObserve() override {
    global_ = roundToActivation(amax_ / 2688.0f, source_) * opts_.scaleMultiplier;
    if (!(global_ > 0.f) || !std::isfinite(global_))
      global_ = amax_ > 0.f ? amax_ / 2688.0f : 1.0f;
  }
  void encode(const SourceBand &b,
              std::vector<std::vector<uint8_t>> &out) const override {
    const int64_t blocks = kp_ / 16;
    const bool last = b.rowBegin + b.rows >= n_;
    const int64_t rowEnd = last ? np_ : b.rowBegin + b.rows;
    float x[16];
    for (int64_t r = b.rowBegin; r < rowEnd; ++r) {
      const bool real = r < n_;
      const float *src = real ? b.data + (r - b.rowBegin) * b.cols : nullptr;
      uint8_t *q = out[0].data() + r * (kp_ / 2);
      for (int64_t blk = 0; blk < blocks; ++blk) {
        float amax = 0.f;
        for (int j = 0; j < 16; ++j) {
          int64_t c = blk * 16 + j;
          x[j] = (real && c < k_) ? src[c] : 0.f;
          amax = std::max(amax, std::fabs(x[j]));
        }
        float d = std::min(amax / 6.0f / global_, float(kE4M3Max));
        uint8_t d8 = encodeE4M3(d);
        float total = global_ * decodeE4M3(d8);
        out[1][swizzledScaleOffset(r, blk, blocks)] = d8;
        uint8_t codes[16];
        const float safe = total == 0.f ? 1.f : total;
        for (int j = 0; j < 16; ++j) {
          float v = total == 0.f ? 0.f : x[j] / safe;
          v = std::min(std::max(v, -float(kE2M1Max)), float(kE2M1Max));
          codes[j] = fast::encodeE2M1(v);
        }
        for (int j = 0; j < 8; ++j)
          q[blk * 8 + j] = uint8_t(codes[2 * j] << 4 | codes[2 * j + 1]);
      }
    }
  }
  void finish(std::vector<std::vector<uint8_t>> &out) const override {
    storeF32(out[2], 0, global_);
  }

private:
  int64_t np_, kp_;
  float amax_ = 0.f, global_ = 1.f;
};

//===----------------------------------------------------------------------===//
// MXFP8
//===----------------------------------------------------------------------===//

class MXFP8Encoder final : public WeightEncoder {
public:
  MXFP8Encoder(const EncodeOptions &o, int64_t n, int64_t k, DType s)
      : WeightEncoder(o, n, k, s) {
    np_ = roundUp(n, 32);
    kp_ = roundUp(k, 32);
    addOutput("weight", DType::F8_E4M3, {np_, kp_});
    addOutput("weight_scale", DType::U8,
              {roundUp(np_, 128), roundUp(kp_ / 32, 4)});
  }
  std::string marker() const override { return R"({"format":"mxfp8"})"; }
  int64_t bandAlign() const override { return 128; }
  void encode(const SourceBand &b,
              std::vector<std::vector<uint8_t>> &out) const override {
    const int64_t blocks = kp_ / 32;
    const bool last = b.rowBegin + b.rows >= n_;
    const int64_t rowEnd = last ? np_ : b.rowBegin + b.rows;
    float x[32];
    for (int64_t r = b.rowBegin; r < rowEnd; ++r) {
      const bool real = r < n_;
      const float *src = real ? b.data + (r - b.rowBegin) * b.cols : nullptr;
      uint8_t *q = out[0].data() + r * kp_;
      for (int64_t blk = 0; blk < blocks; ++blk) {
        float amax = 0.f;
        for (int j = 0; j < 32; ++j) {
          int64_t c = blk * 32 + j;
          x[j] = (real && c < k_) ? src[c] : 0.f;
          amax = std::max(amax, std::fabs(x[j]));
        }
        float need = std::max(amax / float(kE4M3Max) * opts_.scaleMultiplier,
                              0x1p-127f);
        int e = int(std::ceil(std::log2(need))) + kE8M0Bias;
        e = std::clamp(e, 0, kE8M0MaxCode);
        // Kitchen decodes e == 0 as 0.0 here (not 2^-127).
        float scale = e == 0 ? 0.f : fast::fromBits(uint32_t(e) << 23);
        out[1][swizzledScaleOffset(r, blk, blocks)] =
            amax == 0.f ? 0 : uint8_t(e);
        if (amax == 0.f) {
          // A zero block: e = 0 and every code +0 (also for -0).
          std::fill_n(q + blk * 32, 32, uint8_t(0));
          continue;
        }
        if (scale == 0.f) {
          // e == 0 decodes to 0.0 in kitchen: x / 0 saturates to ±448, and
          // 0/0 (kitchen's NaN) stays zero here.
          for (int j = 0; j < 32; ++j)
            q[blk * 32 + j] =
                x[j] == 0.f ? (std::signbit(x[j]) ? 0x80 : 0)
                            : encodeE4M3(x[j] / 0.f);
          continue;
        }
        for (int j = 0; j < 32; ++j) {
          float v = amax == 0.f ? 0.f : x[j] / scale;
          q[blk * 32 + j] = fast::encodeE4M3(
              std::min(std::max(v, -float(kE4M3Max)), float(kE4M3Max)));
        }
      }
    }
  }

private:
  int64_t np_, kp_;
};

} // namespace

std::unique_ptr<WeightEncoder> createFP8Encoder(const EncodeOptions &opts,
                                                int64_t n, int64_t k,
                                                DType source) {
  return std::make_unique<FP8Encoder>(opts, n, k, source);
}
std::unique_ptr<WeightEncoder> createNVFP4Encoder(const EncodeOptions &opts,
                                                  int64_t n, int64_t k,
                                                  DType source) {
  return std::make_unique<NVFP4Encoder>(opts, n, k, source);
}
std::unique_ptr<WeightEncoder> createMXFP8Encoder(const EncodeOptions &opts,
                                                  int64_t n, int64_t k,
                                                  DType source) {
  return std::make_unique<MXFP8Encoder>(opts, n, k, source);
}

} // namespace comfyquant::rt
