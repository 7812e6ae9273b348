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

// Case order matches comfyquant::rt::ModuleKind so the two convert by value.
def ComfyQuant_ModuleKind : I32EnumAttr<"ModuleKind", "kind of quantized module", [
    I32EnumAttrCase<"linear", 0>, I32EnumAttrCase<"embedding", 1>,
    I32EnumAttrCase<"moe", 2>]> {
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

def ComfyQuant_ActScheme : I32EnumAttr<"ActScheme",
    "how activations are quantized (docs/Formats.md §5)", [
    I32EnumAttrCase<"fp8_static", 0>,   // input_scale or 1.0, clamp, RNE
    I32EnumAttrCase<"nvfp4_block", 1>,  // E4M3 16-blocks, global static/dynamic
    I32EnumAttrCase<"mxfp8_block", 2>,  // E8M0 32-blocks, dynamic
    I32EnumAttrCase<"int8_row", 3>,     // dynamic per-row amax/127
    I32EnumAttrCase<"int4_row", 4>]> {  // dynamic per-row amax/7
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}


def ComfyQuant_TargetKind : I32EnumAttr<"TargetKind",
    "the back end kernels are compiled by", [
    I32EnumAttrCase<"cpu", 0>,
    I32EnumAttrCase<"cuda", 1>]> {
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

def ComfyQuant_ActivationType : I32EnumAttr<"ActivationType",
    "element type of the activations and outputs of computation functions", [
    I32EnumAttrCase<"f32", 0>,
    I32EnumAttrCase<"bf16", 1>,
    I32EnumAttrCase<"f16", 2>]> {
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

def ComfyQuant_CpuMicroKernel : I32EnumAttr<"CpuMicroKernel",
    "the register-blocked inner loop of a CPU GEMM", [
    I32EnumAttrCase<"f32_fma", 0>,          // f32 broadcast-FMA
    I32EnumAttrCase<"i8_generic", 1>,       // widen to i16/i32, multiply-add
    I32EnumAttrCase<"i8_pmaddwd", 2>,       // i16 pairs (AVX2 vpmaddwd)
    I32EnumAttrCase<"i8_vnni", 3>,          // AVX-512 VNNI vpdpbusd
    I32EnumAttrCase<"i8_vnni_emulated", 4>, // the same data flow, AVX2 ops
    I32EnumAttrCase<"i8_amx", 5>,           // AMX tdpbssd tiles
    I32EnumAttrCase<"i8_amx_emulated", 6>,  // AMX tile semantics, vector ops
    I32EnumAttrCase<"bf16_dot", 7>,         // AVX512-BF16 vdpbf16ps: bf16
                                            // pairs, f32 accumulator
    I32EnumAttrCase<"bf16_dot_emulated", 8>, // the same, portable ops
    I32EnumAttrCase<"bf16_amx", 9>,          // AMX-BF16 tdpbf16ps tiles:
                                             // bf16 pairs, f32 accumulator
    I32EnumAttrCase<"bf16_amx_emulated", 10>]> { // AMX tile semantics, scalar
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

def ComfyQuant_CpuDecode : I32EnumAttr<"CpuDecode",
    "where a CPU GEMM's B operand is decoded from its packed storage", [
    I32EnumAttrCase<"none", 0>,     // B is read as stored (no decoder)
    I32EnumAttrCase<"whole", 1>,    // decoded whole before the GEMM (AMX)
    I32EnumAttrCase<"panel", 2>,    // once per N tile into a reused [nr, K]
                                    // panel that the M block's tiles share
    I32EnumAttrCase<"reg", 3, "register">, // per kv-vector in the K loop
    I32EnumAttrCase<"adaptive", 4>]> { // register for a one-row call,
                                       // panel otherwise (decided at run time)
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

def ComfyQuant_CpuGemmForm : I32EnumAttr<"CpuGemmForm",
    "how a vector CPU GEMM's micro-kernel lays its accumulators", [
    I32EnumAttrCase<"inner", 0>,  // K along the lanes: each accumulator is
                                  // one C element's partial dot product,
                                  // reduced horizontally per tile
    I32EnumAttrCase<"outer", 1>]> { // N along the lanes: broadcast A times a
                                    // K-major packed panel of B, no reduction
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

/// `form` defaults to `inner`, and is then left out of the printed form.
def ComfyQuant_CpuGemmFormParameter : EnumParameter<ComfyQuant_CpuGemmForm> {
  let defaultValue = "::mlir::comfyquant::CpuGemmForm::inner";
}

def ComfyQuant_CpuRowKernel : I32EnumAttr<"CpuRowKernel",
    "the micro-kernel of a CPU GEMM's one-row calls (M = 1)", [
    I32EnumAttrCase<"ukernel", 0>,  // the GEMM's own
    I32EnumAttrCase<"f32_fma", 1>,  // f32 FMAs on B decoded to f32 (a bf16
                                    // kernel whose B has no register table)
    I32EnumAttrCase<"bf16_dot", 2>,    // vdpbf16ps on B's bf16 table read
                                       // by register permutes (f32_fma
                                       // where vdpbf16ps is half rate)
    I32EnumAttrCase<"i8_planes", 3>]> { // the integer dot on B's nibble
                                        // planes: 2·kv elements of K per
                                        // step, even and odd apart
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

/// `row` defaults to `ukernel`, and is then left out of the printed form.
def ComfyQuant_CpuRowKernelParameter : EnumParameter<ComfyQuant_CpuRowKernel> {
  let defaultValue = "::mlir::comfyquant::CpuRowKernel::ukernel";
}

def ComfyQuant_GpuMmaKind : I32EnumAttr<"GpuMmaKind",
    "the operands a tensor-core GEMM kernel multiplies", [
    I32EnumAttrCase<"s8", 0>,                // i8 x i8 -> i32
    I32EnumAttrCase<"fp8", 1>,               // e4m3/e5m2 -> f32
    I32EnumAttrCase<"fp8_ue8m0_scaled", 2>,  // MXFP8, UE8M0 scales per step
    I32EnumAttrCase<"fp8_block_scaled", 3>,  // FP8, another scale function
    I32EnumAttrCase<"f16", 4>,               // f16 -> f32
    I32EnumAttrCase<"fp4_ue4m3_scaled", 5>,  // NVFP4, 4 UE4M3 scales per step
    I32EnumAttrCase<"bf16", 6>]> {             // bf16 -> f32
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Attribute interfaces
//===----------------------------------------------------------------------===//

def ComfyQuant_GemmConfigAttrInterface
    : AttrInterface<"GemmConfigAttrInterface"> {
  let cppNamespace = "::mlir::comfyquant";
  let description = [{
    How one back end computes one GEMM: the tile of C each unit of work
    (a CPU micro-kernel call, a GPU block) produces and the K step it
    consumes at a time. Every back end's config implements it, so that
    reports and tests read GEMM plans alike.
  }];
  let methods = [
    InterfaceMethod<"The back end the config is for.",
                    "::mlir::comfyquant::TargetKind", "getBackend">,
    InterfaceMethod<"Rows of C per unit of work.", "int64_t", "getTileRows">,
    InterfaceMethod<"Columns of C per unit of work.", "int64_t",
                    "getTileCols">,
    InterfaceMethod<"Elements of K per step.", "int64_t", "getStepK">,
  ];
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
    How `comfyquant.quantize` turns activations into GEMM codes
    (docs/CpuCodegen.md §1). `type` is the FP8 code type of `fp8_static`
    (the weight's); `block` is the block size of the block schemes, which
    must be the registry's block size of the matching format (NVFP4 16,
    MXFP8 32).

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
  let extraClassDeclaration = [{
    /// The block-scaled format whose activations this scheme quantizes
    /// (nvfp4_block -> nvfp4, mxfp8_block -> mxfp8), else nullopt.
    std::optional<::comfyquant::rt::Format> getBlockFormat() const;
  }];
}

def ComfyQuant_ModuleInfoAttr : ComfyQuant_Attr<"ModuleInfo", "module"> {
  let summary = "What a decomposed function computes: the module it came from";
  let description = [{
    `comfyquant-decompose-modules` replaces each module op by a `func.func`
    of the same symbol name and records the module on it as the discardable
    attribute `comfyquant.module`, so the function still states its kind,
    format, logical shape (`out_features` N / V, `in_features` K / D),
    expert count, rotation and options (everything a manifest entry needs;
    the bound tensors are the function's `comfyquant.weight` ops). The
    dialect verifies that the function's signature is the kernel contract
    of that kind (docs/CpuCodegen.md §2):

    * linear: `(x: tensor<MxKxT>) -> tensor<MxNxT>`
    * moe: `(x: tensor<MxKxT>, expert: index) -> tensor<MxNxT>`
    * embedding: `(indices: tensor<Mxi64>) -> tensor<MxDxT>`

    with `T` one of f32, bf16, f16 and `M` usually dynamic.

    ```mlir
    #comfyquant.module<linear, format = <int8_tensorwise, granularity = row>, out_features = 64, in_features = 256, rotation = <256>>
    #comfyquant.module<moe, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64, experts = 3>
    ```
  }];
  let parameters = (ins
    EnumParameter<ComfyQuant_ModuleKind>:$kind,
    AttrParameter<"::mlir::comfyquant::FormatAttr", "weight format">:$format,
    "int64_t":$out_features,
    "int64_t":$in_features,
    DefaultValuedParameter<"int64_t", "0">:$experts,
    OptionalParameter<"::mlir::comfyquant::RotationAttr">:$rotation,
    OptionalParameter<"::mlir::comfyquant::OptionsAttr">:$options);
  let assemblyFormat = [{
    `<` $kind `,` struct($format, $out_features, $in_features, $experts,
                         $rotation, $options) `>`
  }];
  let genVerifyDecl = 1;
}

def ComfyQuant_TargetAttr : ComfyQuant_Attr<"Target", "target"> {
  let summary = "What kernels are compiled for: a CPU variant or a CUDA arch";
  let description = [{
    One entry of the runtime's target table (comfyquant/runtime/Targets.h):
    a CPU kernel variant or a CUDA arch. The LLVM CPU and features, the
    vector width, the PTX version and the tensor-core instructions of the
    target come from that table, so IR that pins a target means the same
    thing to every tool.

    A CPU target may also name the CPU its kernels are tuned for, beyond
    what the variant's ISA says (as LLVM's -mtune): `generic` (the default,
    left out of the printed form), `host` (the compiling machine) or an
    LLVM x86-64 CPU name. The strategy and the vectorizers read it here.

    ```mlir
    #comfyquant.target<cpu, "avx512-vnni">
    #comfyquant.target<cpu, "avx512-bf16", tune = "emeraldrapids">
    #comfyquant.target<cuda, "sm_90a">
    ```
  }];
  let parameters = (ins EnumParameter<ComfyQuant_TargetKind>:$kind,
                        StringRefParameter<"variant or arch name">:$name,
                        StringRefParameter<"CPU the kernels are tuned for",
                                           "\"generic\"">:$tune);
  let builders = [
    AttrBuilder<(ins "TargetKind":$kind, "::llvm::StringRef":$name), [{
      return $_get($_ctxt, kind, name, "generic");
    }]>
  ];
  let assemblyFormat = "`<` $kind `,` $name (`,` `tune` `=` $tune^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The CPU variant (null for a CUDA target).
    const ::comfyquant::rt::CpuVariantInfo *getCpuVariant() const;
    /// The CUDA arch (null for a CPU target).
    const ::comfyquant::rt::CudaArchInfo *getCudaArch() const;
  }];
}

def ComfyQuant_GemmKind : I32EnumAttr<"GemmKind",
    "what a GEMM contraction multiplies and accumulates in", [
    I32EnumAttrCase<"I8I8I32", 0, "i8">,    // i8 x i8, sign-extended, i32
    I32EnumAttrCase<"FloatF32", 1, "float">, // f32/bf16/f16 operands, f32
    I32EnumAttrCase<"F8F8F32", 2, "fp8">,   // FP8 codes stored as i8, widened
                                            // in the body (optionally block-
                                            // scaled: MXFP8), f32
    I32EnumAttrCase<"F4F4F32", 3, "fp4">]> { // E2M1 codes one per i8, decoded
                                            // in the body, block-scaled
                                            // (NVFP4), f32
  let cppNamespace = "::mlir::comfyquant";
  let genSpecializedAttr = 0;
}

def ComfyQuant_GemmInfoAttr : ComfyQuant_Attr<"GemmInfo", "gemm_info"> {
  let summary = "What a linalg contraction built from a GEMM computes";
  let description = [{
    The conversion to linalg tags each contraction it builds from a
    `comfyquant.qmatmul`/`qgemm` (`comfyquant.gemm_info`): the kind, the
    element types as multiplied (for FP8 and FP4 codes stored as i8, their
    float type) and, for block-scaled contractions, the block size of the
    scale operands (inputs 2 and 3). The back ends find their GEMMs by this
    tag instead of matching the body again; `comfyquant-tag-gemms` tags
    contractions written by hand (tests, other producers).

    ```mlir
    #comfyquant.gemm_info<i8, i8 x i8>
    #comfyquant.gemm_info<fp4, f4E2M1FN x f4E2M1FN, block = 16>
    ```
  }];
  let parameters = (ins EnumParameter<ComfyQuant_GemmKind>:$kind,
                        "::mlir::Type":$aType, "::mlir::Type":$bType,
                        DefaultValuedParameter<"int64_t", "0">:$block);
  let assemblyFormat =
      "`<` $kind `,` $aType `x` $bType (`,` `block` `=` $block^)? `>`";
  let genVerifyDecl = 1;
}

def ComfyQuant_CpuGemmAttr : ComfyQuant_Attr<"CpuGemm", "cpu_gemm", [
    DeclareAttrInterfaceMethods<ComfyQuant_GemmConfigAttrInterface>]> {
  let summary = "How the CPU back end computes one GEMM";
  let description = [{
    The micro-kernel and its tiles: `mr` x `nr` vector registers of
    accumulators (rows of C x vectors of columns; AMX: rows and columns
    of C in one or two 16 x 16 tiles each, below), `kv` elements of K per
    step, `mc` rows of A per block that
    a packed panel of B is reused across (a multiple of `mr`), and where
    B's decoder runs (`decode`): not at all (`none`, B is used as stored),
    whole before the GEMM (`whole`), once per N tile into a reused panel
    (`panel`), per K step in registers (`register`), or in registers for
    one-row calls (M = 1) and through the panel otherwise (`adaptive`).

    `form` says which way the accumulators run. `inner` (the default): each
    of the mr x nr accumulators holds kv K-elements of one C element's dot
    product and is reduced once per tile. `outer` (f32_fma, the VNNI
    and bf16 kernels): each accumulator holds one vector of adjacent C
    columns, so a tile is mr rows x nr vectors of columns; A is broadcast
    one element (VNNI: four bytes, bf16: two values) at a time and B is read
    from a K-major panel packed once per N tile and M block. One-row M
    blocks and column tails narrower than a vector use the inner form. `kc`
    (outer form; 0, the default, and then left out: the whole of K) splits
    K into blocks of kc elements, a multiple of kv: the panel is packed per
    K block, so it stays in L1 while the M block's tiles stream past it,
    and the accumulators of the blocks before the last wait in an
    [mc, columns] buffer; the epilogue runs after the last block.

    `row` is the micro-kernel of one-row calls, which use each decoded
    element of B once, so the decode costs more than the products: the
    GEMM's own (`ukernel`, the default, then left out), `f32_fma` (a bf16
    kernel whose B decoder is not a table: widening a bf16 to f32 folds into
    the decoder) or `bf16_dot` (vdpbf16ps on B decoded through a table of
    bf16s in registers, A read as stored; chosen for an f32_fma GEMM on bf16
    operands of a CPU with a bf16 dot product, where the tuning made the
    GEMM's rows take FMAs).

    `min_rows` (1, the default, then left out) is the fewest rows of A the
    config is meant for: the runtime runs a call with fewer rows with the
    entry of another variant of the artifact (the best one whose config
    has no such floor), so an AMX kernel, which pads every call to 16-row
    tiles, never computes a one-row call where a VNNI kernel exists.

    AMX (`i8_amx`, `bf16_amx`): `mr` x `nr` is 16 or 32 each, one or two
    16 x 16 i32 (f32) tiles of C per direction (2 x 2: four accumulators,
    two B and two A tiles, all eight tile registers), `kv` the elements of
    a 64-byte K step (64 i8, 32 bf16), and `mc` the rows of A whose packed
    codes stay in L2 while every N tile of B passes over them.

    ```mlir
    #comfyquant.cpu_gemm<i8_amx, mr = 32, nr = 32, kv = 64, mc = 256, decode = none, min_rows = 16>
    #comfyquant.cpu_gemm<i8_vnni, mr = 4, nr = 4, kv = 64, mc = 64, decode = adaptive>
    #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 128, decode = none, form = outer>
    #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 258, decode = adaptive, form = outer, row = bf16_dot>
    ```
  }];
  let parameters = (ins EnumParameter<ComfyQuant_CpuMicroKernel>:$ukernel,
                        "int64_t":$mr, "int64_t":$nr, "int64_t":$kv,
                        "int64_t":$mc,
                        DefaultValuedParameter<"int64_t", "0">:$kc,
                        EnumParameter<ComfyQuant_CpuDecode>:$decode,
                        ComfyQuant_CpuGemmFormParameter:$form,
                        ComfyQuant_CpuRowKernelParameter:$row,
                        DefaultValuedParameter<"int64_t", "1">:$min_rows);
  let assemblyFormat = "`<` $ukernel `,` struct($mr, $nr, $kv, $mc, $kc, "
                       "$decode, $form, $row, $min_rows) `>`";
  let genVerifyDecl = 1;
}

def ComfyQuant_GpuGemmAttr : ComfyQuant_Attr<"GpuGemm", "gpu_gemm", [
    DeclareAttrInterfaceMethods<ComfyQuant_GemmConfigAttrInterface>]> {
  let summary = "How the CUDA back end computes one GEMM";
  let description = [{
    The operand kind of a tensor-core GEMM kernel, the block's tile of C,
    each warp's tile, the bytes of K per step and the shared-memory stages.
    The instruction follows from the kind and the arch (wgmma on sm_90a,
    mma.sync elsewhere, block-scaled on sm_120a).

    `split_k` (default 1, then not printed): for a decode-sized M (at most
    `kSplitRows` rows) the K loop is split over that many blocks along the
    grid's z, each writing its partial sums to a workspace, and a second
    kernel adds them in split order and applies the epilogue, so that a
    narrow N still fills the GPU. Larger M runs one block per tile.

    `decode_rows` (default 0, then not printed): from that many rows of A
    on, the fused decoder of B (W4A8's codes through its grid, W4A4's
    nibbles) runs once per call, a kernel writing the decoded operand into
    a workspace, and the GEMM reads that as stored with the tile a stored
    operand gets (two warpgroups, cp.async stages where they fit); for
    plain FP8 and NVFP4 both operands (NVFP4's times their block scales)
    are widened to f16 once per call and an f16 GEMM reads them (for archs
    without the format's MMA); below it, the GEMM
    decodes B in its copies as configured. A fused decoder
    decodes every weight once per row tile of C, so from two row tiles on
    decoding once costs less.

    ```mlir
    #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>
    #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1, split_k = 6>
    #comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2, split_k = 11>
    #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1, split_k = 16, decode_rows = 128>
    ```
  }];
  let parameters = (ins EnumParameter<ComfyQuant_GpuMmaKind>:$kind,
                        ArrayRefParameter<"int64_t">:$block,
                        ArrayRefParameter<"int64_t">:$warp,
                        "int64_t":$k_bytes, "int64_t":$stages,
                        DefaultValuedParameter<"int64_t", "1">:$split_k,
                        DefaultValuedParameter<"int64_t", "0">:$decode_rows);
  // Custom: the two optional trailing keys each start with a comma, which
  // the declarative format cannot tell apart.
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// The most rows of A for which a split_k config splits K.
    static constexpr int64_t kSplitRows = 16;
    /// The most blocks K is split over.
    static constexpr int64_t kMaxSplitK = 16;
    /// The kernel that decodes an operand once per call (decode_rows) is
    /// outlined under this name; its PTX name ends with "_decode".
    static constexpr ::llvm::StringLiteral kDecodeKernelName = "decode_operand";
  }];
  let genVerifyDecl = 1;
}

#endif // COMFYQUANT_ATTRS_TD
