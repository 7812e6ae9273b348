//===- ComfyQuantDialect.td - comfyquant dialect ------------*- tablegen -*-===//
#ifndef COMFYQUANT_DIALECT_TD
#define COMFYQUANT_DIALECT_TD

include "mlir/IR/OpBase.td"

def ComfyQuant_Dialect : Dialect {
  let name = "comfyquant";
  let cppNamespace = "::mlir::comfyquant";
  let summary = "Comfy quant checkpoints, quantized modules and their computation";
  let description = [{
    The comfyquant dialect states a ComfyUI quantized ("Comfy quant")
    checkpoint exactly: the tensors of the file (by name, dtype, shape and
    offset; never the bytes), the quantized modules that use them (linear,
    embedding, MoE bank) with their format, logical shape, ConvRot rotation
    and options, and the computation level that the decompose / fuse passes
    produce (rotate, quantize, dequantize, quantized matmul, epilogue).
    Every format rule is checked by the runtime's format registry, the single
    source of truth shared with the checkpoint reader and the reference path.
  }];
  let useDefaultAttributePrinterParser = 1;
  // Verifies `comfyquant.module` on decomposed functions (other
  // `comfyquant.*` discardable attributes, e.g. codegen's strategy records,
  // are accepted as they are).
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Registers the attributes (in the TU that defines their storage).
    void registerAttributes();

    /// The discardable attribute naming the module a function implements.
    static constexpr ::llvm::StringLiteral getModuleAttrName() {
      return ::llvm::StringLiteral("comfyquant.module");
    }
    /// #comfyquant.target: the CPU variant or CUDA arch code is for (on a
    /// function, a module or a gpu.module).
    static constexpr ::llvm::StringLiteral getTargetAttrName() {
      return ::llvm::StringLiteral("comfyquant.target");
    }
    /// A GEMM's config (#comfyquant.cpu_gemm / #comfyquant.gpu_gemm).
    static constexpr ::llvm::StringLiteral getGemmAttrName() {
      return ::llvm::StringLiteral("comfyquant.gemm");
    }
    /// What a contraction built from a GEMM computes (#comfyquant.gemm_info).
    static constexpr ::llvm::StringLiteral getGemmInfoAttrName() {
      return ::llvm::StringLiteral("comfyquant.gemm_info");
    }
    /// The configs of the tensor-core GEMMs a function was formed with.
    static constexpr ::llvm::StringLiteral getGemmsAttrName() {
      return ::llvm::StringLiteral("comfyquant.gemms");
    }
    /// The entry symbol a kernel function is exported under.
    static constexpr ::llvm::StringLiteral getEntryAttrName() {
      return ::llvm::StringLiteral("comfyquant.entry");
    }
    /// On a lowered kernel function: the module it computes
    /// (#comfyquant.module) and its weight arguments' bindings.
    static constexpr ::llvm::StringLiteral getLoweredModuleAttrName() {
      return ::llvm::StringLiteral("comfyquant.lowered_module");
    }
    static constexpr ::llvm::StringLiteral getWeightsAttrName() {
      return ::llvm::StringLiteral("comfyquant.weights");
    }
    /// On a CPU kernel module after packed entries: the entries that
    /// compute only the column range they are given.
    static constexpr ::llvm::StringLiteral getColumnSplitAttrName() {
      return ::llvm::StringLiteral("comfyquant.column_split");
    }
    /// On a CPU kernel function: the fewest rows of A its GEMMs' configs
    /// are meant for (their largest min_rows, when above 1); on its module
    /// after packed entries: {entry symbol: that floor}.
    static constexpr ::llvm::StringLiteral getMinRowsAttrName() {
      return ::llvm::StringLiteral("comfyquant.min_rows");
    }
    /// On a CUDA host entry: its kernels in launch order and its workspace
    /// rule [bytes per row, fixed bytes].
    static constexpr ::llvm::StringLiteral getKernelsAttrName() {
      return ::llvm::StringLiteral("comfyquant.kernels");
    }
    static constexpr ::llvm::StringLiteral getWorkspaceBytesAttrName() {
      return ::llvm::StringLiteral("comfyquant.workspace_bytes");
    }
  }];
}

class ComfyQuant_Op<string mnemonic, list<Trait> traits = []>
    : Op<ComfyQuant_Dialect, mnemonic, traits>;

#endif // COMFYQUANT_DIALECT_TD
