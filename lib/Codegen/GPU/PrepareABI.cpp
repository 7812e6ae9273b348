//===- PrepareABI.cpp - host-entry ABI of CUDA artifacts ------------------===//
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
    FunctionType type = func.getFunctionType();
    if (type.getNumResults() != 1 || type.getNumInputs() == 0)
      return func.emitOpError("a CUDA host entry needs x and one tensor "
                              "result y");
    auto result = dyn_cast<RankedTensorType>(type.getResult(0));
    if (!result)
      return func.emitOpError("result must be a ranked tensor");
    Location loc = func.getLoc();
    // y at position 1 (2 once the launcher is in front), written in place.
    auto yType = MemRefType::get(result.getShape(), result.getElementType());
    if (failed(func.insertArgument(1, yType, marker(b, "comfyquant.output"),
                                   loc)))
      return failure();
    Value y = func.getArgument(1);
    SmallVector<func::ReturnOp> returns;
    func.walk([&](func::ReturnOp r) { returns.push_back(r); });
    for (func::ReturnOp r : returns) {
      OpBuilder ob(r);
      auto m = bufferization::MaterializeInDestinationOp::create(
          ob, r.getLoc(), TypeRange{}, r.getOperand(0), y);
      m.setRestrict(true);
      m.setWritable(true);
      func::ReturnOp::create(ob, r.getLoc());
      r.erase();
    }
    if (failed(func.eraseResult(0)))
      return failure();
    auto workspace = MemRefType::get({ShapedType::kDynamic}, b.getI8Type());
    if (failed(func.insertArgument(func.getNumArguments(), workspace,
                                   marker(b, "comfyquant.workspace"), loc)))
      return failure();
    if (failed(func.insertArgument(0, LLVM::LLVMPointerType::get(b.getContext()),
                                   marker(b, "comfyquant.launcher"), loc)))
      return failure();
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (isa<TensorType>(func.getArgument(i).getType()))
        func.setArgAttr(i, "bufferization.writable", b.getBoolAttr(false));
    func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  b.getUnitAttr());
    return success();
  }
};

} // namespace
