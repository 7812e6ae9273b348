//===- ComfyQuantToLinalg.h - comfyquant -> linalg --------------*- C++ -*-===//
//
// Lowering of the comfyquant computation ops to linalg/tensor/arith/math on
// tensors (see the pass description in Conversion/Passes.td).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CONVERSION_COMFYQUANTTOLINALG_H
#define COMFYQUANT_CONVERSION_COMFYQUANTTOLINALG_H

#include "mlir/IR/PatternMatch.h"
#include "mlir/Support/LLVM.h"

namespace mlir {
class Type;
namespace func {
class FuncOp;
} // namespace func
namespace comfyquant {

/// Patterns lowering `rotate`, `quantize`, `dequantize`, `qmatmul` and
/// `epilogue` to upstream dialects on tensors.
void populateComfyQuantToLinalgPatterns(RewritePatternSet &patterns);

/// Replaces every `comfyquant.weight` in `func` by a function argument of
/// the storage type (one per distinct tensor, appended in order of first
/// use) and records the weight list as the `comfyquant.weights` attribute
/// (array of {tensor, dtype, offset, shape, arg[, shard]}). The function's
/// `comfyquant.module` record moves to `comfyquant.lowered_module` (the
/// signature no longer is the module contract). Fails with a
/// diagnostic when a weight does not resolve to a `comfyquant.tensor`.
LogicalResult convertWeightsToArguments(func::FuncOp func);

/// The element type a value of element type `t` is stored as in lowered IR:
/// `t` for f16/bf16/f32/f64 and signless integers of 8 bits or more; a
/// signless integer of the same width for ui*/si* and the small float
/// formats (f8*, f6*, f4* and sub-byte integers use i8).
Type getStorageElementType(Type t);

} // namespace comfyquant
} // namespace mlir

#endif // COMFYQUANT_CONVERSION_COMFYQUANTTOLINALG_H
