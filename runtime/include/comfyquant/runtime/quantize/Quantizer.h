//===- Quantizer.h - make Comfy quant checkpoints ---------------*- C++ -*-===//
//
// The job of comfyquant-quantize and cq_quantize: a source checkpoint
// (.safetensors, a sharded index, or a directory of them) in, a Comfy quant
// checkpoint out. Three steps:
//
//   plan      the architecture policy (Policy.h) and the format decide, per
//             tensor, quantize / cast / keep and why; the planned modules are
//             checked by the format registry before anything is written;
//   write     layer by layer, in bands of rows, within --max-memory: every
//             quantized layer is encoded (WeightEncoder.h), optionally
//             measured against its source (validate, mixed, MSE search) and
//             written at its offset of a temporary file; the header is
//             written last into space reserved for it, and the file is
//             renamed over the output (never an input);
//   verify    re-reads an output: the reader's header checks, every module
//             valid by the registry, finite scales, and with a source the
//             error statistics again.
//===----------------------------------------------------------------------===//

#ifndef COMFYQUANT_RUNTIME_QUANTIZE_QUANTIZER_H
#define COMFYQUANT_RUNTIME_QUANTIZE_QUANTIZER_H

#include "comfyquant/runtime/DType.h"
#include "comfyquant/runtime/quantize/WeightEncoder.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace comfyquant::rt {

struct QuantizeOptions {
  std::string input, output;
  std::string format;       ///< a name of quantizeFormatNames()
  std::string architecture; ///< "" detects
  std::vector<std::string> policyFiles;
  std::vector<std::string> include, exclude; ///< globs over module names
  std::string component;    ///< "" | "diffusion_model" | "text_encoder"
  int64_t convrotGroup = 0; ///< 0: the policy's, else the format's default
  int64_t groupSize = 0;    ///< W4A8 / W6A8 G (0: default)
  std::string w4a4LinearDtype; ///< "" : int8 for w4a4, int4 for int4-convrot
  std::string codebook = "auto"; ///< W4A8: auto | fixed | fit | none
  std::string sRelDtype;    ///< W4A8 / W6A8: "" or "e4m3" (default) | "f32"
  std::string mixedProfile = "balanced"; ///< size | balanced | quality
  uint64_t maxMemory = 0;   ///< bytes of working memory; 0 = no bound
  bool validate = false;    ///< measure every layer, keep those over bound
  bool strict = false;      ///< a layer over bound / non-finite is an error
  double errorBound = -1;   ///< relative RMSE bound; < 0: per format
  bool overwrite = false;
  int threads = 0;          ///< 0: every available core
  std::string optimizer = "none"; ///< none | mse
  std::string mseObjective = "auto"; ///< weight | activation | auto
  std::string calibrationSource;     ///< safetensors of activation rows
  int mseSteps = 6;
  bool awq = false;         ///< NVFP4: search an AWQ pre_quant_scale
  int awqSteps = 10;        ///< α grid points after 0
  /// A file for the JSON report (written atomically after the output);
  /// checked before anything is written: never an input or an output.
  std::string report;
  /// Progress lines (a layer done); null: quiet.
  std::function<void(const std::string &)> progress;
};

/// Error of a quantized weight against its source.
struct ErrorStats {
  double relRmse = 0, maxAbs = 0, cosine = 1;
  /// With calibration rows x: |x (Ŵ − W)ᵀ| / |x Wᵀ| over all rows; < 0 when
  /// not measured.
  double outputRelRmse = -1;
  nlohmann::json toJson() const;
};

struct TensorPlan {
  std::string name;   ///< source tensor
  std::string module; ///< module name (quantized weights)
  enum class Action { Keep, Quantize, Cast } action = Action::Keep;
  std::string reason;
  std::string format; ///< Comfy quant format, or the cast dtype
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  uint64_t bytesBefore = 0, bytesAfter = 0;
  EncodeOptions encode; ///< Quantize
  std::vector<EncodeOptions> candidates; ///< mixed: in order of preference
  std::vector<double> candidateBounds;
  DType castTo = DType::F16;
  // Filled by the write step.
  std::string outcome; ///< "quantized", "kept: <why>", ...
  ErrorStats error;
  bool measured = false;
};

struct QuantizePlan {
  std::string input, format, policy, policyOrigin, detection;
  std::vector<TensorPlan> tensors; ///< sorted by name
  uint64_t bytesBefore = 0, bytesAfter = 0;
  nlohmann::json toJson() const;
  /// A readable table: one line per tensor, then totals.
  std::string toText() const;
};

struct QuantizeReport {
  QuantizePlan plan;
  std::string output;
  uint64_t outputBytes = 0;
  uint64_t peakWorkingBytes = 0; ///< the tool's own accounting
  uint64_t peakRssAnonBytes = 0; ///< sampled /proc/self/status RssAnon
  double seconds = 0;
  double encodeSeconds = 0; ///< of which encoding (reading the source rows
                            ///< and computing codes; no output I/O)
  int quantized = 0, kept = 0, fellBack = 0;
  /// A directory of separate files: each file's report (the fields above
  /// then hold the last file's plan and the sums).
  std::vector<QuantizeReport> files;
  nlohmann::json toJson() const;
};

/// Formats --format accepts, with one line each.
const std::vector<std::pair<std::string, std::string>> &quantizeFormatNames();

/// Plans without writing (also --inspect / --dry-run): one plan per
/// checkpoint of the input (several for a directory of separate files).
/// Throws Error.
std::vector<QuantizePlan> planQuantization(const QuantizeOptions &opts);

/// Plans and writes. Throws Error; on any failure no output is left.
QuantizeReport quantizeCheckpoint(const QuantizeOptions &opts);

/// The relative-RMSE bound --validate applies to a format's encoding.
double defaultErrorBound(const EncodeOptions &e);

struct VerifyReport {
  bool ok = true;
  std::vector<std::string> problems;
  nlohmann::json modules = nlohmann::json::array();
  nlohmann::json toJson() const;
};

/// Re-reads a written checkpoint; with `source`, compares every module with
/// the source weight of the same name. Throws Error when the file cannot be
/// read at all; rule violations go to problems.
VerifyReport verifyQuantizedOutput(const std::string &output,
                                   const std::string &source,
                                   double errorBound, int threads);

/// Peak / current anonymous memory of this process (RssAnon), bytes.
uint64_t currentRssAnonBytes();

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_QUANTIZE_QUANTIZER_H
