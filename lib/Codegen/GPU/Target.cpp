//===- Target.cpp - PTX per arch, cubins with ptxas -----------------------===//
#include "comfyquant/Codegen/GPU/GPUCodegen.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>
#include <mutex>

using namespace mlir;
using namespace mlir::comfyquant;

const std::vector<CUDAArch> &mlir::comfyquant::getCUDAArchs() {
  return ::comfyquant::rt::cudaArchs();
}

const CUDAArch *mlir::comfyquant::lookupCUDAArch(llvm::StringRef name) {
  return ::comfyquant::rt::findCudaArch(name.str());
}

bool mlir::comfyquant::accumulatesFp8Steps(const CUDAArch &arch) {
  return !arch.wgmma;
}

bool mlir::comfyquant::hasFP4Mma(const CUDAArch &arch) {
  return arch.blockScaledMma || arch.tcgen05;
}

bool mlir::comfyquant::formsKernelsAlike(const CUDAArch &a, const CUDAArch &b) {
  // Without an FP8 (FP4) MMA, FP8 (NVFP4) GEMMs from some M on widen their
  // operands to f16 once per call (comfyquant-gpu-select-strategy's
  // decode_rows).
  return accumulatesFp8Steps(a) == accumulatesFp8Steps(b) &&
         a.fp8Mma == b.fp8Mma && hasFP4Mma(a) == hasFP4Mma(b);
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

void mlir::comfyquant::configureNVPTXBackend() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto &options = llvm::cl::getRegisteredOptions();
    auto it = options.find("nvptx-no-f32x2");
    if (it != options.end() && !it->second->getNumOccurrences())
      (void)it->second->addOccurrence(0, "nvptx-no-f32x2", "true");
  });
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

std::map<std::string, KernelResources>
mlir::comfyquant::parsePtxasReport(StringRef report) {
  llvm::Regex entry("Compiling entry function '([^']+)'");
  llvm::Regex properties("Function properties for ([A-Za-z_$][A-Za-z0-9_$]*)");
  llvm::Regex spills("([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads");
  llvm::Regex registers("Used ([0-9]+) registers");
  llvm::Regex shared("([0-9]+) bytes smem");
  std::map<std::string, KernelResources> kernels;
  std::string current;
  SmallVector<StringRef> lines;
  report.split(lines, '\n');
  auto number = [](StringRef text) {
    int64_t v = 0;
    text.getAsInteger(10, v);
    return v;
  };
  for (StringRef line : lines) {
    SmallVector<StringRef> m;
    if (entry.match(line, &m)) {
      current = m[1].str();
      kernels[current];
      continue;
    }
    if (properties.match(line, &m)) {
      // Device functions (.func) have properties too; only entries count.
      current = kernels.count(m[1].str()) ? m[1].str() : "";
      continue;
    }
    if (current.empty())
      continue;
    KernelResources &k = kernels[current];
    if (spills.match(line, &m)) {
      k.spillStoreBytes = number(m[1]);
      k.spillLoadBytes = number(m[2]);
    }
    if (registers.match(line, &m))
      k.registers = number(m[1]);
    if (shared.match(line, &m))
      k.sharedBytes = number(m[1]);
  }
  return kernels;
}

std::map<std::string, int64_t>
mlir::comfyquant::recordedBlockSizes(StringRef ptx) {
  llvm::Regex entry("^\\.(visible )?\\.entry ([A-Za-z_$][A-Za-z0-9_$]*)\\(");
  llvm::Regex bound(
      "^\\.(maxntid|reqntid) ([0-9]+)(, *([0-9]+))?(, *([0-9]+))?");
  std::map<std::string, int64_t> sizes;
  std::string current;
  SmallVector<StringRef> lines;
  ptx.split(lines, '\n');
  for (StringRef line : lines) {
    SmallVector<StringRef> m;
    if (entry.match(line, &m)) {
      current = m[2].str();
    } else if (!current.empty() && bound.match(line, &m)) {
      int64_t threads = 1;
      for (unsigned i : {2u, 4u, 6u}) {
        int64_t d = 1;
        if (!m[i].empty() && !m[i].getAsInteger(10, d))
          threads *= d;
      }
      sizes[current] = threads;
    } else if (line.starts_with("{")) {
      current.clear(); // the body: no directive of the entry follows
    }
  }
  return sizes;
}

bool mlir::comfyquant::checkKernelResources(
    const std::map<std::string, KernelResources> &used,
    const std::map<std::string, int64_t> &blockSizes, const CUDAArch &arch,
    std::string &error) {
  for (const auto &[name, k] : used) {
    auto size = blockSizes.find(name);
    if (size == blockSizes.end()) {
      error = "kernel '" + name +
              "' has no recorded block size (.maxntid) in the PTX";
      return false;
    }
    const int64_t threads = size->second;
    if (threads < 1 || threads > arch.maxThreadsPerBlock) {
      error = "kernel '" + name + "' is formed for " +
              std::to_string(threads) + " threads per block (at most " +
              std::to_string(arch.maxThreadsPerBlock) + ")";
      return false;
    }
    const int64_t warps = (threads + 31) / 32;
    const int64_t perWarp = llvm::alignTo(k.registers * 32, 256);
    if (warps * perWarp > arch.registersPerBlock) {
      error = "kernel '" + name + "' uses " + std::to_string(k.registers) +
              " registers per thread, more than a " +
              std::to_string(threads) + "-thread block may (" +
              std::to_string(arch.registersPerBlock) + " per block)";
      return false;
    }
  }
  return true;
}
