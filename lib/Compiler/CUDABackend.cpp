//===- CUDABackend.cpp - host entries + one image per CUDA arch -----------===//
//
// Host entries are formed one kernel at a time, once per group of archs
// whose GEMM strategies are chosen alike (formsKernelsAlike); a group whose
// kernels come out the same as an earlier group's shares its host entry, so
// one cuda/host.so serves every arch. Each group's device functions are
// gathered into one gpu.module, which is lowered once per kind of lowering
// (in parallel, each in its own context) to PTX and, with ptxas, a cubin
// per arch whose resource use is checked against the block size each
// kernel was formed with.
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
#include <set>

using namespace mlir;
using namespace mlir::comfyquant;
namespace rt = ::comfyquant::rt;

namespace {

constexpr llvm::StringLiteral kKernelModule = "comfyquant_kernels";
/// What a formed entry's name is replaced by when groups compare their
/// formations.
constexpr llvm::StringLiteral kEntryPlaceholder = "@ENTRY@";

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
    const std::vector<const CUDAArch *> &archs = options.targets.cudaArchs;
    for (size_t i = 0; i < archs.size() && i < groupOf.size(); ++i) {
      auto it = entries[groupOf[i]].find(index);
      if (it == entries[groupOf[i]].end())
        continue;
      rt::CudaEntry e;
      e.dtype = dtype;
      e.arch = archs[i]->name;
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

  size_t entryCount() const override { return hostSymbols().size(); }
  std::vector<KernelResourceReport> kernelResources() const override {
    std::vector<KernelResourceReport> all;
    for (const auto &perArch : resources)
      all.insert(all.end(), perArch.begin(), perArch.end());
    return all;
  }

private:
  /// The archs whose kernels are formed alike, their gathered device
  /// functions and what each formed entry's kernels are named by.
  struct FormationGroup {
    std::vector<const CUDAArch *> archs;
    OwningOpRef<ModuleOp> device;
    gpu::GPUModuleOp gathered;
    /// Kernel text (name left out) -> the name it was copied under.
    llvm::StringMap<std::string> kernelByKey;
  };

  /// Forms the host entry of one kernel for `group` and copies its device
  /// functions into the group's gathered module (those not identical to an
  /// earlier entry's). A later group whose formation is an earlier group's
  /// takes that entry and its kernels.
  bool formEntry(MLIRContext &ctx, const BackendKernel &kernel,
                 std::vector<FormationGroup> &groups, size_t group,
                 const std::string &cudaDir, std::vector<std::string> &objects,
                 std::string &error);
  /// Copies `name` (a kernel of `from`'s gathered module) into `to`'s,
  /// once.
  static void copyKernel(FormationGroup &from, FormationGroup &to,
                         StringRef name);
  /// Lowers each group's gathered kernels for its archs: PTX, and with
  /// ptxas a checked cubin.
  bool buildImages(MLIRContext &ctx, std::vector<FormationGroup> &groups,
                   const std::string &cudaDir, std::string &error);
  /// Every distinct host entry symbol, in formation order.
  std::vector<std::string> hostSymbols() const {
    std::vector<std::string> symbols;
    std::set<std::string> seen;
    for (const auto &perGroup : entries)
      for (const auto &[index, e] : perGroup)
        if (seen.insert(e.entry).second)
          symbols.push_back(e.entry);
    return symbols;
  }

  const CompileOptions &options;
  /// Per formation group: kernel index -> host entry.
  std::vector<std::map<int, HostEntry>> entries;
  /// The formation group of each target arch (options.targets.cudaArchs).
  std::vector<size_t> groupOf;
  /// Per kernel index, the formed module of each group that formed its own
  /// entry (the group and the module, its entry name replaced by
  /// kEntryPlaceholder): what later groups compare with.
  std::map<int, std::vector<std::pair<size_t, std::string>>> formations;
  std::vector<rt::CudaImage> images;
  /// Per arch (the order of `images`), ptxas's report of every kernel.
  std::vector<std::vector<KernelResourceReport>> resources;
  size_t formedCount = 0, kernelCount = 0;
};

} // namespace

void CUDABackend::copyKernel(FormationGroup &from, FormationGroup &to,
                             StringRef name) {
  if (SymbolTable::lookupSymbolIn(to.gathered, name))
    return;
  Operation *f = SymbolTable::lookupSymbolIn(from.gathered, name);
  if (!f)
    return;
  if (std::optional<std::string> key = kernelKey(cast<gpu::GPUFuncOp>(f)))
    to.kernelByKey.try_emplace(*key, name.str());
  to.gathered.getBody()->push_back(f->clone());
}

