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
  }];
}

class ComfyQuant_Op<string mnemonic, list<Trait> traits = []>
    : Op<ComfyQuant_Dialect, mnemonic, traits>;

#endif // COMFYQUANT_DIALECT_TD
