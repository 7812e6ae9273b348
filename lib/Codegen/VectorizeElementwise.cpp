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

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/TilingInterface.h"

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

bool isCandidate(linalg::GenericOp op) {
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

/// Tiles `op` to [1, ..., 1, inner] and vectorizes every tile.
LogicalResult tileAndVectorize(RewriterBase &rw, TilingInterface op,
                               int64_t inner, int64_t width) {
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
        vectorSizes.back() = width;
      }
    }
    rw.setInsertionPoint(t);
    FailureOr<linalg::VectorizationResult> v = linalg::vectorize(
        rw, t, vectorSizes, SmallVector<bool>(vectorSizes.size(), false),
        /*vectorizeNDExtract=*/true);
    if (failed(v))
      return failure();
    if (t->getNumResults())
      rw.replaceOp(t, v->replacements);
    else
      rw.eraseOp(t);
  }
  return success();
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
    for (linalg::GenericOp op : ops) {
      const int64_t extent = op.getStaticLoopRanges().back();
      const int64_t body = std::min(extent, width);
      if (!acceptsTile(rw, op, body))
        continue;
      const unsigned dim = op.getNumLoops() - 1;
      const int64_t main = extent - extent % width;
      auto tilingOp = cast<TilingInterface>(op.getOperation());
      LogicalResult r = success();
      if (extent < width || main == extent) {
        r = tileAndVectorize(rw, tilingOp, extent < width ? 0 : width, body);
      } else {
        // Full vectors, then one static tile of the remainder.
        rw.setInsertionPoint(op);
        auto [head, tail] =
            linalg::splitOp(rw, tilingOp, dim, rw.getIndexAttr(main));
        if (head)
          r = tileAndVectorize(rw, head, width, width);
        if (succeeded(r) && tail)
          r = tileAndVectorize(rw, tail, 0, extent - main);
      }
      if (failed(r)) {
        func.emitError("comfyquant-cpu-vectorize-elementwise: could not "
                       "vectorize a linalg.generic the vectorizer accepted");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