bool CUDABackend::formEntry(MLIRContext &ctx, const BackendKernel &kernel,
                            std::vector<FormationGroup> &groups, size_t group,
                            const std::string &cudaDir,
                            std::vector<std::string> &objects,
                            std::string &error) {
  const bool build = options.emit == EmitKind::Artifact;
  auto t0 = std::chrono::steady_clock::now();
  FormationGroup &own = groups[group];
  gpu::GPUModuleOp gathered = own.gathered;
  llvm::StringMap<std::string> &kernelByKey = own.kernelByKey;
  HostEntry result;
  result.entry = "cq_" + std::to_string(kernel.index) + "_" + kernel.dtype +
                 "_cuda";
  // A later group's entry is named after its first arch.
  if (group > 0)
    result.entry += std::string("_") + own.archs.front()->name;
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
                     for (const CUDAArch *arch : own.archs)
                       o.archs.push_back(arch->name);
                     buildComfyQuantGPUKernelFormationPipeline(pm, o);
                   },
                   error))
    return false;
  // The same kernels as an earlier group's: its entry serves this group.
  std::string formed = printOp(*m);
  for (size_t at = formed.find(result.entry); at != std::string::npos;
       at = formed.find(result.entry, at))
    formed.replace(at, result.entry.size(), kEntryPlaceholder);
  std::vector<std::pair<size_t, std::string>> &earlier =
      formations[kernel.index];
  for (const auto &[from, text] : earlier) {
    if (text != formed)
      continue;
    const HostEntry &same = entries[from].at(kernel.index);
    for (const std::string &name : same.kernels)
      copyKernel(groups[from], own, name);
    entries[group][kernel.index] = same;
    return true;
  }
  earlier.emplace_back(group, std::move(formed));
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
  // Progress counts kernels: a later group's own entry reports under its
  // kernel's number.
  if (group == 0)
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
  entries[group][kernel.index] = std::move(result);
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
  // The archs in groups that form kernels alike, in target order; each
  // group's entries' kernels gathered for its device compilations.
  std::vector<FormationGroup> groups;
  groupOf.clear();
  for (const CUDAArch *arch : options.targets.cudaArchs) {
    auto alike = llvm::find_if(groups, [&](const FormationGroup &g) {
      return formsKernelsAlike(*g.archs.front(), *arch);
    });
    if (alike == groups.end()) {
      FormationGroup g;
      g.device = ModuleOp::create(UnknownLoc::get(&ctx));
      OpBuilder db = OpBuilder::atBlockEnd(g.device->getBody());
      g.gathered =
          gpu::GPUModuleOp::create(db, g.device->getLoc(), kKernelModule);
      (*g.device)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                           UnitAttr::get(&ctx));
      groups.push_back(std::move(g));
      alike = std::prev(groups.end());
    }
    alike->archs.push_back(arch);
    groupOf.push_back(alike - groups.begin());
  }
  entries.assign(groups.size(), {});
  formations.clear();
  std::vector<std::string> objects;
  kernelCount = kernels.size();
  for (const BackendKernel &kernel : kernels)
    for (size_t g = 0; g < groups.size(); ++g)
      if (!formEntry(ctx, kernel, groups, g, cudaDir, objects, error)) {
        error = "cuda: " + error;
        return false;
      }
  if (options.emit == EmitKind::MLIR)
    return true;
  if (build) {
    std::string host = cudaDir + "/host.so";
    std::vector<std::string> symbols = hostSymbols();
    // Objects in kernel order, as the entries were formed.
    if (!linkSharedLibrary(objects, host, error) ||
        !verifySharedLibrary(host, symbols, error)) {
      error = "cuda: " + error;
      return false;
    }
    for (const std::string &o : objects)
      llvm::sys::fs::remove(o);
  }
  if (!buildImages(ctx, groups, cudaDir, error)) {
    error = "cuda: " + error;
    return false;
  }
  if (options.progress && build)
    *options.progress << "comfyquant-compile: cuda: " << entryCount()
                      << " host entries, " << images.size() << " archs, "
                      << llvm::format("%.2f",
                                      std::chrono::duration<double>(
                                          std::chrono::steady_clock::now() -
                                          t0)
                                          .count())
                      << " s\n";
  return true;
}

bool CUDABackend::buildImages(MLIRContext &ctx,
                              std::vector<FormationGroup> &groups,
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
  // One device compilation per group and kind of lowering, each in its
  // own context: an arch whose lowering is an older arch's of its group
  // (sm_86 of sm_80's) takes that PTX with its own .version and .target;
  // ptxas still assembles each arch.
  std::vector<std::string> deviceTexts;
  for (FormationGroup &g : groups)
    deviceTexts.push_back(printOp(*g.device));
  const size_t count = archs.size();
  std::vector<size_t> lowered(count);
  for (size_t i = 0; i < count; ++i) {
    lowered[i] = i;
    for (size_t j = 0; j < i; ++j)
      if (lowered[j] == j && groupOf[j] == groupOf[i] &&
          sameLowering(*archs[j], *archs[i])) {
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
                           OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(
                               deviceTexts[groupOf[i]], &local);
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
    // Spills are not refused (no smaller tile to fall back to yet), but
    // a kernel that spills is named: its local-memory traffic is the
    // slowest path it has.
    if (options.progress)
      for (const KernelResourceReport &r : reports[i])
        if (r.spillStoreBytes || r.spillLoadBytes)
          *options.progress << "comfyquant-compile: warning: " << arch.name
                            << ": kernel '" << r.kernel << "' spills ("
                            << r.spillStoreBytes << " B stored, "
                            << r.spillLoadBytes << " B loaded per thread; "
                            << r.registers << " registers)\n";
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
