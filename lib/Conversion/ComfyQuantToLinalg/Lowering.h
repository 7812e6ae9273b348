//===- Lowering.h - what the comfyquant -> linalg patterns share -*- C++ -*-===//
//
// Values whose element type has no arithmetic (f8*, f4*, ui8, i4) are
// carried in a storage type (signless integers, sub-byte values in an i8)
// and cross between lowered ops through unrealized casts that fold away.
// These helpers state that convention once for the element-wise patterns
// (ElementwiseToLinalg.cpp), the GEMM patterns (GemmToLinalg.cpp) and the
// pass (ComfyQuantToLinalg.cpp).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CONVERSION_COMFYQUANTTOLINALG_LOWERING_H
#define COMFYQUANT_CONVERSION_COMFYQUANTTOLINALG_LOWERING_H

#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::comfyquant::lowering {

/// `t` (a ranked tensor type) with its storage element type.
RankedTensorType storageType(Type t);
/// `v` in its storage type (through an unrealized cast when it differs).
Value toStorage(OpBuilder &b, Location loc, Value v);
/// A storage-typed `v` seen as `original`.
Value fromStorage(OpBuilder &b, Location loc, Value v, Type original);
/// The element type of a shaped value.
Type elementOf(Value v);
/// Whether `v` is a tensor of one element.
bool isOneElement(Value v);
/// The map of `loops` loop dimensions onto `dims`.
AffineMap mapOf(MLIRContext *ctx, unsigned loops, ArrayRef<int> dims);
/// `v` as type `t` (a tensor.cast where they differ).
Value castTo(PatternRewriter &rw, Location loc, Value v, Type t);

/// y = T((f32(acc)·row)·col + f32(bias)) (GemmToLinalg.cpp).
Value buildEpilogue(PatternRewriter &rw, Location loc, Value acc,
                    Value rowScale, Value colScale, Value bias,
                    Type resultElt);
/// comfyquant.epilogue's pattern (GemmToLinalg.cpp), which the element-wise
/// set registers: an epilogue left unfused is element-wise.
void populateEpilogueToLinalgPatterns(RewritePatternSet &patterns);

} // namespace mlir::comfyquant::lowering

#endif // COMFYQUANT_CONVERSION_COMFYQUANTTOLINALG_LOWERING_H
