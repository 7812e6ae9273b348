//===- VectorizeReductions.cpp - vector folds of order-free row reductions ===//
//
// The activation quantizers start with a row (or block) amax: a
// linalg.generic reducing the innermost, contiguous dimension with maxnumf
// (NVFP4's dynamic global scale also reduces the rows: outer reduction
// loops fold each row into the same element).
// Left to linalg's loop lowering it is a scalar fold whose accumulator
// lives in memory. Max, min and bitwise folds give the same result in any
// order, so each row is folded `lanes` elements at a time into one vector
// accumulator and reduced once:
//
//   for i0.. (parallel dims)                       (tensor iter_args)
//     acc = broadcast(init[i0..])   (idempotent)  | identity (and/or/xor)
//     for k0 in [0, K - K % lanes) step lanes
//       acc = combine(acc, body(in[i0.., k0 : k0 + lanes]))
//     r = vector.reduction(acc) (+ init for the non-idempotent ones)
//     for k in tail: r = combine(r, body(in[i0.., k]))
//     init[i0..] = r
//===----------------------------------------------------------------------===//
#include "GemmConfig.h"

#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUVECTORIZEREDUCTIONS
#include "comfyquant/Codegen/CPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// A reduction whose fold may be regrouped: its vector kind and whether
/// folding the initial value more than once is harmless.
struct Combiner {
  vector::CombiningKind kind;
  bool idempotent;
};

std::optional<Combiner> orderFreeCombiner(Operation *op) {
  using K = vector::CombiningKind;
  if (isa<arith::MaxNumFOp>(op))
    return Combiner{K::MAXNUMF, true};
  if (isa<arith::MinNumFOp>(op))
    return Combiner{K::MINNUMF, true};
  if (isa<arith::MaximumFOp>(op))
    return Combiner{K::MAXIMUMF, true};
  if (isa<arith::MinimumFOp>(op))
    return Combiner{K::MINIMUMF, true};
  if (isa<arith::MaxSIOp>(op))
    return Combiner{K::MAXSI, true};
  if (isa<arith::MinSIOp>(op))
    return Combiner{K::MINSI, true};
  if (isa<arith::MaxUIOp>(op))
    return Combiner{K::MAXUI, true};
  if (isa<arith::MinUIOp>(op))
    return Combiner{K::MINUI, true};
  if (isa<arith::AndIOp>(op))
    return Combiner{K::AND, true};
  if (isa<arith::OrIOp>(op))
    return Combiner{K::OR, true};
  if (isa<arith::XOrIOp>(op))
    return Combiner{K::XOR, false};
  return std::nullopt;
}

/// The shape of a row reduction this pass rewrites.
struct RowReduction {
  linalg::GenericOp op;
  Operation *combine; // the fold: combine(out, value) or (value, out)
  Value value;        // the body's per-element value
  Combiner kind;
};

std::optional<RowReduction> matchRowReduction(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumResults() != 1 || op.getNumReductionLoops() < 1 ||
      op.getNumLoops() < 1 || op->hasAttr(ComfyQuantDialect::getGemmAttrName()))
    return std::nullopt;
  const unsigned loops = op.getNumLoops();
  SmallVector<utils::IteratorType> it = op.getIteratorTypesArray();
  if (it.back() != utils::IteratorType::reduction)
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (ShapedType::isDynamic(ranges.back()) || ranges.back() < 2)
    return std::nullopt;
  // Inputs read every loop in order (the row is contiguous); the init is
  // indexed by the parallel loops in order.
  for (OpOperand *in : op.getDpsInputOperands())
    if (!op.getMatchingIndexingMap(in).isIdentity() ||
        !isa<RankedTensorType>(in->get().getType()))
      return std::nullopt;
  // Outer reduction loops (a whole-tensor amax) fold more rows into the
  // same init element: the init reads the parallel loops alone, in order.
  AffineMap initMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!initMap.isProjectedPermutation())
    return std::nullopt;
  unsigned next = 0;
  for (unsigned i = 0; i + 1 < loops; ++i) {
    if (it[i] != utils::IteratorType::parallel)
      continue;
    if (next >= initMap.getNumResults() || initMap.getDimPosition(next) != i)
      return std::nullopt;
    ++next;
  }
  if (next != initMap.getNumResults())
    return std::nullopt;
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  BlockArgument out = body.getArguments().back();
  Operation *combine = yield.getValues()[0].getDefiningOp();
  if (!combine || combine->getNumOperands() != 2 || !out.hasOneUse() ||
      *out.getUsers().begin() != combine)
    return std::nullopt;
  std::optional<Combiner> kind = orderFreeCombiner(combine);
  if (!kind)
    return std::nullopt;
  Value value = combine->getOperand(0) == out ? combine->getOperand(1)
                                              : combine->getOperand(0);
  // Every other body op must widen to vectors lane by lane.
  for (Operation &o : body.without_terminator()) {
    if (&o == combine)
      continue;
    if (o.getNumRegions() || o.getNumResults() != 1 ||
        !OpTrait::hasElementwiseMappableTraits(&o) || isa<linalg::IndexOp>(o))
      return std::nullopt;
  }
  return RowReduction{op, combine, value, *kind};
}

