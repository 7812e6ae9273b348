//===- ComfyQuantOps.td - comfyquant operations -------------*- tablegen -*-===//
#ifndef COMFYQUANT_OPS_TD
#define COMFYQUANT_OPS_TD

include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantDialect.td"
include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Checkpoint level: the file, its tensors, its modules.
//===----------------------------------------------------------------------===//

def ComfyQuant_CheckpointOp : ComfyQuant_Op<"checkpoint", [
    Symbol, SymbolTable, IsolatedFromAbove, NoTerminator, SingleBlock,
    NoRegionArguments]> {
  let summary = "A safetensors checkpoint (one file or the shards of an index)";
  let description = [{
    Holds one `comfyquant.tensor` per tensor of the checkpoint. `size` and
    `hash` (FNV-1a 64 of the shard headers) identify the file so a runtime
    can refuse a mismatched checkpoint. No weight bytes are in the IR.

    ```mlir
    comfyquant.checkpoint @checkpoint path "model.safetensors" size 4096 hash "fnv1a64:0123456789abcdef" {
      comfyquant.tensor @"blocks.0.qkv.weight" : tensor<64x32xf8E4M3FN> at 256
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$path,
                       I64Attr:$size, StrAttr:$hash);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `path` $path `size` $size `hash` $hash attr-dict-with-keyword
    $body
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$symName,
      "::llvm::StringRef":$path, "int64_t":$size, "::llvm::StringRef":$hash)>];
}

def ComfyQuant_TensorOp : ComfyQuant_Op<"tensor", [
    Symbol, HasParent<"CheckpointOp">]> {
  let summary = "One tensor of a checkpoint: dtype, shape and file offset";
  let description = [{
    The element type states the safetensors dtype (`ui8` = U8, `i8` = I8,
    `f8E4M3FN` = F8_E4M3, `f8E5M2` = F8_E5M2, `f8E8M0FNU` = F8_E8M0, `i1` =
    BOOL, ...). `offset` is the absolute byte offset in the file named by
    `shard` (the checkpoint path when absent).

    ```mlir
    comfyquant.tensor @"blocks.0.qkv.weight_scale" : tensor<f32> at 8448
    comfyquant.tensor @"blocks.1.w1.weight" : tensor<64x16xi8> at 128 in "model-00002-of-00002.safetensors"
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyStaticShapeTensor>:$type,
                       I64Attr:$offset, OptionalAttr<StrAttr>:$shard);
  let assemblyFormat = "$sym_name `:` $type `at` $offset (`in` $shard^)? attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def ComfyQuant_AttentionOp : ComfyQuant_Op<"attention"> {
  let summary = "An attention preference (`<module>.comfy_attention.config`)";
  let description = [{
    Preserved verbatim for round trips; preferences never enable weight
    quantization.

    ```mlir
    comfyquant.attention "transformer_blocks.0.attn" config "{\"attention\": \"comfy_kitchen_int8\"}"
    ```
  }];
  let arguments = (ins StrAttr:$module, StrAttr:$config);
  let assemblyFormat = "$module `config` $config attr-dict";
  let hasVerifier = 1;
}

/// Shared by the three module kinds: format, logical shape, rotation,
/// options and the role -> checkpoint tensor bindings. The verifier builds a
/// registry ModuleDesc from the bound tensors and checks every format rule.
class ComfyQuant_ModuleOp<string mnemonic, string kindName>
    : ComfyQuant_Op<mnemonic, [Symbol,
        DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Kind of module as the format registry names it.
    static constexpr ::llvm::StringLiteral getKindName() {
      return ::llvm::StringLiteral("}] # kindName # [{");
    }
  }];
}

