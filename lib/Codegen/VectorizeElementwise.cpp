//===- VectorizeElementwise.cpp - vector tiles of elementwise generics ----===//
//
// The GEMM micro-kernels are vectorized by comfyquant-cpu-vectorize-gemm;
// everything around them (activation quantization, weight decoders run per
// N tile, epilogues) is elementwise and would otherwise lower to scalar
// loops. Each such op is tiled to [1, ..., 1, lanes] and handed to the
// upstream linalg vectorizer.
//===----------------------------------------------------------------------===//
#include "Gemm.h"

#include "comfyquant/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/TilingInterface.h"

#include <numeric>

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUVECTORIZEELEMENTWISE
#include "comfyquant/Codegen/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// The lane count recorded by comfyquant-cpu-select-strategy (f32 lanes of
/// the variant's vector registers).
int64_t strategyLanes(func::FuncOp func) {
  auto s = func->getAttrOfType<DictionaryAttr>("comfyquant.strategy");
  if (!s)
    return 0;
  auto bits = s.getAs<IntegerAttr>("vector_bits");
  return bits ? bits.getInt() / 32 : 0;
}

/// Records in the function's strategy which path the elementwise ops took:
/// `elementwise = "vector"`, or `"vector+scalar"` when some tiles (short
/// remainders, ops the vectorizer rejects) stay scalar loops.
void recordElementwisePath(func::FuncOp func, int64_t scalarTiles) {
  auto s = func->getAttrOfType<DictionaryAttr>("comfyquant.strategy");
  if (!s)
    return;
  NamedAttrList attrs(s);
  attrs.set("elementwise",
            StringAttr::get(func.getContext(),
                            scalarTiles ? "vector+scalar" : "vector"));
  func->setAttr("comfyquant.strategy", attrs.getDictionary(func.getContext()));
}

/// An AMX GEMM's elementwise consumer stays a linalg.generic: the AMX pass
/// computes it in the tile write-back after bufferization.
bool consumesAmxGemm(linalg::GenericOp op) {
  for (Value in : op.getDpsInputs())
    if (auto g = in.getDefiningOp<linalg::GenericOp>())
      if (std::optional<comfyquant::detail::GemmConfig> c =
              comfyquant::detail::readGemmConfig(g))
        if (StringRef(c->ukernel).starts_with("i8-amx"))
          return true;
  return false;
}