/// The body's value for elements [k0, k0 + width) of row `ivs` (width 0:
/// one scalar element), with its ops cloned lane-wise.
Value emitBody(ImplicitLocOpBuilder &b, const RowReduction &r, ValueRange ivs,
               Value k0, int64_t width) {
  linalg::GenericOp op = r.op;
  Block &body = op.getRegion().front();
  IRMapping map;
  SmallVector<Value> idx(ivs.begin(), ivs.end());
  idx.push_back(k0);
  for (OpOperand *in : op.getDpsInputOperands()) {
    Value src = in->get();
    Type elt = cast<RankedTensorType>(src.getType()).getElementType();
    Value v;
    if (width == 0) {
      v = tensor::ExtractOp::create(b, src, idx);
    } else {
      Value pad = arith::ConstantOp::create(b, b.getZeroAttr(elt));
      v = vector::TransferReadOp::create(b, VectorType::get({width}, elt), src,
                                         idx, pad, ArrayRef<bool>{true});
    }
    map.map(body.getArgument(in->getOperandNumber()), v);
  }
  for (Operation &o : body.without_terminator()) {
    if (&o == r.combine)
      continue;
    if (width == 0) {
      b.clone(o, map);
      continue;
    }
    SmallVector<Value> operands;
    for (Value v : o.getOperands()) {
      Value m = map.lookupOrDefault(v);
      if (!isa<VectorType>(m.getType()))
        m = vector::BroadcastOp::create(
            b, VectorType::get({width}, m.getType()), m);
      operands.push_back(m);
    }
    OperationState state(o.getLoc(), o.getName());
    state.addOperands(operands);
    state.addAttributes(o.getAttrs());
    state.addTypes(VectorType::get({width}, o.getResult(0).getType()));
    map.map(o.getResult(0), b.create(state)->getResult(0));
  }
  Value v = map.lookupOrDefault(r.value);
  if (width && !isa<VectorType>(v.getType()))
    v = vector::BroadcastOp::create(b, VectorType::get({width}, v.getType()),
                                    v);
  return v;
}

/// combine(acc, v) with the combiner's own op (scalars or vectors).
Value emitCombine(ImplicitLocOpBuilder &b, const RowReduction &r, Value acc,
                  Value v) {
  OperationState state(r.combine->getLoc(), r.combine->getName());
  state.addOperands({acc, v});
  state.addAttributes(r.combine->getAttrs());
  state.addTypes(acc.getType());
  return b.create(state)->getResult(0);
}

/// The fold of a vector's lanes. Float max / min as a tree of halves
/// combined by the fold's own vector op: LLVM expands a float max
/// reduction without `nnan` lane by lane (a scalar max and NaN test per
/// lane, ~4% of an NVFP4 linear's cycles in its 16-element block amax); the
/// fold is order-free, so the tree gives the same value.
Value reduceVector(ImplicitLocOpBuilder &b, const RowReduction &r, Value v) {
  using K = vector::CombiningKind;
  const K kind = r.kind.kind;
  const int64_t n = cast<VectorType>(v.getType()).getNumElements();
  if ((kind != K::MAXNUMF && kind != K::MINNUMF && kind != K::MAXIMUMF &&
       kind != K::MINIMUMF) ||
      !llvm::isPowerOf2_64(n))
    return vector::ReductionOp::create(b, kind, v);
  for (int64_t w = n; w > 1; w /= 2) {
    Value lo = vector::ExtractStridedSliceOp::create(b, v, ArrayRef<int64_t>{0},
                                                     ArrayRef<int64_t>{w / 2},
                                                     ArrayRef<int64_t>{1});
    Value hi = vector::ExtractStridedSliceOp::create(
        b, v, ArrayRef<int64_t>{w / 2}, ArrayRef<int64_t>{w / 2},
        ArrayRef<int64_t>{1});
    v = emitCombine(b, r, lo, hi);
  }
  return vector::ExtractOp::create(b, v, 0);
}

