//===- ExtractLanes.cpp - single lanes read as scalars --------------------===//
//
// Upstream sinks vector.extract below elementwise ops of one element type
// only, and below vector.load of memrefs; the lanes picked out of a vector of
// block scales (a table row per K group) are casts of a tensor read. Each
// such lane costs a lane move out of a register (vpextrq, vextracti128)
// where a scalar load would do.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/ExtractLanes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace {

/// The one static lane a 1-D extract reads, if it is one.
std::optional<int64_t> staticLane(vector::ExtractOp e) {
  if (e.getSourceVectorType().getRank() != 1 || !e.getDynamicPosition().empty())
    return std::nullopt;
  ArrayRef<int64_t> pos = e.getStaticPosition();
  if (pos.size() != 1 || pos[0] < 0)
    return std::nullopt;
  return pos[0];
}

/// extract(cast(v), i) -> cast(extract(v, i)).
struct ExtractOfCast : OpRewritePattern<vector::ExtractOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::ExtractOp e,
                                PatternRewriter &rw) const override {
    std::optional<int64_t> lane = staticLane(e);
    Operation *cast = e.getSource().getDefiningOp();
    if (!lane || !cast ||
        !isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtUIOp,
             arith::ExtSIOp, arith::TruncIOp>(cast))
      return failure();
    Value src =
        vector::ExtractOp::create(rw, e.getLoc(), cast->getOperand(0), *lane);
    OperationState state(e.getLoc(), cast->getName().getIdentifier(),
                         ValueRange{src}, TypeRange{e.getType()},
                         cast->getAttrs());
    rw.replaceOp(e, rw.create(state)->getResults());
    return success();
  }
};

/// extract(transfer_read(t[i..., j]), l) -> tensor.extract t[i..., j + l]
/// for an in-bounds, unmasked 1-D read along t's innermost dimension.
struct ExtractOfTensorRead : OpRewritePattern<vector::ExtractOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::ExtractOp e,
                                PatternRewriter &rw) const override {
    std::optional<int64_t> lane = staticLane(e);
    auto read = e.getSource().getDefiningOp<vector::TransferReadOp>();
    if (!lane || !read || read.getMask() ||
        !isa<RankedTensorType>(read.getBase().getType()) ||
        read.getVectorType().getRank() != 1 ||
        !read.getPermutationMap().isMinorIdentity() || !read.isDimInBounds(0))
      return failure();
    SmallVector<Value> at(read.getIndices());
    Value offset = arith::ConstantIndexOp::create(rw, e.getLoc(), *lane);
    at.back() = arith::AddIOp::create(rw, e.getLoc(), at.back(), offset);
    rw.replaceOpWithNewOp<tensor::ExtractOp>(e, read.getBase(), at);
    return success();
  }
};

} // namespace

void mlir::comfyquant::populateExtractLanePatterns(
    RewritePatternSet &patterns) {
  patterns.add<ExtractOfCast, ExtractOfTensorRead>(patterns.getContext());
}
