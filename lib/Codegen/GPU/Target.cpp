//===- Target.cpp - PTX per arch, cubins with ptxas -----------------------===//
#include "comfyquant/Codegen/GPU/GPUCodegen.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/DialectRegistry.h"
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

const std::vector<CUDAArch> &mlir::comfyquant::getCUDAArchs() {
  return ::comfyquant::rt::cudaArchs();
}

const CUDAArch *mlir::comfyquant::lookupCUDAArch(llvm::StringRef name) {
  return ::comfyquant::rt::findCudaArch(name.str());
}

void mlir::comfyquant::registerComfyQuantGPUTranslations(
    DialectRegistry &registry) {
  registerAllToLLVMIRTranslations(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
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

std::string mlir::comfyquant::findCUDAToolkit() {
  std::string ptxas = findPtxas();
  if (ptxas.empty())
    return "";
  llvm::SmallString<256> root(ptxas);
  llvm::sys::path::remove_filename(root); // bin/
  llvm::sys::path::remove_filename(root);
  llvm::SmallString<256> libdevice(root);
  llvm::sys::path::append(libdevice, "nvvm", "libdevice");
  return llvm::sys::fs::is_directory(libdevice) ? std::string(root) : "";
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
