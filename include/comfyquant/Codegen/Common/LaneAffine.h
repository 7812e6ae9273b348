//===- LaneAffine.h - lane-affine vector indices ----------------*- C++ -*-===//
#ifndef COMFYQUANT_CODEGEN_COMMON_LANEAFFINE_H
#define COMFYQUANT_CODEGEN_COMMON_LANEAFFINE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace mlir::comfyquant::detail {

/// Rewrites lane-affine gathers from 1-D tensors as loads (+ shuffle or
/// broadcast), and lane-affine remui/divui vectors as `broadcast + const`.
/// Runs on vectorized tensor code, before bufferization.
void foldLaneAffineIndices(func::FuncOp func);

/// The integer every lane of `v` holds, when known: a splat constant, or a
/// broadcast of a constant or of a static tensor.dim (the vectorizer
/// multiplies linearized indices by a row length that way).
std::optional<int64_t> splatInteger(Value v);

} // namespace mlir::comfyquant::detail

#endif // COMFYQUANT_CODEGEN_COMMON_LANEAFFINE_H
