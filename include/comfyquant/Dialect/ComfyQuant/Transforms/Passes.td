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

#endif // COMFYQUANT_PASSES_TD
