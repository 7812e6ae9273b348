//===- CUDABackend.cpp - the CUDA half of an artifact ---------------------===//
//
// Host entries are formed one kernel at a time; their device functions are
// gathered into one gpu.module, which is lowered once per kind of lowering
// (in parallel, each in its own context) to PTX and, with ptxas, a cubin
// per arch.
//===----------------------------------------------------------------------===//
#include "comfyquant/Compiler/CUDABackend.h"
#include "comfyquant/Codegen/CPU/CPUCodegen.h"
#include "comfyquant/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <limits>
#include <optional>
#include <mutex>
#include <thread>

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

constexpr llvm::StringLiteral kKernelModule = "comfyquant_kernels";
/// Registers per SM partition available to one block of the SIMT kernels.
constexpr int64_t kRegistersPerBlock = 65536;

std::string printOp(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os);
  return s;
}

bool writeFile(const std::string &path, llvm::StringRef bytes,
               std::string &error) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    error = path + ": cannot write";
    return false;
  }
  return true;
}

/// Collects diagnostics of one pass-manager run into a string.
struct DiagnosticCollector {
  std::string text;
  llvm::raw_string_ostream os{text};
  ScopedDiagnosticHandler handler;
  explicit DiagnosticCollector(MLIRContext *ctx)
      : handler(ctx, [this](Diagnostic &d) {
          os << d.getLocation() << ": " << d << "\n";
          for (Diagnostic &n : d.getNotes())
            os << "  note: " << n << "\n";
          return success();
        }) {}
};

/// A kernel's text with its own name left out: two kernels with the same
/// key compile to the same code. The printing flags are set here, not
/// taken from the command line (an elided constant would hide a
/// difference). A kernel that refers to another symbol (a device function,
/// a global) gets no key: its text does not hold what it calls.
std::optional<std::string> kernelKey(gpu::GPUFuncOp f) {
  std::optional<SymbolTable::UseRange> uses = SymbolTable::getSymbolUses(f);
  if (!uses || !uses->empty())
    return std::nullopt;
  OwningOpRef<gpu::GPUFuncOp> copy(cast<gpu::GPUFuncOp>(f->clone()));
  copy->setName("kernel");
  OpPrintingFlags flags;
  flags.printGenericOpForm()
      .enableDebugInfo(false)
      .elideLargeElementsAttrs(std::numeric_limits<int64_t>::max())
      .elideLargeResourceString(std::numeric_limits<int64_t>::max());
  std::string s;
  llvm::raw_string_ostream os(s);
  copy->print(os, flags);
  return s;
}

bool runPipeline(ModuleOp module, const CUDACompileOptions &options,
                 function_ref<void(OpPassManager &)> build,
                 const std::string &what, std::string &error) {
  DiagnosticCollector diagnostics(module.getContext());
  PassManager pm(module.getContext());
  if (options.configure && failed(options.configure(pm))) {
    error = what + ": invalid --mlir-* pass manager options";
    return false;
  }
  build(pm);
  if (failed(pm.run(module))) {
    error = what + " failed:\n" + diagnostics.text;
    return false;
  }
  return true;
}

/// Checks ptxas's -v report: every kernel must be launchable with the
/// block size its host entry uses.
bool checkResourceUsage(const std::string &usage, const CUDAArch &arch,
                        std::string &error) {
  llvm::Regex entry("Compiling entry function '([^']+)'");
  llvm::Regex registers("Used ([0-9]+) registers");
  std::string current;
  SmallVector<StringRef> lines;
  StringRef(usage).split(lines, '\n');
  for (StringRef line : lines) {
    SmallVector<StringRef> m;
    if (entry.match(line, &m))
      current = m[1].str();
    else if (registers.match(line, &m)) {
      int64_t count = 0;
      m[1].getAsInteger(10, count);
      if (count * 256 > kRegistersPerBlock) {
        error = std::string(arch.name) + ": kernel '" + current + "' uses " +
                std::to_string(count) +
                " registers per thread, more than a 256-thread block may";
        return false;
      }
    }
  }
  return true;
}

} // namespace

/// Whether `to`'s kernels are `from`'s: every choice the device lowering
/// makes per arch (tensor-core instructions) is the same, and `from` is no
/// newer (capability and PTX ISA), so `from`'s PTX is valid for `to`.
static bool sameLowering(const CUDAArch &from, const CUDAArch &to) {
  return from.fp8Mma == to.fp8Mma && from.wgmma == to.wgmma &&
         from.blockScaledMma == to.blockScaledMma &&
         from.tcgen05 == to.tcgen05 &&
         from.computeCapability <= to.computeCapability &&
         from.ptxVersion <= to.ptxVersion;
}

