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
#include "mlir/Dialect/Vector/IR/VectorOps.h"
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

/// The indices at which `epi` reads operand `in` for the element (row, col).
static SmallVector<Value> operandIndices(OpBuilder &b, Location loc,
                                         linalg::GenericOp epi, OpOperand *in,
                                         Value row, Value col) {
  SmallVector<Value> at;
  for (AffineExpr e : epi.getMatchingIndexingMap(in).getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e))
      at.push_back(d.getPosition() == 0 ? row : col);
    else
      at.push_back(arith::ConstantIndexOp::create(
          b, loc, cast<AffineConstantExpr>(e).getValue()));
  }
  return at;
}

Value mlir::comfyquant::detail::emitEpilogueAt(OpBuilder &b, Location loc,
                                               linalg::GenericOp epi,
                                               unsigned accOperand, Value acc,
                                               Value row, Value col,
                                               llvm::function_ref<Value(OpOperand &)> readInput,
                                               const IRMapping *seed) {
  Block &body = epi.getRegion().front();
  IRMapping map;
  // Values the body reads stand for others (a staged copy of a table).
  if (seed)
    for (auto [from, to] : seed->getValueMap())
      map.map(from, to);
  for (OpOperand *in : epi.getDpsInputOperands()) {
    BlockArgument arg = body.getArgument(in->getOperandNumber());
    if (in->getOperandNumber() == accOperand) {
      map.map(arg, acc);
      continue;
    }
    if (Value given = readInput ? readInput(*in) : Value()) {
      map.map(arg, given);
      continue;
    }
    SmallVector<Value> at = operandIndices(b, loc, epi, in, row, col);
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
    // An op whose results are seeded (a load done once for several
    // elements) is not emitted again.
    if (o.getNumResults() && llvm::all_of(o.getResults(), [&](Value r) {
          return map.contains(r);
        }))
      continue;
    b.clone(o, map);
  }
  return map.lookup(cast<linalg::YieldOp>(body.getTerminator()).getValues()[0]);
}

Value mlir::comfyquant::detail::emitEpilogueVectorAt(OpBuilder &b, Location loc,
                                                     linalg::GenericOp epi,
                                                     unsigned accOperand,
                                                     Value acc, Value row,
                                                     Value col) {
  auto accType = cast<VectorType>(acc.getType());
  const int64_t lanes = accType.getNumElements();
  Block &body = epi.getRegion().front();
  // The position of the column dim in an operand's indices when the
  // operand is contiguous along it (every later index a constant 0 into a
  // dim of size 1, e.g. a [N, 1] scale); -1 if the columns do not index it;
  // nullopt if they do but not contiguously.
  auto columnPosition = [&](OpOperand *in) -> std::optional<int64_t> {
    ArrayRef<AffineExpr> exprs = epi.getMatchingIndexingMap(in).getResults();
    // A tensor, or a memref whose elements lie in row-major order.
    auto type = dyn_cast<ShapedType>(in->get().getType());
    if (auto mem = dyn_cast<MemRefType>(in->get().getType()))
      if (!mem.getLayout().isIdentity())
        type = nullptr;
    for (auto [i, e] : llvm::enumerate(exprs)) {
      if (!e.isFunctionOfDim(1))
        continue;
      if (!type || !isa<AffineDimExpr>(e))
        return std::nullopt;
      for (size_t j = i + 1; j < exprs.size(); ++j) {
        auto cst = dyn_cast<AffineConstantExpr>(exprs[j]);
        if (!cst || cst.getValue() != 0 || type.getDimSize(j) != 1)
          return std::nullopt;
      }
      return int64_t(i);
    }
    return int64_t(-1);
  };
  // Checked first, so a refusal leaves no IR behind.
  for (OpOperand *in : epi.getDpsInputOperands())
    if (in->getOperandNumber() != accOperand && !columnPosition(in))
      return Value();
  for (Operation &o : body.without_terminator())
    if (!isa<linalg::IndexOp>(o) && o.getNumOperands() &&
        !OpTrait::hasElementwiseMappableTraits(&o))
      return Value();

  auto vectorOf = [&](Type t) { return VectorType::get({lanes}, t); };
  IRMapping map;
  for (OpOperand *in : epi.getDpsInputOperands()) {
    BlockArgument arg = body.getArgument(in->getOperandNumber());
    if (in->getOperandNumber() == accOperand) {
      map.map(arg, acc);
      continue;
    }
    const int64_t colAt = *columnPosition(in);
    SmallVector<Value> at = operandIndices(b, loc, epi, in, row, col);
    Value v = in->get();
    if (colAt >= 0) {
      // Unit dims after the columns folded into them: a plain vector read.
      auto type = cast<ShapedType>(v.getType());
      if (colAt + 1 < type.getRank()) {
        SmallVector<ReassociationIndices> groups;
        for (int64_t i = 0; i < colAt; ++i)
          groups.push_back({i});
        groups.emplace_back();
        for (int64_t i = colAt; i < type.getRank(); ++i)
          groups.back().push_back(i);
        if (isa<MemRefType>(type))
          v = memref::CollapseShapeOp::create(b, loc, v, groups);
        else
          v = tensor::CollapseShapeOp::create(b, loc, v, groups);
        at.resize(colAt + 1);
      }
      Type elt = arg.getType();
      Value pad = arith::ConstantOp::create(b, loc, b.getZeroAttr(elt));
      v = vector::TransferReadOp::create(b, loc, vectorOf(elt), v, at, pad,
                                         ArrayRef<bool>{true});
    } else if (isa<RankedTensorType>(v.getType())) {
      v = tensor::ExtractOp::create(b, loc, v, at);
    } else if (isa<MemRefType>(v.getType())) {
      v = memref::LoadOp::create(b, loc, v, at);
    }
    map.map(arg, v);
  }
  auto asVector = [&](Value v) -> Value {
    if (isa<VectorType>(v.getType()))
      return v;
    return vector::BroadcastOp::create(b, loc, vectorOf(v.getType()), v);
  };
  for (Operation &o : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(o)) {
      Value v = row;
      if (index.getDim() == 1) {
        Value step = vector::StepOp::create(b, loc, vectorOf(b.getIndexType()));
        v = arith::AddIOp::create(b, loc, asVector(col), step);
      }
      map.map(index.getResult(), v);
      continue;
    }
    // Ops on values the same for every column stay scalar.
    if (llvm::none_of(o.getOperands(), [&](Value v) {
          return isa<VectorType>(map.lookupOrDefault(v).getType());
        })) {
      b.clone(o, map);
      continue;
    }
    OperationState state(loc, o.getName());
    for (Value v : o.getOperands())
      state.addOperands(asVector(map.lookupOrDefault(v)));
    for (Type t : o.getResultTypes())
      state.addTypes(vectorOf(t));
    state.addAttributes(o.getAttrs());
    Operation *n = b.create(state);
    map.map(o.getResults(), n->getResults());
  }
  return asVector(map.lookupOrDefault(
      cast<linalg::YieldOp>(body.getTerminator()).getValues()[0]));
}
