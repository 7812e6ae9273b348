//===- comfyquant-compile.cpp - checkpoint -> CPU kernel artifact ---------===//
//
//   comfyquant-compile CHECKPOINT --target cpu -o DIR [--modules GLOB]...
//       [--dtypes f32,bf16,f16] [--variants x86-64-v3,avx512-vnni,...]
//       [--emit=so|mlir|llvm|asm] [--overwrite] [--quiet] [--json]
//       [--kind NAME=KIND]... [--shape NAME=NxK]... [-j N]
//       [--mlir-print-ir-after-all] [--mlir-timing] (any --mlir-* pass
//       manager option; they apply to every pass manager, on every thread)
//
// Imports the checkpoint (lib/Import), decomposes every selected module
// into computation ops per activation dtype (buildComfyQuantDecomposePipeline),
// lowers them to linalg (convert-comfyquant-to-linalg), compiles each
// distinct kernel for every CPU variant (buildComfyQuantCPUCodegenPipeline,
// LLVM object emission) and links one kernels.so. DIR receives kernels.so
// and manifest.json (docs/CpuCodegen.md §3) atomically: both are written in
// a temporary sibling directory that replaces DIR in one rename at the end.
// DIR may not be or contain the checkpoint or a shard; an existing DIR is
// replaced only with --overwrite, and only when it is an artifact.
// Identical kernels (same format, shape and options) are compiled once and
// shared. Kernel x variant codegen jobs run on -j worker threads (default:
// all hardware threads), each with its own MLIRContext; the artifact does
// not depend on the count. Progress per module and a final summary on
// stderr (--quiet: none); --json prints a summary to stdout. Any error:
// message, exit code 1.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/CPU/CPUCodegen.h"
#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Compiler/CUDABackend.h"
#include "comfyquant/Conversion/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/Import/CheckpointImporter.h"
#include "comfyquant/Pipelines/Pipelines.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Manifest.h"
#include "comfyquant/runtime/ModuleResolver.h"
#include "comfyquant/runtime/OutputFile.h"
#include "comfyquant/version.h"
#include "ToolVersion.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>

namespace cl = llvm::cl;
namespace rt = ::comfyquant::rt;
using namespace mlir;
using namespace mlir::comfyquant;

/// Our options: --help lists only these (LLVM and MLIR ones stay under
/// --help-hidden).
static cl::OptionCategory toolOptions("comfyquant-compile options");

static cl::opt<std::string> inputFile(cl::cat(toolOptions), cl::Positional, cl::desc("<checkpoint>"),
                                      cl::Required);
static cl::opt<std::string> target(cl::cat(toolOptions), "target", cl::desc("Targets: cpu, cuda[:ARCH,...] or both "
                                            "(cpu,cuda:sm_90a,sm_120a); archs: sm_80, "
                                            "sm_86, sm_89, sm_90a, sm_100a, sm_120a "
                                            "(cuda alone: all)"),
                                   cl::init("cpu"));
static cl::opt<std::string> outputDir(cl::cat(toolOptions), "o",
    cl::desc("Artifact directory (never the checkpoint's; swapped in "
             "atomically)"));
static cl::list<std::string>
    moduleGlobs(cl::cat(toolOptions), "modules", cl::desc("Compile the modules matching this glob "
                                    "(repeatable, comma-separated; all when "
                                    "absent)"),
                cl::CommaSeparated);
static cl::list<std::string> dtypes(cl::cat(toolOptions), "dtypes",
                                    cl::desc("Activation dtypes (f32,bf16,f16)"),
                                    cl::CommaSeparated);
static cl::list<std::string>
    variants(cl::cat(toolOptions), "variants",
             cl::desc("CPU variants (x86-64-v3,avx512-vnni,avx512-bf16,amx; "
                      "default all)"),
             cl::CommaSeparated);
static cl::opt<std::string>
    emit(cl::cat(toolOptions), "emit",
         cl::desc("so: the artifact (default); mlir: the vectorized tensor "
                  "IR with strategy attributes; llvm: optimized LLVM IR; asm: "
                  "assembly; ptx: the PTX of each CUDA arch (mlir/llvm/asm/ptx print "
                  "to stdout, no -o needed)"),
         cl::init("so"));
static cl::opt<bool> overwrite(cl::cat(toolOptions), "overwrite",
    cl::desc("Replace an existing artifact directory"));
static cl::opt<bool> quiet(cl::cat(toolOptions), "quiet",
    cl::desc("No progress lines and no summary on stderr"));
static cl::opt<bool> asJson(cl::cat(toolOptions), "json",
    cl::desc("Print a machine-readable summary of the artifact to stdout"));
static cl::opt<std::string> ukernel(cl::cat(toolOptions), "ukernel",
                                    cl::desc("Force a GEMM micro-kernel"),
                                    cl::init(""));
static cl::opt<std::string> cpuTune(
    cl::cat(toolOptions), "cpu-tune",
    cl::desc("CPU the kernels are tuned for, as LLVM's -mtune: generic "
             "(default), host (this machine) or an LLVM x86 CPU name "
             "(e.g. znver4, emeraldrapids); it picks between micro-kernels "
             "the variant allows"),
    cl::init("generic"));
