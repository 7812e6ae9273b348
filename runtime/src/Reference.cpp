//===- Reference.cpp - reference dequantization ---------------------------===//
#include "comfyquant/runtime/Reference.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/FormatRegistry.h"
#include "comfyquant/runtime/Numerics.h"
#include "comfyquant/runtime/TensorAccess.h"

#include <algorithm>
#include <cmath>

namespace comfyquant::rt {

namespace {

int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// A scale element; 1-byte scales are bit-reinterpreted as `view` (ComfyUI
/// `view`s U8 scale storage as its FP8 type, docs/Formats.md §1.3 step 5).
float scaleAt(const TensorInfo &t, int64_t i, DType view) {
  if (dtypeSize(t.dtype) == 1 && t.dtype != DType::I8) {
    uint8_t b = t.data[i];
    return view == DType::F8_E8M0 ? decodeE8M0(b) : decodeE4M3(b);
  }
  return loadF32(t, i);
}

/// A scalar-or-per-expert scale ([] / [1] shared, [E] per expert).
float expertScalar(const TensorInfo *t, int64_t expert) {
  if (!t)
    return 1.0f; // embeddings without weight_scale
  return loadF32(*t, t->numel() == 1 ? 0 : expert);
}

/// 4-bit code of logical column c in a low-first or high-first packed row.
uint8_t nibble(const uint8_t *row, int64_t c, NibbleOrder order) {
  uint8_t b = row[c / 2];
  bool high = (c % 2 == 0) == (order == NibbleOrder::HighFirst);
  return high ? (b >> 4) : (b & 0xF);
}

/// 6-bit code: K/2 bytes of low nibbles (low-first), then K/4 bytes of 2-bit
/// high fields (docs/Formats.md §4.6 step 1).
uint8_t sixBitCode(const uint8_t *row, int64_t c, int64_t k) {
  uint8_t lo = nibble(row, c, NibbleOrder::LowFirst);
  uint8_t hi = (row[k / 2 + c / 4] >> (2 * (c % 4))) & 3;
  return static_cast<uint8_t>(lo | (hi << 4));
}

} // namespace

int8_t groupedInt8Grid(float level, float sRel) {
  float p = level * sRel; // single f32 multiply
  float r = std::nearbyint(p); // RNE under the default rounding mode
  r = std::min(float(ActQuant::kGridMax), std::max(-float(ActQuant::kGridMax), r));
  return static_cast<int8_t>(r);
}

std::vector<int64_t> dequantizedShape(const ModuleDesc &m) {
  if (m.kind == ModuleKind::MoE)
    return {m.experts, m.outFeatures, m.inFeatures};
  return {m.outFeatures, m.inFeatures};
}

void dequantizeRows(const ResolvedModule &m, int64_t expert, int64_t rowBegin,
                    int64_t rowEnd, float *out, bool unrotate) {
  const ModuleDesc &d = m.desc;
  const FormatInfo &f = formatInfo(d.format);
  const int64_t N = d.outFeatures, K = d.inFeatures;
  const int64_t E = d.kind == ModuleKind::MoE ? d.experts : 1;
  if (expert < 0 || expert >= E || rowBegin < 0 || rowEnd > N ||
      rowBegin > rowEnd)
    throw Error("", moduleSubject(d.name),
                "rows [" + std::to_string(rowBegin) + ", " +
                    std::to_string(rowEnd) + ") of expert " +
                    std::to_string(expert) + " are out of range (N = " +
                    std::to_string(N) + ", E = " + std::to_string(E) + ")");
  if (d.format == Format::NVFP4) {
    // e2m1 · (bs · s2): the decode scale is formed first (docs/Formats.md
    // §4.2), so this is not operand · row scale.
    const TensorInfo &w = *m.tensor("weight");
    const TensorInfo &scale = *m.tensor("weight_scale");
    const int64_t Ns = storageRows(f, N), rowBytes = storageCols(f, K);
    const int64_t cols = roundUp(K, 16) / 16;
    const int64_t base =
        expert * static_cast<int64_t>(swizzledScaleCount(Ns, cols));
    const float s2 = weightRowScale(m, expert, 0);
    for (int64_t r = rowBegin; r < rowEnd; ++r) {
      const uint8_t *row = w.data + (expert * Ns + r) * rowBytes;
      float *o = out + (r - rowBegin) * K;
      for (int64_t c = 0; c < K; ++c) {
        float bs = scaleAt(scale, base + swizzledScaleOffset(r, c / 16, cols),
                           DType::F8_E4M3);
        o[c] = decodeE2M1(nibble(row, c, NibbleOrder::HighFirst)) * (bs * s2);
      }
    }
  } else {
    // Every other format: the exact operand times its row scale, one f32
    // rounding (mxfp8: the product with 2^(e-127) is already exact).
    weightOperandRows(m, expert, rowBegin, rowEnd, out);
    for (int64_t r = rowBegin; r < rowEnd; ++r) {
      const float s = weightRowScale(m, expert, r);
      float *o = out + (r - rowBegin) * K;
      for (int64_t c = 0; c < K; ++c)
        o[c] *= s;
    }
  }
  if (d.rotationGroup && unrotate)
    for (int64_t r = rowBegin; r < rowEnd; ++r)
      rotateRowF32(out + (r - rowBegin) * K, K, d.rotationGroup);
}

void weightOperandRows(const ResolvedModule &m, int64_t expert,
                       int64_t rowBegin, int64_t rowEnd, float *out) {
  const ModuleDesc &d = m.desc;
  const FormatInfo &f = formatInfo(d.format);
  const int64_t N = d.outFeatures, K = d.inFeatures;
  const int64_t E = d.kind == ModuleKind::MoE ? d.experts : 1;
  if (expert < 0 || expert >= E || rowBegin < 0 || rowEnd > N ||
      rowBegin > rowEnd)
    throw Error("", moduleSubject(d.name), "operand rows out of range");
  const TensorInfo &w = *m.tensor("weight");
  const int64_t Ns = storageRows(f, N), rowBytes = storageCols(f, K);
  const TensorInfo *scale = m.tensor("weight_scale");
  for (int64_t r = rowBegin; r < rowEnd; ++r) {
    float *o = out + (r - rowBegin) * K;
    const uint8_t *row = w.data + (expert * Ns + r) * rowBytes;
    const int64_t globalRow = expert * N + r;
    switch (d.format) {
    case Format::Float8E4M3FN:
      for (int64_t c = 0; c < K; ++c)
        o[c] = decodeE4M3(row[c]);
      break;
    case Format::Float8E5M2:
      for (int64_t c = 0; c < K; ++c)
        o[c] = decodeE5M2(row[c]);
      break;
    case Format::NVFP4: {
      const int64_t cols = roundUp(K, 16) / 16;
      const int64_t base =
          expert * static_cast<int64_t>(swizzledScaleCount(Ns, cols));
      for (int64_t c = 0; c < K; ++c)
        o[c] = decodeE2M1(nibble(row, c, NibbleOrder::HighFirst)) *
               scaleAt(*scale, base + swizzledScaleOffset(r, c / 16, cols),
                       DType::F8_E4M3);
      break;
    }
    case Format::MXFP8: {
      const int64_t cols = roundUp(K, 32) / 32;
      const int64_t base =
          expert * static_cast<int64_t>(swizzledScaleCount(Ns, cols));
      for (int64_t c = 0; c < K; ++c)
        o[c] = decodeE4M3(row[c]) *
               scaleAt(*scale, base + swizzledScaleOffset(r, c / 32, cols),
                       DType::F8_E8M0);
      break;
    }
    case Format::Int8Tensorwise:
      for (int64_t c = 0; c < K; ++c)
        o[c] = static_cast<float>(static_cast<int8_t>(row[c]));
      break;
    case Format::ConvRotW4A4:
      for (int64_t c = 0; c < K; ++c) {
        int v = nibble(row, c, NibbleOrder::LowFirst);
        o[c] = static_cast<float>(v >= 8 ? v - 16 : v);
      }
      break;
    case Format::AsymW4A8Int8:
    case Format::W6A8Int8: {
      const TensorInfo &sRel = *m.tensor("weight_s_rel");
      const TensorInfo *codebook = m.tensor("weight_codebook");
      const int64_t G = d.groupSize, groups = K / G;
      for (int64_t c = 0; c < K; ++c) {
        float level;
        if (d.format == Format::W6A8Int8)
          level = static_cast<float>(sixBitCode(row, c, K)) - 32.0f;
        else if (codebook)
          level = loadF32(*codebook, nibble(row, c, NibbleOrder::LowFirst));
        else
          level =
              static_cast<float>(nibble(row, c, NibbleOrder::LowFirst)) - 8.0f;
        float rel = scaleAt(sRel, globalRow * groups + c / G, DType::F8_E4M3);
        o[c] = static_cast<float>(groupedInt8Grid(level, rel));
      }
      break;
    }
    }
  }
}

float weightRowScale(const ResolvedModule &m, int64_t expert, int64_t row) {
  const ModuleDesc &d = m.desc;
  const int64_t globalRow = expert * d.outFeatures + row;
  const TensorInfo *scale = m.tensor("weight_scale");
  switch (d.format) {
  case Format::Float8E4M3FN:
  case Format::Float8E5M2:
    return expertScalar(scale, expert);
  case Format::NVFP4:
    return expertScalar(m.tensor("weight_scale_2"), expert);
  case Format::MXFP8:
    return 1.0f;
  case Format::Int8Tensorwise:
    if (scale && int8ScaleGranularity(scale->shape) == ScaleGranularity::Row)
      return loadF32(*scale, globalRow);
    return expertScalar(scale, expert);
  case Format::ConvRotW4A4:
    return loadF32(*scale, globalRow);
  case Format::AsymW4A8Int8:
  case Format::W6A8Int8:
    return loadF32(*m.tensor("weight_s_channel"), globalRow);
  }
  return 1.0f;
}

std::vector<float> dequantizeModule(const ResolvedModule &m, bool unrotate) {
  const ModuleDesc &d = m.desc;
  const int64_t E = d.kind == ModuleKind::MoE ? d.experts : 1;
  const int64_t perExpert = d.outFeatures * d.inFeatures;
  std::vector<float> out(static_cast<size_t>(E * perExpert));
  for (int64_t e = 0; e < E; ++e)
    dequantizeRows(m, e, 0, d.outFeatures, out.data() + e * perExpert,
                   unrotate);
  return out;
}

std::vector<uint16_t> toBFloat16(const std::vector<float> &v) {
  std::vector<uint16_t> r(v.size());
  std::transform(v.begin(), v.end(), r.begin(), floatToBFloat16);
  return r;
}

std::vector<uint16_t> toHalf(const std::vector<float> &v) {
  std::vector<uint16_t> r(v.size());
  std::transform(v.begin(), v.end(), r.begin(), floatToHalf);
  return r;
}

} // namespace comfyquant::rt
