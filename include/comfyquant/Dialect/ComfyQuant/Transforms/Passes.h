//===- Passes.h - comfyquant passes -----------------------------*- C++ -*-===//
#ifndef COMFYQUANT_DIALECT_COMFYQUANT_TRANSFORMS_PASSES_H
#define COMFYQUANT_DIALECT_COMFYQUANT_TRANSFORMS_PASSES_H

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::comfyquant {

#define GEN_PASS_DECL
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h.inc"

} // namespace mlir::comfyquant

#endif
