//===- ModuleResolver.h - checkpoint -> validated modules -------*- C++ -*-===//
//
// Joins the decoded configuration (QuantConfig) with the tensors of a
// checkpoint and the format registry: every configured module gets its kind,
// format, logical shape, options and tensor views, and is checked against
// every rule of its format. Tensors that belong to no module are listed as
// unquantized.
//
// Module kind: ComfyUI takes it from the model, which a checkpoint does not
// state. The resolver uses (in order) an explicit override, MoE for a 3-D
// weight or a `num_experts` key, Embedding for a last name component that
// names an embedding table (embed_tokens, token_embedding, ...), else Linear.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_MODULERESOLVER_H
#define COMFYQUANT_RUNTIME_MODULERESOLVER_H

#include "comfyquant/runtime/FormatRegistry.h"
#include "comfyquant/runtime/QuantConfig.h"
#include "comfyquant/runtime/Safetensors.h"

#include <map>
#include <string>
#include <vector>

namespace comfyquant::rt {

struct ResolveOptions {
  /// Per-module kind overrides.
  std::map<std::string, ModuleKind> kinds;
  /// Per-module logical (N, K) overrides (padded NVFP4/MXFP8 storage).
  std::map<std::string, std::pair<int64_t, int64_t>> shapes;
};

struct ResolvedModule {
  ModuleDesc desc;
  QuantConfig config;
  /// Tensor views by role key ("weight", "weight_scale", ...).
  std::map<std::string, const TensorInfo *> tensors;
  std::vector<std::string> warnings;

  const TensorInfo *tensor(const std::string &role) const {
    auto it = tensors.find(role);
    return it == tensors.end() ? nullptr : it->second;
  }

  /// Whether each activation row is computed on its own (rows may be split
  /// across threads): all formats but NVFP4 quantizing x without an
  /// input_scale, whose global scale is the amax over every row.
  bool rowsIndependent() const {
    return !(desc.format == Format::NVFP4 && !desc.fullPrecision &&
             !tensor("input_scale"));
  }
};

struct ResolvedCheckpoint {
  const Checkpoint *checkpoint = nullptr;
  CheckpointConfig config;
  std::vector<ResolvedModule> modules; ///< sorted by name
  std::vector<const TensorInfo *> unquantized;
  std::vector<std::string> warnings;

  const ResolvedModule *find(const std::string &name) const;
};

/// Parses "NAME=linear|embedding|moe" into `opts.kinds`; returns an error
/// message or "".
std::string addKindOverride(ResolveOptions &opts, const std::string &spec);
/// Parses "NAME=NxK" into `opts.shapes`; returns an error message or "".
std::string addShapeOverride(ResolveOptions &opts, const std::string &spec);

/// True if the last component of `module` names an embedding table.
bool looksLikeEmbedding(const std::string &module);

/// Resolves and validates every module. Throws Error naming the file, the
/// module and the violated rule.
ResolvedCheckpoint resolveCheckpoint(const Checkpoint &ckpt,
                                     const ResolveOptions &opts = {});

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_MODULERESOLVER_H
