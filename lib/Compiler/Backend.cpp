//===- Backend.cpp - one target back end of the compile driver ------------===//
#include "comfyquant/Compiler/Backend.h"

using namespace mlir::comfyquant;

// The vtable's home.
Backend::~Backend() = default;

bool Backend::lowerToLinalg(ModuleOp decomposed, const PassManagerSetup &pm,
                            const std::string &dtype,
                            std::string &error) const {
  return runPipeline(decomposed, pm,
                     "lowering to linalg for " + name().str() + " (" + dtype +
                         ")",
                     [&](OpPassManager &p) {
                       p.addPass(createConvertComfyQuantToLinalg(
                           linalgOptions()));
                     },
                     error);
}