static cl::opt<std::string> gemmTiles(
    cl::cat(toolOptions), "gemm-tiles",
    cl::desc("Override the CPU GEMM register tile, M block and K block: "
             "MRxNR[xMC[xKC]] (tuning; 0 keeps the strategy's value, except "
             "KC 0: all of K)"),
    cl::init(""));
static cl::opt<std::string>
    gemmDecode(cl::cat(toolOptions), "gemm-decode",
               cl::desc("Where every vector GEMM decodes B: panel, register or "
                        "adaptive (tuning and tests; default: the strategy's)"),
               cl::init(""));
static cl::opt<std::string>
    gemmForm(cl::cat(toolOptions), "gemm-form",
             cl::desc("Accumulator layout of every vector GEMM: inner or "
                      "outer (tuning and tests; default: the strategy's)"),
             cl::init(""));
static cl::list<std::string>
    kinds(cl::cat(toolOptions), "kind", cl::desc("Module kind override NAME=linear|embedding|moe"));
static cl::opt<int> compileJobs(cl::cat(toolOptions), "j",
    cl::desc("Parallel codegen jobs (default: all hardware threads)"),
    cl::init(0));
static cl::list<std::string>
    shapes(cl::cat(toolOptions), "shape", cl::desc("Logical shape override NAME=NxK"));

namespace {

/// A fatal error: main reports it and returns 1 (objects are destroyed).
struct Fatal {
  std::string message;
};

[[noreturn]] void die(const std::string &msg) { throw Fatal{msg}; }

/// --gemm-tiles as counts (0: the strategy's value; kc -1), parsed once
/// before any job runs.
struct GemmTileOverride {
  int64_t mr = 0, nr = 0, mc = 0, kc = -1;
};
GemmTileOverride tileOverride;

GemmTileOverride parseGemmTiles(StringRef spec) {
  GemmTileOverride o;
  if (spec.empty())
    return o;
  int64_t t[4] = {0, 0, 0, -1};
  SmallVector<StringRef> parts;
  spec.split(parts, 'x');
  if (parts.size() < 2 || parts.size() > 4)
    die("--gemm-tiles takes MRxNR, MRxNRxMC or MRxNRxMCxKC, not '" +
        spec.str() + "'");
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].getAsInteger(10, t[i]) || t[i] < 0)
      die("--gemm-tiles: '" + parts[i].str() + "' is not a count");
  o.mr = t[0];
  o.nr = t[1];
  o.mc = t[2];
  o.kc = t[3];
  return o;
}

std::string hex64(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// --mlir-timing: one timer per pipeline under this root (null when off).
/// Nesting from worker threads is safe (DefaultTimingManager tracks each
/// thread's timers).
TimingScope *rootTiming = nullptr;

/// Whether any --mlir-print-ir-* option was given: its output must not
/// interleave, so codegen then runs on one thread.
bool printsIR() {
  for (auto &option : cl::getRegisteredOptions())
    if (option.first.starts_with("mlir-print-ir") &&
        option.second->getNumOccurrences() > 0)
      return true;
  return false;
}

/// Runs `build` on a pass manager over `module` with the --mlir-* pass
/// manager options applied; diagnostics go to stderr.
void runPipeline(ModuleOp module, StringRef what,
                 function_ref<void(OpPassManager &)> build) {
  PassManager pm(module->getContext());
  if (failed(applyPassManagerCLOptions(pm)))
    die(what.str() + ": invalid --mlir-* pass manager options");
  std::optional<TimingScope> timing;
  if (rootTiming) {
    timing.emplace(rootTiming->nest(what.str()));
    pm.enableTiming(*timing);
  }
  build(pm);
  if (failed(pm.run(module)))
    die(what.str() + " failed (see the diagnostics above)");
}

std::string printOp(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os, OpPrintingFlags().printGenericOpForm(false));
  return s;
}

/// The kernel text with its symbol and tensor bindings neutralised: two
/// modules with equal keys compile to the same code.
std::string kernelKey(func::FuncOp fn) {
  OwningOpRef<func::FuncOp> copy(fn.clone());
  copy->setSymName("kernel");
  (*copy)->removeAttr("comfyquant.weights");
  (*copy)->removeAttr("comfyquant.lowered_module");
  for (unsigned i = 0; i < copy->getNumArguments(); ++i)
    for (StringRef a : {"comfyquant.tensor", "comfyquant.offset",
                        "comfyquant.shard"})
      copy->removeArgAttr(i, a);
  return printOp(copy.get());
}

struct Kernel {
  std::string key;
  OwningOpRef<func::FuncOp> fn; // lowered to linalg, weights as arguments
  // The same module lowered for tensor cores (GemmOperands::Native): what
  // the CUDA back end compiles.
  OwningOpRef<func::FuncOp> cudaFn;
  std::string dtype;
  std::map<std::string, std::string> entries; // variant -> symbol
  std::optional<std::string> owner;            // first module using it
  std::vector<std::string> columnSplit;        // entries splitting columns
};

/// One kernel compiled for one CPU variant.
struct CodegenJob {
  std::string module;
  int kernel = 0;
  std::string dtype;
  const CPUVariant *variant = nullptr;
  std::string entry;
  double seconds = 0;
  std::string error;
  bool columnSplit = false; ///< the entry honours its column range
};

