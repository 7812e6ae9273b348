//===- Prologue.cpp - a GEMM operand's elementwise producer, per element --===//
//
// A weight operand is often a temporary that an elementwise op fills from
// the stored weight (nibbles unpacked, codebook values, unswizzled block
// scales) just before the GEMM. Evaluating that op where the GEMM reads the
// operand reads the stored weight instead: no kernel and no temporary for
// the decoded copy. These are the rules for when that is possible.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/Gemm.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

Value mlir::comfyquant::detail::baseBuffer(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

SmallVector<Value>
mlir::comfyquant::detail::producerReads(linalg::GenericOp producer) {
  SmallVector<Value> reads;
  for (Value in : producer.getDpsInputs())
    reads.push_back(baseBuffer(in));
  producer.getRegion().walk([&](memref::LoadOp load) {
    reads.push_back(baseBuffer(load.getMemRef()));
  });
  return reads;
}

linalg::GenericOp
mlir::comfyquant::detail::operandProducer(Value operand,
                                          linalg::GenericOp gemm) {
  auto alloc = operand.getDefiningOp<memref::AllocOp>();
  if (!alloc || !alloc.getType().hasStaticShape() ||
      alloc.getType().getRank() != 2)
    return {};
  linalg::GenericOp producer;
  for (Operation *user : operand.getUsers()) {
    if (user == gemm.getOperation())
      continue;
    auto g = dyn_cast<linalg::GenericOp>(user);
    if (!g || producer || g->getBlock() != gemm->getBlock() ||
        !g->isBeforeInBlock(gemm))
      return {};
    producer = g;
  }
  if (!producer || !producer.hasPureBufferSemantics() ||
      producer.getNumLoops() != 2 || producer.getNumParallelLoops() != 2 ||
      producer.getNumDpsInits() != 1 ||
      producer.getDpsInitOperand(0)->get() != operand ||
      !producer.getIndexingMapsArray().back().isIdentity() ||
      llvm::is_contained(producer.getDpsInputs(), operand))
    return {};
  // The destination is only written; inputs are read at loop dims and
  // constants; the body is pure scalar code, linalg.index and loads.
  Block &body = producer.getRegion().front();
  if (!body.getArgument(producer.getNumDpsInputs()).use_empty())
    return {};
  for (OpOperand *in : producer.getDpsInputOperands())
    if (!llvm::all_of(producer.getMatchingIndexingMap(in).getResults(),
                      [](AffineExpr e) {
                        return isa<AffineDimExpr, AffineConstantExpr>(e);
                      }))
      return {};
  for (Operation &o : body.without_terminator())
    if (o.getNumRegions() ||
        !(isPure(&o) || isa<linalg::IndexOp, memref::LoadOp>(o)))
      return {};
  // What the producer reads must hold the same values where the GEMM runs:
  // neither the GEMM nor anything in between may write it.
  SmallVector<Value> reads = producerReads(producer);
  for (Value init : gemm.getDpsInits())
    if (llvm::is_contained(reads, baseBuffer(init)))
      return {};
  for (Operation *o = producer->getNextNode(); o != gemm.getOperation();
       o = o->getNextNode()) {
    if (isMemoryEffectFree(o) || isa<memref::AllocOp, memref::LoadOp>(o))
      continue;
    auto written = dyn_cast<DestinationStyleOpInterface>(o);
    if (!written || o->getNumRegions() > 1)
      return {};
    for (Value init : written.getDpsInits())
      if (llvm::is_contained(reads, baseBuffer(init)))
        return {};
    // Any read-only op of its own region (a linalg body) is fine; anything
    // else with effects is not understood.
    bool plain = true;
    o->walk([&](Operation *inner) {
      if (inner != o && !isMemoryEffectFree(inner) &&
          !isa<memref::LoadOp>(inner))
        plain = false;
    });
    if (!plain)
      return {};
  }
  return producer;
}

Value mlir::comfyquant::detail::emitProducerAt(OpBuilder &b, Location loc,
                                               linalg::GenericOp producer,
                                               Value row, Value col,
                                               const IRMapping *seed) {
  return emitEpilogueAt(b, loc, producer, /*accOperand=*/~0u, Value(), row,
                        col, {}, seed);
}

SmallVector<Value> mlir::comfyquant::detail::producerLoadIndicesAt(
    OpBuilder &b, Location loc, memref::LoadOp load, Value row, Value col) {
  Block *body = load->getBlock();
  llvm::SetVector<Operation *> slice;
  std::function<void(Value)> collect = [&](Value v) {
    Operation *o = v.getDefiningOp();
    if (!o || o->getBlock() != body || slice.contains(o) ||
        isa<linalg::IndexOp>(o))
      return;
    for (Value in : o->getOperands())
      collect(in);
    slice.insert(o);
  };
  for (Value index : load.getIndices())
    collect(index);
  IRMapping map;
  for (Operation &o : *body)
    if (auto index = dyn_cast<linalg::IndexOp>(o))
      map.map(index.getResult(), index.getDim() == 0 ? row : col);
  // Operands before users: the slice is in walk order.
  for (Operation *o : slice)
    b.clone(*o, map);
  return llvm::map_to_vector(load.getIndices(), [&](Value index) {
    return map.lookupOrDefault(index);
  });
}

namespace {

/// `v` as x * A + c (or x * A | c for A a power of two, or x * A with
/// c = 0) with 0 <= c < A: (x, A, c). The columns these come from are
/// inside their operand, so x * A + c does not wrap.
std::optional<std::tuple<Value, int64_t, int64_t>> alignedColumn(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  APInt c(64, 0);
  auto mul = dyn_cast<arith::MulIOp>(def);
  if (isa<arith::AddIOp, arith::OrIOp>(def)) {
    if (!matchPattern(def->getOperand(1), m_ConstantInt(&c)))
      return std::nullopt;
    mul = def->getOperand(0).getDefiningOp<arith::MulIOp>();
  }
  APInt a;
  if (!mul || !matchPattern(mul.getRhs(), m_ConstantInt(&a)) ||
      a.getActiveBits() > 62 || c.getActiveBits() > 62 ||
      c.getZExtValue() >= a.getZExtValue() ||
      (isa<arith::OrIOp>(def) && !a.isPowerOf2()))
    return std::nullopt;
  return std::make_tuple(mul.getLhs(), static_cast<int64_t>(a.getZExtValue()),
                         static_cast<int64_t>(c.getZExtValue()));
}

/// (x, A, c, D) when `op` divides (or takes the remainder of) an aligned
/// column x * A + c by a positive constant D dividing A or a multiple of
/// A.
template <typename OpTy>
std::optional<std::tuple<Value, int64_t, int64_t, int64_t>>
alignedDivision(OpTy op) {
  auto column = alignedColumn(op.getLhs());
  APInt d;
  if (!column || !matchPattern(op.getRhs(), m_ConstantInt(&d)) ||
      d.isZero() || d.getActiveBits() > 62)
    return std::nullopt;
  auto [x, a, c] = *column;
  auto divisor = static_cast<int64_t>(d.getZExtValue());
  if (a % divisor && divisor % a)
    return std::nullopt;
  return std::make_tuple(x, a, c, divisor);
}

struct FoldAlignedDiv : OpRewritePattern<arith::DivUIOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::DivUIOp op,
                                PatternRewriter &rewriter) const override {
    auto division = alignedDivision(op);
    if (!division)
      return failure();
    auto [x, a, c, d] = *division;
    Location loc = op.getLoc();
    Type type = op.getType();
    auto constant = [&](int64_t v) {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getIntegerAttr(type, v));
    };
    if (d == a) {
      rewriter.replaceOp(op, x);
      return success();
    }
    if (d % a == 0) {
      // c < A < D: the quotient is x's alone.
      rewriter.replaceOpWithNewOp<arith::DivUIOp>(op, x, constant(d / a));
      return success();
    }
    Value scaled = arith::MulIOp::create(rewriter, loc, x, constant(a / d));
    rewriter.replaceOpWithNewOp<arith::AddIOp>(op, scaled, constant(c / d));
    return success();
  }
};

