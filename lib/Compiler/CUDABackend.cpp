//===- CUDABackend.cpp - host entries + one image per CUDA arch -----------===//
//
// Host entries are formed one kernel at a time (arch-neutral, so one
// cuda/host.so serves every arch); their device functions are gathered into
// one gpu.module, which is lowered once per kind of lowering (in parallel,
// each in its own context) to PTX and, with ptxas, a cubin per arch whose
// resource use is checked against the block size each kernel was formed
// with.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/GPUCodegen.h"
#include "comfyquant/Codegen/Host/HostCodegen.h"
#include "comfyquant/Compiler/Backend.h"
#include "comfyquant/Conversion/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
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

#include "llvm/Support/Format.h"

#include <algorithm>
#include <chrono>
#include <optional>

using namespace mlir;
using namespace mlir::comfyquant;
namespace rt = ::comfyquant::rt;

namespace {

constexpr llvm::StringLiteral kKernelModule = "comfyquant_kernels";

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
  std::string s;
  llvm::raw_string_ostream os(s);
  copy->print(os, fixedPrintingFlags(/*genericForm=*/true));
  return s;
}

} // namespace

/// Whether `to`'s kernels are `from`'s: every choice the device lowering
/// makes per arch (tensor-core instructions) is the same, and `from` is no
/// newer (capability and PTX ISA), so `from`'s PTX is valid for `to`.
static bool sameLowering(const CUDAArch &from, const CUDAArch &to) {
  return from.fp8Mma == to.fp8Mma && from.wgmma == to.wgmma &&
         from.blockScaledMma == to.blockScaledMma &&
         from.tcgen05 == to.tcgen05 && from.tcgen05Int8 == to.tcgen05Int8 &&
         from.computeCapability <= to.computeCapability &&
         from.ptxVersion <= to.ptxVersion;
}

