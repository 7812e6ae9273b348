//===- Passes.td - comfyquant conversion passes -------------*- tablegen -*-===//
#ifndef COMFYQUANT_CONVERSION_PASSES_TD
#define COMFYQUANT_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertComfyQuantToLinalg
    : Pass<"convert-comfyquant-to-linalg", "::mlir::ModuleOp"> {
  let summary = "Lower comfyquant computation ops to linalg/tensor/arith/math";
  let description = [{
    Turns the computation level of a decomposed module (`comfyquant.weight`,
    `rotate`, `quantize`, `unpack`, `unswizzle`, `dequantize`, `lookup`,
    `qmatmul`, `epilogue`, `qgemm`) into upstream dialects on tensors:

    * `comfyquant.weight` becomes a function argument (a memref bound
      zero-copy by the runtime). Arguments are appended in order of first
      use; each carries `comfyquant.tensor`, `comfyquant.dtype`,
      `comfyquant.offset` (and `comfyquant.shard`) and the function lists
      them in `comfyquant.weights` (the artifact manifest's weight list).
      The function's `comfyquant.module` record moves to
      `comfyquant.lowered_module`.
    * Element types without arithmetic (ui8, f8*, f4*, i4) are carried in a
      storage type (signless integers of the same width, sub-byte values in
      an i8) and decoded with integer ops; function arguments of such types
      take the storage type.
    * `rotate` (and `quantize ... rotation`) is the radix-4 fast
      Walsh–Hadamard butterfly of docs/CpuCodegen.md §1 (log4(Gr) stages,
      f32, stride 1 first), never a dense Gr×Gr product.
    * `quantize` computes every scheme bit for bit like the reference
      forward (division in the activation dtype, RNE, clamps; E8M0/E4M3/
      E2M1 encoders on the bits). With `rotated-quantize=rows` a rotated
      int8_row / int4_row quantizer runs one row per iteration of an
      scf.for (butterfly, amax, codes on a [1, K] slice), so the f32
      rotation never exists for all rows at once.
    * `qmatmul`/`qgemm` become a `linalg.generic` contraction
      `C[m,n] += A[m,k]·B[n,k]`: i8·i8 accumulates exactly in i32. With
      `gemm-operands=decoded` (the default, for CPU micro-kernels) float
      operands (with their block scales) are decoded to exact values, in
      bf16 where every value of both operands is one (FP8 codes, E2M1 or
      E2M1 x E4M3; the CPU's bf16 dot products take them as they are) or is
      one inside bf16's normal range (FP8 x E8M0, MXFP8: below 2^-126 the
      f32 value's high half), in f32 otherwise;
      with `gemm-operands=native` (tensor cores) FP8 operands stay i8
      codes widened in the contraction body, and block-scaled contractions
      read codes and block scales as stored: MXFP8 (E8M0 scales at
      `k floordiv 32`) and NVFP4 (E2M1 codes one per byte, E4M3 scales at
      `k floordiv 16`), each factor decoded exactly in the body.
    * `unpack`, `unswizzle`, `dequantize` and `lookup` decode the stored
      formats element-wise (swizzled block scales, nibble orders, codebooks,
      the W4A8/W6A8 int8 grid) and un-rotate.
    * `epilogue` (and the tail of `qgemm`) is `(f32(acc)·row)·col + bias`
      in f32, one rounding.

    Values of storage types cross between lowered ops as
    `builtin.unrealized_conversion_cast`s that fold away once both sides are
    lowered (one may remain only where a function returns such a value).
  }];
  let options = [
    Option<"gemmOperands", "gemm-operands", "::mlir::comfyquant::GemmOperands",
           "::mlir::comfyquant::GemmOperands::Decoded",
           "What GEMM contractions read for float formats",
           [{::llvm::cl::values(
             clEnumValN(::mlir::comfyquant::GemmOperands::Decoded, "decoded",
                        "exact bf16 or f32 values (CPU)"),
             clEnumValN(::mlir::comfyquant::GemmOperands::Native, "native",
                        "FP8 and E2M1 codes, MXFP8/NVFP4 block scales (tensor cores)"))}]>,
    Option<"rotatedQuantize", "rotated-quantize",
           "::mlir::comfyquant::RotatedQuantize",
           "::mlir::comfyquant::RotatedQuantize::Whole",
           "Layout of rotated row-wise quantizers",
           [{::llvm::cl::values(
             clEnumValN(::mlir::comfyquant::RotatedQuantize::Whole, "whole",
                        "each step over all rows (GPU)"),
             clEnumValN(::mlir::comfyquant::RotatedQuantize::Rows, "rows",
                        "an scf.for over rows, each step on one row (CPU)"))}]>
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect", "::mlir::scf::SCFDialect"
  ];
}

#endif // COMFYQUANT_CONVERSION_PASSES_TD