bool isCandidate(linalg::GenericOp op) {
  if (consumesAmxGemm(op))
    return false;
  if (op->hasAttr("comfyquant.gemm") || !op.hasPureTensorSemantics() ||
      op.getNumLoops() == 0 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return false;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  return !ShapedType::isDynamic(ranges.back()) && ranges.back() >= 2;
}

/// Tile sizes [1, ..., 1, inner] (inner 0: the whole innermost extent).
SmallVector<OpFoldResult> tileSizes(Builder &b, unsigned loops, int64_t inner) {
  SmallVector<OpFoldResult> sizes(loops - 1, b.getIndexAttr(1));
  sizes.push_back(b.getIndexAttr(inner));
  return sizes;
}

/// Whether the vectorizer accepts a [1, ..., 1, width] tile of `op`: built
/// once on a scratch tile, so a rejected op is left untiled.
bool acceptsTile(RewriterBase &rw, linalg::GenericOp op, int64_t width) {
  OpBuilder::InsertionGuard g(rw);
  rw.setInsertionPoint(op);
  unsigned loops = op.getNumLoops();
  SmallVector<OpFoldResult> offsets(loops, rw.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes(loops, rw.getIndexAttr(1));
  sizes.back() = rw.getIndexAttr(width);
  FailureOr<TilingResult> tile =
      cast<TilingInterface>(op.getOperation())
          .getTiledImplementation(rw, offsets, sizes);
  if (failed(tile) || tile->tiledOps.size() != 1)
    return false;
  SmallVector<int64_t> vectorSizes(loops, 1);
  vectorSizes.back() = width;
  bool ok = succeeded(linalg::vectorizeOpPrecondition(
      tile->tiledOps.front(), vectorSizes, {}, /*vectorizeNDExtract=*/true));
  // Erase the scratch tile and the slices it was built from.
  SmallVector<Operation *> scratch(tile->generatedSlices.begin(),
                                   tile->generatedSlices.end());
  for (Operation *t : llvm::reverse(tile->tiledOps))
    rw.eraseOp(t);
  for (Operation *s : llvm::reverse(scratch))
    if (s->use_empty())
      rw.eraseOp(s);
  return ok;
}

/// Tiles `op` to [1, ..., 1, inner] and vectorizes every tile. A tile the
/// vectorizer rejects (e.g. a one-element remainder, which has no loop left
/// once unit dimensions are dropped) stays a scalar generic, lowered to loops
/// with the rest of linalg; `scalarTiles` counts them.
LogicalResult tileAndVectorize(RewriterBase &rw, TilingInterface op,
                               int64_t inner, int64_t width,
                               int64_t &scalarTiles) {
  auto linalgOp = cast<linalg::LinalgOp>(op.getOperation());
  unsigned loops = linalgOp.getNumLoops();
  scf::SCFTilingOptions options;
  options.setTileSizes(tileSizes(rw, loops, inner));
  rw.setInsertionPoint(op);
  FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(rw, op, options);
  if (failed(tiled))
    return failure();
  rw.replaceOp(op, tiled->replacements);
  for (Operation *t : tiled->tiledOps) {
    if (width < 2) {
      ++scalarTiles;
      continue;
    }
    // Drop the unit loops first: the tile becomes a 1-D generic (its
    // linalg.index values of outer loops are the tile offsets), vectorized
    // to plain vector<width x T>.
    rw.setInsertionPoint(t);
    SmallVector<int64_t> vectorSizes(loops, 1);
    vectorSizes.back() = width;
    if (auto generic = dyn_cast<linalg::GenericOp>(t)) {
      FailureOr<linalg::DropUnitDimsResult> dropped =
          linalg::dropUnitDims(rw, generic, linalg::ControlDropUnitDims());
      if (succeeded(dropped)) {
        rw.replaceOp(generic, dropped->replacements);
        t = dropped->resultOp.getOperation();
        vectorSizes.assign(
            cast<linalg::LinalgOp>(t).getNumLoops(), 1);
        if (vectorSizes.empty()) {
          ++scalarTiles;
          continue;
        }
        vectorSizes.back() = width;
      }
    }
    rw.setInsertionPoint(t);
    if (failed(linalg::vectorizeOpPrecondition(t, vectorSizes, {},
                                               /*vectorizeNDExtract=*/true))) {
      ++scalarTiles;
      continue;
    }
    FailureOr<linalg::VectorizationResult> v = linalg::vectorize(
        rw, t, vectorSizes, SmallVector<bool>(vectorSizes.size(), false),
        /*vectorizeNDExtract=*/true);
    if (failed(v)) {
      ++scalarTiles;
      continue;
    }
    if (t->getNumResults())
      rw.replaceOp(t, v->replacements);
    else
      rw.eraseOp(t);
  }
  return success();
}

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
Value readLanes(RewriterBase &rw, Location loc, Value base,
                ArrayRef<Value> lead, Value offset, const LaneAffine &l,
                LaneAffineBuilder &lb, VectorType result) {
  const int64_t lo = *llvm::min_element(l.c), hi = *llvm::max_element(l.c);
  SmallVector<Value> at(lead);
  Value laneBase = lb.add(offset, l.u);
  at.push_back(lb.add(laneBase, lb.index(lo)));
  if (lo == hi) {
    Value e = tensor::ExtractOp::create(rw, loc, base, at);
    return vector::BroadcastOp::create(rw, loc, result, e);
  }
  auto wide = VectorType::get({hi - lo + 1}, result.getElementType());
  Value pad =
      arith::ConstantOp::create(rw, loc, rw.getZeroAttr(result.getElementType()));
  SmallVector<bool> inBounds(1, true);
  Value ld = vector::TransferReadOp::create(rw, loc, wide, base, at, pad,
                                            inBounds);
  SmallVector<int64_t> mask;
  for (int64_t x : l.c)
    mask.push_back(x - lo);
  return vector::ShuffleOp::create(rw, loc, ld, ld, mask);
}

/// Rewrites lane-affine gathers from 1-D tensors as loads (+ shuffle or
/// broadcast), and lane-affine remui/divui vectors as `broadcast + const`.
void foldLaneAffineIndices(func::FuncOp func) {
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

//===----------------------------------------------------------------------===//
// Small-table lookups -> register permutes
//===----------------------------------------------------------------------===//
//
// A gather of f32 from a table of at most 16 entries indexed by data (the
// W4A8 codebook level of each nibble) is two vpermps and a blend on AVX2
// (the table's halves in two registers, bit 3 of the index picks one), one
// vpermps on AVX-512. A vpgatherdd costs far more per lane.

void lowerTableLookups(func::FuncOp func, int64_t lanes) {
  if (lanes != 8 && lanes != 16)
    return;
  IRRewriter rw(func.getContext());
  SmallVector<vector::GatherOp> gathers;
  func.walk([&](vector::GatherOp g) { gathers.push_back(g); });
  for (vector::GatherOp g : gathers) {
    auto table = dyn_cast<RankedTensorType>(g.getBase().getType());
    VectorType result = g.getVectorType();
    auto cast = g.getIndices().getDefiningOp<arith::IndexCastOp>();
    if (!table || table.getRank() != 1 || !table.hasStaticShape() ||
        table.getDimSize(0) > 16 || !table.getElementType().isF32() ||
        result.getRank() != 1 || result.getNumElements() % lanes || !cast ||
        !matchPattern(g.getMask(), m_One()) ||
        !isZeroInteger(g.getOffsets()[0]))
      continue;
    auto idxType = dyn_cast<VectorType>(cast.getIn().getType());
    if (!idxType || !idxType.getElementType().isInteger(32))
      continue;
    // Indices of a gather are in bounds, so < 16 here; table entries past
    // its size are padding that no lane selects.
    rw.setInsertionPoint(g);
    Location loc = g.getLoc();
    auto f32s = VectorType::get({lanes}, rw.getF32Type());
    auto i32s = VectorType::get({lanes}, rw.getI32Type());
    Value pad = arith::ConstantOp::create(rw, loc, rw.getF32FloatAttr(0.0f));
    auto half = [&](int64_t at) -> Value {
      bool inBounds = at + lanes <= table.getDimSize(0);
      return vector::TransferReadOp::create(
          rw, loc, f32s, g.getBase(),
          ValueRange{arith::ConstantIndexOp::create(rw, loc, at)}, pad,
          ArrayRef<bool>{inBounds});
    };
    Value lo = half(0), hi = lanes == 8 ? half(8) : Value();
    Value eight = arith::ConstantOp::create(
        rw, loc, i32s, DenseElementsAttr::get(i32s, rw.getI32IntegerAttr(8)));
    Value zero = arith::ConstantOp::create(rw, loc, i32s, rw.getZeroAttr(i32s));
    // One register of lanes at a time (a kv-vector of a GEMM step may span
    // several).
    Value r = arith::ConstantOp::create(rw, loc, result,
                                        rw.getZeroAttr(result));
    for (int64_t at = 0; at < result.getNumElements(); at += lanes) {
      Value idx = cast.getIn();
      if (result.getNumElements() != lanes)
        idx = vector::ExtractStridedSliceOp::create(
            rw, loc, idx, ArrayRef<int64_t>{at}, ArrayRef<int64_t>{lanes},
            ArrayRef<int64_t>{1});
      Value part;
      if (lanes == 16) {
        part = mlir::comfyquant::detail::intrinsicPlaceholder(
            rw, loc, "llvm.x86.avx512.permvar.sf.512", f32s,
            ValueRange{lo, idx});
      } else {
        Value pl = mlir::comfyquant::detail::intrinsicPlaceholder(
            rw, loc, "llvm.x86.avx2.permps", f32s, ValueRange{lo, idx});
        Value ph = mlir::comfyquant::detail::intrinsicPlaceholder(
            rw, loc, "llvm.x86.avx2.permps", f32s, ValueRange{hi, idx});
        Value upper = arith::CmpIOp::create(
            rw, loc, arith::CmpIPredicate::ne,
            arith::AndIOp::create(rw, loc, idx, eight), zero);
        part = arith::SelectOp::create(rw, loc, upper, ph, pl);
      }
      r = result.getNumElements() == lanes
              ? part
              : Value(vector::InsertStridedSliceOp::create(
                    rw, loc, part, r, ArrayRef<int64_t>{at},
                    ArrayRef<int64_t>{1}));
    }
    rw.replaceOp(g, r);
  }
}

/// A read of a whole tensor just written whole (through a unit-dim
/// expand_shape, as dropped unit dims leave it) is the written vector: the
/// per-vector decoder of a one-row GEMM then stays in registers.
void forwardWholeTensorWrites(func::FuncOp func) {
  IRRewriter rw(func.getContext());
  SmallVector<vector::TransferReadOp> reads;
  func.walk([&](vector::TransferReadOp r) { reads.push_back(r); });
  for (vector::TransferReadOp read : reads) {
    Value src = read.getBase();
    if (auto expand = src.getDefiningOp<tensor::ExpandShapeOp>())
      src = expand.getSrc();
    auto write = src.getDefiningOp<vector::TransferWriteOp>();
    if (!write || !write.getPermutationMap().isMinorIdentity() ||
        !read.getPermutationMap().isMinorIdentity() ||
        write.hasOutOfBoundsDim() || read.getMask() || write.getMask())
      continue;
    auto written = dyn_cast<RankedTensorType>(write.getResult().getType());
    if (!written || !written.hasStaticShape() ||
        written.getNumElements() != write.getVectorType().getNumElements() ||
        read.getVectorType().getNumElements() != written.getNumElements() ||
        read.getVectorType().getElementType() != written.getElementType() ||
        !llvm::all_of(read.getIndices(),
                      [](Value v) { return isZeroInteger(v); }) ||
        !llvm::all_of(write.getIndices(),
                      [](Value v) { return isZeroInteger(v); }))
      continue;
    rw.setInsertionPoint(read);
    Value v = write.getVector();
    if (v.getType() != read.getVectorType())
      v = vector::ShapeCastOp::create(rw, read.getLoc(), read.getVectorType(),
                                      v);
    rw.replaceOp(read, v);
  }
}

struct VectorizeElementwisePass
    : mlir::comfyquant::impl::ComfyQuantCPUVectorizeElementwiseBase<
          VectorizeElementwisePass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    int64_t width = lanes > 0 ? int64_t(lanes) : strategyLanes(func);
    if (width < 2)
      return;
    SmallVector<linalg::GenericOp> ops;
    func.walk([&](linalg::GenericOp op) {
      if (isCandidate(op))
        ops.push_back(op);
    });
    IRRewriter rw(&getContext());
    int64_t scalarTiles = 0;
    for (linalg::GenericOp op : ops) {
      SmallVector<int64_t> ranges = op.getStaticLoopRanges();
      const int64_t extent = ranges.back();
      // A single short row (a GEMM's per-step decode of one kv-vector) is
      // one vector, however many registers it spans: its consumer reads it
      // whole, so it can be forwarded in registers.
      const bool oneRow = llvm::all_of(ArrayRef<int64_t>(ranges).drop_back(),
                                       [](int64_t r) { return r == 1; });
      const int64_t body =
          oneRow && extent <= 4 * width ? extent : std::min(extent, width);
      if (!acceptsTile(rw, op, body))
        continue;
      const unsigned dim = op.getNumLoops() - 1;
      const int64_t main = extent - extent % width;
      auto tilingOp = cast<TilingInterface>(op.getOperation());
      LogicalResult r = success();
      if (body == extent || main == extent) {
        r = tileAndVectorize(rw, tilingOp, body == extent ? 0 : width, body,
                             scalarTiles);
      } else {
        // Full vectors, then one static tile of the remainder.
        rw.setInsertionPoint(op);
        auto [head, tail] =
            linalg::splitOp(rw, tilingOp, dim, rw.getIndexAttr(main));
        if (head)
          r = tileAndVectorize(rw, head, width, width, scalarTiles);
        if (succeeded(r) && tail)
          r = tileAndVectorize(rw, tail, 0, extent - main, scalarTiles);
      }
      if (failed(r)) {
        func.emitError("comfyquant-cpu-vectorize-elementwise: could not "
                       "tile a linalg.generic");
        return signalPassFailure();
      }
    }
    recordElementwisePath(func, scalarTiles);
    foldLaneAffineIndices(func);
    lowerTableLookups(func, width);
    // Canonical form (one-iteration tile loops and full-size slices gone),
    // with work on uniform values (a block scale, a per-row scale) done once
    // in scalars and broadcast rather than in every lane; then vectors
    // written and read back whole are forwarded.
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    for (Dialect *d : ctx->getLoadedDialects())
      d->getCanonicalizationPatterns(patterns);
    for (RegisteredOperationName op : ctx->getRegisteredOperations())
      op.getCanonicalizationPatterns(patterns, ctx);
    vector::populateSinkVectorOpsPatterns(patterns);
    // Like the canonicalizer: not converging within the iteration limit is
    // not an error (the IR is valid either way).
    (void)applyPatternsGreedily(func, std::move(patterns));
    forwardWholeTensorWrites(func);
  }
};

} // namespace