/// `ptx` (lowered for `from`) with the `.version` and `.target` of `to`.
static std::string retargetPTX(const std::string &ptx, const CUDAArch &from,
                               const CUDAArch &to) {
  auto version = [](const CUDAArch &a) {
    return ".version " + rt::ptxVersionName(a.ptxVersion) + "\n";
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

/// Lowers a module holding gpu.modules for `arch` and returns the PTX of the
/// one named `gpuModule`. Returns false with `error` set.
static bool emitPTX(ModuleOp deviceModule, StringRef gpuModule,
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
        // A family target's PTX was generated as its first member.
        if (arch.lowerAs)
          if (const CUDAArch *as = lookupCUDAArch(arch.lowerAs))
            ptx = retargetPTX(ptx, *as, arch);
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

namespace {

/// What the manifest records of one host entry.
struct HostEntry {
  std::string entry;
  std::vector<std::string> kernels; ///< launch order = kernel index
  /// How many of `kernels` are identical to a kernel of an earlier entry,
  /// whose name they carry (one copy in each image).
  int sharedKernels = 0;
  int64_t workspacePerRow = 0, workspaceFixed = 0;
};

class CUDABackend final : public Backend {
public:
  explicit CUDABackend(const CompileOptions &options) : options(options) {}

  StringRef name() const override { return "cuda"; }

  ConvertComfyQuantToLinalgOptions linalgOptions() const override {
    // Tensor cores read GEMM operands as stored: FP8 codes, exact f16.
    ConvertComfyQuantToLinalgOptions o;
    o.gemmOperands = GemmOperands::Native;
    return o;
  }

  bool compile(MLIRContext &ctx, ArrayRef<BackendKernel> kernels,
               const std::string &dir, const BackendProgress &progress,
               std::string &error) override;

  void addSection(rt::Manifest &manifest) const override {
    if (images.empty())
      return;
    rt::CudaBackend cuda;
    for (const rt::CudaImage &i : images)
      cuda.images.push_back(i);
    manifest.cuda = std::move(cuda);
  }

  void addEntries(rt::ManifestModule &module, const std::string &dtype,
                  int index) const override {
    auto it = entries.find(index);
    if (it == entries.end())
      return;
    for (const CUDAArch *arch : options.targets.cudaArchs) {
      rt::CudaEntry e;
      e.dtype = dtype;
      e.arch = arch->name;
      e.host = it->second.entry;
      e.kernels = it->second.kernels;
      e.workspacePerRow = it->second.workspacePerRow;
      e.workspaceFixed = it->second.workspaceFixed;
      module.cudaEntries.push_back(std::move(e));
    }
  }

  std::map<std::string, std::string> entriesOf(int) const override {
    return {};
  }

  std::vector<std::string> files() const override {
    std::vector<std::string> list;
    if (images.empty())
      return list;
    list.push_back("cuda/host.so");
    for (const rt::CudaImage &i : images)
      for (const std::string &f : {i.ptx, i.cubin})
        if (!f.empty())
          list.push_back(f);
    return list;
  }

  size_t entryCount() const override { return entries.size(); }
  std::vector<KernelResourceReport> kernelResources() const override {
    std::vector<KernelResourceReport> all;
    for (const auto &perArch : resources)
      all.insert(all.end(), perArch.begin(), perArch.end());
    return all;
  }

private:
  /// Forms the host entry of one kernel and copies its device functions
  /// into `gathered` (those not identical to an earlier entry's).
  bool formEntry(MLIRContext &ctx, const BackendKernel &kernel,
                 const std::string &cudaDir, gpu::GPUModuleOp gathered,
                 llvm::StringMap<std::string> &kernelByKey,
                 std::vector<std::string> &objects, std::string &error);
  /// Lowers the gathered kernels for every arch: PTX, and with ptxas a
  /// checked cubin.
  bool buildImages(MLIRContext &ctx, ModuleOp device,
                   const std::string &cudaDir, std::string &error);

  const CompileOptions &options;
  std::map<int, HostEntry> entries; ///< kernel index -> host entry
  std::vector<rt::CudaImage> images;
  /// Per arch (the order of `images`), ptxas's report of every kernel.
  std::vector<std::vector<KernelResourceReport>> resources;
  size_t formedCount = 0, kernelCount = 0;
};

} // namespace

bool CUDABackend::formEntry(MLIRContext &ctx, const BackendKernel &kernel,
                            const std::string &cudaDir,
                            gpu::GPUModuleOp gathered,
                            llvm::StringMap<std::string> &kernelByKey,
                            std::vector<std::string> &objects,
                            std::string &error) {
  const bool build = options.emit == EmitKind::Artifact;
  auto t0 = std::chrono::steady_clock::now();
  HostEntry result;
  result.entry = "cq_" + std::to_string(kernel.index) + "_" + kernel.dtype +
                 "_cuda";
  OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(kernel.text, &ctx);
  if (!m) {
    error = result.entry + ": the kernel IR does not parse";
    return false;
  }
  auto fn = *m->getOps<func::FuncOp>().begin();
  fn->setAttr(ComfyQuantDialect::getEntryAttrName(), StringAttr::get(&ctx, result.entry));
  if (!runPipeline(*m, options.passManagers,
                   "kernel formation of " + result.entry,
                   [&](OpPassManager &pm) {
                     GPUKernelFormationOptions o;
                     o.lowerComfyQuant = false;
                     buildComfyQuantGPUKernelFormationPipeline(pm, o);
                   },
                   error))
    return false;
  fn = *m->getOps<func::FuncOp>().begin();
  if (auto names = fn->getAttrOfType<ArrayAttr>(ComfyQuantDialect::getKernelsAttrName()))
    for (Attribute a : names)
      result.kernels.push_back(cast<StringAttr>(a).str());
  if (auto ws =
          fn->getAttrOfType<DenseI64ArrayAttr>(ComfyQuantDialect::getWorkspaceBytesAttrName())) {
    result.workspacePerRow = ws[0];
    result.workspaceFixed = ws[1];
  }
  if (options.emit == EmitKind::MLIR)
    *options.out << "// " << result.entry << "\n" << printOp(*m) << "\n";
  // Copy the device functions over; the launches of the host half keep
  // verifying against the originals until they are lowered. A kernel
  // identical to one already copied (the integer GEMM of every output
  // dtype, say) is not copied again: the entry names the first one, since
  // the host half launches by position in its kernel list. Only earlier
  // entries' kernels are shared: a kernel list never names one kernel twice.
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
      gathered.getBody()->push_back(f->clone());
    }
  for (auto &k : ownKeys)
    kernelByKey.try_emplace(k.getKey(), k.getValue());
  if (build) {
    if (!runPipeline(*m, options.passManagers,
                     "host lowering of " + result.entry,
                     [&](OpPassManager &pm) {
                       buildComfyQuantGPUHostPipeline(pm);
                     },
                     error))
      return false;
    // Host entries run on any x86-64 machine: the most portable variant.
    (*m)->setAttr(ComfyQuantDialect::getTargetAttrName(),
                  TargetAttr::get(&ctx, TargetKind::cpu,
                                  ::comfyquant::rt::cpuVariants().front().name));
    std::string object;
    if (!emitHostObject(*m, object, error))
      return false;
    std::string path = cudaDir + "/" + result.entry + ".o";
    if (!writeFile(path, object, error))
      return false;
    objects.push_back(path);
  }
  ++formedCount;
  if (options.progress && build) {
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - t0)
                         .count();
    *options.progress << "comfyquant-compile: [cuda " << formedCount << "/"
                      << kernelCount << "] " << result.entry << ": "
                      << result.kernels.size() << " kernels";
    if (result.sharedKernels)
      *options.progress << " (" << result.sharedKernels
                        << " shared with earlier entries)";
    *options.progress << ", " << llvm::format("%.2f", seconds) << " s\n";
  }
  entries[kernel.index] = std::move(result);
  return true;
}

bool CUDABackend::compile(MLIRContext &ctx, ArrayRef<BackendKernel> kernels,
                          const std::string &dir,
                          const BackendProgress &progress,
                          std::string &error) {
  const bool build = options.emit == EmitKind::Artifact;
  if (options.emit == EmitKind::LLVM || options.emit == EmitKind::Assembly)
    return true; // CPU forms only
  auto t0 = std::chrono::steady_clock::now();
  const std::string cudaDir = dir + "/cuda";
  if (build) {
    if (auto ec = llvm::sys::fs::create_directories(cudaDir)) {
      error = "cuda: " + cudaDir + ": " + ec.message();
      return false;
    }
  }
  // Every entry's kernels, gathered for the device compilations.
  OwningOpRef<ModuleOp> device(ModuleOp::create(UnknownLoc::get(&ctx)));
  OpBuilder db = OpBuilder::atBlockEnd(device->getBody());
  auto gathered =
      gpu::GPUModuleOp::create(db, device->getLoc(), kKernelModule);
  (*device)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                     UnitAttr::get(&ctx));
  std::vector<std::string> objects;
  // Kernel text (name left out) -> the name it was first copied under.
  llvm::StringMap<std::string> kernelByKey;
  kernelCount = kernels.size();
  for (const BackendKernel &kernel : kernels)
    if (!formEntry(ctx, kernel, cudaDir, gathered, kernelByKey, objects,
                   error)) {
      error = "cuda: " + error;
      return false;
    }
  if (options.emit == EmitKind::MLIR)
    return true;
  if (build) {
    std::string host = cudaDir + "/host.so";
    std::vector<std::string> symbols;
    for (auto &[index, e] : entries)
      symbols.push_back(e.entry);
    // Objects in kernel order, as the entries were formed.
    if (!linkSharedLibrary(objects, host, error) ||
        !verifySharedLibrary(host, symbols, error)) {
      error = "cuda: " + error;
      return false;
    }
    for (const std::string &o : objects)
      llvm::sys::fs::remove(o);
  }
  if (!buildImages(ctx, *device, cudaDir, error)) {
    error = "cuda: " + error;
    return false;
  }
  if (options.progress && build)
    *options.progress << "comfyquant-compile: cuda: " << entries.size()
                      << " host entries, " << images.size() << " archs, "
                      << llvm::format("%.2f",
                                      std::chrono::duration<double>(
                                          std::chrono::steady_clock::now() -
                                          t0)
                                          .count())
                      << " s\n";
  return true;
}

