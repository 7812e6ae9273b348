//===- LaneAffine.cpp - lane-affine vector indices ------------------------===//
#include "comfyquant/Codegen/Common/LaneAffine.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <numeric>

using namespace mlir;
using namespace mlir::comfyquant;

//===----------------------------------------------------------------------===//
// Gathers with lane-affine indices -> loads
//===----------------------------------------------------------------------===//
//
// The vectorizer turns `tensor.extract flat[row + k / 2]` (nibbles) or
// `flat[row + k / 16]` (block scales) into vector.gather, since the index is
// not `uniform + lane`. Within one tile k = k0 + lane with k0 a multiple of
// the lane count (the tile loop starts at 0 and steps by it), so such an
// index is `broadcast(u) + c` with c constant per lane: a contiguous load of
// max(c) - min(c) + 1 elements and a shuffle, or one scalar load and a
// broadcast when c is uniform. remui by a divisor of the known multiple of u
// becomes a constant (the nibble select then folds to a blend).

namespace {

/// `broadcast(u) + c`: u a scalar index (null: 0) that is a multiple of
/// `mult` (0: u is zero), c constant per lane.
struct LaneAffine {
  Value u;
  int64_t mult = 0;
  SmallVector<int64_t> c;
};

/// A known divisor of the scalar index `v` (0 when v is the constant 0).
int64_t knownMultiple(Value v) {
  if (std::optional<int64_t> k = getConstantIntValue(v))
    return *k < 0 ? 1 : *k;
  if (auto iv = dyn_cast<BlockArgument>(v))
    if (auto loop = dyn_cast<scf::ForOp>(iv.getOwner()->getParentOp()))
      if (iv == loop.getInductionVar()) {
        std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound());
        std::optional<int64_t> st = getConstantIntValue(loop.getStep());
        if (lb && st && *lb >= 0 && *st > 0)
          return std::gcd(*lb, *st);
      }
  if (auto add = v.getDefiningOp<arith::AddIOp>())
    return std::gcd(knownMultiple(add.getLhs()), knownMultiple(add.getRhs()));
  if (auto mul = v.getDefiningOp<arith::MulIOp>())
    return knownMultiple(mul.getLhs()) * knownMultiple(mul.getRhs());
  if (auto div = v.getDefiningOp<arith::DivUIOp>()) {
    // A multiple of m divided by a divisor d of m: a multiple of m / d.
    std::optional<int64_t> d = getConstantIntValue(div.getRhs());
    const int64_t m = knownMultiple(div.getLhs());
    if (d && *d > 0 && m % *d == 0)
      return m / *d;
    return 1;
  }
  if (auto rem = v.getDefiningOp<arith::RemUIOp>()) {
    // u - (u / d) * d: a multiple of whatever divides both u and d.
    std::optional<int64_t> d = getConstantIntValue(rem.getRhs());
    if (d && *d > 0)
      return std::gcd(knownMultiple(rem.getLhs()), *d);
  }
  return 1;
}

class LaneAffineBuilder {
public:
  LaneAffineBuilder(RewriterBase &rw, Location loc) : rw(rw), loc(loc) {}

