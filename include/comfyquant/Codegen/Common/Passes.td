//===- Passes.td - target-neutral comfyquant codegen passes -*- tablegen -*-===//
//
// Passes any back end can run. The two after bufferization keep the
// `comfyquant-cpu-` prefix they had when the CPU was the only back end.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_COMMON_PASSES_TD
#define COMFYQUANT_CODEGEN_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

def ComfyQuantTagGemms : Pass<"comfyquant-tag-gemms"> {
  let summary = "Tag the GEMM contractions of IR not built by the conversion";
  let description = [{
    The back ends find GEMMs by their `comfyquant.gemm_info` tag, which
    `convert-comfyquant-to-linalg` puts on every contraction it builds.
    This pass tags the `linalg.generic` ops of other IR (written by hand in
    tests, or by another producer) whose body is a GEMM of a form the back
    ends compile (C[m, n] += f(A[m, k]) * g(B[n, k]); i8, float, FP8 codes,
    block-scaled MXFP8 and NVFP4); ops already tagged are left alone. Runs
    on any op.
  }];
  let dependentDialects = ["::mlir::comfyquant::ComfyQuantDialect"];
}

def ComfyQuantFuseOperandProducers
    : Pass<"comfyquant-fuse-operand-producers", "::mlir::func::FuncOp"> {
  let summary = "Fold chains of elementwise weight decoders into the one "
                "that feeds a GEMM";
  let description = [{
    Runs on linalg on tensors, before the GEMMs are tiled. A weight often
    reaches a GEMM through several elementwise ops (nibbles unpacked into a
    full-size temporary, then decoded and scaled). A code generator that
    evaluates the GEMM operand's producer per tile sees only the last of
    them and reads the others' full-size results from memory. This pass
    fuses every all-parallel `linalg.generic` feeding the B operand's
    producer (through an input with a permutation map, used by nothing
    else) into it, repeatedly, so the stored weight is read where the GEMM
    needs it and no temporary of the decoded weight is written. A read
    (`tensor.extract`) in that producer of a generic whose elements are a
    function of their indices alone (a relayout: NVFP4's and MXFP8's
    swizzled block scales) is replaced by that function evaluated at the
    read's indices, so the relayout is not materialized on every call.

    Only B, the weight operand, is treated: the code generators evaluate
    its producer per tile; the activation's producers run once per call
    either way.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}


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


def ComfyQuantFlattenCollapsedViews
    : Pass<"comfyquant-flatten-collapsed-views", "::mlir::func::FuncOp"> {
  let summary = "1-D views of contiguous buffers as casts, not collapses";
  let description = [{
    Runs after bufferization, before `fold-memref-alias-ops`. Decoders read
    packed weights and block scales through a 1-D `memref.collapse_shape`
    of the argument (`flat[n · D1 + k / G]`). Folding a load through the
    collapse delinearizes its index back to [n, k / G] with a division and a
    remainder by D1 per load, which LLVM cannot strength-reduce across the
    K loop; a load of the 1-D view is a base plus a linear offset. Each
    collapse of an identity-layout buffer into one dimension becomes
    `memref.reinterpret_cast` of the same buffer to the same 1-D shape, a
    view no folding pattern rewrites.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
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
