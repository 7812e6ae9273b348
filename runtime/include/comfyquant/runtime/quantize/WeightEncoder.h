//===- WeightEncoder.h - Comfy quant weight encoders (reference) -*- C++ -*-===//
//
// The encoder of every weight format, the inverse of Reference.h's decoders:
// given a logical [N, K] weight in its source dtype, the tensors a Comfy
// quant checkpoint stores for it. Each encoder states comfy-kitchen's eager
// (CPU, torch) quantizer operation by operation, including where torch
// rounds an intermediate to the source dtype ("division at the source
// dtype"), so that codes and scales are bit-identical to kitchen's for the
// same input (docs/Quantize.md §3 lists each format's statement and the few
// documented departures, e.g. an all-zero FP8 tensor, where kitchen writes
// NaN).
//
// Encoders work on row bands: a first pass (observe) gathers what the whole
// tensor decides (a global amax, a codebook), then bands of rows are encoded
// independently, in any order and from several threads, into the slices of
// the output tensors they own. So a layer is never held in f32 at once.
//===----------------------------------------------------------------------===//

#ifndef COMFYQUANT_RUNTIME_QUANTIZE_WEIGHTENCODER_H
#define COMFYQUANT_RUNTIME_QUANTIZE_WEIGHTENCODER_H

#include "comfyquant/runtime/DType.h"
#include "comfyquant/runtime/FormatRegistry.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace comfyquant::rt {

/// How a W4A8 codebook is chosen (kitchen's `codebook` argument).
enum class CodebookChoice : uint8_t {
  Auto,  ///< kitchen's rule: the frozen Lloyd-Max table or a per-tensor fit
  Fixed, ///< always the frozen table
  Fit,   ///< always a per-tensor Lloyd-Max fit
  None,  ///< symmetric uniform codes (code - 8), no codebook tensor
};

/// What to encode a weight to.
struct EncodeOptions {
  Format format = Format::Int8Tensorwise;
  bool perRow = false;        ///< int8_tensorwise: one scale per row [N, 1]
  int64_t rotationGroup = 0;  ///< ConvRot group Gr (0: no rotation)
  int64_t groupSize = 0;      ///< W4A8 / W6A8 group G
  CodebookChoice codebook = CodebookChoice::Auto;
  std::string linearDtype;    ///< convrot_w4a4: "int4" | "int8" (marker only)
  bool sRelF32 = false;       ///< W4A8 / W6A8: s_rel stored as F32, not E4M3
  /// Scale multiplier tried by the MSE search (1 = kitchen's scale).
  float scaleMultiplier = 1.0f;
};

/// One tensor an encoder writes, as "P.<key>".
struct EncodedTensorSpec {
  std::string key; ///< "weight", "weight_scale", ...
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
};

/// A band of consecutive logical rows of the source, widened to f32
/// exactly.
struct SourceBand {
  const float *data = nullptr; ///< rows x cols, row-major (may be null, below)
  int64_t rowBegin = 0, rows = 0, cols = 0;
  /// The same rows as stored (BF16 / F16 / F32 bytes, unaligned), or null
  /// when the rows were transformed (AWQ column scales).
  const uint8_t *raw = nullptr;
};

class WeightEncoder {
public:
  /// The encoder of `opts.format` for a logical [n, k] weight stored as
  /// `source` (BF16, F16 or F32). Throws Error (subject `module`) when the
  /// shape breaks the format's rules.
  static std::unique_ptr<WeightEncoder> create(const EncodeOptions &opts,
                                               int64_t n, int64_t k,
                                               DType source,
                                               const std::string &module);
  virtual ~WeightEncoder();

  /// The tensors written, "weight" first.
  const std::vector<EncodedTensorSpec> &outputs() const { return outputs_; }
  /// The comfy_quant JSON of the module.
  virtual std::string marker() const = 0;
  /// Bands start at multiples of this many rows (a swizzled scale tile).
  virtual int64_t bandAlign() const { return 1; }
  /// Whether observe() / encode() read only `raw` (data may then be null).
  virtual bool rawOnly() const { return false; }
  /// Whether encode() needs observe() over every row first.
  virtual bool needsObserve() const { return false; }
  /// Bytes observe() keeps until finishObserve() (a codebook's samples).
  virtual uint64_t observeBytes() const { return 0; }
  /// First pass: called with bands covering every row, in order.
  virtual void observe(const SourceBand &band) { (void)band; }
  /// Ends the first pass.
  virtual void finishObserve() {}
  /// Encodes one band into `out` (one buffer per output, full size); writes
  /// only the bytes the band owns, so bands may run concurrently. The last
  /// band also writes the padding rows of padded formats.
  virtual void encode(const SourceBand &band,
                      std::vector<std::vector<uint8_t>> &out) const = 0;
  /// Writes whatever depends on the whole tensor (global scales); called
  /// once after every band.
  virtual void finish(std::vector<std::vector<uint8_t>> &out) const {
    (void)out;
  }

  int64_t rows() const { return n_; }
  int64_t cols() const { return k_; }
  DType sourceDType() const { return source_; }
  const EncodeOptions &options() const { return opts_; }

protected:
  WeightEncoder(const EncodeOptions &opts, int64_t n, int64_t k, DType source)
      : opts_(opts), n_(n), k_(k), source_(source) {}
  void addOutput(std::string key, DType dtype, std::vector<int64_t> shape);

  EncodeOptions opts_;
  int64_t n_, k_;
  DType source_;
  std::vector<EncodedTensorSpec> outputs_;
};

/// The shape rule of `opts` for a logical [n, k] weight, as a sentence, or
/// "" when the format can encode it.
std::string encodeShapeRule(const EncodeOptions &opts, int64_t n, int64_t k);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_QUANTIZE_WEIGHTENCODER_H
