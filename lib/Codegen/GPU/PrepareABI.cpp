//===- PrepareABI.cpp - host-entry ABI of CUDA artifacts ------------------===//
#include "comfyquant/Codegen/Common/DestinationPassing.h"
#include "comfyquant/Codegen/GPU/Passes.h"
#include "comfyquant/Codegen/Host/Passes.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPUPREPAREABI
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

DictionaryAttr marker(Builder &b, StringRef name) {
  return b.getDictionaryAttr({b.getNamedAttr(name, b.getUnitAttr())});
}

struct PrepareABIPass
    : mlir::comfyquant::impl::ComfyQuantGPUPrepareABIBase<PrepareABIPass> {
  void runOnOperation() override {
    Builder b(&getContext());
    if (failed(recordPackedEntries(
            getOperation(), [&](func::FuncOp func) { return rewrite(func, b); })))
      signalPassFailure();
  }

  LogicalResult rewrite(func::FuncOp func, Builder &b) {
    if (func.getFunctionType().getNumResults() != 1 ||
        func.getNumArguments() == 0)
      return func.emitOpError("a CUDA host entry needs x and one tensor "
                              "result y");
    // y at position 1 (2 once the launcher is in front), written in place.
    if (failed(comfyquant::detail::makeDestinationPassing(func)))
      return failure();
    Location loc = func.getLoc();
    auto workspace = MemRefType::get({ShapedType::kDynamic}, b.getI8Type());
    if (failed(func.insertArgument(func.getNumArguments(), workspace,
                                   marker(b, "comfyquant.workspace"), loc)))
      return failure();
    if (failed(func.insertArgument(0, LLVM::LLVMPointerType::get(b.getContext()),
                                   marker(b, "comfyquant.launcher"), loc)))
      return failure();
    return success();
  }
};

} // namespace
