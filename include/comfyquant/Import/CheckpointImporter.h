//===- CheckpointImporter.h - checkpoint -> comfyquant IR -------*- C++ -*-===//
#ifndef COMFYQUANT_IMPORT_CHECKPOINTIMPORTER_H
#define COMFYQUANT_IMPORT_CHECKPOINTIMPORTER_H

#include "comfyquant/runtime/ModuleResolver.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <vector>

namespace mlir::comfyquant {

struct ImportOptions {
  /// Import only these modules (all when empty); unknown names are errors.
  std::vector<std::string> modules;
  /// List only the tensors the imported modules reference.
  bool onlyReferencedTensors = false;
};

/// Builds the IR of a resolved checkpoint: one `comfyquant.checkpoint` with
/// its tensors (name order), the attention preferences, then one module op
/// per quantized module (name order) — deterministic for a given file.
/// Returns null after emitting a diagnostic at `loc` on error.
OwningOpRef<ModuleOp>
importCheckpoint(MLIRContext *ctx, const ::comfyquant::rt::ResolvedCheckpoint &ckpt,
                 const ImportOptions &options = {});

} // namespace mlir::comfyquant

#endif
