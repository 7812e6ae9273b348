//===- LowerLaunches.cpp - gpu.launch_func -> cq_gpu_launcher calls -------===//
//
// The host half of a CUDA artifact is x86 code that only computes launch
// geometry and kernel parameters; the launches themselves go through the
// runtime's launcher (a struct {void *self; void (*launch)(...)} the entry
// receives a pointer to), so the host library needs no CUDA symbol.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/IR/SymbolTable.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPULOWERLAUNCHES
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// The LLVM value behind a converted operand (looks through the cast the
/// partial conversion left for the unconverted launch).
Value llvmValue(Value v) {
  if (auto cast = v.getDefiningOp<UnrealizedConversionCastOp>())
    if (cast.getNumOperands() == 1)
      return cast.getOperand(0);
  return v;
}

struct LowerLaunchesPass
    : mlir::comfyquant::impl::ComfyQuantGPULowerLaunchesBase<
          LowerLaunchesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::LaunchFuncOp> launches;
    module.walk([&](gpu::LaunchFuncOp l) { launches.push_back(l); });
    for (gpu::LaunchFuncOp launch : launches)
      if (failed(lower(launch)))
        return signalPassFailure();
    for (auto m : llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>()))
      m.erase();
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  }

  /// Appends the scalars a kernel parameter expands to, in NVVM order.
  LogicalResult flatten(OpBuilder &b, Location loc, Value operand,
                        SmallVectorImpl<Value> &leaves) {
    Value v = llvmValue(operand);
    if (auto desc = dyn_cast<LLVM::LLVMStructType>(v.getType())) {
      // {allocated, aligned, offset, sizes[R], strides[R]}
      ArrayRef<Type> fields = desc.getBody();
      for (int64_t i = 0; i < 3; ++i)
        leaves.push_back(LLVM::ExtractValueOp::create(b, loc, v, i));
      if (fields.size() == 5) {
        auto sizes = cast<LLVM::LLVMArrayType>(fields[3]);
        for (int64_t k : {3, 4})
          for (unsigned i = 0; i < sizes.getNumElements(); ++i)
            leaves.push_back(LLVM::ExtractValueOp::create(
                b, loc, v, ArrayRef<int64_t>{k, i}));
      }
      return success();
    }
    if (isa<IntegerType, FloatType, LLVM::LLVMPointerType>(v.getType())) {
      leaves.push_back(v);
      return success();
    }
    return emitError(loc, "kernel parameter of type ")
           << operand.getType() << " has no launch ABI";
  }

  LogicalResult lower(gpu::LaunchFuncOp launch) {
    Location loc = launch.getLoc();
    auto fn = launch->getParentOfType<LLVM::LLVMFuncOp>();
    if (!fn || fn.getNumArguments() == 0 ||
        !isa<LLVM::LLVMPointerType>(fn.getArgument(0).getType()))
      return launch.emitOpError("must be in an LLVM function whose first "
                                "argument is the launcher");
    auto kernels = fn->getAttrOfType<ArrayAttr>(ComfyQuantDialect::getKernelsAttrName());
    int32_t index = -1;
    if (kernels)
      for (auto [i, k] : llvm::enumerate(kernels))
        if (cast<StringAttr>(k) == launch.getKernelName())
          index = i;
    if (index < 0)
      return launch.emitOpError("kernel ")
             << launch.getKernelName() << " is not in comfyquant.kernels";
    if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty() ||
        launch.getClusterSizeX())
      return launch.emitOpError("async launches and clusters are not "
                                "supported by the launcher ABI");

    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i32 = IntegerType::get(ctx, 32);
    auto i64 = IntegerType::get(ctx, 64);
    OpBuilder b(launch);
    SmallVector<Value> leaves;
    for (Value operand : launch.getKernelOperands())
      if (failed(flatten(b, loc, operand, leaves)))
        return failure();

    // Parameter slots live in the entry block: no stack growth per launch.
    OpBuilder entry = OpBuilder::atBlockBegin(&fn.getBody().front());
    Value one = LLVM::ConstantOp::create(entry, loc, i64, 1);
    Value count = LLVM::ConstantOp::create(
        entry, loc, i64, std::max<int64_t>(leaves.size(), 1));
    Value params = LLVM::AllocaOp::create(entry, loc, ptr, ptr, count, 8);
    for (auto [i, leaf] : llvm::enumerate(leaves)) {
      Value slot = LLVM::AllocaOp::create(entry, loc, ptr, leaf.getType(), one, 8);
      LLVM::StoreOp::create(b, loc, leaf, slot);
      Value at = LLVM::GEPOp::create(b, loc, ptr, ptr, params,
                                     ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(b, loc, slot, at);
    }
    auto toI64 = [&](Value v) -> Value {
      v = llvmValue(v);
      if (v.getType() == i64)
        return v;
      if (v.getType().isInteger(32))
        return LLVM::ZExtOp::create(b, loc, i64, v);
      return UnrealizedConversionCastOp::create(b, loc, i64, v).getResult(0);
    };
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    Value smem = launch.getDynamicSharedMemorySize()
                     ? toI64(launch.getDynamicSharedMemorySize())
                     : LLVM::ConstantOp::create(b, loc, i64, 0).getResult();
    // launcher is `const cq_gpu_launcher **`: {void *self; launch fn}.
    Value launcher = LLVM::LoadOp::create(b, loc, ptr, fn.getArgument(0));
    Value self = LLVM::LoadOp::create(b, loc, ptr, launcher);
    Value fnSlot = LLVM::GEPOp::create(b, loc, ptr, ptr, launcher,
                                       ArrayRef<LLVM::GEPArg>{1});
    Value callee = LLVM::LoadOp::create(b, loc, ptr, fnSlot);
    auto type = LLVM::LLVMFunctionType::get(
        LLVM::LLVMVoidType::get(ctx),
        {ptr, i32, i64, i64, i64, i64, i64, i64, i64, ptr, i32});
    SmallVector<Value> args = {
        callee,
        self,
        LLVM::ConstantOp::create(b, loc, i32, index),
        toI64(grid.x),
        toI64(grid.y),
        toI64(grid.z),
        toI64(block.x),
        toI64(block.y),
        toI64(block.z),
        smem,
        params,
        LLVM::ConstantOp::create(b, loc, i32, int32_t(leaves.size()))};
    LLVM::CallOp::create(b, loc, type, args);
    launch.erase();
    return success();
  }
};

} // namespace
