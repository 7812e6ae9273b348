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
  let arguments = (ins SymbolRefAttr:$tensor);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$tensor attr-dict `:` type($result)";
}

def ComfyQuant_RotateOp : ComfyQuant_Op<"rotate", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "ConvRot rotation of activations along the last dimension";
  let arguments = (ins AnyRankedTensor:$input, ComfyQuant_RotationAttr:$rotation);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input $rotation attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def ComfyQuant_QuantizeOp : ComfyQuant_Op<"quantize", [Pure]> {
  let summary = "Quantize activations [M, K] to codes plus scales";
  let description = [{
    `int8_row` / `int4_row`: per-row dynamic scales `[M, 1]` f32
    (`max(amax/127, 1e-30)`, `amax/7`), codes i8 / i4. `fp8_static`: one f32
    scale (the optional `static_scale`, else 1.0), codes of `type`.
    `mxfp8_block`: E8M0 scales per 32-block `[M, K/32]`. `nvfp4_block`:
    E4M3 block scales per 16-block `[M, K/16]` (global scale `static_scale`
    or dynamic amax/2688), codes f4E2M1FN.
  }];
  let arguments = (ins AnyRankedTensor:$input, ComfyQuant_ActQuantAttr:$scheme,
                       Optional<AnyRankedTensor>:$static_scale);
  let results = (outs AnyRankedTensor:$codes, AnyRankedTensor:$scales);
  let assemblyFormat = [{
    $input $scheme (`scale` $static_scale^ `:` type($static_scale))? attr-dict
    `:` type($input) `->` type($codes) `,` type($scales)
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

def ComfyQuant_QMatmulOp : ComfyQuant_Op<"qmatmul", [Pure]> {
  let summary = "Quantized matmul C[M, N] = A[M, K] · B[N, K]ᵀ, exact accumulation";
  let description = [{
    Integer operands accumulate in i32 (exact); float (FP8 / FP4 / bf16)
    operands in f32. The accumulator type is the result element type.
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def ComfyQuant_EpilogueOp : ComfyQuant_Op<"epilogue", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "y = f32(acc) · row_scale[m] · col_scale[n] + bias[n], cast";
  let description = [{
    The GEMM epilogue in CUTLASS order: `(f32(acc)·xs)·ws + bias` in f32 and
    one rounding to the result element type.
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

#endif // COMFYQUANT_OPS_TD
