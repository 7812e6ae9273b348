//===- Intrinsics.cpp - intrinsic placeholders and their materialization --===//
#include "comfyquant/Codegen/Common/Gemm.h"
#include "comfyquant/Codegen/Common/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::comfyquant;

Value mlir::comfyquant::detail::intrinsicPlaceholder(OpBuilder &b,
                                                     Location loc,
                                                     StringRef name,
                                                     Type result,
                                                     ValueRange args) {
  auto op = UnrealizedConversionCastOp::create(b, loc, TypeRange{result}, args);
  op->setAttr("comfyquant.intrinsic", b.getStringAttr(name));
  return op.getResult(0);
}

//===----------------------------------------------------------------------===//
// Intrinsic placeholders -> llvm.call_intrinsic
//===----------------------------------------------------------------------===//

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTMATERIALIZEINTRINSICS
#include "comfyquant/Codegen/Common/Passes.h.inc"
} // namespace mlir::comfyquant

namespace {
struct MaterializeIntrinsicsPass
    : mlir::comfyquant::impl::ComfyQuantMaterializeIntrinsicsBase<
          MaterializeIntrinsicsPass> {
  void runOnOperation() override {
    SmallVector<UnrealizedConversionCastOp> casts;
    getOperation().walk([&](UnrealizedConversionCastOp op) {
      if (op->hasAttr("comfyquant.intrinsic"))
        casts.push_back(op);
    });
    IRRewriter rw(&getContext());
    for (UnrealizedConversionCastOp op : casts) {
      rw.setInsertionPoint(op);
      auto name = op->getAttrOfType<StringAttr>("comfyquant.intrinsic");
      auto call = LLVM::CallIntrinsicOp::create(
          rw, op.getLoc(), op.getResult(0).getType(), name, op.getOperands());
      rw.replaceOp(op, call.getResults());
    }
  }
};
} // namespace
