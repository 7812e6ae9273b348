//===- Passes.td - target-neutral comfyquant codegen passes -*- tablegen -*-===//
//
// Passes every back end runs after bufferization. Their names keep the
// `comfyquant-cpu-` prefix they had when the CPU was the only back end.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_COMMON_PASSES_TD
#define COMFYQUANT_CODEGEN_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

def ComfyQuantLowerStridedCopies
    : Pass<"comfyquant-cpu-lower-strided-copies", "::mlir::func::FuncOp"> {
  let summary = "Copies between strided buffers as loops, not runtime calls";
  let description = [{
    Runs after bufferization. `finalize-memref-to-llvm` lowers a
    `memref.copy` whose operands are both contiguous to `llvm.memcpy`, and
    any other copy (a slice of a row, a tile of a padded buffer: odd shapes
    produce them) to a call of `memrefCopy`, a function of MLIR's C runner
    utilities that no kernel image links. Each such copy becomes a
    `linalg.copy`, lowered to loops with the other linalg ops, so the kernels
    have no undefined symbol. Contiguous copies stay `memref.copy`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}


def ComfyQuantMaterializeIntrinsics
    : Pass<"comfyquant-cpu-materialize-intrinsics", "::mlir::ModuleOp"> {
  let summary = "Turn intrinsic placeholders into LLVM calls";
  let description = [{
    Code generators hold target intrinsics (on the CPU: pmaddwd, vpdpbusd,
    vpermps) as pure `builtin.unrealized_conversion_cast` ops tagged
    `comfyquant.intrinsic = "llvm.<name>"` so bufferization and the buffer
    deallocation pipeline (which reject ops of unknown memory effects) can
    run; this pass, placed after them, replaces each by
    `llvm.call_intrinsic`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}


#endif // COMFYQUANT_CODEGEN_COMMON_PASSES_TD
