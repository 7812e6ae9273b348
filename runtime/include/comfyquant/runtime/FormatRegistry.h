//===- FormatRegistry.h - the single source of truth for formats -*- C++ -*-===//
//
// One entry per Comfy quant format (docs/Formats.md §2–§3): the weight storage
// dtype, the side tensors (key, required, dtypes), the code width, nibble
// order, scale granularity, padding, rotation use and which module kinds may
// use it. `verifyModule` states every shape / divisibility rule once; the
// checkpoint resolver (file), the dialect verifiers (IR), the reference
// dequantizer and codegen all call it.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_FORMATREGISTRY_H
#define COMFYQUANT_RUNTIME_FORMATREGISTRY_H

#include "comfyquant/runtime/DType.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace comfyquant::rt {

enum class Format : uint8_t {
  Float8E4M3FN,
  Float8E5M2,
  NVFP4,
  MXFP8,
  Int8Tensorwise,
  ConvRotW4A4,
  AsymW4A8Int8,
  W6A8Int8,
};
constexpr int kNumFormats = 8;

enum class ModuleKind : uint8_t { Linear, Embedding, MoE };
enum class ScaleGranularity : uint8_t { Tensor, Row, Group, Block };
enum class NibbleOrder : uint8_t { None, HighFirst, LowFirst };
enum class RotationUse : uint8_t { Never, Optional, Always };

/// A side tensor of a format, stored as "P.<key>".
struct TensorRole {
  const char *key;
  bool required;              ///< for Linear/MoE (embeddings: see verify)
  std::vector<DType> dtypes;  ///< accepted storage dtypes
  const char *shape;          ///< the shape rule, as documentation
};

struct FormatInfo {
  Format format;
  const char *name;          ///< the comfy_quant "format" string
  DType weightDType;         ///< storage dtype of P.weight
  int codeBits;              ///< bits per weight code: 8, 6 or 4
  NibbleOrder nibbles;       ///< for 4-bit codes
  ScaleGranularity granularity; ///< of the (main) weight scale
  int64_t blockSize;         ///< block-scale block along K (16, 32) or 0
  DType blockScaleDType;     ///< element type of block / group scales
  int64_t pad;               ///< N and K padded to this (16, 32) or 1
  bool quantizeInput;        ///< ComfyUI quantize_input
  RotationUse rotation;
  int64_t defaultGroupSize;  ///< G default for grouped formats, else 0
  bool embedding;            ///< usable by Embedding modules
  bool moe;                  ///< usable by MoE banks
  bool flattenedBank;        ///< MoE banks flatten to [E·N, ...]
  std::vector<TensorRole> roles; ///< "weight" first
};

const std::vector<FormatInfo> &allFormats();
const FormatInfo &formatInfo(Format f);
std::optional<Format> parseFormat(std::string_view name);
const char *formatName(Format f);
/// "float8_e4m3fn, float8_e5m2, ..." for messages.
std::string knownFormatList();

const char *moduleKindName(ModuleKind k);
std::optional<ModuleKind> parseModuleKind(std::string_view name);
const char *granularityName(ScaleGranularity g);
const char *nibbleOrderName(NibbleOrder n);

/// Activation quantization (docs/Formats.md §5, docs/Numerics.md §3): the
/// reference forward (Forward.cpp) and the compiled lowering
/// (ComfyQuantToLinalg) both read these.
struct ActQuant {
  /// Per-row int8: s = max(amax / 127, 1e-30) in f32, codes in [-128, 127].
  static constexpr double kInt8Max = 127.0, kInt8Min = -128.0;
  static constexpr double kInt8MinScale = 1e-30;
  /// Per-row int4 (convrot_w4a4 linear_dtype=int4): s = max(amax, 1e-10) / 7,
  /// codes in [-7, 7].
  static constexpr double kInt4Max = 7.0, kInt4MinAmax = 1e-10;
  /// NVFP4 dynamic global scale: amax(|x|) / (6 · 448).
  static constexpr double kNvfp4GlobalDivisor = 2688.0;
  /// W4A8 / W6A8 weight grid: clamp(RNE(level · s_rel), -127, 127).
  static constexpr double kGridMax = 127.0;
};

/// Default ConvRot group size (docs/Formats.md §3).
constexpr int64_t kDefaultRotationGroup = 256;
/// convrot_w4a4 kernels tile K by 64 (quant_group_size, fixed by ComfyUI).
constexpr int64_t kW4A4KMultiple = 64;

/// A tensor as far as rules are concerned.
struct TensorDesc {
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

/// A quantized module, abstracted from where it came from (a file or IR).
struct ModuleDesc {
  std::string name;
  ModuleKind kind = ModuleKind::Linear;
  Format format = Format::Float8E4M3FN;
  int64_t outFeatures = 0; ///< N (per expert for MoE; V for embeddings)
  int64_t inFeatures = 0;  ///< K (D for embeddings)
  int64_t experts = 0;     ///< E for MoE banks, else 0
  int64_t groupSize = 0;   ///< G for grouped formats, else 0
  int64_t rotationGroup = 0; ///< Gr when ConvRot applies, else 0
  bool fullPrecision = false;
  std::string linearDtype; ///< convrot_w4a4: "int4" | "int8"
  std::map<std::string, TensorDesc> tensors; ///< by role key
};

/// The parameters that pin a format down (the dialect's format attribute).
struct FormatParams {
  ScaleGranularity granularity = ScaleGranularity::Tensor;
  int64_t group = 0; ///< block size (16 / 32) or group size G, else 0
  std::optional<DType> scaleDType; ///< block / group scale element type
  NibbleOrder nibbles = NibbleOrder::None;
};
/// The registry's parameters for `f` (G = the default group size).
FormatParams defaultFormatParams(Format f);
/// Checks `p` against the registry entry of `f` (K-independent rules only).
std::optional<std::string> verifyFormatParams(Format f, const FormatParams &p);
/// The K-independent group_size rules of the grouped formats (docs/Formats.md
/// §2.2): G >= 4, G divides 16 or is a multiple of 16; w6a8: G % 16 == 0.
std::optional<std::string> verifyGroupSize(Format f, int64_t g);

/// Every rule of docs/Formats.md §2–§3 for `m`; returns the first violated
/// rule as a sentence ("weight_scale must be F32 [N] = [64], got F32 [32]"), or
/// nullopt when `m` is valid.
std::optional<std::string> verifyModule(const ModuleDesc &m);

/// Fills outFeatures / inFeatures / experts of `m` from its storage shapes
/// (docs/Formats.md §4.8): packed widths give K exactly; NVFP4/MXFP8 storage is
/// padded, so the logical N / K come from bias / pre_quant_scale when present
/// and from the storage otherwise. Values already set (> 0) are explicit
/// overrides and are checked against the storage. Returns a rule violation
/// or nullopt.
std::optional<std::string> inferLogicalShape(ModuleDesc &m);

/// How an int8_tensorwise weight_scale of this shape applies: one value per
/// row when it has rank >= 2 and more than one element ([N, 1], [E, N, 1],
/// [E·N, 1]); otherwise a scalar ([], [1], [1, 1]) or one per expert ([E]).
ScaleGranularity int8ScaleGranularity(const std::vector<int64_t> &shape);

/// Storage rows / columns of one expert's weight for logical N, K.
int64_t storageRows(const FormatInfo &f, int64_t n);
int64_t storageCols(const FormatInfo &f, int64_t k);

/// Bytes of every tensor of the module (for reports).
int64_t moduleBytes(const ModuleDesc &m);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_FORMATREGISTRY_H
