//===- FlattenCollapsedViews.cpp - 1-D views as reinterpret casts ---------===//
#include "comfyquant/Codegen/Common/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTFLATTENCOLLAPSEDVIEWS
#include "comfyquant/Codegen/Common/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;

namespace {

struct FlattenCollapsedViewsPass
    : mlir::comfyquant::impl::ComfyQuantFlattenCollapsedViewsBase<
          FlattenCollapsedViewsPass> {
  void runOnOperation() override {
    SmallVector<memref::CollapseShapeOp> collapses;
    getOperation().walk([&](memref::CollapseShapeOp op) {
      MemRefType src = op.getSrcType(), dst = op.getResultType();
      // Identity layouts on both sides: offset 0 and row-major strides, so
      // element i of the view is element i of the buffer.
      // (Weights and scales have static shapes; a dynamic view keeps its
      // collapse.)
      if (src.getLayout().isIdentity() && dst.getLayout().isIdentity() &&
          dst.getRank() == 1 && src.getRank() > 1 && dst.hasStaticShape())
        collapses.push_back(op);
    });
    IRRewriter rw(&getContext());
    for (memref::CollapseShapeOp op : collapses) {
      rw.setInsertionPoint(op);
      MemRefType dst = op.getResultType();
      OpFoldResult size = rw.getIndexAttr(dst.getDimSize(0));
      rw.replaceOpWithNewOp<memref::ReinterpretCastOp>(
          op, dst, op.getSrc(), /*offset=*/rw.getIndexAttr(0),
          ArrayRef<OpFoldResult>{size},
          ArrayRef<OpFoldResult>{rw.getIndexAttr(1)});
    }
  }
};

} // namespace
