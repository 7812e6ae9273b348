//===- comfyquant-opt.cpp - comfyquant optimizer driver -------------------===//
//
// mlir-opt with the comfyquant dialect and passes: every upstream dialect,
// extension and pass is registered too, so pipelines that lower comfyquant
// IR to upstream dialects run in one tool. Options are mlir-opt's; -o may
// not name the input file (mlir-opt would truncate it before reading).
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/GPUCodegen.h"
#include "comfyquant/Conversion/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h"
#include "comfyquant/Pipelines/Pipelines.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/OutputFile.h"
#include "ToolVersion.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mlir::comfyquant::ComfyQuantDialect>();
  mlir::registerAllPasses();
  mlir::comfyquant::registerComfyQuantPasses();
  mlir::comfyquant::registerComfyQuantPipelines();
  mlir::comfyquant::registerComfyQuantConversionPasses();
  mlir::comfyquant::registerComfyQuantCPUCodegen();
  mlir::comfyquant::registerComfyQuantGPUCodegen();
  mlir::comfyquant::registerComfyQuantGPUTranslations(registry);
  ::comfyquant::tools::setVersionPrinter();
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "comfyquant optimizer driver\n", registry);
  if (input != "-" && output != "-") {
    try {
      ::comfyquant::rt::checkNotAnInput(output, {input});
    } catch (const ::comfyquant::rt::Error &e) {
      llvm::errs() << "comfyquant-opt: error: " << e.what() << "\n";
      return 1;
    }
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}
