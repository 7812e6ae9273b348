//===- VectorizeElementwise.cpp - vector tiles of elementwise generics ----===//
//
// The GEMM micro-kernels are vectorized by comfyquant-cpu-vectorize-gemm;
// everything around them (activation quantization, weight decoders run per
// N tile, epilogues) is elementwise and would otherwise lower to scalar
// loops. Each such op is tiled to [1, ..., 1, lanes] and handed to the
// upstream linalg vectorizer.
//===----------------------------------------------------------------------===//
#include "ElementwiseIdioms.h"
#include "GemmConfig.h"
#include "comfyquant/Codegen/CPU/CPUCodegen.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Codegen/Common/ExtractLanes.h"
#include "comfyquant/Codegen/Common/LaneAffine.h"
#include "comfyquant/Codegen/Common/NibblePairs.h"
#include "comfyquant/Codegen/Common/SinkShuffles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <numeric>

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUVECTORIZEELEMENTWISE
#include "comfyquant/Codegen/CPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;

namespace {

/// Records on a function with a target which path its elementwise ops
/// took: `comfyquant.elementwise = "vector"`, or `"vector+scalar"` when
/// some tiles (short remainders, ops the vectorizer rejects) stay scalar
/// loops.
void recordElementwisePath(func::FuncOp func, int64_t scalarTiles) {
  if (!func->hasAttr(ComfyQuantDialect::getTargetAttrName()))
    return;
  func->setAttr("comfyquant.elementwise",
                StringAttr::get(func.getContext(),
                                scalarTiles ? "vector+scalar" : "vector"));
}

/// An AMX GEMM's elementwise consumer stays a linalg.generic: the AMX pass
/// computes it in the tile write-back after bufferization.
bool consumesAmxGemm(linalg::GenericOp op) {
  for (Value in : op.getDpsInputs())
    if (auto g = in.getDefiningOp<linalg::GenericOp>())
      if (std::optional<mlir::comfyquant::detail::GemmConfig> c =
              mlir::comfyquant::detail::readGemmConfig(g))
        if (c->isAmx())
          return true;
  return false;
}

bool isCandidate(linalg::GenericOp op) {
  if (consumesAmxGemm(op))
    return false;
  if (op->hasAttr(ComfyQuantDialect::getGemmAttrName()) || !op.hasPureTensorSemantics() ||
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

  /// The tuning of a `tune` option, resolved once per pass instance (`host`
  /// asks LLVM for this machine's name); none without the option (each
  /// function's target says) or for a name it does not know, which
  /// runOnOperation reports.
  std::optional<mlir::comfyquant::detail::CpuTuning> tuning;

  LogicalResult initialize(MLIRContext *) override {
    if (!tune.empty() && mlir::comfyquant::isCpuTuneName(tune))
      tuning = mlir::comfyquant::detail::cpuTuning(tune);
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    int64_t width = mlir::comfyquant::detail::targetLanes(func, lanes);
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
    mlir::comfyquant::detail::foldLaneAffineIndices(func);
    const ::comfyquant::rt::CpuVariantInfo *variant =
        mlir::comfyquant::detail::targetVariant(func);
    if (!tune.empty() && !tuning) {
      (void)mlir::comfyquant::detail::lookupCpuTuning(func, tune);
      return signalPassFailure();
    }
    const mlir::comfyquant::detail::CpuTuning t =
        tuning ? *tuning : mlir::comfyquant::detail::targetTuning(func);
    lowerTableLookups(func, width,
                      width == 16 && variant && variant->bytePermute,
                      t.slowTwoTableWordPermute);
    // Canonical form (one-iteration tile loops and full-size slices gone),
    // with work on uniform values (a block scale, a per-row scale) done once
    // in scalars and broadcast rather than in every lane, and on a block's
    // value once per block rather than in each of its lanes; then vectors
    // written and read back whole are forwarded.
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    for (Dialect *d : ctx->getLoadedDialects())
      d->getCanonicalizationPatterns(patterns);
    for (RegisteredOperationName op : ctx->getRegisteredOperations())
      op.getCanonicalizationPatterns(patterns, ctx);
    vector::populateSinkVectorOpsPatterns(patterns);
    populateSinkReplicatingShufflePatterns(patterns);
    populateExtractLanePatterns(patterns);
    populateNibblePairPatterns(patterns);
    populateX86RoundPatterns(patterns, width);
    if (width == 16 && variant && variant->bytePermute)
      populateMultishiftPatterns(patterns);
    // Like the canonicalizer: not converging within the iteration limit is
    // not an error (the IR is valid either way).
    (void)applyPatternsGreedily(func, std::move(patterns));
    forwardWholeTensorWrites(func);
  }
};

} // namespace
