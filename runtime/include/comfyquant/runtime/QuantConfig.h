//===- QuantConfig.h - per-module comfy_quant configuration -----*- C++ -*-===//
//
// Decodes every way a checkpoint states which modules are quantized
// (docs/Formats.md §1, §3, §6, §7.3):
//   * `<m>.comfy_quant` U8 tensors holding a UTF-8 JSON object;
//   * `__metadata__._quantization_metadata` (legacy; wins over a tensor of the
//     same module, as ComfyUI's convert_old_quants overwrites it);
//   * legacy `scaled_fp8` checkpoints (marker + `scale_weight`/`scale_input`);
//   * Comfy-Org's INT8 exporter marker without "format" (accepted as
//     int8_tensorwise with a warning);
//   * `<m>.comfy_attention.config` attention preferences (parsed, preserved).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_QUANTCONFIG_H
#define COMFYQUANT_RUNTIME_QUANTCONFIG_H

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace comfyquant::rt {

class Checkpoint;

/// Where a module's configuration came from.
enum class ConfigSource { Tensor, QuantizationMetadata, ScaledFp8 };
const char *configSourceName(ConfigSource s);

/// The decoded options of one quantized module. Option lookup follows
/// ComfyUI: top level first, then the nested `params` object.
struct QuantConfig {
  std::string module;      ///< parameter prefix P
  std::string format;      ///< the format string (validated by the registry)
  std::string rawJson;     ///< the JSON text as stored (or synthesised)
  ConfigSource source = ConfigSource::Tensor;
  bool fullPrecisionMatrixMult = false;
  bool convrot = false;
  std::optional<int64_t> convrotGroupSize; ///< absent -> format default
  std::optional<std::string> linearDtype;  ///< convrot_w4a4 only
  std::optional<int64_t> groupSize;        ///< grouped formats
  std::optional<int64_t> numExperts;       ///< informational
  /// Embedding lookups read only top-level convrot keys (no params).
  bool convrotTopLevel = false;
  std::optional<int64_t> convrotGroupSizeTopLevel;
  /// Physical tensor key for a role when it is not "P.<role>" (legacy
  /// scaled_fp8: "weight_scale" -> "P.scale_weight").
  std::map<std::string, std::string> renamed;
  /// Physical keys that belong to the module but are ignored (scaled_fp8
  /// scale_input == 1.0 is dropped, as ComfyUI does).
  std::set<std::string> dropped;
  /// Options whose value has the wrong type, by key, with the message. Only
  /// formats that read the key reject them (ComfyUI ignores the others).
  std::map<std::string, std::string> optionErrors;
  std::vector<std::string> warnings;
};

/// Parses one comfy_quant JSON object for module `module`. `file` labels
/// errors. Throws Error naming the file, the module and the rule.
QuantConfig parseQuantConfig(std::string_view json, const std::string &module,
                             const std::string &file,
                             ConfigSource source = ConfigSource::Tensor);

/// One entry of an attention preference list.
struct AttentionEntry {
  std::string method;      ///< "comfy_kitchen_int8", "comfy_kitchen_sol", ...
  std::string optionsJson; ///< the whole entry object as JSON text
  bool known = false;      ///< a method ComfyUI knows
};

/// `<module>.comfy_attention.config`.
struct AttentionPreference {
  std::string module;  ///< attention module path (key minus the suffix)
  std::string rawJson; ///< preserved verbatim for round trips
  std::vector<AttentionEntry> entries;
};

/// Parses an attention preference JSON (object or array of objects).
/// Throws Error.
AttentionPreference parseAttentionPreference(std::string_view json,
                                             const std::string &module,
                                             const std::string &file,
                                             std::vector<std::string> &warnings);

/// All configuration of a checkpoint.
struct CheckpointConfig {
  std::map<std::string, QuantConfig> modules; ///< by module prefix
  std::vector<AttentionPreference> attention;
  /// Keys that are configuration, not weights (comfy_quant tensors, the
  /// scaled_fp8 marker, attention configs).
  std::set<std::string> configKeys;
  std::vector<std::string> warnings;
};

/// Decodes every configuration source of `ckpt`. Throws Error.
CheckpointConfig decodeCheckpointConfig(const Checkpoint &ckpt);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_QUANTCONFIG_H