/// The kernel as a module in text form (generic form, with locations), so a
/// worker thread can parse it into its own context.
std::string printForWorker(func::FuncOp fn) {
  OwningOpRef<ModuleOp> m(ModuleOp::create(fn.getLoc()));
  m->push_back(cast<func::FuncOp>(fn->clone()));
  std::string s;
  llvm::raw_string_ostream os(s);
  m->print(os, OpPrintingFlags().printGenericOpForm().enableDebugInfo());
  return s;
}

void writeFile(const std::string &path, const std::string &bytes);

/// Parses the kernel into `ctx`, runs the CPU codegen pipeline for the
/// job's variant and writes `<entry>.o` into `dir` (or prints the requested
/// form). Errors throw Fatal.
void runCodegenJob(MLIRContext &ctx, CodegenJob &j,
                   const std::string &text, StringRef dir,
                   const std::string &emit, std::mutex &stdoutMutex) {
  const std::string what = "codegen of '" + j.module + "' (" + j.dtype + ", " +
                           j.variant->name + ")";
  OwningOpRef<ModuleOp> km = parseSourceString<ModuleOp>(text, &ctx);
  if (!km)
    die(what + ": the kernel IR does not parse");
  auto fn = cast<func::FuncOp>(km->getBody()->front());
  fn->setAttr("comfyquant.entry", StringAttr::get(&ctx, j.entry));
  runPipeline(*km, what, [&](OpPassManager &pm) {
    CPUCodegenOptions o;
    o.variant = j.variant->name;
    o.ukernel = ukernel;
    o.tune = cpuTune;
    o.mr = tileOverride.mr;
    o.nr = tileOverride.nr;
    o.mc = tileOverride.mc;
    o.kc = tileOverride.kc;
    o.decode = gemmDecode;
    o.form = gemmForm;
    o.lowerComfyQuant = false;
    o.lowerToLLVM = emit != "mlir";
    buildComfyQuantCPUCodegenPipeline(pm, o);
  });
  if (emit == "mlir") {
    std::lock_guard<std::mutex> lock(stdoutMutex);
    llvm::outs() << "// " << j.module << " " << j.dtype << " "
                 << j.variant->name << "\n"
                 << printOp(*km) << "\n";
    return;
  }
  if (auto split = (*km)->getAttrOfType<ArrayAttr>("comfyquant.column_split")) {
    for (Attribute a : split)
      if (cast<StringAttr>(a).getValue() == j.entry)
        j.columnSplit = true;
    (*km)->removeAttr("comfyquant.column_split");
  }
  std::string object, error, text2;
  if (!emitCPUObject(*km, *j.variant, object, error,
                     emit == "asm" ? &text2 : nullptr,
                     emit == "llvm" ? &text2 : nullptr))
    die("module '" + j.module + "' (" + j.dtype + ", " + j.variant->name +
        "): " + error);
  if (emit != "so") {
    std::lock_guard<std::mutex> lock(stdoutMutex);
    llvm::outs() << "; " << j.module << " " << j.dtype << " "
                 << j.variant->name << "\n"
                 << text2 << "\n";
    return;
  }
  writeFile((dir + "/" + j.entry + ".o").str(), object);
}

struct ModuleRecord {
  std::string name;
  ModuleInfoAttr info;
  std::optional<std::vector<rt::ManifestWeight>> weights; // set by dtype 1
  std::map<std::string, int> kernelOf; // dtype -> kernel index
  double seconds = 0;
  bool rowIndependent = true;
};

bool matchesAny(const std::string &name,
                const std::vector<llvm::GlobPattern> &globs) {
  if (globs.empty())
    return true;
  for (const llvm::GlobPattern &g : globs)
    if (g.match(name))
      return true;
  return false;
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

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f)
    die(path + ": cannot write");
}

} // namespace

static int compileMain(int argc, char **argv);

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  try {
    return compileMain(argc, argv);
  } catch (const Fatal &f) {
    llvm::outs().flush();
    llvm::errs() << "comfyquant-compile: error: " << f.message << "\n";
    return 1;
  }
}

/// Dies unless `dir` is absent, empty or a previous artifact: even with
/// --overwrite, nothing else is ever replaced.
static void checkReplaceable(const std::string &dir) {
  if (!llvm::sys::fs::exists(dir))
    return;
  std::error_code ec;
  bool empty = llvm::sys::fs::directory_iterator(dir, ec) ==
               llvm::sys::fs::directory_iterator();
  if (!llvm::sys::fs::is_directory(dir) ||
      (!llvm::sys::fs::exists(dir + "/manifest.json") && !empty))
    die(dir + ": exists and is not an artifact directory; refusing to "
              "replace it");
}

static double roundMillis(double seconds) {
  return std::round(seconds * 1000.0) / 1000.0;
}

