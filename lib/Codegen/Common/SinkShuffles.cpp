//===- SinkShuffles.cpp - lane-replicating shuffles below elementwise ops -===//
//
// Lane-affine gathers of block scales become a load of one element per block
// and a shuffle that repeats each element over its block's lanes. The scale's
// decode that follows (an E4M3 or E8M0 byte to f32) then runs on every lane
// although each block has one value; moving the shuffle below the decode
// runs it on one lane per block and repeats the result instead.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/SinkShuffles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace {

/// Replication below this factor (a nibble pair's 2x) saves fewer lanes
/// than the wider result shuffle costs.
constexpr int64_t kMinReplication = 4;

/// The source of `s` if it is a 1-D shuffle reading only its first operand
/// and at least kMinReplication times wider than it.
Value replicatedSource(vector::ShuffleOp s) {
  VectorType src = s.getV1VectorType();
  if (src.getRank() != 1 || src.isScalable())
    return {};
  const int64_t narrow = src.getDimSize(0);
  if (s.getResultVectorType().getDimSize(0) < kMinReplication * narrow)
    return {};
  if (!llvm::all_of(s.getMask(),
                    [&](int64_t i) { return i >= 0 && i < narrow; }))
    return {};
  return s.getV1();
}

/// `c` as the narrow constant that `mask` replicates into it, if every lane
/// of `c` equals the lane of the narrow vector it is copied from.
Attribute narrowConstant(DenseElementsAttr c, ArrayRef<int64_t> mask,
                         VectorType narrowType) {
  if (c.isSplat())
    return DenseElementsAttr::get(narrowType, c.getSplatValue<Attribute>());
  SmallVector<Attribute> wide(c.getValues<Attribute>());
  SmallVector<Attribute> narrow(narrowType.getDimSize(0));
  for (auto [lane, from] : llvm::enumerate(mask)) {
    if (!narrow[from])
      narrow[from] = wide[lane];
    else if (narrow[from] != wide[lane])
      return {};
  }
  // Lanes no result lane reads take any value.
  for (Attribute &a : narrow)
    if (!a)
      a = wide.front();
  return DenseElementsAttr::get(narrowType, narrow);
}

/// An operand of an op below which the shuffle moves: the narrow source of
/// a shuffle by the same mask, or a narrowed constant.
struct NarrowOperand {
  Value source;
  TypedAttr constant;
};

/// Each operand of the elementwise `op` as it reads once the shuffle by
/// `mask` (onto `narrowLanes`) moves below it, or nothing if one is neither
/// a shuffle by `mask` nor a constant agreeing with it. `pending`, a value
/// about to become such a shuffle, counts as one.
std::optional<SmallVector<NarrowOperand>> narrowOperands(Operation *op,
                                                         ArrayRef<int64_t> mask,
                                                         int64_t narrowLanes,
                                                         Value pending = {}) {
  SmallVector<NarrowOperand> result;
  for (Value v : op->getOperands()) {
    auto type = dyn_cast<VectorType>(v.getType());
    if (!type || type.getRank() != 1 ||
        type.getDimSize(0) != static_cast<int64_t>(mask.size()))
      return std::nullopt;
    if (v == pending) {
      result.push_back({v, {}});
      continue;
    }
    if (auto s = v.getDefiningOp<vector::ShuffleOp>()) {
      Value src = replicatedSource(s);
      if (src && s.getMask() == mask &&
          s.getV1VectorType().getDimSize(0) == narrowLanes) {
        result.push_back({src, {}});
        continue;
      }
    }
    DenseElementsAttr c;
    if (!matchPattern(v, m_Constant(&c)))
      return std::nullopt;
    auto narrow = dyn_cast_or_null<TypedAttr>(narrowConstant(
        c, mask, VectorType::get({narrowLanes}, type.getElementType())));
    if (!narrow)
      return std::nullopt;
    result.push_back({{}, narrow});
  }
  return result;
}

/// A widening cast moved above the shuffle only pays when the shuffle can
/// keep going below its users; otherwise it just widens the shuffle (and
/// hides the narrow source's value range from range-based narrowing).
bool isWidening(Operation *op) {
  if (op->getNumOperands() != 1)
    return false;
  Type from = getElementTypeOrSelf(op->getOperand(0).getType());
  Type to = getElementTypeOrSelf(op->getResult(0).getType());
  return from.isIntOrFloat() && to.isIntOrFloat() &&
         to.getIntOrFloatBitWidth() > from.getIntOrFloatBitWidth();
}

bool isSinkable(Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>() && op->getNumResults() == 1 &&
         op->getNumRegions() == 0 && op->getNumOperands() > 0 && isPure(op);
}

struct SinkReplicatingShuffle
    : public OpTraitRewritePattern<OpTrait::Elementwise> {
  using OpTraitRewritePattern::OpTraitRewritePattern;

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rw) const override {
    if (!isSinkable(op))
      return failure();
    auto result = dyn_cast<VectorType>(op->getResult(0).getType());
    if (!result || result.getRank() != 1 || result.isScalable())
      return failure();
    ArrayRef<int64_t> mask;
    int64_t narrowLanes = 0;
    for (Value v : op->getOperands()) {
      auto s = v.getDefiningOp<vector::ShuffleOp>();
      if (s && replicatedSource(s)) {
        mask = s.getMask();
        narrowLanes = s.getV1VectorType().getDimSize(0);
        break;
      }
    }
    if (!narrowLanes)
      return failure();
    std::optional<SmallVector<NarrowOperand>> narrow =
        narrowOperands(op, mask, narrowLanes);
    if (!narrow)
      return failure();
    Value self = op->getResult(0);
    if (isWidening(op) && !llvm::all_of(op->getUsers(), [&](Operation *user) {
          return isSinkable(user) &&
                 narrowOperands(user, mask, narrowLanes, self);
        }))
      return failure();

    SmallVector<Value> operands;
    for (const NarrowOperand &o : *narrow)
      operands.push_back(o.source ? o.source
                                  : Value(arith::ConstantOp::create(
                                        rw, op->getLoc(), o.constant)));
    auto narrowResult = VectorType::get({narrowLanes}, result.getElementType());
    OperationState state(op->getLoc(), op->getName(), operands,
                         TypeRange{narrowResult}, op->getAttrs());
    Value small = rw.create(state)->getResult(0);
    rw.replaceOpWithNewOp<vector::ShuffleOp>(op, small, small, mask);
    return success();
  }
};

} // namespace

void mlir::comfyquant::populateSinkReplicatingShufflePatterns(
    RewritePatternSet &patterns) {
  patterns.add<SinkReplicatingShuffle>(patterns.getContext());
}
