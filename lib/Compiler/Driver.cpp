//===- Driver.cpp - checkpoint -> artifact --------------------------------===//
#include "comfyquant/Compiler/Driver.h"
#include "comfyquant/Codegen/GPU/GPUCodegen.h"
#include "comfyquant/Compiler/Backend.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/Import/CheckpointImporter.h"
#include "comfyquant/Pipelines/Pipelines.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Manifest.h"
#include "comfyquant/runtime/ModuleResolver.h"
#include "comfyquant/runtime/OutputFile.h"
#include "comfyquant/version.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

#include <unistd.h>

using namespace mlir;
using namespace mlir::comfyquant;
namespace rt = ::comfyquant::rt;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string hex64(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// The kernel's weight arguments (`comfyquant.weights`), in order.
std::vector<rt::ManifestWeight> manifestWeights(ArrayAttr weights) {
  std::vector<rt::ManifestWeight> list;
  if (!weights)
    return list;
  for (Attribute a : weights) {
    auto d = cast<DictionaryAttr>(a);
    rt::ManifestWeight w;
    w.tensor = d.getAs<StringAttr>("tensor").str();
    w.offset = d.getAs<IntegerAttr>("offset").getInt();
    w.dtype = d.getAs<StringAttr>("dtype").str();
    for (Attribute s : d.getAs<ArrayAttr>("shape"))
      w.shape.push_back(cast<IntegerAttr>(s).getInt());
    if (auto shard = d.getAs<StringAttr>("shard"))
      w.shard = shard.str();
    list.push_back(std::move(w));
  }
  return list;
}

/// A selected module across dtypes.
struct ModuleRecord {
  ModuleInfoAttr info;
  std::optional<std::vector<rt::ManifestWeight>> weights; // set by dtype 1
  std::map<std::string, int> kernelOf; // dtype -> kernel index
  double seconds = 0;
  bool rowIndependent = true;
  int jobsLeft = 0;     ///< codegen jobs of the kernels it owns
  bool owns = false;    ///< owns at least one kernel
};

/// One distinct kernel: per back end, its lowering as text.
struct PlannedKernel {
  std::string dtype, owner;
  int ownerRank = 0;
  std::vector<std::string> text; ///< per back end
};

/// Returns false unless `dir` is absent, empty or a previous artifact: even
/// with --overwrite, nothing else is ever replaced.
bool replaceable(const std::string &dir, std::string &error) {
  if (!llvm::sys::fs::exists(dir))
    return true;
  std::error_code ec;
  bool empty = llvm::sys::fs::directory_iterator(dir, ec) ==
               llvm::sys::fs::directory_iterator();
  if (!llvm::sys::fs::is_directory(dir) ||
      (!llvm::sys::fs::exists(dir + "/manifest.json") && !empty)) {
    error = dir + ": exists and is not an artifact directory; refusing to "
                  "replace it";
    return false;
  }
  return true;
}

/// Whether the artifact may be written to `dir`: not an input, replaceable,
/// absent unless --overwrite. Checked before compiling and again before
/// publishing (the directory may change meanwhile).
bool checkOutput(const std::string &dir, const rt::Checkpoint &ckpt,
                 bool overwrite, std::string &error) {
  try {
    rt::checkNotAnInput(dir, rt::checkpointFiles(ckpt),
                        /*outputIsDirectory=*/true);
    if (!replaceable(dir, error))
      return false;
    rt::checkOverwrite(dir, overwrite, /*outputIsDirectory=*/true);
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
  return true;
}

/// A temporary sibling of `dir` (its missing parents created), removed on
/// destruction unless released.
class StagingDirectory {
public:
  bool create(const std::string &dir, std::string &error) {
    llvm::SmallString<128> abs(dir);
    llvm::sys::fs::make_absolute(abs);
    llvm::sys::path::remove_dots(abs, true);
    llvm::StringRef parent = llvm::sys::path::parent_path(abs);
    if (!parent.empty())
      if (std::error_code ec = llvm::sys::fs::create_directories(parent)) {
        error = dir + ": cannot create its parent directory " + parent.str() +
                ": " + ec.message();
        return false;
      }
    std::string templ = abs.str().str() + ".tmp-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) {
      error = dir + ": cannot create a temporary directory next to it: " +
              std::strerror(errno);
      return false;
    }
    path = buf.data();
    return true;
  }
  void release() { path.clear(); }
  ~StagingDirectory() {
    if (!path.empty())
      llvm::sys::fs::remove_directories(path);
  }
  std::string path;
};

/// The compilation of one checkpoint.
class Driver {
public:
  Driver(const CompileOptions &options) : options(options) {}
  bool run(CompileResult &result, std::string &error);

private:
  bool resolve(std::string &error);
  bool plan(MLIRContext &ctx, std::string &error);
  void printModuleDone(const std::string &name, bool shared);
  rt::Manifest buildManifest() const;

  const CompileOptions &options;
  Clock::time_point start = Clock::now();
  std::vector<std::string> dtypes;
  std::unique_ptr<rt::Checkpoint> ckpt;
  rt::ResolvedCheckpoint resolved;
  std::vector<std::string> selected;
  std::map<std::string, ModuleRecord> records;
  std::vector<PlannedKernel> kernels;
  std::vector<std::unique_ptr<Backend>> backends;
  std::mutex progressMutex;
  size_t modulesDone = 0;
};

} // namespace

