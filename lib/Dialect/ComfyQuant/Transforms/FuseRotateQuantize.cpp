//===- FuseRotateQuantize.cpp - rotation into activation quantization -----===//
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTFUSEROTATEQUANTIZE
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// quantize(rotate(x)) -> quantize x rotation <Gr>, for the per-row integer
/// schemes and a rotation used only by this quantization (otherwise the
/// rotated activation is needed anyway and fusing would rotate twice).
struct FuseRotateIntoQuantize : OpRewritePattern<QuantizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(QuantizeOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getRotationAttr())
      return rewriter.notifyMatchFailure(op, "already rotates");
    auto rotate = op.getInput().getDefiningOp<RotateOp>();
    if (!rotate || !rotate->hasOneUse())
      return rewriter.notifyMatchFailure(op,
                                         "input is not a single-use rotate");
    ActScheme scheme = op.getScheme().getScheme();
    if (scheme != ActScheme::int8_row && scheme != ActScheme::int4_row)
      return rewriter.notifyMatchFailure(op, "not a per-row integer scheme");
    rewriter.modifyOpInPlace(op, [&] {
      op.getInputMutable().assign(rotate.getInput());
      op.setRotationAttr(rotate.getRotation());
    });
    rewriter.eraseOp(rotate);
    return success();
  }
};

struct FuseRotateQuantizePass
    : mlir::comfyquant::impl::ComfyQuantFuseRotateQuantizeBase<
          FuseRotateQuantizePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseRotateQuantizePatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

void mlir::comfyquant::populateFuseRotateQuantizePatterns(
    RewritePatternSet &patterns) {
  patterns.add<FuseRotateIntoQuantize>(patterns.getContext());
}
