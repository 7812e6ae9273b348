//===- SignedNibbles.cpp - GEMM operands unpacked from signed int4 --------===//
//
// The unpack is recognised by what it computes, not how it is spelled: the
// value it yields may depend on the loaded byte and on the parity of the K
// index only, so folding its ops at every (byte, parity) pair decides it.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/SignedNibbles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::comfyquant::gpu_codegen;

namespace {

bool isIndexOfDim(Value v, unsigned dim) {
  auto index = v.getDefiningOp<linalg::IndexOp>();
  return index && index.getDim() == dim;
}

bool isConstant(Value v, int64_t c) {
  APInt value;
  return matchPattern(v, m_ConstantInt(&value)) && value.getSExtValue() == c;
}

/// Whether `o` is `k % 2` or `k & 1`, k the index of dim 1.
bool isParity(Operation *o) {
  if (isa<arith::RemUIOp, arith::RemSIOp>(o))
    return isIndexOfDim(o->getOperand(0), 1) && isConstant(o->getOperand(1), 2);
  if (isa<arith::AndIOp>(o))
    return (isIndexOfDim(o->getOperand(0), 1) &&
            isConstant(o->getOperand(1), 1)) ||
           (isIndexOfDim(o->getOperand(1), 1) &&
            isConstant(o->getOperand(0), 1));
  return false;
}

/// Whether `v` is `k / 2` or `k >> 1`, k the index of dim 1.
bool isHalfOfK(Value v) {
  Operation *o = v.getDefiningOp();
  return o && isa<arith::DivUIOp, arith::ShRUIOp>(o) &&
         isIndexOfDim(o->getOperand(0), 1) &&
         isConstant(o->getOperand(1), isa<arith::DivUIOp>(o) ? 2 : 1);
}

/// The ops of `body` that `v` is computed by, in `slice`; false where `v`
/// depends on the index of `banned` (-1: none), a block argument or a
/// load. `leaf` values, parity ops and values from outside the body end
/// the walk.
bool collectSlice(Block *body, Value v, Value leaf, int banned,
                  bool parityLeaves, llvm::SetVector<Operation *> &slice) {
  if (v == leaf)
    return true;
  Operation *o = v.getDefiningOp();
  if (!o)
    return false;
  // Values from outside the body: constants, or loop invariants of the
  // index computation.
  if (o->getBlock() != body)
    return true;
  if (slice.contains(o))
    return true;
  if (auto index = dyn_cast<linalg::IndexOp>(o))
    return static_cast<int>(index.getDim()) != banned;
  if (parityLeaves && isParity(o)) {
    slice.insert(o);
    return true;
  }
  if (o->getNumRegions() || isa<memref::LoadOp>(o))
    return false;
  for (Value in : o->getOperands())
    if (!collectSlice(body, in, leaf, banned, parityLeaves, slice))
      return false;
  slice.insert(o);
  return true;
}

/// The integer `slice` (body order) yields for `result` with the load's
/// value `byte` and every parity op `parity`; nothing when an op does not
/// fold.
std::optional<int64_t> evaluate(ArrayRef<Operation *> slice, Value load,
                                Value result, int64_t byte, int64_t parity) {
  llvm::DenseMap<Value, Attribute> known;
  Builder builder(load.getContext());
  known[load] = builder.getIntegerAttr(load.getType(), APInt(8, byte));
  for (Operation *o : slice) {
    if (isParity(o)) {
      known[o->getResult(0)] =
          builder.getIntegerAttr(o->getResult(0).getType(), parity);
      continue;
    }
    SmallVector<Attribute> operands;
    for (Value in : o->getOperands()) {
      Attribute attr = known.lookup(in);
      if (!attr)
        (void)matchPattern(in, m_Constant(&attr));
      operands.push_back(attr);
    }
    SmallVector<OpFoldResult> folded;
    if (failed(o->fold(operands, folded)) ||
        folded.size() != o->getNumResults())
      return std::nullopt;
    for (auto [r, f] : llvm::zip(o->getResults(), folded)) {
      Attribute attr = isa<Attribute>(f) ? cast<Attribute>(f)
                                         : known.lookup(cast<Value>(f));
      if (!isa_and_nonnull<IntegerAttr>(attr))
        return std::nullopt;
      known[r] = attr;
    }
  }
  auto value = dyn_cast_or_null<IntegerAttr>(known.lookup(result));
  if (!value)
    return std::nullopt;
  return value.getValue().getSExtValue();
}

} // namespace

std::optional<SignedNibbles>
mlir::comfyquant::gpu_codegen::matchSignedNibbles(linalg::GenericOp producer) {
  if (producer.getNumLoops() != 2 || producer.getNumDpsInputs() != 0 ||
      producer.getNumDpsInits() != 1 ||
      !getElementTypeOrSelf(producer.getDpsInitOperand(0)->get().getType())
           .isInteger(8))
    return std::nullopt;
  Block &body = producer.getRegion().front();
  memref::LoadOp load;
  for (Operation &o : body.without_terminator())
    if (auto l = dyn_cast<memref::LoadOp>(o)) {
      if (load)
        return std::nullopt;
      load = l;
    }
  if (!load || !load.getType().isInteger(8))
    return std::nullopt;
  // The byte: the last index is (independent of k) + k / 2, the others
  // independent of k, along a unit-stride dim.
  auto memType = load.getMemRefType();
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(memType.getStridesAndOffset(strides, offset)) ||
      strides.back() != 1)
    return std::nullopt;
  llvm::SetVector<Operation *> unused;
  ValueRange indices = load.getIndices();
  for (Value index : indices.drop_back())
    if (!collectSlice(&body, index, Value(), /*banned=*/1, false, unused))
      return std::nullopt;
  Value last = indices.back();
  if (!isHalfOfK(last)) {
    auto sum = last.getDefiningOp<arith::AddIOp>();
    if (!sum)
      return std::nullopt;
    Value lhs = sum.getLhs(), rhs = sum.getRhs();
    if (isHalfOfK(lhs))
      std::swap(lhs, rhs);
    if (!isHalfOfK(rhs) || !collectSlice(&body, lhs, Value(), 1, false, unused))
      return std::nullopt;
  }
  // The value: a function of the byte and k's parity alone, the signed
  // nibble at every point.
  Value yielded = body.getTerminator()->getOperand(0);
  llvm::SetVector<Operation *> slice;
  if (!collectSlice(&body, yielded, load.getResult(), /*banned=*/0, true,
                    slice))
    return std::nullopt;
  for (Operation *o : slice)
    if (!isParity(o))
      for (Value in : o->getOperands())
        if (isIndexOfDim(in, 1))
          return std::nullopt;
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered, [](Operation *x, Operation *y) {
    return x->isBeforeInBlock(y);
  });
  for (int64_t byte = 0; byte < 256; ++byte)
    for (int64_t parity = 0; parity < 2; ++parity) {
      std::optional<int64_t> got =
          evaluate(ordered, load.getResult(), yielded, byte, parity);
      int64_t nibble = parity ? byte >> 4 : byte & 15;
      if (!got || *got != (nibble >= 8 ? nibble - 16 : nibble))
        return std::nullopt;
    }
  return SignedNibbles{load};
}