/// `ptx` (lowered for `from`) with the `.version` and `.target` of `to`.
static std::string retargetPTX(const std::string &ptx, const CUDAArch &from,
                               const CUDAArch &to) {
  auto version = [](const CUDAArch &a) {
    return ".version " + std::to_string(a.ptxVersion / 10) + "." +
           std::to_string(a.ptxVersion % 10) + "\n";
  };
  auto target = [](const CUDAArch &a) {
    return ".target " + std::string(a.name) + "\n";
  };
  std::string out = ptx;
  for (auto [old, replacement] : {std::pair{version(from), version(to)},
                                  std::pair{target(from), target(to)}}) {
    size_t at = out.find(old);
    if (at != std::string::npos)
      out.replace(at, old.size(), replacement);
  }
  return out;
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
        // A device function left undefined (libdevice not linked) would only
        // fail in ptxas or at load time.
        llvm::Regex external("\\.extern \\.func[^(]*\\([^)]*\\)[ \t\n]*([A-Za-z_$][A-Za-z0-9_$]*)");
        SmallVector<StringRef> m;
        if (external.match(ptx, &m)) {
          error = "device function '" + m[1].str() +
                  "' is not defined (libdevice not found: install the CUDA "
                  "toolkit or set COMFYQUANT_PTXAS to its bin/ptxas)";
          return false;
        }
        return true;
      }
    }
  }
  error = "no PTX for gpu.module '" + gpuModule.str() + "'";
  return false;
}

