//===- Forward.h - reference forward pass of quantized modules --*- C++ -*-===//
//
// The oracle for compiled kernels: plain loops that compute each format's
// forward exactly as docs/CpuCodegen.md §1 states (docs/Formats.md §5) —
// format-exact activation quantization in the activation dtype, exact i32
// accumulation for integer formats, f32 accumulation in k order for float
// formats, and the f32 epilogue with one rounding to the activation dtype.
// A ForwardTrace exposes the intermediates (activation codes, scales, i32
// accumulators) that compiled code must reproduce bit for bit.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_FORWARD_H
#define COMFYQUANT_RUNTIME_FORWARD_H

#include "comfyquant/runtime/ModuleResolver.h"

#include <cstdint>
#include <vector>

namespace comfyquant::rt {

/// A row-major [rows, cols] activation in F32, BF16 or F16.
struct ActivationView {
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  const void *data = nullptr;
};

/// Intermediates of one forward call.
struct ForwardTrace {
  /// The activation as the quantizer saw it (after pre_quant_scale and the
  /// rotation, rounded to the activation dtype), [M, K].
  std::vector<float> quantizerInput;
  /// Activation codes [M, Kq]: int8/int4 values, or FP8 / E2M1 bit patterns.
  std::vector<int32_t> codes;
  /// Activation scales: per row [M] (int paths), one value (fp8, nvfp4
  /// global), or per block [M, K/block] (nvfp4 E4M3 / mxfp8 E8M0 decoded).
  std::vector<float> scales;
  /// nvfp4: the global activation scale (input_scale or amax/2688).
  float globalScale = 0.0f;
  /// Integer accumulators [M, N] (int paths only).
  std::vector<int32_t> acc;
  /// Which path ran: "quantized" or "full_precision".
  const char *path = "";
};

/// True for the three activation dtypes.
bool isActivationDType(DType t);
/// Rounds an f32 value once (RNE) to `t` and back (identity for F32).
float roundToActivation(float v, DType t);

/// y = module(x) for a Linear module, or for expert `expert` of a MoE bank:
/// [x.rows, N] in x.dtype (raw bytes). Throws Error on a shape or dtype
/// mismatch (the message names the module and the rule).
std::vector<uint8_t> referenceLinear(const ResolvedModule &m,
                                     const ActivationView &x,
                                     int64_t expert = 0,
                                     ForwardTrace *trace = nullptr);

/// Embedding lookup: rows `indices` of the table, dequantized, in `out`
/// (F32/BF16/F16): [n, D] raw bytes. Throws Error on an index out of range.
std::vector<uint8_t> referenceEmbedding(const ResolvedModule &m,
                                        const int64_t *indices, int64_t n,
                                        DType out);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_FORWARD_H