bool Driver::resolve(std::string &error) {
  std::vector<llvm::GlobPattern> globs;
  for (const std::string &g : options.moduleGlobs) {
    auto p = llvm::GlobPattern::create(g);
    if (!p) {
      error = "--modules '" + g + "': " + llvm::toString(p.takeError());
      return false;
    }
    globs.push_back(std::move(*p));
  }
  try {
    rt::ResolveOptions opts;
    for (const std::string &k : options.kindOverrides)
      if (std::string err = rt::addKindOverride(opts, k); !err.empty()) {
        error = err;
        return false;
      }
    for (const std::string &s : options.shapeOverrides)
      if (std::string err = rt::addShapeOverride(opts, s); !err.empty()) {
        error = err;
        return false;
      }
    ckpt = rt::Checkpoint::open(options.checkpoint);
    // Never write over the checkpoint; fail before compiling anything.
    if (options.emit == EmitKind::Artifact &&
        !checkOutput(options.outputDir, *ckpt, options.overwrite, error))
      return false;
    resolved = rt::resolveCheckpoint(*ckpt, opts);
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
  for (const rt::ResolvedModule &m : resolved.modules) {
    bool match = globs.empty();
    for (const llvm::GlobPattern &g : globs)
      match = match || g.match(m.desc.name);
    if (match)
      selected.push_back(m.desc.name);
  }
  if (selected.empty()) {
    error = options.checkpoint + ": no quantized module matches --modules";
    return false;
  }
  return true;
}

/// Per dtype: decompose, lower for every back end, collect the distinct
/// kernels. Modules share a kernel only where every back end's lowering is
/// the same.
bool Driver::plan(MLIRContext &ctx, std::string &error) {
  ImportOptions importOptions;
  importOptions.modules = selected;
  importOptions.onlyReferencedTensors = true;
  OwningOpRef<ModuleOp> imported =
      importCheckpoint(&ctx, resolved, importOptions);
  if (!imported) {
    error = options.checkpoint + ": import failed";
    return false;
  }
  std::map<std::string, int> kernelIndex; // identity -> index
  std::map<std::string, int> rank;
  for (size_t i = 0; i < selected.size(); ++i)
    rank[selected[i]] = static_cast<int>(i);
  for (const std::string &dt : dtypes) {
    auto t0 = Clock::now();
    OwningOpRef<ModuleOp> decomposed(
        cast<ModuleOp>(imported->getOperation()->clone()));
    if (!runPipeline(*decomposed, options.passManagers,
                     "decomposition (" + dt + ")",
                     [&](OpPassManager &pm) {
                       DecomposeOptions d;
                       // checkCompileOptions admits only the enum's names.
                       d.activationType = *symbolizeActivationType(dt);
                       buildComfyQuantDecomposePipeline(pm, d);
                     },
                     error))
      return false;
    // Each back end reads GEMM operands in its own form.
    std::vector<OwningOpRef<ModuleOp>> lowered;
    for (auto &backend : backends) {
      lowered.emplace_back(cast<ModuleOp>(decomposed->getOperation()->clone()));
      if (!backend->lowerToLinalg(*lowered.back(), options.passManagers, dt,
                                  error))
        return false;
    }
    const double share =
        secondsSince(t0) / static_cast<double>(selected.size());
    for (auto fn : lowered.front()->getOps<func::FuncOp>()) {
      std::string name = fn.getSymName().str();
      ModuleRecord &r = records[name];
      r.info = fn->getAttrOfType<ModuleInfoAttr>(ComfyQuantDialect::getLoweredModuleAttrName());
      if (!r.info) {
        error = "module '" + name + "': the decomposed function has no "
                "comfyquant.module record";
        return false;
      }
      std::vector<rt::ManifestWeight> w =
          manifestWeights(fn->getAttrOfType<ArrayAttr>(ComfyQuantDialect::getWeightsAttrName()));
      if (r.weights && *r.weights != w) {
        error = "module '" + name + "': weight lists differ between dtypes";
        return false;
      }
      r.weights = w;
      r.seconds += share;
      std::string identity = dt;
      std::vector<func::FuncOp> forms;
      for (size_t b = 0; b < backends.size(); ++b) {
        auto form = lowered[b]->lookupSymbol<func::FuncOp>(fn.getSymName());
        if (!form) {
          error = "module '" + name + "': no " + backends[b]->name().str() +
                  " lowering";
          return false;
        }
        identity += "\n" + kernelKey(form);
        forms.push_back(form);
      }
      auto [it, fresh] =
          kernelIndex.emplace(identity, static_cast<int>(kernels.size()));
      if (fresh) {
        PlannedKernel k;
        k.dtype = dt;
        k.owner = name;
        k.ownerRank = rank[name];
        for (func::FuncOp form : forms)
          k.text.push_back(printForWorker(form));
        kernels.push_back(std::move(k));
      } else if (rank[name] < kernels[it->second].ownerRank) {
        // The first module in checkpoint order owns it.
        kernels[it->second].owner = name;
        kernels[it->second].ownerRank = rank[name];
      }
      r.kernelOf[dt] = it->second;
    }
  }
  for (auto &[name, r] : records) {
    r.owns = false;
    for (auto &[dt, ki] : r.kernelOf)
      r.owns = r.owns || kernels[ki].owner == name;
  }
  for (const rt::ResolvedModule &m : resolved.modules)
    if (auto it = records.find(m.desc.name); it != records.end())
      it->second.rowIndependent = m.rowsIndependent();
  return true;
}

void Driver::printModuleDone(const std::string &name, bool shared) {
  ++modulesDone;
  if (!options.progress)
    return;
  const ModuleRecord &r = records[name];
  *options.progress << "comfyquant-compile: [" << modulesDone << "/"
                    << selected.size() << "] " << name << " ("
                    << rt::formatName(toRegistry(r.info.getFormat().getKind()))
                    << " " << r.info.getOutFeatures() << "x"
                    << r.info.getInFeatures()
                    << "): " << llvm::format("%.2f", r.seconds) << " s"
                    << (shared ? " (kernels shared)" : "") << "\n";
}

/// The artifact's manifest (runtime/.../Manifest.h): the checkpoint's
/// identity, each back end's section and per module its shape, weight
/// bindings and entries.
rt::Manifest Driver::buildManifest() const {
  rt::Manifest m;
  m.producer = std::string("comfyquant ") + CQ_VERSION_STRING;
  m.llvmVersion = LLVM_VERSION_STRING;
  // The checkpoint by absolute path and relative to the artifact: the
  // runtime tries the relative one first, so an artifact moved together with
  // its checkpoint still finds it.
  const std::filesystem::path ckptAbs =
      std::filesystem::absolute(options.checkpoint).lexically_normal();
  m.checkpointPath = ckptAbs.string();
  m.checkpointRelativePath =
      ckptAbs
          .lexically_relative(
              std::filesystem::absolute(options.outputDir).lexically_normal())
          .string();
  m.checkpointSize = ckpt->totalSize();
  m.checkpointHash = "fnv1a64:" + hex64(ckpt->headerHash());
  m.dtypes = dtypes;
  for (const auto &backend : backends)
    backend->addSection(m);
  for (const std::string &name : selected) {
    const ModuleRecord &r = records.at(name);
    rt::ManifestModule a;
    a.name = name;
    a.kind = *rt::parseModuleKind(stringifyModuleKind(r.info.getKind()).str());
    a.format = rt::formatName(toRegistry(r.info.getFormat().getKind()));
    a.outFeatures = r.info.getOutFeatures();
    a.inFeatures = r.info.getInFeatures();
    if (r.info.getKind() == ModuleKind::moe)
      a.experts = r.info.getExperts();
    a.rotationGroup =
        r.info.getRotation() ? r.info.getRotation().getGroup() : 0;
    a.rowIndependent = r.rowIndependent;
    a.weights = r.weights.value_or(std::vector<rt::ManifestWeight>());
    for (auto &[dt, ki] : r.kernelOf)
      for (const auto &backend : backends)
        backend->addEntries(a, dt, ki);
    m.modules.push_back(std::move(a));
  }
  return m;
}

bool Driver::run(CompileResult &result, std::string &error) {
  if (!checkCompileOptions(options, error))
    return false;
  dtypes = options.dtypes;
  if (dtypes.empty())
    dtypes = {"f32", "bf16", "f16"};
  if (options.targets.cpu)
    backends.push_back(createCPUBackend(options));
  if (!options.targets.cudaArchs.empty())
    backends.push_back(createCUDABackend(options));
  if (!resolve(error))
    return false;

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerComfyQuantGPUTranslations(registry);
  registry.insert<ComfyQuantDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  if (options.serialize)
    ctx.disableMultithreading(); // module-scope IR printing needs it
  if (!plan(ctx, error))
    return false;

  const bool artifact = options.emit == EmitKind::Artifact;
  StagingDirectory staging;
  if (artifact && !staging.create(options.outputDir, error))
    return false;
  BackendProgress progress;
  progress.planned = [&](int index, int count) {
    std::lock_guard<std::mutex> lock(progressMutex);
    records[kernels[index].owner].jobsLeft += count;
  };
  progress.finished = [&](int index, double seconds) {
    std::lock_guard<std::mutex> lock(progressMutex);
    ModuleRecord &r = records[kernels[index].owner];
    r.seconds += seconds;
    if (--r.jobsLeft == 0)
      printModuleDone(kernels[index].owner, /*shared=*/false);
  };
  for (size_t b = 0; b < backends.size(); ++b) {
    std::vector<BackendKernel> list;
    for (size_t ki = 0; ki < kernels.size(); ++ki) {
      BackendKernel k;
      k.index = static_cast<int>(ki);
      k.dtype = kernels[ki].dtype;
      k.owner = kernels[ki].owner;
      k.ownerRank = kernels[ki].ownerRank;
      k.text = std::move(kernels[ki].text[b]);
      list.push_back(std::move(k));
    }
    if (!backends[b]->compile(ctx, list, staging.path, progress, error))
      return false;
    if (b == 0)
      // Modules whose kernels were all shared with earlier ones.
      for (const std::string &name : selected)
        if (!records[name].owns)
          printModuleDone(name, /*shared=*/true);
  }
  if (options.out)
    options.out->flush();
  if (!artifact)
    return true;

  const std::string text = rt::writeManifest(buildManifest());
  const std::string manifestPath = staging.path + "/manifest.json";
  // Never publish a manifest the runtime would refuse.
  try {
    rt::parseManifest(text, manifestPath);
  } catch (const rt::Error &e) {
    error = std::string("internal error: ") + e.what();
    return false;
  }
  if (!writeFile(manifestPath, text, error))
    return false;

  // Publish: the checks again, then the finished directory replaces the
  // output in one rename.
  std::vector<std::string> files = {"manifest.json"};
  for (const auto &backend : backends)
    for (const std::string &f : backend->files())
      files.push_back(f);
  for (const std::string &f : files) {
    uint64_t size = 0;
    llvm::sys::fs::file_size(staging.path + "/" + f, size);
    result.files[f] = size;
  }
  llvm::sys::fs::setPermissions(staging.path,
                                llvm::sys::fs::all_read |
                                    llvm::sys::fs::all_exe |
                                    llvm::sys::fs::owner_write);
  if (!checkOutput(options.outputDir, *ckpt, options.overwrite, error))
    return false;
  try {
    rt::publishDirectory(staging.path, options.outputDir);
  } catch (const rt::Error &e) {
    error = e.what();
    return false;
  }
  staging.release();

  llvm::SmallString<128> absDir(options.outputDir);
  llvm::sys::fs::make_absolute(absDir);
  llvm::sys::path::remove_dots(absDir, /*remove_dot_dot=*/true);
  result.artifact = absDir.str().str();
  for (const auto &backend : backends) {
    result.entries += backend->entryCount();
    for (KernelResourceReport &k : backend->kernelResources())
      result.cudaKernels.push_back(std::move(k));
  }
  for (const std::string &name : selected) {
    const ModuleRecord &r = records[name];
    CompiledModule m;
    m.name = name;
    m.kind = stringifyModuleKind(r.info.getKind()).str();
    m.format = rt::formatName(toRegistry(r.info.getFormat().getKind()));
    m.outFeatures = r.info.getOutFeatures();
    m.inFeatures = r.info.getInFeatures();
    for (auto &[dt, ki] : r.kernelOf)
      m.cpuEntries[dt] = backends.front()->entriesOf(ki);
    m.seconds = r.seconds;
    result.modules.push_back(std::move(m));
  }
  return true;
}

bool mlir::comfyquant::compileCheckpoint(const CompileOptions &options,
                                         CompileResult &result,
                                         std::string &error) {
  return Driver(options).run(result, error);
}