bool mlir::comfyquant::compileCUDA(MLIRContext &ctx,
                                   ArrayRef<CUDAKernelSource> sources,
                                   const CUDACompileOptions &options,
                                   std::vector<CUDAEntryResult> &entries,
                                   std::vector<CUDAImageResult> &images,
                                   std::string &error, llvm::raw_ostream &out) {
  const bool build = options.print.empty();
  const std::string cudaDir = options.dir + "/cuda";
  if (build) {
    if (auto ec = llvm::sys::fs::create_directories(cudaDir)) {
      error = cudaDir + ": " + ec.message();
      return false;
    }
  }
  // Every entry's kernels, gathered for the device compilations.
  OwningOpRef<ModuleOp> device(ModuleOp::create(UnknownLoc::get(&ctx)));
  OpBuilder db = OpBuilder::atBlockEnd(device->getBody());
  auto kernels = gpu::GPUModuleOp::create(db, device->getLoc(), kKernelModule);
  (*device)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                     UnitAttr::get(&ctx));
  std::vector<std::string> objects;
  const CPUVariant &hostVariant = getCPUVariants().front();
  // Kernel text (name left out) -> the name it was first copied under.
  llvm::StringMap<std::string> kernelByKey;

  for (const CUDAKernelSource &source : sources) {
    auto t0 = std::chrono::steady_clock::now();
    OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(source.moduleText, &ctx);
    if (!m) {
      error = source.entry + ": the kernel IR does not parse";
      return false;
    }
    auto fn = *m->getOps<func::FuncOp>().begin();
    fn->setAttr("comfyquant.entry", StringAttr::get(&ctx, source.entry));
    if (!runPipeline(
            *m, options,
            [&](OpPassManager &pm) {
              GPUKernelFormationOptions o;
              o.lowerComfyQuant = false;
              buildComfyQuantGPUKernelFormationPipeline(pm, o);
            },
            "kernel formation of " + source.entry, error))
      return false;
    CUDAEntryResult result;
    result.entry = source.entry;
    fn = *m->getOps<func::FuncOp>().begin();
    if (auto names = fn->getAttrOfType<ArrayAttr>("comfyquant.kernels"))
      for (Attribute a : names)
        result.kernels.push_back(cast<StringAttr>(a).str());
    if (auto ws = fn->getAttrOfType<DenseI64ArrayAttr>(
            "comfyquant.workspace_bytes")) {
      result.workspacePerRow = ws[0];
      result.workspaceFixed = ws[1];
    }
    if (options.print == "mlir")
      out << "// " << source.entry << "\n" << printOp(*m) << "\n";
    // Copy the device functions over; the launches of the host half keep
    // verifying against the originals until they are lowered. A kernel
    // identical to one already copied (the integer GEMM of every output
    // dtype, say) is not copied again: the entry names the first one, since
    // the host half launches by position in its kernel list.
    // Only earlier entries' kernels are shared: a kernel list never names
    // one kernel twice.
    llvm::StringMap<std::string> ownKeys;
    for (auto g : m->getOps<gpu::GPUModuleOp>())
      for (auto f : g.getOps<gpu::GPUFuncOp>()) {
        std::optional<std::string> key = kernelKey(f);
        auto earlier = key ? kernelByKey.find(*key) : kernelByKey.end();
        if (earlier != kernelByKey.end()) {
          std::replace(result.kernels.begin(), result.kernels.end(),
                       f.getName().str(), earlier->second);
          ++result.sharedKernels;
          continue;
        }
        if (key)
          ownKeys.try_emplace(*key, f.getName().str());
        kernels.getBody()->push_back(f->clone());
      }
    for (auto &k : ownKeys)
      kernelByKey.try_emplace(k.getKey(), k.getValue());
    if (build) {
      if (!runPipeline(
              *m, options,
              [&](OpPassManager &pm) { buildComfyQuantGPUHostPipeline(pm); },
              "host lowering of " + source.entry, error))
        return false;
      std::string object;
      if (!emitCPUObject(*m, hostVariant, object, error))
        return false;
      std::string path = cudaDir + "/" + source.entry + ".o";
      if (!writeFile(path, object, error))
        return false;
      objects.push_back(path);
    }
    if (options.formed)
      options.formed(result, std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - t0)
                                 .count());
    entries.push_back(std::move(result));
  }
  if (options.print == "mlir")
    return true;

  if (build) {
    std::string host = cudaDir + "/host.so";
    if (!linkSharedLibrary(objects, host, error))
      return false;
    std::vector<std::string> symbols;
    for (const CUDAEntryResult &e : entries)
      symbols.push_back(e.entry);
    if (!verifySharedLibrary(host, symbols, error))
      return false;
    for (const std::string &o : objects)
      llvm::sys::fs::remove(o);
  }

  // One device compilation per kind of lowering, each in its own context:
  // an arch whose lowering is an older arch's (sm_86 of sm_80's) takes that
  // PTX with its own .version and .target; ptxas still assembles each arch.
  const std::string deviceText = printOp(*device);
  const size_t count = options.archs.size();
  std::vector<size_t> lowered(count);
  for (size_t i = 0; i < count; ++i) {
    lowered[i] = i;
    for (size_t j = 0; j < i; ++j)
      if (lowered[j] == j &&
          sameLowering(*options.archs[j], *options.archs[i])) {
        lowered[i] = j;
        break;
      }
  }
  std::vector<std::string> ptx(count), errors(count);
  auto parallel = [&](auto &&body) {
    std::atomic<size_t> next{0};
    auto work = [&]() {
      DialectRegistry registry;
      ctx.getDialectRegistry().appendTo(registry);
      MLIRContext local(registry, MLIRContext::Threading::DISABLED);
      for (size_t i; (i = next++) < count;)
        body(local, i);
    };
    unsigned workers = std::max(1u, std::min<unsigned>(options.jobs, count));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < workers; ++t)
      pool.emplace_back(work);
    work();
    for (std::thread &t : pool)
      t.join();
  };
  parallel([&](MLIRContext &local, size_t i) {
    if (lowered[i] != i)
      return;
    OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(deviceText, &local);
    if (!m) {
      errors[i] = "the device IR does not parse";
      return;
    }
    emitPTX(*m, kKernelModule, *options.archs[i], ptx[i], errors[i]);
  });
  for (size_t i = 0; i < count; ++i)
    if (lowered[i] != i) {
      errors[i] = errors[lowered[i]];
      ptx[i] = retargetPTX(ptx[lowered[i]], *options.archs[lowered[i]],
                           *options.archs[i]);
    }
  // Every arch's PTX file and cubin.
  parallel([&](MLIRContext &, size_t i) {
    const CUDAArch &arch = *options.archs[i];
    if (!errors[i].empty() || !build)
      return;
    std::string ptxPath = cudaDir + "/" + arch.name + ".ptx";
    if (!writeFile(ptxPath, ptx[i], errors[i]))
      return;
    if (options.ptxas.empty())
      return;
    std::string usage;
    std::string cubin = cudaDir + "/" + arch.name + ".cubin";
    if (assembleCubin(options.ptxas, ptxPath, arch, cubin, errors[i], &usage))
      checkResourceUsage(usage, arch, errors[i]);
  });
  for (size_t i = 0; i < options.archs.size(); ++i) {
    const CUDAArch &arch = *options.archs[i];
    if (!errors[i].empty()) {
      error = std::string(arch.name) + ": " + errors[i];
      return false;
    }
    if (options.print == "ptx")
      out << "// " << arch.name << "\n" << ptx[i] << "\n";
    CUDAImageResult image;
    image.arch = arch.name;
    image.ptx = std::string("cuda/") + arch.name + ".ptx";
    if (!options.ptxas.empty())
      image.cubin = std::string("cuda/") + arch.name + ".cubin";
    image.ptxVersion = arch.ptxVersion;
    images.push_back(std::move(image));
  }
  return true;
}
