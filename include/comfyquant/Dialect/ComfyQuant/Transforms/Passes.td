//===- Passes.td - comfyquant passes ------------------------*- tablegen -*-===//
#ifndef COMFYQUANT_PASSES_TD
#define COMFYQUANT_PASSES_TD

include "mlir/Pass/PassBase.td"

def ComfyQuantPruneTensors : Pass<"comfyquant-prune-tensors", "::mlir::ModuleOp"> {
  let summary = "Drop checkpoint tensors that no module or weight op references";
  let description = [{
    An imported checkpoint lists every tensor of the file. After selecting
    modules (or after decomposition), most are unreferenced; this pass
    removes the `comfyquant.tensor` ops no symbol use reaches, so the IR
    states exactly the bytes a compiled artifact binds.
  }];
  let dependentDialects = ["::mlir::comfyquant::ComfyQuantDialect"];
}

def ComfyQuantDecomposeModules
    : Pass<"comfyquant-decompose-modules", "::mlir::ModuleOp"> {
  let summary = "Turn each quantized module op into a function of computation ops";
  let description = [{
    Every `comfyquant.linear`, `comfyquant.embedding` and `comfyquant.moe`
    op becomes a `func.func` with the module's symbol name (the module op
    is erased; the function carries `comfyquant.module =
    #comfyquant.module<...>` with the kind, format, logical shape, experts,
    rotation and options). Signatures (T = `activation-type`):

    * linear: `(x: tensor<?xKxT>) -> tensor<?xNxT>`
    * moe: `(x: tensor<?xKxT>, expert: index) -> tensor<?xNxT>`; every
      per-expert tensor is sliced (`tensor.extract_slice`) at `expert`
    * embedding: `(indices: tensor<?xi64>) -> tensor<?xDxT>`

    The body binds every tensor of the module with `comfyquant.weight` (in
    registry role order) and computes the forward of docs/CpuCodegen.md §1:

    * nvfp4 `pre_quant_scale`: `x · T(pqs)` rounded to T (`linalg.generic`);
    * `full_precision_matrix_mult`: `comfyquant.dequantize` (un-rotating
      ConvRot weights) to T, float `comfyquant.qmatmul` (f32 acc),
      epilogue `+ bias`;
    * float8: `quantize <fp8_static>` with `input_scale` (else 1.0), FP8
      GEMM, epilogue `(acc·s)·s_w + bias`;
    * nvfp4: `quantize <nvfp4_block>` (static or dynamic global scale g),
      `unpack` (E2M1 codes) and `unswizzle` (E4M3 block scales) of the
      weight, block-scaled GEMM, epilogue `acc·(g·s2) + bias`;
    * mxfp8: `quantize <mxfp8_block>`, the weight sliced to [N, K] and its
      E8M0 scales unswizzled, block-scaled GEMM, epilogue `acc + bias`;
    * int8_tensorwise / convrot_w4a4 / asym_w4a8_int8 / w6a8_int8: `rotate`
      (ConvRot), `quantize <int8_row>` (`<int4_row>` for convrot_w4a4 with
      linear_dtype int4), weight as stored (int8) or `unpack`ed (nibbles,
      int8 grid), i32 GEMM, epilogue `(acc·s_x)·s_w + bias`;
    * embeddings: `comfyquant.lookup` of the gathered rows.

    Scales are converted to f32 and the bias to T where the file stores
    other float types. Format facts (block sizes, code types, storage
    shapes, scale dtypes) come from the format registry.
  }];
  let options = [
    Option<"activationType", "activation-type",
           "::mlir::comfyquant::ActivationType",
           /*default=*/"::mlir::comfyquant::ActivationType::bf16",
           "Activation (and output) element type of the functions",
           [{::llvm::cl::values(
             clEnumValN(::mlir::comfyquant::ActivationType::f32, "f32", "f32"),
             clEnumValN(::mlir::comfyquant::ActivationType::bf16, "bf16", "bf16"),
             clEnumValN(::mlir::comfyquant::ActivationType::f16, "f16", "f16"))}]>
  ];
  let dependentDialects = [
    "::mlir::comfyquant::ComfyQuantDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def ComfyQuantFuseRotateQuantize
    : Pass<"comfyquant-fuse-rotate-quantize", "::mlir::func::FuncOp"> {
  let summary = "Fuse ConvRot activation rotation into activation quantization";
  let description = [{
    `comfyquant.quantize(comfyquant.rotate(x))` with an integer per-row
    scheme, where the rotation has no other use, becomes one
    `comfyquant.quantize ... rotation <Gr>`: the row is rotated by the fast
    Walsh–Hadamard butterfly (O(K log Gr), never a dense Gr × Gr matrix)
    and quantized without the rotated [M, K] activation reaching memory.
    Codes and scales are bit-identical to the unfused pair.
  }];
  let dependentDialects = ["::mlir::comfyquant::ComfyQuantDialect"];
}

def ComfyQuantFuseGemmEpilogue
    : Pass<"comfyquant-fuse-gemm-epilogue", "::mlir::func::FuncOp"> {
  let summary = "Fuse a quantized matmul with its epilogue";
  let description = [{
    `comfyquant.epilogue(comfyquant.qmatmul(...))`, where the accumulator
    has no other use, becomes one `comfyquant.qgemm`: scales, bias and the
    cast to the output type are applied to the accumulator tile in
    registers, so no [M, N] i32 / f32 matrix reaches memory.
  }];
  let dependentDialects = ["::mlir::comfyquant::ComfyQuantDialect"];
}

#endif // COMFYQUANT_PASSES_TD