  std::optional<LaneAffine> split(Value v, unsigned depth = 0) {
    auto type = dyn_cast<VectorType>(v.getType());
    if (!type || type.getRank() != 1 || type.isScalable() ||
        !type.getElementType().isIndex() || depth > 16)
      return std::nullopt;
    const int64_t n = type.getNumElements();
    if (v.getDefiningOp<vector::StepOp>()) {
      LaneAffine r;
      for (int64_t i = 0; i < n; ++i)
        r.c.push_back(i);
      return r;
    }
    DenseIntElementsAttr cst;
    if (matchPattern(v, m_Constant(&cst))) {
      LaneAffine r;
      for (const APInt &x : cst.getValues<APInt>())
        r.c.push_back(x.getSExtValue());
      return r;
    }
    if (auto bc = v.getDefiningOp<vector::BroadcastOp>()) {
      if (!bc.getSource().getType().isIndex())
        return std::nullopt;
      LaneAffine r;
      r.u = bc.getSource();
      r.mult = knownMultiple(r.u);
      r.c.assign(n, 0);
      return r;
    }
    Operation *op = v.getDefiningOp();
    if (!op || op->getNumOperands() != 2)
      return std::nullopt;
    std::optional<LaneAffine> a = split(op->getOperand(0), depth + 1);
    if (!a)
      return std::nullopt;
    if (isa<arith::AddIOp>(op)) {
      std::optional<LaneAffine> b = split(op->getOperand(1), depth + 1);
      if (!b)
        return std::nullopt;
      LaneAffine r;
      r.u = add(a->u, b->u);
      r.mult = std::gcd(a->mult, b->mult);
      for (int64_t i = 0; i < n; ++i)
        r.c.push_back(a->c[i] + b->c[i]);
      return r;
    }
    std::optional<int64_t> k = splat(op->getOperand(1));
    if (!k || *k <= 0)
      return std::nullopt;
    const int64_t d = *k;
    auto lanesIn = [&](int64_t lo, int64_t hi) {
      return llvm::all_of(a->c, [&](int64_t x) { return x >= lo && x < hi; });
    };
    if (isa<arith::MulIOp>(op)) {
      LaneAffine r;
      r.u = a->u ? scalar<arith::MulIOp>(a->u, d) : Value();
      r.mult = a->mult * d;
      for (int64_t x : a->c)
        r.c.push_back(x * d);
      return r;
    }
    if (isa<arith::DivUIOp>(op)) {
      LaneAffine r;
      if (a->mult % d == 0 && lanesIn(0, INT64_MAX)) {
        // (u + c) / d = u / d + c / d.
        r.u = a->u ? scalar<arith::DivUIOp>(a->u, d) : Value();
        r.mult = a->mult / d;
        for (int64_t x : a->c)
          r.c.push_back(x / d);
        return r;
      }
      if (a->mult > 0 && d % a->mult == 0 && lanesIn(0, a->mult)) {
        // u + c stays inside u's block of d: uniform u / d.
        r.u = scalar<arith::DivUIOp>(a->u, d);
        r.mult = 1;
        r.c.assign(n, 0);
        return r;
      }
      return std::nullopt;
    }
    if (isa<arith::RemUIOp>(op)) {
      LaneAffine r;
      if (a->mult % d == 0 && lanesIn(0, INT64_MAX)) {
        for (int64_t x : a->c) // u % d == 0.
          r.c.push_back(x % d);
        return r;
      }
      if (a->mult > 0 && d % a->mult == 0 && lanesIn(0, a->mult)) {
        // u % d is a multiple of u's block below d - mult: (u + c) % d =
        // u % d + c.
        r.u = scalar<arith::RemUIOp>(a->u, d);
        r.mult = a->mult;
        r.c = a->c;
        return r;
      }
      return std::nullopt;
    }
    return std::nullopt;
  }

  Value materialize(const LaneAffine &l, VectorType type) {
    Value c = arith::ConstantOp::create(
        rw, loc, type,
        DenseElementsAttr::get(type, ArrayRef<APInt>(llvm::map_to_vector(
                                         l.c, [](int64_t x) {
                                           return APInt(64, x, true);
                                         }))));
    if (!l.u)
      return c;
    Value u = vector::BroadcastOp::create(rw, loc, type, l.u);
    return arith::AddIOp::create(rw, loc, u, c);
  }

  Value add(Value a, Value b) {
    if (!a)
      return b;
    if (!b)
      return a;
    return arith::AddIOp::create(rw, loc, a, b);
  }
  Value index(int64_t x) { return arith::ConstantIndexOp::create(rw, loc, x); }

  /// A vector whose lanes all hold the same known integer: a splat
  /// constant, or a broadcast of a constant or of a static tensor.dim (the
  /// vectorizer multiplies linearized indices by the row length that way).
  static std::optional<int64_t> splatValue(Value v) { return splat(v); }

private:
  RewriterBase &rw;
  Location loc;

  static std::optional<int64_t> splat(Value v) {
    SplatElementsAttr s;
    if (matchPattern(v, m_Constant(&s)))
      return s.getSplatValue<APInt>().getSExtValue();
    auto bc = v.getDefiningOp<vector::BroadcastOp>();
    if (!bc)
      return std::nullopt;
    Value x = bc.getSource();
    if (std::optional<int64_t> k = getConstantIntValue(x))
      return k;
    if (auto dim = x.getDefiningOp<tensor::DimOp>()) {
      auto type = dyn_cast<RankedTensorType>(dim.getSource().getType());
      std::optional<int64_t> d = dim.getConstantIndex();
      if (type && d && *d >= 0 && *d < type.getRank() &&
          !type.isDynamicDim(*d))
        return type.getDimSize(*d);
    }
    return std::nullopt;
  }
  template <typename Op> Value scalar(Value u, int64_t k) {
    return Op::create(rw, loc, u, index(k));
  }
};