/// The final summary: one line on stderr (none with --quiet) and, with
/// --json, the machine-readable form on stdout.
static void reportSummary(const std::string &dir,
                   const std::map<std::string, uint64_t> &fileSizes,
                   const std::vector<std::string> &selected,
                   std::map<std::string, ModuleRecord> &records,
                   const std::vector<Kernel> &kernels, size_t cudaEntryCount,
                   double seconds) {
  uint64_t bytes = 0;
  for (const auto &[file, size] : fileSizes)
    bytes += size;
  size_t entries = 0; // symbols in kernels.so and cuda/host.so
  for (const Kernel &k : kernels)
    entries += k.entries.size();
  entries += cudaEntryCount;
  llvm::SmallString<128> absDir(dir);
  llvm::sys::fs::make_absolute(absDir);
  llvm::sys::path::remove_dots(absDir, /*remove_dot_dot=*/true);
  if (!quiet)
    llvm::errs() << "comfyquant-compile: wrote " << absDir << ": "
                 << selected.size() << " modules, " << entries
                 << " entries, " << bytes << " bytes, "
                 << llvm::format("%.2f", seconds) << " s\n";
  if (!asJson)
    return;
  nlohmann::ordered_json summary;
  summary["schema"] = "comfyquant-compile";
  summary["schema_version"] = 1;
  summary["artifact"] = absDir.str().str();
  summary["bytes"] = bytes;
  summary["files"] = fileSizes;
  summary["entries"] = entries;
  nlohmann::ordered_json modules = nlohmann::ordered_json::array();
  for (const std::string &name : selected) {
    ModuleRecord &r = records[name];
    nlohmann::ordered_json m;
    m["name"] = name;
    m["kind"] = stringifyModuleKind(r.info.getKind()).str();
    m["format"] = rt::formatName(toRegistry(r.info.getFormat().getKind()));
    m["out_features"] = r.info.getOutFeatures();
    m["in_features"] = r.info.getInFeatures();
    nlohmann::ordered_json entry;
    for (auto &[dt, ki] : r.kernelOf)
      entry[dt] = kernels[ki].entries;
    m["entry"] = entry;
    m["seconds"] = roundMillis(r.seconds);
    modules.push_back(m);
  }
  summary["modules"] = modules;
  summary["seconds"] = roundMillis(seconds);
  llvm::outs() << summary.dump(2) << "\n";
  llvm::outs().flush();
}

/// The artifact's manifest (runtime/.../Manifest.h): the checkpoint's
/// identity, the CPU backend and per module its shape, weight bindings and
/// entries.
static rt::Manifest
buildManifest(const rt::Checkpoint &ckpt,
              const std::vector<const CPUVariant *> *variants,
              const std::vector<std::string> &dtypes,
              const std::vector<std::string> &selected,
              std::map<std::string, ModuleRecord> &records,
              const std::vector<Kernel> &kernels,
              const std::map<int, CUDAEntryResult> &cudaEntries,
              const std::vector<const CUDAArch *> &cudaArchs,
              const std::vector<CUDAImageResult> &cudaImages) {
  rt::Manifest m;
  m.producer = std::string("comfyquant ") + CQ_VERSION_STRING;
  m.llvmVersion = LLVM_VERSION_STRING;
  // The checkpoint by absolute path and relative to the artifact: the
  // runtime tries the relative one first, so an artifact moved together with
  // its checkpoint still finds it.
  const std::filesystem::path ckptAbs =
      std::filesystem::absolute(inputFile.getValue()).lexically_normal();
  m.checkpointPath = ckptAbs.string();
  m.checkpointRelativePath =
      ckptAbs
          .lexically_relative(
              std::filesystem::absolute(outputDir.getValue()).lexically_normal())
          .string();
  m.checkpointSize = ckpt.totalSize();
  m.checkpointHash = "fnv1a64:" + hex64(ckpt.headerHash());
  m.dtypes = dtypes;
  if (variants) {
    rt::CpuBackend cpu;
    for (const CPUVariant *v : *variants)
      cpu.variants.push_back(v->name);
    m.cpu = std::move(cpu);
  }
  if (!cudaImages.empty()) {
    rt::CudaBackend cuda;
    for (const CUDAImageResult &i : cudaImages) {
      rt::CudaImage image;
      image.arch = i.arch;
      image.ptx = i.ptx;
      image.cubin = i.cubin;
      image.ptxVersion = std::to_string(i.ptxVersion / 10) + "." +
                         std::to_string(i.ptxVersion % 10);
      cuda.images.push_back(std::move(image));
    }
    m.cuda = std::move(cuda);
  }
  for (const std::string &name : selected) {
    ModuleRecord &r = records[name];
    rt::ManifestModule a;
    a.name = name;
    a.kind = stringifyModuleKind(r.info.getKind()).str();
    a.format = rt::formatName(toRegistry(r.info.getFormat().getKind()));
    a.outFeatures = r.info.getOutFeatures();
    a.inFeatures = r.info.getInFeatures();
    if (r.info.getKind() == ModuleKind::moe)
      a.experts = r.info.getExperts();
    a.rotationGroup =
        r.info.getRotation() ? r.info.getRotation().getGroup() : 0;
    a.rowIndependent = r.rowIndependent;
    a.weights = r.weights.value_or(std::vector<rt::ManifestWeight>());
    for (auto &[dt, ki] : r.kernelOf) {
      const Kernel &k = kernels[ki];
      for (auto &[variant, symbol] : k.entries) {
        rt::CpuEntry e;
        e.dtype = dt;
        e.variant = variant;
        e.symbol = symbol;
        e.columnSplit = llvm::is_contained(k.columnSplit, symbol);
        a.cpuEntries.push_back(std::move(e));
      }
      if (auto it = cudaEntries.find(ki); it != cudaEntries.end())
        for (const CUDAArch *arch : cudaArchs) {
          rt::CudaEntry e;
          e.dtype = dt;
          e.arch = arch->name;
          e.host = it->second.entry;
          e.kernels = it->second.kernels;
          e.workspacePerRow = it->second.workspacePerRow;
          e.workspaceFixed = it->second.workspaceFixed;
          a.cudaEntries.push_back(std::move(e));
        }
    }
    m.modules.push_back(std::move(a));
  }
  return m;
}

