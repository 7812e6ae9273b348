//===- Passes.h - comfyquant passes -----------------------------*- C++ -*-===//
#ifndef COMFYQUANT_DIALECT_COMFYQUANT_TRANSFORMS_PASSES_H
#define COMFYQUANT_DIALECT_COMFYQUANT_TRANSFORMS_PASSES_H

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace mlir::comfyquant {

#define GEN_PASS_DECL
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h.inc"

/// Builds the function of one module op (`comfyquant.linear`,
/// `comfyquant.embedding` or `comfyquant.moe`) next to it, with activation
/// element type `activationType` (f32, bf16 or f16), and erases the module
/// op. The function has the module's symbol name and carries
/// `comfyquant.module`. Fails (with a diagnostic) on IR it cannot decompose.
FailureOr<func::FuncOp> decomposeModule(RewriterBase &rewriter,
                                        Operation *moduleOp,
                                        FloatType activationType,
                                        SymbolTableCollection &symbolTables);

/// quantize(rotate(x)) -> quantize x rotation <Gr>.
void populateFuseRotateQuantizePatterns(RewritePatternSet &patterns);
/// epilogue(qmatmul(a, b)) -> qgemm a, b.
void populateFuseGemmEpiloguePatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h.inc"

} // namespace mlir::comfyquant

#endif
