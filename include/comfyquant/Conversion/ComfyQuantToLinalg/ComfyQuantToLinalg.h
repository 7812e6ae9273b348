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

/// What the GEMM contraction of `qmatmul`/`qgemm` reads. Integer operands
/// are i8 either way; the choice concerns float formats.
enum class GemmOperands {
  /// Float operands decoded to exact f32 values (block scales applied)
  /// before the contraction: what the CPU micro-kernels consume.
  Decoded,
  /// Operands in the form a tensor core multiplies: FP8 (e4m3/e5m2) stays
  /// in its i8 storage, widened inside the contraction body
  /// (`extf(bitcast(i8 -> f8))`); MXFP8 also passes its E8M0 block scales
  /// (blocks of 32) to the contraction, which multiplies each product by
  /// `scale_a * scale_b`; NVFP4 (E2M1 x E4M3 block scale, a product of at
  /// most 6 significant bits) is decoded to exact f16. Everything else is
  /// decoded as for `Decoded`.
  Native,
};

/// How a rotated row-wise quantizer (`quantize ... rotation` with the
/// int8_row or int4_row scheme) is laid out.
enum class RotatedQuantize {
  /// Each step (widen, butterfly stages, amax, codes) over the whole
  /// [M, K] activation: one parallel op per step (GPU kernels).
  Whole,
  /// One row at a time in an scf.for, each step on a [1, K] slice: the
  /// f32 intermediates stay in L1 and no [M, K] f32 temporary exists (CPU).
  Rows,
};

/// Patterns lowering the element-wise computation ops (`rotate`,
/// `quantize`, `dequantize`, `unpack`, `unswizzle`, `lookup`, `epilogue`)
/// and moving storage casts through shape-only tensor ops.
void populateComfyQuantElementwiseToLinalgPatterns(
    RewritePatternSet &patterns,
    RotatedQuantize rotated = RotatedQuantize::Whole);

/// Patterns lowering `qmatmul` and `qgemm` to a `linalg.generic`
/// contraction whose operands are in the form `operands` says (plus the
/// `qgemm` epilogue).
void populateComfyQuantGemmToLinalgPatterns(RewritePatternSet &patterns,
                                            GemmOperands operands);

/// Both sets.
void populateComfyQuantToLinalgPatterns(
    RewritePatternSet &patterns, GemmOperands operands = GemmOperands::Decoded,
    RotatedQuantize rotated = RotatedQuantize::Whole);

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
