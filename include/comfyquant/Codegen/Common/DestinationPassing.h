//===- DestinationPassing.h - y as a destination argument -------*- C++ -*-===//
#ifndef COMFYQUANT_CODEGEN_COMMON_DESTINATIONPASSING_H
#define COMFYQUANT_CODEGEN_COMMON_DESTINATIONPASSING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::comfyquant::detail {

/// Gives `func` the destination-passing form every back end's entries share:
/// a function with one tensor result `y` gets a memref argument at position
/// 1 (marked `comfyquant.output`) that the result is materialized into, so
/// bufferization writes y in place, and returns nothing; every tensor
/// argument is marked read-only. A function without results keeps its
/// signature. Returns whether y was added; fails (with a diagnostic on
/// `func`) for any other result list.
FailureOr<bool> makeDestinationPassing(func::FuncOp func);

} // namespace mlir::comfyquant::detail

#endif // COMFYQUANT_CODEGEN_COMMON_DESTINATIONPASSING_H
