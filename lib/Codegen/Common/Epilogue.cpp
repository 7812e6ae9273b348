//===- Epilogue.cpp - a GEMM's elementwise epilogue, one element at a time ===//
//
// Both GEMM lowerings (register-blocked on tensors, AMX tiles on buffers)
// compute the accumulator's elementwise consumer (scales, bias, cast) where
// they store each reduced accumulator, so no accumulator matrix is
// materialized. These are the rules for when that is possible and the code
// that evaluates the consumer at one (row, column).
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

std::optional<unsigned>
mlir::comfyquant::detail::epilogueAccOperand(linalg::GenericOp epi,
                                             Value acc) {
  if (epi.getNumLoops() != 2 || epi.getNumParallelLoops() != 2 ||
      epi.getNumDpsInits() != 1)
    return std::nullopt;
  // The destination is only written; every map is made of loop dims and
  // constants; the accumulator is read with the identity map.
  Block &body = epi.getRegion().front();
  if (!body.getArgument(epi.getNumDpsInputs()).use_empty())
    return std::nullopt;
  std::optional<unsigned> found;
  for (OpOperand &o : epi->getOpOperands()) {
    AffineMap map = epi.getMatchingIndexingMap(&o);
    if (!llvm::all_of(map.getResults(), [](AffineExpr e) {
          return isa<AffineDimExpr, AffineConstantExpr>(e);
        }))
      return std::nullopt;
    if (o.get() == acc) {
      if (found || !map.isIdentity() || epi.isDpsInit(&o))
        return std::nullopt;
      found = o.getOperandNumber();
    }
  }
  if (!found || !epi.getIndexingMapsArray().back().isIdentity())
    return std::nullopt;
  // Only reads of its operands and scalar arithmetic in the body.
  for (Operation &o : body.without_terminator())
    if (o.getNumRegions() || !isPure(&o))
      return std::nullopt;
  return found;
}

Value mlir::comfyquant::detail::emitEpilogueAt(OpBuilder &b, Location loc,
                                               linalg::GenericOp epi,
                                               unsigned accOperand, Value acc,
                                               Value row, Value col) {
  Block &body = epi.getRegion().front();
  IRMapping map;
  for (OpOperand *in : epi.getDpsInputOperands()) {
    BlockArgument arg = body.getArgument(in->getOperandNumber());
    if (in->getOperandNumber() == accOperand) {
      map.map(arg, acc);
      continue;
    }
    SmallVector<Value> at;
    for (AffineExpr e : epi.getMatchingIndexingMap(in).getResults()) {
      if (auto d = dyn_cast<AffineDimExpr>(e))
        at.push_back(d.getPosition() == 0 ? row : col);
      else
        at.push_back(arith::ConstantIndexOp::create(
            b, loc, cast<AffineConstantExpr>(e).getValue()));
    }
    Value v = in->get();
    if (isa<RankedTensorType>(v.getType()))
      v = tensor::ExtractOp::create(b, loc, v, at);
    else if (isa<MemRefType>(v.getType()))
      v = memref::LoadOp::create(b, loc, v, at);
    map.map(arg, v);
  }
  for (Operation &o : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(o)) {
      map.map(index.getResult(), index.getDim() == 0 ? row : col);
      continue;
    }
    b.clone(o, map);
  }
  return map.lookup(cast<linalg::YieldOp>(body.getTerminator()).getValues()[0]);
}
