//===- ExternalizeDynamicSharedMemory.cpp - .extern .shared ---------------===//
#include "comfyquant/Codegen/GPU/Passes.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPUEXTERNALIZEDYNAMICSHAREDMEMORY
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// NVVM's shared address space.
constexpr unsigned kSharedAddressSpace = 3;

struct ExternalizeDynamicSharedMemoryPass
    : mlir::comfyquant::impl::ComfyQuantGPUExternalizeDynamicSharedMemoryBase<
          ExternalizeDynamicSharedMemoryPass> {
  void runOnOperation() override {
    for (auto global : getOperation().getOps<LLVM::GlobalOp>()) {
      auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType());
      if (global.getAddrSpace() != kSharedAddressSpace || !array ||
          array.getNumElements() != 0)
        continue;
      // An internal zero-length array is printed as a 1-byte static
      // variable; an external declaration is the launch's dynamic memory.
      global.setLinkage(LLVM::Linkage::External);
      global.removeValueAttr();
      if (!global.getInitializerRegion().empty())
        global.getInitializerRegion().getBlocks().clear();
    }
  }
};

} // namespace
