//===- Passes.td - comfyquant conversion passes -------------*- tablegen -*-===//
#ifndef COMFYQUANT_CONVERSION_PASSES_TD
#define COMFYQUANT_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertComfyQuantToLinalg
    : Pass<"convert-comfyquant-to-linalg", "::mlir::ModuleOp"> {
  let summary = "Lower comfyquant computation ops to linalg/tensor/arith/math";
  let description = [{
    Turns the computation level of a decomposed module (`comfyquant.weight`,
    `rotate`, `quantize`, `dequantize`, `qmatmul`, `epilogue`) into upstream
    dialects on tensors:

    * `comfyquant.weight` becomes a function argument (a memref bound
      zero-copy by the runtime). Arguments are appended in order of first
      use; each carries `comfyquant.tensor`, `comfyquant.dtype`,
      `comfyquant.offset` (and `comfyquant.shard`) and the function lists
      them in `comfyquant.weights` (the artifact manifest's weight list).
      Storage element types without arithmetic (ui8, f8*, f4*) are passed as
      signless integers of the same width and decoded with integer ops.
    * `rotate` is the radix-4 fast Walsh–Hadamard butterfly of
      docs/CpuCodegen.md §1 (log4(Gr) stages, f32, stride 1 first), never a
      dense Gr×Gr product.
    * `quantize` computes the schemes bit for bit like the reference forward
      (division in the activation dtype, RNE, clamps).
    * `qmatmul` is a `linalg.generic` contraction `C[m,n] += A[m,k]·B[n,k]`:
      i8·i8 accumulates exactly in i32; float operands are decoded to f32.
    * `dequantize` decodes every format (swizzled block scales, nibble
      orders, codebooks, the W4A8/W6A8 int8 grid) and un-rotates.
    * `epilogue` is `(f32(acc)·row)·col + bias` in f32, one rounding.

    Values of storage types without arithmetic cross between lowered ops
    as `builtin.unrealized_conversion_cast`s that fold away once both
    sides are lowered.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect", "::mlir::scf::SCFDialect"
  ];
}

#endif // COMFYQUANT_CONVERSION_PASSES_TD
