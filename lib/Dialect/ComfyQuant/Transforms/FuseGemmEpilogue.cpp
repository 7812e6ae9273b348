//===- FuseGemmEpilogue.cpp - quantized matmul + epilogue -> qgemm --------===//
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTFUSEGEMMEPILOGUE
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// epilogue(qmatmul(a, b)) -> qgemm a, b with the epilogue's operands, when
/// the accumulator has no other use (else it must be materialised anyway).
struct FuseEpilogueIntoGemm : OpRewritePattern<EpilogueOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(EpilogueOp op,
                                PatternRewriter &rewriter) const override {
    auto mm = op.getAcc().getDefiningOp<QMatmulOp>();
    if (!mm || !mm->hasOneUse())
      return rewriter.notifyMatchFailure(op, "acc is not a single-use qmatmul");
    auto gemm = QGemmOp::create(
        rewriter, op.getLoc(), op.getResult().getType(), mm.getLhs(),
        mm.getRhs(), mm.getLhsBlockScales(), mm.getRhsBlockScales(),
        op.getRowScale(), op.getColScale(), op.getBias(), mm.getBlockAttr());
    // Discardable attributes of both ops survive on the fused op.
    for (Operation *from : {mm.getOperation(), op.getOperation()})
      for (NamedAttribute a : from->getDiscardableAttrs())
        gemm->setAttr(a.getName(), a.getValue());
    rewriter.replaceOp(op, gemm.getResult());
    rewriter.eraseOp(mm);
    return success();
  }
};

struct FuseGemmEpiloguePass
    : mlir::comfyquant::impl::ComfyQuantFuseGemmEpilogueBase<
          FuseGemmEpiloguePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseGemmEpiloguePatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

void mlir::comfyquant::populateFuseGemmEpiloguePatterns(
    RewritePatternSet &patterns) {
  patterns.add<FuseEpilogueIntoGemm>(patterns.getContext());
}
