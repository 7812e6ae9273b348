//===- QuantizeInternal.h - shared by the quantizer's steps -----*- C++ -*-===//

#ifndef COMFYQUANT_RUNTIME_QUANTIZE_QUANTIZEINTERNAL_H
#define COMFYQUANT_RUNTIME_QUANTIZE_QUANTIZEINTERNAL_H

#include "comfyquant/runtime/ModuleResolver.h"
#include "comfyquant/runtime/Safetensors.h"
#include "comfyquant/runtime/quantize/Policy.h"
#include "comfyquant/runtime/quantize/Quantizer.h"

#include <string>
#include <vector>

namespace comfyquant::rt {

/// One checkpoint of the input: a file or an index. `relativeOutput` is set
/// when the input is a directory of separate files, each written to
/// OUT/<relativeOutput>.
struct SourceFile {
  std::string path;
  std::string relativeOutput;
};

/// The checkpoints IN names; refuses pickle files. Throws Error.
std::vector<SourceFile> sourceFiles(const std::string &input);

PolicySet loadPolicies(const QuantizeOptions &o);

QuantizePlan planFor(const Checkpoint &ckpt, const QuantizeOptions &o,
                     const PolicySet &policies);

/// Widens rows [r0, r0 + rows) of a 2-D BF16/F16/F32 tensor to f32; returns
/// false when a value is not finite.
bool widenRows(const TensorInfo &t, int64_t r0, int64_t rows, float *out);

/// A module over in-memory encoded tensors (for measuring an encoding with
/// the reference decoder). `storage` must outlive the result.
ResolvedModule inMemoryModule(const std::string &name,
                              const WeightEncoder &enc,
                              const std::vector<std::vector<uint8_t>> &bytes,
                              std::vector<TensorInfo> &storage);

/// Error statistics accumulated over bands.
struct ErrorAccumulator {
  double sumSq = 0, errSq = 0, dot = 0, qSq = 0, maxAbs = 0;
  /// With calibration rows x: Σ|x Wᵀ|² and Σ|x (Ŵ − W)ᵀ|².
  double outSq = 0, outErrSq = 0;
  bool measuredOutput = false;
  void add(const float *ref, const float *q, int64_t count);
  void merge(const ErrorAccumulator &o);
  ErrorStats stats() const;
};

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_QUANTIZE_QUANTIZEINTERNAL_H