bool CUDABackend::buildImages(MLIRContext &ctx, ModuleOp device,
                              const std::string &cudaDir, std::string &error) {
  const bool build = options.emit == EmitKind::Artifact;
  const std::vector<const CUDAArch *> &archs = options.targets.cudaArchs;
  std::string ptxas;
  if (build) {
    ptxas = findPtxas();
    if (ptxas.empty() && options.progress)
      *options.progress << "comfyquant-compile: warning: ptxas not found "
                           "(COMFYQUANT_PTXAS, PATH, $CUDA_HOME/bin, "
                           "/usr/local/cuda/bin): PTX only, no cubins\n";
  }
  // One device compilation per kind of lowering, each in its own context:
  // an arch whose lowering is an older arch's (sm_86 of sm_80's) takes that
  // PTX with its own .version and .target; ptxas still assembles each arch.
  const std::string deviceText = printOp(device);
  const size_t count = archs.size();
  std::vector<size_t> lowered(count);
  for (size_t i = 0; i < count; ++i) {
    lowered[i] = i;
    for (size_t j = 0; j < i; ++j)
      if (lowered[j] == j && sameLowering(*archs[j], *archs[i])) {
        lowered[i] = j;
        break;
      }
  }
  const unsigned workers =
      options.serialize ? 1u : workerCount(options.jobs, count);
  std::vector<std::string> ptx(count), errors(count);
  std::vector<std::vector<KernelResourceReport>> reports(count);
  parallelForEachContext(ctx.getDialectRegistry(), count, workers,
                         [&](MLIRContext &local, size_t i) {
                           if (lowered[i] != i)
                             return true;
                           OwningOpRef<ModuleOp> m =
                               parseSourceString<ModuleOp>(deviceText, &local);
                           if (!m)
                             errors[i] = "the device IR does not parse";
                           else
                             emitPTX(*m, kKernelModule, *archs[i], ptx[i],
                                     errors[i]);
                           return true;
                         });
  for (size_t i = 0; i < count; ++i)
    if (lowered[i] != i) {
      errors[i] = errors[lowered[i]];
      ptx[i] = retargetPTX(ptx[lowered[i]], *archs[lowered[i]], *archs[i]);
    }
  // Every arch's PTX file and cubin.
  parallelForEachContext(
      ctx.getDialectRegistry(), count, workers, [&](MLIRContext &, size_t i) {
        const CUDAArch &arch = *archs[i];
        if (!errors[i].empty() || !build)
          return true;
        std::string ptxPath = cudaDir + "/" + arch.name + ".ptx";
        if (!writeFile(ptxPath, ptx[i], errors[i]) || ptxas.empty())
          return true;
        std::string usage;
        std::string cubin = cudaDir + "/" + arch.name + ".cubin";
        if (!assembleCubin(ptxas, ptxPath, arch, cubin, errors[i], &usage))
          return true;
        std::map<std::string, KernelResources> used = parsePtxasReport(usage);
        std::map<std::string, int64_t> blocks = recordedBlockSizes(ptx[i]);
        checkKernelResources(used, blocks, arch, errors[i]);
        for (const auto &[kernel, r] : used) {
          auto block = blocks.find(kernel);
          reports[i].push_back({arch.name, kernel, r.registers,
                                r.spillStoreBytes, r.spillLoadBytes,
                                r.sharedBytes,
                                block == blocks.end() ? 0 : block->second});
        }
        return true;
      });
  for (size_t i = 0; i < count; ++i) {
    const CUDAArch &arch = *archs[i];
    if (!errors[i].empty()) {
      error = std::string(arch.name) + ": " + errors[i];
      return false;
    }
    if (options.emit == EmitKind::PTX)
      *options.out << "// " << arch.name << "\n" << ptx[i] << "\n";
    rt::CudaImage image;
    image.arch = arch.name;
    image.ptx = std::string("cuda/") + arch.name + ".ptx";
    if (!ptxas.empty())
      image.cubin = std::string("cuda/") + arch.name + ".cubin";
    image.ptxVersion = ::comfyquant::rt::ptxVersionName(arch.ptxVersion);
    images.push_back(std::move(image));
    resources.push_back(std::move(reports[i]));
  }
  return true;
}

std::unique_ptr<Backend>
mlir::comfyquant::createCUDABackend(const CompileOptions &options) {
  return std::make_unique<CUDABackend>(options);
}
