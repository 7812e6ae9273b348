//===- LowerBoundedMinMax.cpp - max/min against a constant, native --------===//
#include "comfyquant/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPULOWERBOUNDEDMINMAX
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// Whether `v` is a scalar float constant other than zero and NaN.
bool isBound(Value v) {
  FloatAttr c;
  return matchPattern(v, m_Constant(&c)) && !c.getValue().isZero() &&
         !c.getValue().isNaN();
}

/// arith.maxnumf / arith.minnumf (x, bound) -> llvm.intr.maxnum / minnum.
template <typename ArithOp, typename NativeOp>
struct LowerBounded : OpRewritePattern<ArithOp> {
  using OpRewritePattern<ArithOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(ArithOp op,
                                PatternRewriter &rewriter) const override {
    if (!isa<FloatType>(op.getType()) || !isBound(op.getRhs()))
      return failure();
    rewriter.replaceOpWithNewOp<NativeOp>(op, op.getLhs(), op.getRhs());
    return success();
  }
};

struct LowerBoundedMinMaxPass
    : mlir::comfyquant::impl::ComfyQuantGPULowerBoundedMinMaxBase<
          LowerBoundedMinMaxPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateBoundedMinMaxPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::comfyquant::populateBoundedMinMaxPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerBounded<arith::MaxNumFOp, LLVM::MaxNumOp>,
               LowerBounded<arith::MinNumFOp, LLVM::MinNumOp>>(
      patterns.getContext());
}
