//===- PrepareABI.cpp - host-entry ABI of CUDA artifacts ------------------===//
#include "comfyquant/Codegen/Common/DestinationPassing.h"
#include "comfyquant/Codegen/GPU/Passes.h"

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
    ModuleOp module = getOperation();
    Builder b(&getContext());
    SmallVector<NamedAttribute> entries;
    if (auto existing =
            module->getAttrOfType<DictionaryAttr>("comfyquant.entries"))
      entries.append(existing.begin(), existing.end());
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.isPublic())
        continue;
      if (failed(rewrite(func, b)))
        return signalPassFailure();
      StringAttr entry = func->getAttrOfType<StringAttr>("comfyquant.entry");
      if (!entry)
        entry = b.getStringAttr(func.getSymName() + "_entry");
      entries.push_back(b.getNamedAttr(func.getSymName(), entry));
    }
    module->setAttr("comfyquant.entries", b.getDictionaryAttr(entries));
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
    func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  b.getUnitAttr());
    return success();
  }
};

} // namespace