/// The lanes `base[lead..., offset + u + c[i]]` of a lane-affine read:
/// one scalar read and a broadcast when c is uniform, else one contiguous
/// read of max(c) - min(c) + 1 elements and a shuffle. Every lane's element
/// is read by the gather being replaced, so [min(c), max(c)] is in bounds.
///
/// A span inside one aligned window of n (the result's lanes) elements,
/// with u, the offset and the dimension multiples of n, is read as that
/// window: it starts at or before an element the gather reads, so it ends
/// within the dimension. The butterfly's reads of x[(k / 4s)·4s + c·s +
/// k mod s] for c = 0..3 (spans of 13 or 4 elements at four offsets) are
/// then one aligned load, shared, and four shuffles.
Value readLanes(RewriterBase &rw, Location loc, Value base,
                ArrayRef<Value> lead, Value offset, const LaneAffine &l,
                LaneAffineBuilder &lb, VectorType result) {
  const int64_t lo = *llvm::min_element(l.c), hi = *llvm::max_element(l.c);
  SmallVector<Value> at(lead);
  Value laneBase = lb.add(offset, l.u);
  if (lo == hi) {
    at.push_back(lb.add(laneBase, lb.index(lo)));
    Value e = tensor::ExtractOp::create(rw, loc, base, at);
    return vector::BroadcastOp::create(rw, loc, result, e);
  }
  const int64_t n = result.getNumElements();
  auto type = cast<RankedTensorType>(base.getType());
  const int64_t dim = type.getDimSize(type.getRank() - 1);
  const int64_t window = lo >= 0 ? lo / n * n : -1;
  const bool aligned = window >= 0 && hi < window + n && hi - lo + 1 < n &&
                       !ShapedType::isDynamic(dim) && dim % n == 0 &&
                       (l.mult == 0 || l.mult % n == 0) &&
                       (!offset || knownMultiple(offset) % n == 0);
  const int64_t first = aligned ? window : lo;
  at.push_back(lb.add(laneBase, lb.index(first)));
  auto wide =
      VectorType::get({aligned ? n : hi - lo + 1}, result.getElementType());
  Value pad =
      arith::ConstantOp::create(rw, loc, rw.getZeroAttr(result.getElementType()));
  SmallVector<bool> inBounds(1, true);
  Value ld = vector::TransferReadOp::create(rw, loc, wide, base, at, pad,
                                            inBounds);
  SmallVector<int64_t> mask;
  for (int64_t x : l.c)
    mask.push_back(x - first);
  return vector::ShuffleOp::create(rw, loc, ld, ld, mask);
}

} // namespace

std::optional<int64_t> mlir::comfyquant::detail::splatInteger(Value v) {
  return LaneAffineBuilder::splatValue(v);
}

void mlir::comfyquant::detail::foldLaneAffineIndices(func::FuncOp func) {
  IRRewriter rw(func.getContext());
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (isa<vector::GatherOp, arith::RemUIOp, arith::DivUIOp>(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    rw.setInsertionPoint(op);
    LaneAffineBuilder lb(rw, op->getLoc());
    if (!isa<vector::GatherOp>(op)) {
      std::optional<LaneAffine> l = lb.split(op->getResult(0));
      if (l)
        rw.replaceOp(op, lb.materialize(*l, cast<VectorType>(
                                                op->getResult(0).getType())));
      continue;
    }
    auto gather = cast<vector::GatherOp>(op);
    auto base = dyn_cast<RankedTensorType>(gather.getBase().getType());
    VectorType result = gather.getVectorType();
    if (!base || base.getRank() < 1 || result.getRank() != 1 ||
        !matchPattern(gather.getMask(), m_One()))
      continue;
    // A 2-D base read at row · D1 + column (how the vectorizer linearizes
    // a 2-D block-scale read) is read at [row, column] directly: indexing
    // a collapsed view would divide by D1 again for every element.
    Value flat = gather.getBase();
    Value offset = gather.getOffsets().back();
    Value row, columns = gather.getIndices();
    if (base.getRank() == 2 && !base.isDynamicDim(1) &&
        llvm::all_of(gather.getOffsets(),
                     [](Value v) { return isZeroInteger(v); }))
      if (auto add = columns.getDefiningOp<arith::AddIOp>())
        for (int side = 0; side < 2 && !row; ++side) {
          auto mul = add->getOperand(1 - side).getDefiningOp<arith::MulIOp>();
          if (!mul)
            continue;
          auto bc = mul.getLhs().getDefiningOp<vector::BroadcastOp>();
          std::optional<int64_t> d1 =
              LaneAffineBuilder::splatValue(mul.getRhs());
          if (bc && bc.getSource().getType().isIndex() && d1 &&
              *d1 == base.getDimSize(1)) {
            row = bc.getSource();
            columns = add->getOperand(side);
          }
        }
    if (row) {
      std::optional<LaneAffine> l = lb.split(columns);
      if (!l)
        continue;
      rw.replaceOp(op, readLanes(rw, op->getLoc(), flat, {row}, Value(), *l,
                                 lb, result));
      continue;
    }
    // Otherwise an n-D base addressed linearly from zero offsets is read
    // through its 1-D collapse.
    if (base.getRank() > 1) {
      if (!llvm::all_of(gather.getOffsets(),
                        [](Value v) { return isZeroInteger(v); }))
        continue;
      ReassociationIndices all;
      for (int64_t d = 0; d < base.getRank(); ++d)
        all.push_back(d);
      flat = tensor::CollapseShapeOp::create(
          rw, op->getLoc(), flat, ArrayRef<ReassociationIndices>{all});
    }
    std::optional<LaneAffine> l = lb.split(gather.getIndices());
    if (!l)
      continue;
    rw.replaceOp(op, readLanes(rw, op->getLoc(), flat, {}, offset, *l, lb,
                               result));
  }
}
