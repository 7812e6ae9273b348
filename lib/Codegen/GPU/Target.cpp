//===- Target.cpp - PTX per arch, cubins with ptxas -----------------------===//
#include "comfyquant/Codegen/GPU/GPUCodegen.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::comfyquant;

void mlir::comfyquant::registerComfyQuantGPUTranslations(
    DialectRegistry &registry) {
  registerAllToLLVMIRTranslations(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
}

bool mlir::comfyquant::emitPTX(ModuleOp deviceModule, StringRef gpuModule,
                               const CUDAArch &arch, std::string &ptx,
                               std::string &error) {
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  ScopedDiagnosticHandler handler(deviceModule.getContext(),
                                  [&](Diagnostic &d) {
                                    os << d.getLocation() << ": " << d << "\n";
                                    return success();
                                  });
  PassManager pm(deviceModule.getContext());
  GPUDeviceOptions options;
  options.arch = arch.name;
  buildComfyQuantGPUDevicePipeline(pm, options);
  if (failed(pm.run(deviceModule))) {
    error = "device pipeline for " + std::string(arch.name) + " failed:\n" +
            diagnostics;
    return false;
  }
  for (auto binary : deviceModule.getOps<gpu::BinaryOp>()) {
    if (binary.getName() != gpuModule)
      continue;
    for (Attribute a : binary.getObjects()) {
      auto object = dyn_cast<gpu::ObjectAttr>(a);
      if (object && object.getFormat() == gpu::CompilationTarget::Assembly) {
        ptx = object.getObject().getValue().str();
        return true;
      }
    }
  }
  error = "no PTX for gpu.module '" + gpuModule.str() + "'";
  return false;
}

std::string mlir::comfyquant::findPtxas() {
  if (const char *env = std::getenv("COMFYQUANT_PTXAS"))
    return llvm::sys::fs::can_execute(env) ? env : "";
  if (auto onPath = llvm::sys::findProgramByName("ptxas"))
    return *onPath;
  for (const char *var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (const char *root = std::getenv(var)) {
      llvm::SmallString<256> p(root);
      llvm::sys::path::append(p, "bin", "ptxas");
      if (llvm::sys::fs::can_execute(p))
        return std::string(p);
    }
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas"))
    return "/usr/local/cuda/bin/ptxas";
  return "";
}

bool mlir::comfyquant::assembleCubin(const std::string &ptxas,
                                     const std::string &ptxPath,
                                     const CUDAArch &arch,
                                     const std::string &cubinPath,
                                     std::string &error, std::string *usage) {
  std::string archFlag = std::string("-arch=") + arch.name;
  SmallVector<StringRef> argv = {ptxas, archFlag, "-O3", "-v", ptxPath, "-o",
                                 cubinPath};
  llvm::SmallString<128> log;
  if (auto ec = llvm::sys::fs::createTemporaryFile("comfyquant-ptxas", "log",
                                                   log)) {
    error = "cannot create a temporary file: " + ec.message();
    return false;
  }
  llvm::scope_exit removeLog([&] { llvm::sys::fs::remove(log); });
  std::optional<StringRef> redirects[] = {std::nullopt, log.str(), log.str()};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(ptxas, argv, std::nullopt, redirects,
                                     /*SecondsToWait=*/0, /*MemoryLimit=*/0,
                                     &message);
  std::string output;
  if (auto buffer = llvm::MemoryBuffer::getFile(log))
    output = (*buffer)->getBuffer().str();
  if (rc != 0) {
    std::string command;
    for (StringRef a : argv)
      command += (command.empty() ? "" : " ") + a.str();
    error = "ptxas failed for " + std::string(arch.name) + " (exit " +
            std::to_string(rc) + (message.empty() ? "" : ", " + message) +
            "):\n" + output + "reproduce with: " + command;
    return false;
  }
  if (usage)
    *usage = output;
  return true;
}
