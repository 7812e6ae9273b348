//===- Lowering.cpp - what the comfyquant -> linalg patterns share --------===//
#include "Lowering.h"

#include "Emitter.h"
#include "comfyquant/Conversion/Passes.h"

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/runtime/FormatRegistry.h"
#include "comfyquant/runtime/Numerics.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::comfyquant;

Type mlir::comfyquant::getStorageElementType(Type t) {
  if (t.isF32() || t.isF16() || t.isBF16() || t.isF64())
    return t;
  unsigned width = t.getIntOrFloatBitWidth();
  if (t.isSignlessInteger() && width >= 8)
    return t;
  return IntegerType::get(t.getContext(), std::max(8u, width));
}

namespace mlir::comfyquant::lowering {

RankedTensorType storageType(Type t) {
  auto tt = cast<RankedTensorType>(t);
  return tt.clone(getStorageElementType(tt.getElementType()));
}

/// `v` in its storage type: looks through the cast a lowered producer left.
Value toStorage(OpBuilder &b, Location loc, Value v) {
  RankedTensorType st = storageType(v.getType());
  if (st == v.getType())
    return v;
  if (auto cast = v.getDefiningOp<UnrealizedConversionCastOp>())
    if (cast->getNumOperands() == 1 && cast.getOperand(0).getType() == st)
      return cast.getOperand(0);
  return UnrealizedConversionCastOp::create(b, loc, TypeRange{st}, v)
      .getResult(0);
}

/// A storage-typed value as a value of the op's original result type.
Value fromStorage(OpBuilder &b, Location loc, Value v, Type original) {
  if (v.getType() == original)
    return v;
  return UnrealizedConversionCastOp::create(b, loc, TypeRange{original}, v)
      .getResult(0);
}

Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

bool isOneElement(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.hasStaticShape() && t.getNumElements() == 1;
}

/// Maps from the iteration space of `loops` dims to dims `dims` (-1: the
/// constant 0).
AffineMap mapOf(MLIRContext *ctx, unsigned loops, ArrayRef<int> dims) {
  SmallVector<AffineExpr> exprs;
  for (int d : dims)
    exprs.push_back(d < 0 ? getAffineConstantExpr(0, ctx)
                          : getAffineDimExpr(d, ctx));
  return AffineMap::get(loops, 0, exprs, ctx);
}

Value castTo(PatternRewriter &rw, Location loc, Value v, Type t) {
  return v.getType() == t ? v : tensor::CastOp::create(rw, loc, t, v);
}

} // namespace mlir::comfyquant::lowering
