//===- Inspect.h - checkpoint inspection report -----------------*- C++ -*-===//
#ifndef COMFYQUANT_RUNTIME_INSPECT_H
#define COMFYQUANT_RUNTIME_INSPECT_H

#include "comfyquant/runtime/ModuleResolver.h"

#include <nlohmann/json.hpp>
#include <string>

namespace comfyquant::rt {

/// The inspection report as JSON: `checkpoint`, `modules` (name, kind,
/// format, out_features, in_features, experts, convrot_groupsize,
/// group_size, options, bytes, tensors), `totals` per format, `unquantized`,
/// `attention`, `warnings`.
nlohmann::ordered_json inspectJson(const ResolvedCheckpoint &ckpt);

/// The same report as aligned text for people.
std::string inspectText(const ResolvedCheckpoint &ckpt);

} // namespace comfyquant::rt

#endif
