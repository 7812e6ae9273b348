//===- ComfyQuantAttrs.td - comfyquant attributes -----------*- tablegen -*-===//
#ifndef COMFYQUANT_ATTRS_TD
#define COMFYQUANT_ATTRS_TD

include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

// Case order matches comfyquant::rt::Format so the two convert by value.
def ComfyQuant_FormatKind : I32EnumAttr<"FormatKind", "Comfy quant weight format", [
    I32EnumAttrCase<"float8_e4m3fn", 0>,
    I32EnumAttrCase<"float8_e5m2", 1>,
    I32EnumAttrCase<"nvfp4", 2>,
    I32EnumAttrCase<"mxfp8", 3>,
    I32EnumAttrCase<"int8_tensorwise", 4>,
    I32EnumAttrCase<"convrot_w4a4", 5>,
    I32EnumAttrCase<"asym_w4a8_int8", 6>,
    I32EnumAttrCase<"w6a8_int8", 7>]> {
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

def ComfyQuant_ScaleGranularity : I32EnumAttr<"ScaleGranularity",
    "granularity of a scale", [
    I32EnumAttrCase<"tensor", 0>, I32EnumAttrCase<"row", 1>,
    I32EnumAttrCase<"group", 2>, I32EnumAttrCase<"block", 3>]> {
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

def ComfyQuant_NibbleOrder : I32EnumAttr<"NibbleOrder",
    "which nibble of a byte holds the even column", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"high_first", 1>,
    I32EnumAttrCase<"low_first", 2>]> {
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

def ComfyQuant_LinearDtype : I32EnumAttr<"LinearDtype",
    "activation precision of convrot_w4a4 matmuls", [
    I32EnumAttrCase<"int4", 0>, I32EnumAttrCase<"int8", 1>]> {
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

def ComfyQuant_ActScheme : I32EnumAttr<"ActScheme",
    "how activations are quantized (formats.md §5)", [
    I32EnumAttrCase<"fp8_static", 0>,   // input_scale or 1.0, clamp, RNE
    I32EnumAttrCase<"nvfp4_block", 1>,  // E4M3 16-blocks, global static/dynamic
    I32EnumAttrCase<"mxfp8_block", 2>,  // E8M0 32-blocks, dynamic
    I32EnumAttrCase<"int8_row", 3>,     // dynamic per-row amax/127
    I32EnumAttrCase<"int4_row", 4>]> {  // dynamic per-row amax/7
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class ComfyQuant_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<ComfyQuant_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def ComfyQuant_FormatAttr : ComfyQuant_Attr<"Format", "format"> {
  let summary = "A weight format: kind plus the parameters that pin it down";
  let description = [{
    One enum plus parameters. `granularity` and `group` say how the weight
    scales apply (tensor / row / group of `group` along K / swizzled block of
    `group`), `scale` is the element type of block or group scales, `nibbles`
    the packing of 4-bit codes. The verifier checks the combination against
    the format registry.

    ```mlir
    #comfyquant.format<nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first>
    #comfyquant.format<int8_tensorwise, granularity = row>
    ```
  }];
  let parameters = (ins
    EnumParameter<ComfyQuant_FormatKind>:$kind,
    EnumParameter<ComfyQuant_ScaleGranularity>:$granularity,
    DefaultValuedParameter<"int64_t", "0">:$group,
    OptionalParameter<"::mlir::Type">:$scale,
    DefaultValuedParameter<"::mlir::comfyquant::NibbleOrder",
                           "::mlir::comfyquant::NibbleOrder::none">:$nibbles);
  let assemblyFormat = [{
    `<` $kind `,` struct($granularity, $group, $scale, $nibbles) `>`
  }];
  let genVerifyDecl = 1;
  let builders = [
    // The registry's default parameters for `kind` (group size G for
    // grouped formats, row granularity for per-row int8).
    AttrBuilder<(ins "FormatKind":$kind, "ScaleGranularity":$granularity,
                     "int64_t":$group)>
  ];
  let extraClassDeclaration = [{
    /// The registry entry of this format.
    const ::comfyquant::rt::FormatInfo &getInfo() const;
  }];
}

def ComfyQuant_RotationAttr : ComfyQuant_Attr<"Rotation", "convrot"> {
  let summary = "ConvRot: group-wise regular Hadamard rotation along K";
  let description = [{
    Rotation of consecutive groups of `group` columns by the normalised
    regular Hadamard matrix (a power of 4). `H` is symmetric and involutory,
    so the same attribute both rotates and un-rotates.

    ```mlir
    #comfyquant.convrot<256>
    ```
  }];
  let parameters = (ins "int64_t":$group);
  let assemblyFormat = "`<` $group `>`";
  let genVerifyDecl = 1;
}

def ComfyQuant_OptionsAttr : ComfyQuant_Attr<"Options", "options"> {
  let summary = "Module options from comfy_quant";
  let description = [{
    ```mlir
    #comfyquant.options<full_precision_matrix_mult = true>
    #comfyquant.options<linear_dtype = int8>
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"bool", "false">:$full_precision_matrix_mult,
    OptionalParameter<"std::optional<::mlir::comfyquant::LinearDtype>">:$linear_dtype);
  let assemblyFormat = "`<` struct(params) `>`";
}

def ComfyQuant_ActQuantAttr : ComfyQuant_Attr<"ActQuant", "act"> {
  let summary = "Activation quantization scheme";
  let description = [{
    ```mlir
    #comfyquant.act<int8_row>
    #comfyquant.act<fp8_static, type = f8E4M3FN>
    #comfyquant.act<nvfp4_block, block = 16>
    ```
  }];
  let parameters = (ins
    EnumParameter<ComfyQuant_ActScheme>:$scheme,
    OptionalParameter<"::mlir::Type">:$type,
    DefaultValuedParameter<"int64_t", "0">:$block);
  let assemblyFormat = "`<` $scheme (`,` struct($type, $block)^)? `>`";
  let genVerifyDecl = 1;
}

#endif // COMFYQUANT_ATTRS_TD
