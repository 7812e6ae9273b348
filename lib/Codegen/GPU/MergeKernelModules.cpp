//===- MergeKernelModules.cpp - one gpu.module, PTX-safe kernel names -----===//
#include "comfyquant/Codegen/GPU/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/IR/SymbolTable.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPUMERGEKERNELMODULES
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// PTX identifiers: letters, digits, '_' and '$', not starting with a digit.
std::string ptxIdentifier(StringRef name) {
  std::string out;
  for (char c : name)
    out += (llvm::isAlnum(c) || c == '_') ? c : '_';
  if (out.empty() || llvm::isDigit(out.front()))
    out = "_" + out;
  return out;
}

struct MergeKernelModulesPass
    : mlir::comfyquant::impl::ComfyQuantGPUMergeKernelModulesBase<
          MergeKernelModulesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto entries = module->getAttrOfType<DictionaryAttr>("comfyquant.entries");
    SymbolTable symbols(module);
    gpu::GPUModuleOp merged = symbols.lookup<gpu::GPUModuleOp>(moduleName);
    if (!merged) {
      OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
      merged = gpu::GPUModuleOp::create(b, module.getLoc(), moduleName);
      symbols.insert(merged);
    }
    SymbolTable mergedSymbols(merged);
    SmallPtrSet<Operation *, 8> emptied;
    for (auto func : module.getOps<func::FuncOp>()) {
      StringRef entry = func.getSymName();
      if (entries)
        if (auto e = entries.getAs<StringAttr>(func.getSymName()))
          entry = e.getValue();
      SmallVector<Attribute> names;
      WalkResult walk = func.walk([&](gpu::LaunchFuncOp launch) {
        auto kernel = symbols.lookupNearestSymbolFrom<gpu::GPUFuncOp>(
            module, launch.getKernel());
        if (!kernel) {
          launch.emitOpError("kernel not found");
          return WalkResult::interrupt();
        }
        // The kernel that decodes a GEMM operand once per call says so:
        // profiles tell it from the activation prologue.
        std::string role =
            kernel.getName().starts_with(GpuGemmAttr::kDecodeKernelName)
                ? "_decode"
                : "";
        std::string name = ptxIdentifier(entry) + "_k" +
                           std::to_string(names.size()) + role;
        if (mergedSymbols.lookup(name)) {
          launch.emitOpError("kernel name '") << name << "' is taken";
          return WalkResult::interrupt();
        }
        Operation *from = kernel->getParentOp();
        if (from != merged.getOperation()) {
          kernel->remove();
          mergedSymbols.insert(kernel);
          emptied.insert(from);
        }
        (void)mergedSymbols.rename(kernel, StringAttr::get(ctx, name));
        launch.setKernelAttr(SymbolRefAttr::get(
            merged.getNameAttr(), {FlatSymbolRefAttr::get(ctx, name)}));
        names.push_back(StringAttr::get(ctx, name));
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
      if (!names.empty())
        func->setAttr(ComfyQuantDialect::getKernelsAttrName(), ArrayAttr::get(ctx, names));
    }
    for (Operation *m : emptied)
      if (cast<gpu::GPUModuleOp>(m).getOps<gpu::GPUFuncOp>().empty())
        m->erase();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(ctx));
  }
};

} // namespace
