//===- Forward.cpp - reference forward pass of quantized modules ----------===//
//
// Plain loops; every rounding is explicit. See docs/CpuCodegen.md §1.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Forward.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/FormatRegistry.h"
#include "comfyquant/runtime/Numerics.h"
#include "comfyquant/runtime/Reference.h"
#include "comfyquant/runtime/TensorAccess.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace comfyquant::rt {

namespace {

float loadActivation(const ActivationView &x, int64_t i) {
  switch (x.dtype) {
  case DType::F32: {
    float v;
    std::memcpy(&v, static_cast<const uint8_t *>(x.data) + 4 * i, 4);
    return v;
  }
  case DType::BF16:
  case DType::F16: {
    uint16_t b;
    std::memcpy(&b, static_cast<const uint8_t *>(x.data) + 2 * i, 2);
    return x.dtype == DType::BF16 ? bfloat16ToFloat(b) : halfToFloat(b);
  }
  default:
    return 0.0f;
  }
}

/// Stores f32 values (already exact in `t`, or rounded here once) as `t`.
std::vector<uint8_t> storeActivations(const std::vector<float> &v, DType t) {
  std::vector<uint8_t> out(v.size() * dtypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      uint16_t b = t == DType::BF16 ? floatToBFloat16(v[i]) : floatToHalf(v[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

/// The file a module's weight lives in, for messages.
std::string fileOf(const ResolvedModule &m) {
  const TensorInfo *w = m.tensor("weight");
  return w && w->file ? *w->file : std::string();
}

float tensorScalar(const TensorInfo *t, float fallback) {
  return t ? loadF32(*t, 0) : fallback;
}

/// Per-row dynamic int8 (kitchen quantize_int8_rowwise): s = max(amax/127,
/// 1e-30) in f32; q = clamp(RNE(x / s, divided in x's dtype), -128, 127).
float quantizeRowInt8(const float *x, int64_t k, DType t, int32_t *q) {
  float amax = 0.0f;
  for (int64_t c = 0; c < k; ++c)
    amax = std::max(amax, std::fabs(x[c]));
  float s = std::max(amax / float(ActQuant::kInt8Max),
                     float(ActQuant::kInt8MinScale));
  float sx = roundToActivation(s, t);
  for (int64_t c = 0; c < k; ++c) {
    float v = std::nearbyint(roundToActivation(x[c] / sx, t));
    q[c] = static_cast<int32_t>(std::min(float(ActQuant::kInt8Max),
                                         std::max(float(ActQuant::kInt8Min), v)));
  }
  return s;
}

/// Per-row dynamic int4 (kitchen quantize_signed_int4_rowwise, eager):
/// a = max(amax, 1e-10) and s = a / 7 in x's dtype; q = clamp(RNE(x / s), ±7).
float quantizeRowInt4(const float *x, int64_t k, DType t, int32_t *q) {
  float amax = 0.0f;
  for (int64_t c = 0; c < k; ++c)
    amax = std::max(amax, std::fabs(x[c]));
  float a = roundToActivation(std::max(amax, float(ActQuant::kInt4MinAmax)), t);
  float s = roundToActivation(a / float(ActQuant::kInt4Max), t);
  for (int64_t c = 0; c < k; ++c) {
    float v = std::nearbyint(roundToActivation(x[c] / s, t));
    q[c] = static_cast<int32_t>(std::min(float(ActQuant::kInt4Max),
                                         std::max(-float(ActQuant::kInt4Max), v)));
  }
  return s;
}

/// mxfp8 block exponent (docs/Formats.md §4.3): clamp(ceil(log2(max(amax/448,
/// 2^-127))) + 127, 0, 254); a zero block uses 0.
int mxfp8Exponent(float amax) {
  if (amax == 0.0f)
    return 0;
  float r = std::max(amax / float(kE4M3Max), std::ldexp(1.0f, -kE8M0Bias));
  int p;
  float frac = std::frexp(r, &p); // r = frac · 2^p, frac in [0.5, 1)
  int ceilLog2 = frac == 0.5f ? p - 1 : p;
  return std::min(kE8M0MaxCode, std::max(0, ceilLog2 + kE8M0Bias));
}

} // namespace

bool isActivationDType(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

float roundToActivation(float v, DType t) {
  switch (t) {
  case DType::BF16:
    return bfloat16ToFloat(floatToBFloat16(v));
  case DType::F16:
    return halfToFloat(floatToHalf(v));
  default:
    return v;
  }
}

namespace {

/// y[r, n] = epilogue(sum_c x[r, c] · w[n, c], n), the sum in f32 in K
/// order (the float paths' contraction).
template <typename Epilogue>
void floatMatmul(const std::vector<float> &x, const std::vector<float> &w,
                 int64_t M, int64_t N, int64_t K, std::vector<float> &y,
                 Epilogue epilogue) {
  for (int64_t r = 0; r < M; ++r)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t c = 0; c < K; ++c)
        acc += x[r * K + c] * w[n * K + c];
      y[r * N + n] = epilogue(acc, n);
    }
}

/// What the quantized paths share: the module, the shape, the activation
/// (rotated where the format rotates), the weight operand and its row
/// scales, the bias, and the trace to fill.
struct QuantizedLinear {
  const ResolvedModule &m;
  int64_t M, N, K;
  DType T;
  const std::vector<float> &a, &w, &rowScale, &bias;
  ForwardTrace &tr;
  std::vector<float> &y;

  /// int8 (tensor or row scales), ConvRot W4A4, W4A8 and W6A8: per-row
  /// symmetric int8 (int4) activations, exact i32 dot products.
  void integer() {
    const ModuleDesc &d = m.desc;
    const bool int4 =
        d.format == Format::ConvRotW4A4 && d.linearDtype == "int4";
    tr.scales.assign(static_cast<size_t>(M), 0.0f);
    tr.acc.assign(static_cast<size_t>(M * N), 0);
    for (int64_t r = 0; r < M; ++r) {
      int32_t *q = tr.codes.data() + r * K;
      float sx = int4 ? quantizeRowInt4(a.data() + r * K, K, T, q)
                      : quantizeRowInt8(a.data() + r * K, K, T, q);
      tr.scales[r] = sx;
      for (int64_t n = 0; n < N; ++n) {
        int32_t acc = 0; // exact: |q·w| <= 128·127 summed over K < 2^31
        for (int64_t c = 0; c < K; ++c)
          acc += q[c] * static_cast<int32_t>(w[n * K + c]);
        tr.acc[r * N + n] = acc;
        y[r * N + n] =
            (static_cast<float>(acc) * sx) * rowScale[n] + bias[n];
      }
    }
  }

  /// FP8 e4m3 / e5m2: the activation times 1/input_scale in x's dtype,
  /// clamped, encoded.
  void fp8() {
    const bool e4m3 = m.desc.format == Format::Float8E4M3FN;
    const float maxv = float(e4m3 ? kE4M3Max : kE5M2Max);
    const float s = tensorScalar(m.tensor("input_scale"), 1.0f);
    const float recip = roundToActivation(1.0f / s, T);
    tr.scales = {s};
    std::vector<float> xq(static_cast<size_t>(M * K));
    for (int64_t i = 0; i < M * K; ++i) {
      float v = roundToActivation(a[i] * recip, T);
      v = std::min(maxv, std::max(-maxv, v));
      uint8_t code = e4m3 ? encodeE4M3(v) : encodeE5M2(v);
      tr.codes[i] = code;
      xq[i] = e4m3 ? decodeE4M3(code) : decodeE5M2(code);
    }
    floatMatmul(xq, w, M, N, K, y, [&](float acc, int64_t n) {
      return acc * s * rowScale[n] + bias[n];
    });
  }

  /// NVFP4: E2M1 codes in 16-element blocks with E4M3 block scales under a
  /// global scale.
  void nvfp4() {
    // Global scale: input_scale, else amax/2688 formed in x's dtype.
    float g;
    if (const TensorInfo *is = m.tensor("input_scale")) {
      g = loadF32(*is, 0);
    } else {
      float amax = 0.0f;
      for (float v : a)
        amax = std::max(amax, std::fabs(v));
      g = roundToActivation(amax / float(ActQuant::kNvfp4GlobalDivisor), T);
    }
    tr.globalScale = g;
    const int64_t blocks = (K + 15) / 16;
    tr.scales.assign(static_cast<size_t>(M * blocks), 0.0f);
    std::vector<float> xd(static_cast<size_t>(M * K)); // e2m1 · d8
    for (int64_t r = 0; r < M; ++r)
      for (int64_t b = 0; b < blocks; ++b) {
        int64_t c0 = b * 16, c1 = std::min(K, c0 + 16);
        float amax = 0.0f;
        for (int64_t c = c0; c < c1; ++c)
          amax = std::max(amax, std::fabs(a[r * K + c]));
        float dscale = g == 0.0f ? 0.0f : (amax / float(kE2M1Max)) / g;
        uint8_t d8 = encodeE4M3(std::min(dscale, float(kE4M3Max)));
        float d8v = decodeE4M3(d8);
        float t = g * d8v;
        tr.scales[r * blocks + b] = d8v;
        for (int64_t c = c0; c < c1; ++c) {
          float v = t == 0.0f ? 0.0f : a[r * K + c] / t;
          uint8_t code = encodeE2M1(
              std::min(float(kE2M1Max), std::max(-float(kE2M1Max), v)));
          tr.codes[r * K + c] = code;
          xd[r * K + c] = decodeE2M1(code) * d8v;
        }
      }
    const float alpha = g * rowScale[0]; // input global · weight_scale_2
    floatMatmul(xd, w, M, N, K, y, [&](float acc, int64_t n) {
      return acc * alpha + bias[n];
    });
  }

  /// MXFP8: E4M3 codes in 32-element blocks with E8M0 scales.
  void mxfp8() {
    const int64_t blocks = (K + 31) / 32;
    tr.scales.assign(static_cast<size_t>(M * blocks), 0.0f);
    std::vector<float> xd(static_cast<size_t>(M * K)); // code · 2^(e-127)
    for (int64_t r = 0; r < M; ++r)
      for (int64_t b = 0; b < blocks; ++b) {
        int64_t c0 = b * 32, c1 = std::min(K, c0 + 32);
        float amax = 0.0f;
        for (int64_t c = c0; c < c1; ++c)
          amax = std::max(amax, std::fabs(a[r * K + c]));
        int e = mxfp8Exponent(amax);
        float scale = decodeE8M0(static_cast<uint8_t>(e));
        tr.scales[r * blocks + b] = scale;
        for (int64_t c = c0; c < c1; ++c) {
          float v = amax == 0.0f ? 0.0f : a[r * K + c] / scale; // exact
          uint8_t code = encodeE4M3(
              std::min(float(kE4M3Max), std::max(-float(kE4M3Max), v)));
          tr.codes[r * K + c] = code;
          xd[r * K + c] = decodeE4M3(code) * scale;
        }
      }
    floatMatmul(xd, w, M, N, K, y,
                [&](float acc, int64_t n) { return acc + bias[n]; });
  }
};

/// Rejects what no Linear forward takes: an embedding, a non-activation
/// dtype, the wrong K, an expert out of range.
void checkLinearCall(const ResolvedModule &m, const ActivationView &x,
                     int64_t expert) {
  const ModuleDesc &d = m.desc;
  const std::string subject = moduleSubject(d.name);
  const int64_t K = d.inFeatures;
  if (d.kind == ModuleKind::Embedding)
    throw Error(fileOf(m), subject, "an embedding takes indices, not activations");
  if (!isActivationDType(x.dtype))
    throw Error(fileOf(m), subject,
                std::string("activations must be F32, BF16 or F16, got ") +
                    dtypeName(x.dtype));
  if (x.cols != K)
    throw Error(fileOf(m), subject,
                "input has " + std::to_string(x.cols) +
                    " features, the module takes K = " + std::to_string(K));
  const int64_t E = d.kind == ModuleKind::MoE ? d.experts : 1;
  if (expert < 0 || expert >= E)
    throw Error(fileOf(m), subject,
                "expert " + std::to_string(expert) + " is out of range [0, " +
                    std::to_string(E) + ")");
}

} // namespace

std::vector<uint8_t> referenceLinear(const ResolvedModule &m,
                                     const ActivationView &x, int64_t expert,
                                     ForwardTrace *trace) {
  checkLinearCall(m, x, expert);
  const ModuleDesc &d = m.desc;
  const int64_t M = x.rows, K = d.inFeatures, N = d.outFeatures;
  const DType T = x.dtype;
  ForwardTrace local;
  ForwardTrace &tr = trace ? *trace : local;

  // The activation as values of its dtype.
  std::vector<float> a(static_cast<size_t>(M * K));
  for (int64_t i = 0; i < M * K; ++i)
    a[i] = loadActivation(x, i);
  // nvfp4 AWQ smoothing, always (also on the full-precision path):
  // x * pre_quant_scale.to(x.dtype), product in x's dtype.
  if (const TensorInfo *pqs = m.tensor("pre_quant_scale"))
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < K; ++c)
        a[r * K + c] = roundToActivation(
            a[r * K + c] * roundToActivation(loadF32(*pqs, c), T), T);

  // Bias, cast to the activation dtype.
  std::vector<float> bias(static_cast<size_t>(N), 0.0f);
  if (const TensorInfo *b = m.tensor("bias"))
    for (int64_t n = 0; n < N; ++n)
      bias[n] = roundToActivation(loadF32(*b, expert * N + n), T);

  std::vector<float> y(static_cast<size_t>(M * N));
  std::vector<float> w(static_cast<size_t>(N * K));

  if (d.fullPrecision) {
    // Dequantize into the activation dtype, float matmul (f32 accumulation).
    tr.path = "full_precision";
    dequantizeRows(m, expert, 0, N, w.data());
    for (float &v : w)
      v = roundToActivation(v, T);
    tr.quantizerInput = a;
    floatMatmul(a, w, M, N, K, y,
                [&](float acc, int64_t n) { return acc + bias[n]; });
    return storeActivations(y, T);
  }

  tr.path = "quantized";
  weightOperandRows(m, expert, 0, N, w.data());
  std::vector<float> rowScale(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)
    rowScale[n] = weightRowScale(m, expert, n);

  // ConvRot: rotate the activation (fast butterfly, f32), then round to x's
  // dtype as kitchen's rotation in the activation dtype does.
  if (d.rotationGroup)
    for (int64_t r = 0; r < M; ++r) {
      fwhtRowF32(a.data() + r * K, K, d.rotationGroup);
      for (int64_t c = 0; c < K; ++c)
        a[r * K + c] = roundToActivation(a[r * K + c], T);
    }
  tr.quantizerInput = a;
  tr.codes.assign(static_cast<size_t>(M * K), 0);

  QuantizedLinear q{m, M, N, K, T, a, w, rowScale, bias, tr, y};
  switch (d.format) {
  case Format::Int8Tensorwise:
  case Format::ConvRotW4A4:
  case Format::AsymW4A8Int8:
  case Format::W6A8Int8:
    q.integer();
    break;
  case Format::Float8E4M3FN:
  case Format::Float8E5M2:
    q.fp8();
    break;
  case Format::NVFP4:
    q.nvfp4();
    break;
  case Format::MXFP8:
    q.mxfp8();
    break;
  }
  return storeActivations(y, T);
}

std::vector<uint8_t> referenceEmbedding(const ResolvedModule &m,
                                        const int64_t *indices, int64_t n,
                                        DType out) {
  const ModuleDesc &d = m.desc;
  if (d.kind != ModuleKind::Embedding)
    throw Error(fileOf(m), moduleSubject(d.name), "is not an embedding");
  if (!isActivationDType(out))
    throw Error(fileOf(m), moduleSubject(d.name),
                "embedding output must be F32, BF16 or F16");
  const int64_t D = d.inFeatures;
  std::vector<float> y(static_cast<size_t>(n * D));
  for (int64_t i = 0; i < n; ++i) {
    if (indices[i] < 0 || indices[i] >= d.outFeatures)
      throw Error(fileOf(m), moduleSubject(d.name),
                  "index " + std::to_string(indices[i]) +
                      " is out of range [0, " +
                      std::to_string(d.outFeatures) + ")");
    // Only the gathered rows are dequantized.
    dequantizeRows(m, 0, indices[i], indices[i] + 1, y.data() + i * D);
  }
  return storeActivations(y, out);
}

} // namespace comfyquant::rt
