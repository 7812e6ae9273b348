//===- CheckColumnRange.cpp - y written in place for column splits --------===//
#include "comfyquant/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUCHECKCOLUMNRANGE
#include "comfyquant/Codegen/CPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;

namespace {

/// Every use of `v` (and of views of it) stores single elements or vectors.
bool onlyElementWrites(Value v, unsigned depth = 0) {
  if (depth > 8)
    return false;
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<vector::TransferWriteOp, vector::StoreOp, memref::StoreOp>(user) &&
        use.getOperandNumber() == 1)
      continue;
    if (isa<memref::DimOp, memref::ExtractStridedMetadataOp>(user))
      continue;
    if (auto view = dyn_cast<ViewLikeOpInterface>(user))
      if (view.getViewSource() == v &&
          onlyElementWrites(user->getResult(0), depth + 1))
        continue;
    return false;
  }
  return true;
}

struct CheckColumnRangePass
    : mlir::comfyquant::impl::ComfyQuantCPUCheckColumnRangeBase<
          CheckColumnRangePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func->hasAttr("comfyquant.column_range"))
      return;
    for (BlockArgument a : func.getArguments())
      if (func.getArgAttr(a.getArgNumber(), "comfyquant.output") &&
          !onlyElementWrites(a)) {
        func->removeAttr("comfyquant.column_range");
        return;
      }
  }
};

} // namespace