struct FoldAlignedRem : OpRewritePattern<arith::RemUIOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::RemUIOp op,
                                PatternRewriter &rewriter) const override {
    auto division = alignedDivision(op);
    if (!division)
      return failure();
    auto [x, a, c, d] = *division;
    Type type = op.getType();
    if (d % a == 0 && d != a) {
      // (x % (D / A)) * A + c.
      Location loc = op.getLoc();
      auto constant = [&](int64_t v) {
        return arith::ConstantOp::create(rewriter, loc,
                                         rewriter.getIntegerAttr(type, v));
      };
      Value rem = arith::RemUIOp::create(rewriter, loc, x, constant(d / a));
      Value scaled = arith::MulIOp::create(rewriter, loc, rem, constant(a));
      rewriter.replaceOpWithNewOp<arith::AddIOp>(op, scaled, constant(c));
      return success();
    }
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, rewriter.getIntegerAttr(type, c % d));
    return success();
  }
};

} // namespace

void mlir::comfyquant::detail::populateAlignedColumnFoldPatterns(
    RewritePatternSet &patterns) {
  patterns.add<FoldAlignedDiv, FoldAlignedRem>(patterns.getContext());
}

SmallVector<Value> mlir::comfyquant::detail::emitAlignedProducerChunk(
    OpBuilder &b, Location loc, linalg::GenericOp producer, Value row, Value x,
    int64_t align, int64_t count, const IRMapping *seed) {
  assert(count <= align && "a chunk inside one aligned span");
  Type type = x.getType();
  auto constant = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, v));
  };
  Value first = arith::MulIOp::create(b, loc, x, constant(align));
  SmallVector<Value> columns, elems;
  for (int64_t e = 0; e < count; ++e) {
    Value col =
        e ? arith::AddIOp::create(b, loc, first, constant(e)).getResult()
          : first;
    columns.push_back(col);
    elems.push_back(emitProducerAt(b, loc, producer, row, col, seed));
  }
  // The divisions in the columns' index arithmetic (the elements are of
  // the operand's element type, never among them).
  ForwardSliceOptions options;
  options.filter = [&](Operation *o) {
    return o->getNumResults() == 1 && o->getResult(0).getType() == type;
  };
  SetVector<Operation *> reached;
  for (Value col : columns)
    getForwardSlice(col, &reached, options);
  SmallVector<Operation *> divisions;
  for (Operation *o : reached)
    if (isa<arith::DivUIOp, arith::RemUIOp>(o))
      divisions.push_back(o);
  RewritePatternSet folds(b.getContext());
  populateAlignedColumnFoldPatterns(folds);
  // Only the divisions and what their folds create: a fold reaching the
  // elements' ops (a select on a folded parity) would replace an element.
  (void)applyOpPatternsGreedily(
      divisions, std::move(folds),
      GreedyRewriteConfig().setStrictness(
          GreedyRewriteStrictness::ExistingAndNewOps));
  return elems;
}