def ComfyQuant_LinearOp : ComfyQuant_ModuleOp<"linear", "linear"> {
  let summary = "A quantized Linear: y = x·Wᵀ + b with W of shape [N, K]";
  let description = [{
    ```mlir
    comfyquant.linear @"blocks.0.proj" format <int8_tensorwise, granularity = row> [64, 256]
        rotation <256>
        tensors {weight = @checkpoint::@"blocks.0.proj.weight",
                 weight_scale = @checkpoint::@"blocks.0.proj.weight_scale"}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, ComfyQuant_FormatAttr:$format,
                       I64Attr:$out_features, I64Attr:$in_features,
                       OptionalAttr<ComfyQuant_RotationAttr>:$rotation,
                       OptionalAttr<ComfyQuant_OptionsAttr>:$options,
                       DictionaryAttr:$tensors);
  let assemblyFormat = [{
    $sym_name `format` $format `[` $out_features `,` $in_features `]`
    (`rotation` $rotation^)? (`options` $options^)? `tensors` $tensors attr-dict
  }];
}

def ComfyQuant_EmbeddingOp : ComfyQuant_ModuleOp<"embedding", "embedding"> {
  let summary = "A quantized embedding table [V, D] (row lookups)";
  let arguments = (ins SymbolNameAttr:$sym_name, ComfyQuant_FormatAttr:$format,
                       I64Attr:$out_features, I64Attr:$in_features,
                       OptionalAttr<ComfyQuant_RotationAttr>:$rotation,
                       OptionalAttr<ComfyQuant_OptionsAttr>:$options,
                       DictionaryAttr:$tensors);
  let assemblyFormat = [{
    $sym_name `format` $format `[` $out_features `,` $in_features `]`
    (`rotation` $rotation^)? (`options` $options^)? `tensors` $tensors attr-dict
  }];
}

def ComfyQuant_MoEOp : ComfyQuant_ModuleOp<"moe", "moe"> {
  let summary = "A quantized MoE expert bank: E experts of [N, K]";
  let arguments = (ins SymbolNameAttr:$sym_name, ComfyQuant_FormatAttr:$format,
                       I64Attr:$experts,
                       I64Attr:$out_features, I64Attr:$in_features,
                       OptionalAttr<ComfyQuant_RotationAttr>:$rotation,
                       OptionalAttr<ComfyQuant_OptionsAttr>:$options,
                       DictionaryAttr:$tensors);
  let assemblyFormat = [{
    $sym_name `format` $format `[` $experts `x` $out_features `,` $in_features `]`
    (`rotation` $rotation^)? (`options` $options^)? `tensors` $tensors attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// Computation level: what the decompose / fuse passes produce.
//===----------------------------------------------------------------------===//

def ComfyQuant_WeightOp : ComfyQuant_Op<"weight", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A checkpoint tensor as a value (bound zero-copy at run time)";
  let description = [{
    The bytes of one `comfyquant.tensor`, exactly as stored (dtype, shape):
    the codegen turns each weight op of a function into a kernel argument
    that points into the mapped checkpoint.

    ```mlir
    %w = comfyquant.weight @checkpoint::@"blocks.0.proj.weight" : tensor<64x256xi8>
    ```
  }];
  let arguments = (ins SymbolRefAttr:$tensor);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$tensor attr-dict `:` type($result)";
}

def ComfyQuant_RotateOp : ComfyQuant_Op<"rotate", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "ConvRot rotation of activations along the last dimension";
  let description = [{
    Each group of `Gr` consecutive elements along the last dimension is
    multiplied by the normalised regular Hadamard matrix `H` (docs/Formats.md
    §4.0): `y_g = x_g · H`. The arithmetic is the fast Walsh–Hadamard
    butterfly of docs/CpuCodegen.md §1 (also `fwhtRowF32` in the runtime):
    `log4(Gr)` radix-4 stages of stride 1, 4, 16, …, each output
    `0.5f · (((±a ± b) ± c) ± d)` in f32, so the cost is O(K log Gr) and no
    dense `Gr × Gr` matrix is ever formed. The result is rounded once (RNE)
    to the element type, as kitchen's rotation in the activation dtype.

    ```mlir
    %xr = comfyquant.rotate %x <256> : tensor<?x1024xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, ComfyQuant_RotationAttr:$rotation);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input $rotation attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def ComfyQuant_QuantizeOp : ComfyQuant_Op<"quantize", [Pure]> {
  let summary = "Quantize activations [M, K] to GEMM codes plus scales";
  let description = [{
    Dynamic or static activation quantization per scheme
    (docs/CpuCodegen.md §1; "in x dtype" means rounded to the input element
    type T at that point):

    * `int8_row`: per row `s = max(amax/127, 1e-30)` (f32), codes
      `clamp(RNE(x / T(s) in T), -128, 127)` as i8; scales `[M, 1]` f32 = s.
    * `int4_row`: per row `a = T(max(amax, 1e-10))`, `s = T(a/7)`, codes
      `clamp(RNE(x / s in T), -7, 7)` as i4; scales `[M, 1]` f32 = s.
    * `fp8_static`: `s = static_scale` or 1.0; codes
      `fp8_RNE(clamp(x · T(1/s) in T, ±max))` of `type`; scales one f32 = s.
    * `nvfp4_block`: global `g = static_scale`, else `T(amax(|x|)/2688)`;
      per 16-block `d8 = e4m3(min(amax_b/6/g, 448))`, codes
      `e2m1_RNE(clamp(x/(g·d8), ±6))` (f4E2M1FN); scales the E4M3 block
      scales `[M, ceil(K/16)]`; third result `global_scale` = g
      (`tensor<f32>`), present exactly for this scheme.
    * `mxfp8_block`: per 32-block `e = clamp(ceil(log2(max(amax/448,
      2^-127))) + 127, 0, 254)` (0 for a zero block), codes
      `e4m3_RNE(clamp(x/2^(e-127), ±448))`; scales E8M0 `[M, ceil(K/32)]`.

    With `rotation` (what `comfyquant-fuse-rotate-quantize` produces from a
    `comfyquant.rotate` feeding this op; integer schemes only), each row is
    first rotated exactly as `comfyquant.rotate` does — the fast
    Walsh–Hadamard butterfly per group of `Gr`, O(K log Gr), never a dense
    `Gr × Gr` matrix — and rounded to T; amax and the codes are then taken
    from those rounded values, so the fused op produces bit for bit the
    codes and scales of the unfused pair. A lowering keeps the rotated row
    in registers / scratch, never in a full [M, K] buffer.

    ```mlir
    %q, %s = comfyquant.quantize %x <int8_row> rotation <256> : tensor<?x1024xbf16> -> tensor<?x1024xi8>, tensor<?x1xf32>
    %c, %b, %g = comfyquant.quantize %y <nvfp4_block, block = 16> : tensor<?x80xbf16> -> tensor<?x80xf4E2M1FN>, tensor<?x5xf8E4M3FN>, tensor<f32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, ComfyQuant_ActQuantAttr:$scheme,
                       OptionalAttr<ComfyQuant_RotationAttr>:$rotation,
                       Optional<AnyRankedTensor>:$static_scale);
  let results = (outs AnyRankedTensor:$codes, AnyRankedTensor:$scales,
                      Optional<AnyRankedTensor>:$global_scale);
  let assemblyFormat = [{
    $input $scheme (`rotation` $rotation^)?
    (`scale` $static_scale^ `:` type($static_scale))? attr-dict
    `:` type($input) `->` type($codes) `,` type($scales)
    (`,` type($global_scale)^)?
  }];
  let hasVerifier = 1;
}

def ComfyQuant_DequantizeOp : ComfyQuant_Op<"dequantize", [Pure]> {
  let summary = "Dequantize a weight (and its side tensors) to a float tensor";
  let description = [{
    Operands are the packed weight then the side tensors named by `roles`
    (registry role keys). The result is the logical `[N, K]` (`[E, N, K]` for
    banks) weight; `rotation` un-rotates.

    ```mlir
    %w = comfyquant.dequantize %q, %s roles ["weight_scale"]
           format <float8_e4m3fn, granularity = tensor>
           : (tensor<64x32xf8E4M3FN>, tensor<f32>) -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$weight,
                       Variadic<AnyStaticShapeTensor>:$side,
                       StrArrayAttr:$roles, ComfyQuant_FormatAttr:$format,
                       OptionalAttr<ComfyQuant_RotationAttr>:$rotation);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $weight (`,` $side^)? `roles` $roles `format` $format
    (`rotation` $rotation^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def ComfyQuant_UnpackOp : ComfyQuant_Op<"unpack", [Pure]> {
  let summary = "Packed weight storage to the GEMM operand [N, K]";
  let description = [{
    Decodes the stored codes of one weight (one expert of a bank) into the
    exact values the quantized GEMM multiplies, still in the rotated basis
    for ConvRot formats, and without the per-row / global scales (those are
    epilogue factors). Only packed formats (codes narrower than 8 bits)
    unpack; 8-bit formats (FP8, MXFP8, int8) feed their storage to the GEMM
    directly. Nibble order, code width, storage shape and side-tensor
    dtypes are read from the format registry:

    * `nvfp4`: U8 `[Np16, Kp16/2]`, two E2M1 codes per byte in the
      registry's nibble order (even column in the high nibble) ->
      `f4E2M1FN [N, K]` (padding dropped). The E4M3 block scales are a
      separate operand of the GEMM (`comfyquant.unswizzle`).
    * `convrot_w4a4`: I8 `[N, K/2]` signed nibbles (two's complement,
      registry nibble order: even column low) -> `i4 [N, K]` (int4 GEMM,
      `linear_dtype = int4`) or sign-extended `i8 [N, K]` (`int8`).
    * `asym_w4a8_int8` / `w6a8_int8`: the int8 grid of docs/Formats.md §4.6
      steps 1–3, `g8 = clamp(RNE(f32(v) · f32(s_rel[n][k/G])), −127, 127)`
      with `v` = codebook level, `code − 8` or `code − 32`; side operands
      `weight_s_rel` and (4-bit only, optional) `weight_codebook` ->
      `i8 [N, K]`.

    The op is elementwise along each row, so a backend can fuse it into the
    GEMM's B-operand load (decode per tile) instead of materialising [N, K].

    ```mlir
    %b = comfyquant.unpack %w roles [] format <convrot_w4a4, granularity = row, nibbles = low_first>
           : (tensor<64x128xi8>) -> tensor<64x256xi8>
    %g8 = comfyquant.unpack %w, %srel, %cb roles ["weight_s_rel", "weight_codebook"]
           format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
           : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>, tensor<16xf32>) -> tensor<64x256xi8>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$weight,
                       Variadic<AnyStaticShapeTensor>:$side,
                       StrArrayAttr:$roles, ComfyQuant_FormatAttr:$format);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $weight (`,` $side^)? `roles` $roles `format` $format attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def ComfyQuant_UnswizzleOp : ComfyQuant_Op<"unswizzle", [Pure]> {
  let summary = "Swizzled block scales to their logical [rows, blocks] matrix";
  let description = [{
    `result[r][c] = input_flat[offset(r, c)]` with the cuBLAS blocked
    (SWIZZLE_32_4_4) offset of docs/Formats.md §4.0 for a matrix of `C` =
    result columns (the runtime's `swizzledScaleOffset`). The input is the
    stored scale tensor of one weight (one expert of a bank), any shape with
    `swizzledScaleCount(R, C)` elements; U8 storage is reinterpreted as the
    block-scale type (E4M3 for NVFP4, E8M0 for MXFP8, as the registry lists
    for each format's `weight_scale`). Rows past R (padding) are dropped.

    A GPU backend whose block-scaled MMA consumes the swizzled layout
    directly may fold this op into the GEMM's scale operand.

    ```mlir
    %s = comfyquant.unswizzle %ws : tensor<128x8xf8E4M3FN> -> tensor<48x5xf8E4M3FN>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def ComfyQuant_LookupOp : ComfyQuant_Op<"lookup", [Pure]> {
  let summary = "Embedding lookup: dequantize only the rows named by indices";
  let description = [{
    `result[m] = dequantize(weight row indices[m])` for a `[V, D]` table:
    the dequantization of `comfyquant.dequantize` (docs/Formats.md §4, f32
    products, ConvRot un-rotation of the row, one rounding to the result
    element type) applied to the gathered rows only (docs/Formats.md §7.1).
    Side operands are named by `roles` as for `comfyquant.dequantize`
    (`weight_scale` is optional on embeddings: 1.0). Indices outside
    `[0, V)` are a caller error (the runtime checks them); a lowering must
    still not read outside the table.

    ```mlir
    %y = comfyquant.lookup %w[%idx], %s roles ["weight_scale"]
           format <int8_tensorwise, granularity = row> rotation <64>
           : (tensor<48x128xi8>, tensor<?xi64>, tensor<48x1xf32>) -> tensor<?x128xbf16>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$weight,
                       RankedTensorOf<[AnySignlessInteger, Index]>:$indices,
                       Variadic<AnyStaticShapeTensor>:$side,
                       StrArrayAttr:$roles, ComfyQuant_FormatAttr:$format,
                       OptionalAttr<ComfyQuant_RotationAttr>:$rotation);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $weight `[` $indices `]` (`,` $side^)? `roles` $roles `format` $format
    (`rotation` $rotation^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def ComfyQuant_QMatmulOp : ComfyQuant_Op<"qmatmul", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "Quantized matmul C[M, N] = A[M, K] · B[N, K]ᵀ, exact accumulation";
  let description = [{
    Integer operands (at most 8 bits, signed) accumulate exactly in i32;
    float operands (FP8, FP4, or f32 / bf16 / f16 for the full-precision
    path) in f32, in k order. The accumulator type is the result element
    type.

    Block-scaled operands (NVFP4, MXFP8): with `block B scales(As, Bs)`,
    `C[m][n] = Σ_k (A[m][k]·As[m][k/B]) · (B[n][k]·Bs[n][k/B])`, each
    product exact in f32, f32 accumulation. `As` is `[M, ceil(K/B)]`, `Bs`
    `[N, ceil(K/B)]` (logical layout, see `comfyquant.unswizzle`); `B`, the
    scale element type and the code width must be those of a block-scaled
    registry format (NVFP4: E2M1 codes, E4M3 scales, 16; MXFP8: E4M3 codes,
    E8M0 scales, 32).

    ```mlir
    %acc = comfyquant.qmatmul %xq, %w : tensor<?x256xi8>, tensor<64x256xi8> -> tensor<?x64xi32>
    %acc2 = comfyquant.qmatmul %a, %b block 16 scales(%as, %bs : tensor<?x5xf8E4M3FN>, tensor<48x5xf8E4M3FN>)
              : tensor<?x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<?x48xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs,
                       Optional<AnyRankedTensor>:$lhs_block_scales,
                       Optional<AnyRankedTensor>:$rhs_block_scales,
                       OptionalAttr<I64Attr>:$block);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs
    (`block` $block^ `scales` `(` $lhs_block_scales `,` $rhs_block_scales `:`
       type($lhs_block_scales) `,` type($rhs_block_scales) `)`)?
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def ComfyQuant_EpilogueOp : ComfyQuant_Op<"epilogue", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "y = f32(acc) · row_scale[m] · col_scale[n] + bias[n], cast";
  let description = [{
    The GEMM epilogue in CUTLASS order: `(f32(acc)·row_scale[m])·col_scale[n]
    + f32(bias[n])` in f32 and one rounding (RNE) to the result element
    type. Absent scales are 1 (no multiplication); a one-element scale
    broadcasts. `bias` has the result element type (ComfyUI adds the bias
    in the activation dtype; the producer casts it first).

    ```mlir
    %y = comfyquant.epilogue %acc row_scale %xs : tensor<?x1xf32> col_scale %ws : tensor<64x1xf32>
           bias %b : tensor<64xbf16> : tensor<?x64xi32> -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$acc,
                       Optional<AnyRankedTensor>:$row_scale,
                       Optional<AnyRankedTensor>:$col_scale,
                       Optional<AnyRankedTensor>:$bias);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $acc (`row_scale` $row_scale^ `:` type($row_scale))?
    (`col_scale` $col_scale^ `:` type($col_scale))?
    (`bias` $bias^ `:` type($bias))? attr-dict `:` type($acc) `->` type($result)
  }];
  let hasVerifier = 1;
}

def ComfyQuant_QGemmOp : ComfyQuant_Op<"qgemm", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "Quantized GEMM with its epilogue fused: y = epilogue(A · Bᵀ)";
  let description = [{
    `comfyquant.qmatmul` followed by `comfyquant.epilogue`, as one op
    (produced by `comfyquant-fuse-gemm-epilogue`): the accumulator (i32 for
    integer operands, f32 for float ones; block scales as in
    `comfyquant.qmatmul`) is consumed tile by tile by
    `(f32(acc)·row_scale[m])·col_scale[n] + f32(bias[n])` and rounded once
    to the result element type, so no [M, N] accumulator matrix reaches
    memory. Operand rules are those of the two ops it fuses.

    ```mlir
    %y = comfyquant.qgemm %xq, %w row_scale %xs : tensor<?x1xf32> col_scale %ws : tensor<64x1xf32>
           bias %b : tensor<64xbf16> : tensor<?x256xi8>, tensor<64x256xi8> -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs,
                       Optional<AnyRankedTensor>:$lhs_block_scales,
                       Optional<AnyRankedTensor>:$rhs_block_scales,
                       Optional<AnyRankedTensor>:$row_scale,
                       Optional<AnyRankedTensor>:$col_scale,
                       Optional<AnyRankedTensor>:$bias,
                       OptionalAttr<I64Attr>:$block);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs
    (`block` $block^ `scales` `(` $lhs_block_scales `,` $rhs_block_scales `:`
       type($lhs_block_scales) `,` type($rhs_block_scales) `)`)?
    (`row_scale` $row_scale^ `:` type($row_scale))?
    (`col_scale` $col_scale^ `:` type($col_scale))?
    (`bias` $bias^ `:` type($bias))?
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The accumulator type of the fused GEMM: i32 for integer operands,
    /// f32 for float ones.
    ::mlir::Type getAccumulatorType();
  }];
}

//===----------------------------------------------------------------------===//
// Target level: operations a back end forms and lowers per target.
//===----------------------------------------------------------------------===//

def ComfyQuant_MmaFP8Op : ComfyQuant_Op<"mma_fp8", [Pure,
    OptionalTypesMatchWith<"acc has the result type", "result", "acc",
                           "$_self">]> {
  let summary = "Warp-level FP8 m16n8k32 multiply-accumulate into f32 (CUDA)";
  let description = [{
    One warp computes `acc + A · B` for a 16 x 32 tile A and a 32 x 8
    tile B of FP8 codes (`a_type`, `b_type`: f8E4M3FN or f8E5M2) with f32
    accumulation; without `acc`, `A · B` (a zero accumulator, which stays
    an operand-free form so that no constant vector has to cross into a
    kernel). Each lane holds its part of the tiles in the register layout
    of PTX `mma.m16n8k32` with 8-bit operands: `a` is four registers of
    four codes, `b` two of four, `acc` and the result two rows of two f32.

    The op exists so that kernel formation stays the same for every CUDA
    arch: `comfyquant-gpu-lower-mma` turns it into the FP8 `mma.sync` on
    archs that have one (sm_89 and later) and into two exact f16
    `mma.sync` m16n8k16 elsewhere (every e4m3 and e5m2 value is an f16
    value).

    ```mlir
    %d = comfyquant.mma_fp8 %a, %b, %c : f8E4M3FN x f8E4M3FN
           : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[2], [I8]>:$a,
                       VectorOfRankAndType<[2], [I8]>:$b,
                       Optional<VectorOfRankAndType<[2], [F32]>>:$acc,
                       TypeAttr:$a_type, TypeAttr:$b_type);
  let results = (outs VectorOfRankAndType<[2], [F32]>:$result);
  let assemblyFormat = [{
    $a `,` $b (`,` $acc^)? `:` $a_type `x` $b_type attr-dict
    `:` type($a) `,` type($b) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The PTX type name of an FP8 operand type ("e4m3" or "e5m2").
    static ::llvm::StringRef getPtxTypeName(::mlir::Type fp8);
  }];
}

def ComfyQuant_WarpgroupMmaOp : ComfyQuant_Op<"warpgroup_mma", [
    AttrSizedOperandSegments,
    OptionalTypesMatchWith<"acc has the result type", "result", "acc",
                           "$_self">]> {
  let summary = "Block-level 64 x N multiply-accumulate of one 32-byte K "
                "step from workgroup memory (CUDA)";
  let description = [{
    The threads of a block, W warpgroups of 128 (W = 1 or 2), compute
    `acc + A · Bᵀ` for a 64W x K tile A and an N x K tile B that the block
    has just written to workgroup memory, warpgroup q taking the rows
    [64q, 64q + 64) of A, K being 32 bytes: 32 codes of i8 (s8 x s8 -> i32) or
    FP8 (f8E4M3FN/f8E5M2 x f8E4M3FN/f8E5M2 -> f32), 16 f16 or bf16 (-> f32), or 64
    E2M1 codes (f4E2M1FN x f4E2M1FN -> f32, with scales), two per byte, the
    lower K in the low nibble.
    Both tiles are 1-D buffers of 32-bit words stored K-major in 8 x
    16-byte core matrices: byte (row, k) of a tile is byte
    `(row / 8) * 256 + (k / 16) * 128 + (row % 8) * 16 + k % 16`.
    The op first waits for the whole block (a barrier), so the writes of
    every thread are seen; the block must not overwrite the tiles before
    another barrier after it.

    Every thread holds 64 x N / 128 accumulators, `vector<(N/8) x 2 x 2>`:
    element (j, r, e) of warp w (of the block), lane `4g + t` is row
    `16w + g + 8r`, column `8j + 2t + e`, which is both the layout of N / 8
    `mma.sync` m16n8 fragments per warp and the accumulator layout of each
    warpgroup's `wgmma` m64nN. Without `acc` the product starts from zero.
    Scales and FP4 operands take one warpgroup (W = 1).

    With `scales` (FP8 operands only: MXFP8, whose scale block is the K
    step), `a_scales[row]` and `b_scales[col]` are UE8M0 bytes in
    workgroup memory (2^(s - 127); 0xFF is NaN), one per row of A and
    column of B for this K step, and the result is
    `acc + (A · Bᵀ)[m, n] · (2^(a_scales[m] - 127) · 2^(b_scales[n] - 127))`:
    the block-scaled MMA where the arch has one (sm_120a), elsewhere the
    step's f32 partial sums times the f32 product of the two factors.

    FP4 operands (NVFP4) always take `scales`: four UE4M3 bytes per row of
    A and column of B (an E4M3 without its sign; 0x7F is NaN), byte
    `4 * row + j` scaling the K block `[16j, 16j + 16)` of that row:
    `acc + Σ_k e2m1(A[m, k]) · e2m1(B[n, k]) · ue4m3(a_scales[m, k / 16])
    · ue4m3(b_scales[n, k / 16])`. sm_120a has the block-scaled MMA
    (`kind::mxf4nvf4`); elsewhere each value times its scale is exact in
    f16, so the op becomes four f16 steps on tiles decoded in workgroup
    memory.

    Kernel formation emits it for every arch; `comfyquant-gpu-lower-mma`
    makes it `wgmma.mma_async` with shared-memory descriptors on sm_90a and
    per-warp fragment loads plus `mma.sync` elsewhere.

    ```mlir
    %d = comfyquant.warpgroup_mma %a, %b, %c : i8 x i8
           : memref<512xi32, #gpu.address_space<workgroup>>,
             memref<1024xi32, #gpu.address_space<workgroup>>
             -> vector<16x2x2xi32>
    ```
  }];
  let arguments = (ins Arg<MemRefRankOf<[I32], [1]>, "A tile", [MemRead]>:$a,
                       Arg<MemRefRankOf<[I32], [1]>, "B tile", [MemRead]>:$b,
                       Optional<VectorOfRankAndType<[3], [F32, I32]>>:$acc,
                       Arg<Optional<MemRefRankOf<[I8], [1]>>, "A scales",
                           [MemRead]>:$a_scales,
                       Arg<Optional<MemRefRankOf<[I8], [1]>>, "B scales",
                           [MemRead]>:$b_scales,
                       TypeAttr:$a_type, TypeAttr:$b_type);
  let results = (outs VectorOfRankAndType<[3], [F32, I32]>:$result);
  let assemblyFormat = [{
    $a `,` $b (`,` $acc^)?
    (`scales` `(` $a_scales^ `,` $b_scales `:` type($a_scales) `,`
     type($b_scales) `)`)?
    `:` $a_type `x` $b_type attr-dict
    `:` type($a) `,` type($b) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Rows of A per warpgroup (its M).
    static constexpr int64_t kRows = 64;
    /// The most warpgroups a block may hold.
    static constexpr int64_t kMaxWarpgroups = 2;
    /// Bytes of K per step.
    static constexpr int64_t kStepBytes = 32;
    /// E2M1 codes per FP4 scale (four blocks per step).
    static constexpr int64_t kFP4Block = 16;
    /// Whether wgmma (sm_90a) adds each step's product to f32 accumulators
    /// outside the instruction: FP8 operands without scales (FP8 wgmma
    /// sums keep fewer bits than f32). Tile choices depend on it too.
    static bool promotesProducts(::mlir::Type a, bool scaled) {
      return !scaled &&
             ::llvm::isa<::mlir::Float8E4M3FNType, ::mlir::Float8E5M2Type>(a);
    }
    /// Warpgroups of the block (W): A's rows / kRows.
    int64_t getWarpgroups() {
      auto t = ::llvm::cast<::mlir::MemRefType>(getA().getType());
      return t.getNumElements() * 4 / (kRows * kStepBytes);
    }
    /// Columns of B (N).
    int64_t getColumns() {
      return ::llvm::cast<::mlir::VectorType>(getResult().getType())
                 .getDimSize(0) * 8;
    }
  }];
}

#endif // COMFYQUANT_OPS_TD