/// The per-row fold of `r` at the parallel indices `ivs`.
Value emitRow(ImplicitLocOpBuilder &b, const RowReduction &r, ValueRange ivs,
              Value init, int64_t lanes) {
  linalg::GenericOp op = r.op;
  const int64_t K = op.getStaticLoopRanges().back();
  const int64_t width = std::min(lanes, K);
  const int64_t main = K - K % width;
  Type elt = init.getType();
  auto vt = VectorType::get({width}, elt);
  Value acc;
  if (r.kind.idempotent) {
    acc = vector::BroadcastOp::create(b, vt, init);
  } else {
    // xor: zero is its identity.
    acc = arith::ConstantOp::create(b, vt, b.getZeroAttr(vt));
  }
  Value lb = arith::ConstantIndexOp::create(b, 0);
  Value ub = arith::ConstantIndexOp::create(b, main);
  Value step = arith::ConstantIndexOp::create(b, width);
  auto loop = scf::ForOp::create(
      b, lb, ub, step, ValueRange{acc},
      [&](OpBuilder &nb, Location loc, Value k0, ValueRange iter) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value v = emitBody(ib, r, ivs, k0, width);
        scf::YieldOp::create(ib, emitCombine(ib, r, iter[0], v));
      });
  Value red = reduceVector(b, r, loop.getResult(0));
  if (!r.kind.idempotent)
    red = emitCombine(b, r, init, red);
  for (int64_t k = main; k < K; ++k) {
    Value v = emitBody(b, r, ivs, arith::ConstantIndexOp::create(b, k), 0);
    red = emitCombine(b, r, red, v);
  }
  return red;
}

LogicalResult rewrite(RewriterBase &rw, const RowReduction &r, int64_t lanes) {
  linalg::GenericOp op = r.op;
  rw.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rw);
  Value init = op.getDpsInits()[0];
  Value src = op.getDpsInputs().empty() ? Value() : op.getDpsInputs()[0];
  if (!src)
    return failure();
  const unsigned outer = op.getNumLoops() - 1;
  SmallVector<utils::IteratorType> it = op.getIteratorTypesArray();
  // A nest over the outer dimensions, the init tensor carried through; a
  // row's fold reads and writes the init at its parallel indices.
  std::function<Value(ImplicitLocOpBuilder &, unsigned, SmallVector<Value>,
                      Value)>
      nest = [&](ImplicitLocOpBuilder &ib, unsigned d, SmallVector<Value> ivs,
                 Value acc) -> Value {
    if (d == outer) {
      SmallVector<Value> at;
      for (unsigned i = 0; i < outer; ++i)
        if (it[i] == utils::IteratorType::parallel)
          at.push_back(ivs[i]);
      Value old = tensor::ExtractOp::create(ib, acc, at);
      Value red = emitRow(ib, r, ivs, old, lanes);
      return tensor::InsertOp::create(ib, red, acc, at);
    }
    Value lb = arith::ConstantIndexOp::create(ib, 0);
    Value ub = tensor::DimOp::create(ib, src, d);
    Value one = arith::ConstantIndexOp::create(ib, 1);
    auto loop = scf::ForOp::create(
        ib, lb, ub, one, ValueRange{acc},
        [&](OpBuilder &nb, Location loc, Value iv, ValueRange iter) {
          ImplicitLocOpBuilder nib(loc, nb);
          SmallVector<Value> next = ivs;
          next.push_back(iv);
          scf::YieldOp::create(nib, nest(nib, d + 1, next, iter[0]));
        });
    return loop.getResult(0);
  };
  Value result = nest(b, 0, {}, init);
  rw.replaceOp(op, result);
  return success();
}

struct VectorizeReductionsPass
    : mlir::comfyquant::impl::ComfyQuantCPUVectorizeReductionsBase<
          VectorizeReductionsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    int64_t width = mlir::comfyquant::detail::targetLanes(func, lanes);
    if (width < 2)
      return;
    SmallVector<RowReduction> found;
    func.walk([&](linalg::GenericOp op) {
      if (std::optional<RowReduction> r = matchRowReduction(op))
        found.push_back(*r);
    });
    IRRewriter rw(&getContext());
    for (RowReduction &r : found)
      if (failed(rewrite(rw, r, width))) {
        r.op.emitError("comfyquant-cpu-vectorize-reductions: could not "
                       "rewrite the reduction");
        return signalPassFailure();
      }
  }
};

} // namespace