static int compileMain(int argc, char **argv) {
  const auto startTime = std::chrono::steady_clock::now();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  ::comfyquant::tools::setVersionPrinter();
  cl::HideUnrelatedOptions(toolOptions);
  cl::ParseCommandLineOptions(argc, argv,
                              "comfyquant CPU compiler: checkpoint -> "
                              "kernels.so + manifest.json\n\n"
                              "  The standard --mlir-* pass manager options "
                              "(--mlir-print-ir-after-all, --mlir-timing,\n"
                              "  ...) apply to every pass manager.\n");
  tileOverride = parseGemmTiles(gemmTiles);
  if (!mlir::comfyquant::isCpuTuneName(cpuTune))
    die("--cpu-tune takes generic, host or an LLVM x86-64 CPU name, not '" +
        cpuTune + "'");
  if (!gemmDecode.empty() && gemmDecode != "panel" &&
      gemmDecode != "register" && gemmDecode != "adaptive")
    die("--gemm-decode takes panel, register or adaptive, not '" + gemmDecode +
        "'");
  if (!gemmForm.empty() && gemmForm != "inner" && gemmForm != "outer")
    die("--gemm-form takes inner or outer, not '" + gemmForm + "'");
  // --target cpu | cuda[:ARCH[,ARCH]...] | cpu,cuda:ARCH,...
  bool wantCpu = false, wantCuda = false;
  std::vector<const CUDAArch *> cudaArchs;
  {
    SmallVector<StringRef> items;
    StringRef(target).split(items, ',', -1, /*KeepEmpty=*/false);
    bool inCuda = false;
    for (StringRef item : items) {
      item = item.trim();
      if (item == "cpu") {
        wantCpu = true;
        inCuda = false;
        continue;
      }
      if (item == "cuda" || item.starts_with("cuda:")) {
        wantCuda = inCuda = true;
        item = item.drop_front(4).drop_front(item.size() > 4 ? 1 : 0);
        if (item.empty())
          continue;
      }
      const CUDAArch *arch = inCuda ? lookupCUDAArch(item) : nullptr;
      if (!arch)
        die("unknown --target '" + item.str() +
            "' (cpu, cuda[:sm_80,sm_86,sm_89,sm_90a,sm_100a,sm_120a])");
      if (!llvm::is_contained(cudaArchs, arch))
        cudaArchs.push_back(arch);
    }
    if (wantCuda && cudaArchs.empty())
      for (const CUDAArch &a : getCUDAArchs())
        cudaArchs.push_back(&a);
    if (!wantCpu && !wantCuda)
      die("--target names no target (cpu, cuda[:ARCH,...])");
  }
  const bool emitArtifact = emit == "so";
  if (!emitArtifact && emit != "mlir" && emit != "llvm" && emit != "asm" &&
      emit != "ptx")
    die("unknown --emit '" + emit + "' (so, mlir, llvm, asm, ptx)");
  if (emit == "ptx" && !wantCuda)
    die("--emit=ptx needs a cuda target");
  if ((emit == "llvm" || emit == "asm") && !wantCpu)
    die("--emit=" + emit + " applies to the cpu target");
  if (emitArtifact && outputDir.empty())
    die("-o DIR is required");
  if (!emitArtifact && !outputDir.empty())
    die("-o applies only to --emit=so (--emit=" + emit +
        " prints to stdout)");
  if (!emitArtifact && (asJson || overwrite))
    die(std::string(asJson ? "--json" : "--overwrite") +
        " applies only to --emit=so (an artifact directory)");
  DefaultTimingManager timingManager;
  applyDefaultTimingManagerCLOptions(timingManager);
  std::optional<TimingScope> timingRoot;
  if (timingManager.isEnabled()) {
    timingRoot.emplace(timingManager.getRootScope());
    rootTiming = &*timingRoot;
  }
  const bool printIR = printsIR();
  std::vector<std::string> dts(dtypes.begin(), dtypes.end());
  if (dts.empty())
    dts = {"f32", "bf16", "f16"};
  for (const std::string &d : dts)
    if (d != "f32" && d != "bf16" && d != "f16")
      die("unknown dtype '" + d + "' (f32, bf16, f16)");
  std::vector<const CPUVariant *> vs;
  if (variants.empty())
    for (const CPUVariant &v : getCPUVariants())
      vs.push_back(&v);
  for (const std::string &v : variants) {
    const CPUVariant *cv = lookupCPUVariant(v);
    if (!cv) {
      std::string known;
      for (const CPUVariant &k : getCPUVariants())
        known += (known.empty() ? "" : ", ") + std::string(k.name);
      die("unknown CPU variant '" + v + "' (" + known + ")");
    }
    vs.push_back(cv);
  }
  if (!wantCpu) {
    if (!variants.empty())
      die("--variants applies to the cpu target");
    vs.clear();
  }
  std::vector<llvm::GlobPattern> globs;
  for (const std::string &g : moduleGlobs) {
    auto p = llvm::GlobPattern::create(g);
    if (!p)
      die("--modules '" + g + "': " + llvm::toString(p.takeError()));
    globs.push_back(std::move(*p));
  }

  // The checkpoint: resolve and validate every module.
  std::unique_ptr<rt::Checkpoint> ckpt;
  rt::ResolvedCheckpoint resolved;
  try {
    rt::ResolveOptions opts;
    for (const std::string &k : kinds)
      if (std::string err = rt::addKindOverride(opts, k); !err.empty())
        die(err);
    for (const std::string &s : shapes)
      if (std::string err = rt::addShapeOverride(opts, s); !err.empty())
        die(err);
    ckpt = rt::Checkpoint::open(inputFile);
    // Never write over the checkpoint; fail before compiling anything.
    if (emitArtifact) {
      rt::checkNotAnInput(outputDir, rt::checkpointFiles(*ckpt),
                          /*outputIsDirectory=*/true);
      checkReplaceable(outputDir);
      rt::checkOverwrite(outputDir, overwrite, /*outputIsDirectory=*/true);
    }
    resolved = rt::resolveCheckpoint(*ckpt, opts);
  } catch (const std::exception &e) {
    die(e.what());
  }
  std::vector<std::string> selected;
  for (const rt::ResolvedModule &m : resolved.modules)
    if (matchesAny(m.desc.name, globs))
      selected.push_back(m.desc.name);
  if (selected.empty())
    die(inputFile + ": no quantized module matches --modules");

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerComfyQuantGPUTranslations(registry);
  registry.insert<ComfyQuantDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  if (printIR)
    ctx.disableMultithreading(); // module-scope printing needs it

  ImportOptions importOptions;
  importOptions.modules = selected;
  importOptions.onlyReferencedTensors = true;
  OwningOpRef<ModuleOp> imported =
      mlir::comfyquant::importCheckpoint(&ctx, resolved, importOptions);
  if (!imported)
    die(inputFile + ": import failed");

  // Per dtype: decompose, lower to linalg, collect kernels (deduplicated).
  std::vector<Kernel> kernels;
  std::map<std::string, int> kernelIndex; // dtype + key -> index
  std::map<std::string, ModuleRecord> records;
  std::map<std::string, double> decomposeSeconds;
  for (const std::string &dt : dts) {
    auto t0 = std::chrono::steady_clock::now();
    OwningOpRef<ModuleOp> m(cast<ModuleOp>(imported->getOperation()->clone()));
    runPipeline(*m, "decomposition (" + dt + ")", [&](OpPassManager &pm) {
      DecomposeOptions d;
      d.activationType = dt;
      buildComfyQuantDecomposePipeline(pm, d);
    });
    // The back ends read GEMM operands in different forms: CPU micro-
    // kernels decoded f32, tensor cores FP8 codes and exact f16.
    OwningOpRef<ModuleOp> forCuda;
    if (wantCuda) {
      forCuda = cast<ModuleOp>(m->getOperation()->clone());
      runPipeline(*forCuda, "lowering to linalg for CUDA (" + dt + ")",
                  [&](OpPassManager &pm) {
                    ConvertComfyQuantToLinalgOptions o;
                    o.gemmOperands = GemmOperands::Native;
                    pm.addPass(createConvertComfyQuantToLinalg(o));
                  });
    }
    runPipeline(*m, "lowering to linalg (" + dt + ")", [&](OpPassManager &pm) {
      ConvertComfyQuantToLinalgOptions o;
      o.rotatedQuantize = RotatedQuantize::Rows;
      pm.addPass(createConvertComfyQuantToLinalg(o));
    });
    double share =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count() /
        static_cast<double>(selected.size());
    for (auto fn : m->getOps<func::FuncOp>()) {
      std::string name = fn.getSymName().str();
      ModuleRecord &r = records[name];
      r.name = name;
      r.info = fn->getAttrOfType<ModuleInfoAttr>("comfyquant.lowered_module");
      if (!r.info)
        die("module '" + name + "': the decomposed function has no "
            "comfyquant.module record");
      std::vector<rt::ManifestWeight> w =
          manifestWeights(fn->getAttrOfType<ArrayAttr>("comfyquant.weights"));
      if (r.weights && *r.weights != w)
        die("module '" + name + "': weight lists differ between dtypes");
      r.weights = w;
      r.seconds += share;
      std::string key = kernelKey(fn);
      func::FuncOp native;
      if (forCuda) {
        native = forCuda->lookupSymbol<func::FuncOp>(fn.getSymName());
        if (!native)
          die("module '" + name + "': no CUDA lowering");
      }
      // Modules share a kernel only where both lowerings are the same.
      std::string shareKey =
          dt + "\n" + key + (native ? "\n" + kernelKey(native) : "");
      auto [it, fresh] =
          kernelIndex.emplace(shareKey, static_cast<int>(kernels.size()));
      if (fresh) {
        Kernel k;
        k.key = key;
        k.dtype = dt;
        k.fn = cast<func::FuncOp>(fn->clone());
        if (native)
          k.cudaFn = cast<func::FuncOp>(native->clone());
        kernels.push_back(std::move(k));
      }
      r.kernelOf[dt] = it->second;
    }
  }

  // Row independence: every activation row is computed on its own, except
  // NVFP4 without input_scale (a dynamic global scale over all rows).
  for (const rt::ResolvedModule &m : resolved.modules)
    if (auto it = records.find(m.desc.name); it != records.end())
      it->second.rowIndependent =
          !(m.desc.format == rt::Format::NVFP4 && !m.desc.fullPrecision &&
            !m.tensor("input_scale"));

  // Compile each kernel for each variant.
  llvm::SmallString<128> tmpDir;
  if (emitArtifact) {
    llvm::SmallString<128> abs(outputDir);
    llvm::sys::fs::make_absolute(abs);
    llvm::sys::path::remove_dots(abs, true);
    std::string templ = abs.str().str() + ".tmp-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data()))
      die(outputDir + ": cannot create a temporary directory next to it");
    tmpDir = buf.data();
  }
  // Removes the temporary directory on every failure path.
  struct TmpGuard {
    llvm::SmallString<128> &dir;
    ~TmpGuard() {
      if (!dir.empty())
        llvm::sys::fs::remove_directories(dir);
    }
  } tmpGuard{tmpDir};
  auto cleanupAndDie = [&](const std::string &msg) { die(msg); };

  // One job per (distinct kernel, variant), in module order. The kernel is
  // handed over as text: each worker thread has its own MLIRContext (pass
  // managers, diagnostics and the LLVM translation registry are per
  // context) and LLVMContext.
  std::vector<CodegenJob> jobs;
  std::map<std::string, int> jobsLeft; // module -> unfinished jobs
  std::map<std::string, int> freshKernels;
  std::vector<std::string> kernelText(kernels.size());
  for (const std::string &name : selected) {
    ModuleRecord &r = records[name];
    jobsLeft[name] = 0;
    for (auto &[dt, ki] : r.kernelOf) {
      Kernel &k = kernels[ki];
      if (k.owner.has_value())
        continue; // shared with an earlier module
      k.owner = name;
      ++freshKernels[name];
      if (kernelText[ki].empty())
        kernelText[ki] = printForWorker(*k.fn);
      for (const CPUVariant *v : vs) {
        CodegenJob j;
        j.module = name;
        j.kernel = ki;
        j.dtype = dt;
        j.variant = v;
        j.entry = "cq_" + std::to_string(ki) + "_" + dt + "_" + v->shortName;
        jobs.push_back(std::move(j));
        ++jobsLeft[name];
      }
    }
  }
  // Printing (--emit=mlir/llvm/asm, --mlir-print-ir-*) keeps job order.
  unsigned workers = std::min<unsigned>(
      jobs.size(), compileJobs > 0 ? unsigned(compileJobs)
                                   : std::max(1u, std::thread::hardware_concurrency()));
  if (!emitArtifact || printIR)
    workers = 1;
  std::mutex mu; // progress, records, stdout
  size_t done = 0;
  auto finishJob = [&](const CodegenJob &j) {
    std::lock_guard<std::mutex> lock(mu);
    ModuleRecord &r = records[j.module];
    r.seconds += j.seconds;
    if (--jobsLeft[j.module] > 0)
      return;
    ++done;
    if (!quiet)
      llvm::errs() << "comfyquant-compile: [" << done << "/" << selected.size()
                 << "] " << j.module << " ("
                 << rt::formatName(toRegistry(r.info.getFormat().getKind()))
                 << " " << r.info.getOutFeatures() << "x"
                 << r.info.getInFeatures()
                 << "): " << llvm::format("%.2f", r.seconds) << " s\n";
  };
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&]() {
    DialectRegistry workerRegistry;
    registerAllDialects(workerRegistry);
    registerAllExtensions(workerRegistry);
    workerRegistry.insert<ComfyQuantDialect>();
    MLIRContext wctx(workerRegistry, MLIRContext::Threading::DISABLED);
    for (size_t i; !failed && (i = next++) < jobs.size();) {
      CodegenJob &j = jobs[i];
      auto t0 = std::chrono::steady_clock::now();
      try {
        runCodegenJob(wctx, j, kernelText[j.kernel], tmpDir, emit, mu);
      } catch (const Fatal &f) {
        j.error = f.message;
        failed = true;
        return;
      }
      j.seconds = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
      finishJob(j);
    }
  };
  if (workers <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < workers; ++t)
      pool.emplace_back(work);
    for (std::thread &t : pool)
      t.join();
  }
  for (const CodegenJob &j : jobs)
    if (!j.error.empty())
      cleanupAndDie(j.error);
  std::vector<std::string> objects;
  for (const CodegenJob &j : jobs) {
    kernels[j.kernel].entries[j.variant->name] = j.entry;
    if (j.columnSplit)
      kernels[j.kernel].columnSplit.push_back(j.entry);
    if (emitArtifact)
      objects.push_back((tmpDir + "/" + j.entry + ".o").str());
  }
  // Modules whose kernels were all shared with earlier ones.
  for (const std::string &name : selected)
    if (!freshKernels.count(name)) {
      ModuleRecord &r = records[name];
      ++done;
      if (!quiet)
        llvm::errs() << "comfyquant-compile: [" << done << "/" << selected.size()
                   << "] " << name << " ("
                   << rt::formatName(toRegistry(r.info.getFormat().getKind()))
                   << " " << r.info.getOutFeatures() << "x"
                   << r.info.getInFeatures()
                   << "): " << llvm::format("%.2f", r.seconds)
                   << " s (kernels shared)\n";
    }
  // The CUDA half: host entries + one image per arch.
  std::map<int, CUDAEntryResult> cudaEntries; // kernel index -> entry
  std::vector<CUDAImageResult> cudaImages;
  if (wantCuda && (emitArtifact || emit == "mlir" || emit == "ptx")) {
    std::vector<CUDAKernelSource> sources;
    std::vector<int> sourceKernel;
    for (size_t ki = 0; ki < kernels.size(); ++ki) {
      sources.push_back({"cq_" + std::to_string(ki) + "_" +
                             kernels[ki].dtype + "_cuda",
                         printForWorker(*kernels[ki].cudaFn)});
      sourceKernel.push_back(static_cast<int>(ki));
    }
    CUDACompileOptions o;
    o.archs = cudaArchs;
    o.dir = tmpDir.str().str();
    o.print = emitArtifact ? "" : emit.getValue();
    if (emitArtifact) {
      o.ptxas = findPtxas();
      if (o.ptxas.empty() && !quiet)
        llvm::errs() << "comfyquant-compile: warning: ptxas not found "
                        "(COMFYQUANT_PTXAS, PATH, $CUDA_HOME/bin, "
                        "/usr/local/cuda/bin): PTX only, no cubins\n";
    }
    o.jobs = compileJobs > 0 ? unsigned(compileJobs)
                             : std::max(1u, std::thread::hardware_concurrency());
    if (printIR)
      o.jobs = 1;
    o.configure = [](PassManager &pm) { return applyPassManagerCLOptions(pm); };
    size_t formed = 0;
    o.formed = [&](const CUDAEntryResult &e, double seconds) {
      ++formed;
      if (quiet || !emitArtifact)
        return;
      llvm::errs() << "comfyquant-compile: [cuda " << formed << "/"
                   << sources.size() << "] " << e.entry << ": "
                   << e.kernels.size() << " kernels";
      if (e.sharedKernels)
        llvm::errs() << " (" << e.sharedKernels
                     << " shared with earlier entries)";
      llvm::errs() << ", " << llvm::format("%.2f", seconds) << " s\n";
    };
    std::vector<CUDAEntryResult> results;
    std::string cudaError;
    auto t0 = std::chrono::steady_clock::now();
    if (!compileCUDA(ctx, sources, o, results, cudaImages, cudaError,
                     llvm::outs()))
      cleanupAndDie("cuda: " + cudaError);
    for (size_t i = 0; i < results.size(); ++i)
      cudaEntries[sourceKernel[i]] = results[i];
    if (!quiet && emitArtifact)
      llvm::errs() << "comfyquant-compile: cuda: " << results.size()
                   << " host entries, " << cudaImages.size() << " archs, "
                   << llvm::format("%.2f",
                                   std::chrono::duration<double>(
                                       std::chrono::steady_clock::now() - t0)
                                       .count())
                   << " s\n";
  }
  llvm::outs().flush();
  if (!emitArtifact)
    return 0;

  // Link, write the manifest, publish atomically.
  std::string error;
  std::string soPath = (tmpDir + "/kernels.so").str();
  if (wantCpu && !linkSharedLibrary(objects, soPath, error))
    cleanupAndDie(error);
  if (wantCpu) {
    // Never publish an artifact the runtime could not load.
    std::vector<std::string> entrySymbols;
    for (const CodegenJob &j : jobs)
      entrySymbols.push_back(j.entry);
    if (!verifySharedLibrary(soPath, entrySymbols, error))
      cleanupAndDie(error);
  }
  for (const std::string &o : objects)
    llvm::sys::fs::remove(o);

  {
    const std::string text = rt::writeManifest(
        buildManifest(*ckpt, wantCpu ? &vs : nullptr, dts, selected, records,
                      kernels, cudaEntries, cudaArchs, cudaImages));
    const std::string path = (tmpDir + "/manifest.json").str();
    // Never publish a manifest the runtime would refuse.
    try {
      rt::parseManifest(text, path);
    } catch (const rt::Error &e) {
      cleanupAndDie(std::string("internal error: ") + e.what());
    }
    writeFile(path, text);
  }

  // Publish: the checks again (DIR may have changed while compiling), then
  // the finished directory replaces DIR in one rename.
  std::string dir = outputDir;
  std::map<std::string, uint64_t> fileSizes;
  std::vector<std::string> files = {"manifest.json"};
  if (wantCpu)
    files.push_back("kernels.so");
  if (!cudaImages.empty()) {
    files.push_back("cuda/host.so");
    for (const CUDAImageResult &i : cudaImages)
      for (const std::string &f : {i.ptx, i.cubin})
        if (!f.empty())
          files.push_back(f);
  }
  for (const std::string &f : files) {
    uint64_t size = 0;
    llvm::sys::fs::file_size(tmpDir + "/" + f, size);
    fileSizes[f] = size;
  }
  llvm::sys::fs::setPermissions(tmpDir, llvm::sys::fs::all_read |
                                            llvm::sys::fs::all_exe |
                                            llvm::sys::fs::owner_write);
  try {
    rt::checkNotAnInput(dir, rt::checkpointFiles(*ckpt),
                        /*outputIsDirectory=*/true);
    checkReplaceable(dir);
    rt::checkOverwrite(dir, overwrite, /*outputIsDirectory=*/true);
    rt::publishDirectory(tmpDir.str().str(), dir);
  } catch (const rt::Error &e) {
    cleanupAndDie(e.what());
  }
  tmpDir.clear(); // published
  reportSummary(dir, fileSizes, selected, records, kernels, cudaEntries.size(),
                std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - startTime)
                    .count());
  return 0;
}
