//===- comfyquant-compile.cpp - checkpoint -> kernel artifact -------------===//
//
//   comfyquant-compile CHECKPOINT --target cpu|cuda[:ARCH,...] -o DIR
//       [--modules GLOB]... [--dtypes f32,bf16,f16] [--variants ...]
//       [--emit=so|mlir|llvm|asm|ptx] [--overwrite] [--quiet] [--json]
//       [--kind NAME=KIND]... [--shape NAME=NxK]... [-j N] [--mlir-*]
//
// The command line of the compiler library (lib/Compiler, Driver.h): flags
// become one CompileOptions, compileCheckpoint builds and publishes the
// artifact, and this tool prints the summary. The --mlir-* pass manager
// options apply to every pass manager, on every thread. Any error: message,
// exit code 1.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/CPU/CPUCodegen.h"
#include "comfyquant/Codegen/GPU/GPUCodegen.h"
#include "comfyquant/Compiler/Driver.h"
#include "ToolVersion.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>

namespace cl = llvm::cl;
using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// The table's names, comma-separated (help text from the one table).
template <typename Range> std::string names(const Range &table) {
  std::string list;
  for (const auto &entry : table)
    list += (list.empty() ? "" : ", ") + std::string(entry.name);
  return list;
}

/// Our options: --help lists only these (LLVM and MLIR ones stay under
/// --help-hidden).
cl::OptionCategory toolOptions("comfyquant-compile options");

// Help texts generated from the target table. cl::desc keeps a StringRef,
// so the strings must outlive the options: built here, before them.
const std::string targetHelp =
    "Targets: cpu, cuda[:ARCH,...] or both (cpu,cuda:sm_90a,sm_120a); archs: " +
    names(getCUDAArchs()) + " (cuda alone: all)";
const std::string variantsHelp =
    "CPU variants (" + names(getCPUVariants()) + "; default all)";

cl::opt<std::string> inputFile(cl::cat(toolOptions), cl::Positional,
                               cl::desc("<checkpoint>"), cl::Required);
cl::opt<std::string> target(
    cl::cat(toolOptions), "target",
    cl::desc(targetHelp),
    cl::init("cpu"));
cl::opt<std::string> outputDir(cl::cat(toolOptions), "o",
                               cl::desc("Artifact directory (never the "
                                        "checkpoint's; swapped in atomically; "
                                        "missing parents are created)"));
cl::list<std::string> moduleGlobs(cl::cat(toolOptions), "modules",
                                  cl::desc("Compile the modules matching this "
                                           "glob (repeatable, comma-separated; "
                                           "all when absent)"),
                                  cl::CommaSeparated);
cl::list<std::string> dtypes(cl::cat(toolOptions), "dtypes",
                             cl::desc("Activation dtypes (f32,bf16,f16)"),
                             cl::CommaSeparated);
cl::list<std::string> variants(cl::cat(toolOptions), "variants",
                               cl::desc(variantsHelp),
                               cl::CommaSeparated);
cl::opt<std::string> emit(
    cl::cat(toolOptions), "emit",
    cl::desc("so: the artifact (default); mlir: the vectorized tensor IR with "
             "strategy attributes; llvm: optimized LLVM IR; asm: assembly; "
             "ptx: the PTX of each CUDA arch (mlir/llvm/asm/ptx print to "
             "stdout, no -o needed)"),
    cl::init("so"));
cl::opt<bool> overwrite(cl::cat(toolOptions), "overwrite",
                        cl::desc("Replace an existing artifact directory"));
cl::opt<bool> quiet(cl::cat(toolOptions), "quiet",
                    cl::desc("No progress lines and no summary on stderr"));
cl::opt<bool> asJson(cl::cat(toolOptions), "json",
                     cl::desc("Print a machine-readable summary of the "
                              "artifact to stdout"));
cl::opt<EnumChoice<CpuMicroKernel>>
    ukernel(cl::cat(toolOptions), "ukernel",
            cl::desc("Force a GEMM micro-kernel (f32-fma, i8-vnni, i8-amx, "
                     "bf16-dot, ...)"));
cl::opt<std::string> cpuTune(
    cl::cat(toolOptions), "cpu-tune",
    cl::desc("CPU the kernels are tuned for, as LLVM's -mtune: generic "
             "(default), host (this machine) or an LLVM x86 CPU name (e.g. "
             "znver4, emeraldrapids); it picks between micro-kernels the "
             "variant allows"),
    cl::init("generic"));
cl::opt<std::string> gemmTiles(
    cl::cat(toolOptions), "gemm-tiles",
    cl::desc("Override the CPU GEMM register tile, M block and K block: "
             "MRxNR[xMC[xKC]] (tuning; 0 keeps the strategy's value, except "
             "KC 0: all of K)"),
    cl::init(""));
cl::opt<int> amxMinRows(
    cl::cat(toolOptions), "amx-min-rows",
    cl::desc("Fewest rows of x a call runs the AMX kernels with; the runtime "
             "runs calls with fewer rows on the best variant below (default "
             "16, the tile height)"),
    cl::init(16));
cl::opt<EnumChoice<CpuDecode>> gemmDecode(
    cl::cat(toolOptions), "gemm-decode",
    cl::desc("Where every vector GEMM decodes B: panel, register or adaptive "
             "(tuning and tests; default: the strategy's)"));
cl::opt<EnumChoice<CpuGemmForm>> gemmForm(
    cl::cat(toolOptions), "gemm-form",
    cl::desc("Accumulator layout of every vector GEMM: inner or outer "
             "(tuning and tests; default: the strategy's)"));
cl::opt<EnumChoice<CpuRowKernel>> gemmRow(
    cl::cat(toolOptions), "gemm-row",
    cl::desc("Micro-kernel of every vector GEMM's one-row calls: ukernel "
             "(the GEMM's own), f32-fma, bf16-dot or i8-planes (tuning and "
             "tests; default: the strategy's)"));
cl::list<std::string> kinds(cl::cat(toolOptions), "kind",
                            cl::desc("Module kind override "
                                     "NAME=linear|embedding|moe"));
cl::opt<int> compileJobs(cl::cat(toolOptions), "j",
                         cl::desc("Parallel codegen jobs (default: all "
                                  "hardware threads)"),
                         cl::init(0));
cl::list<std::string> shapes(cl::cat(toolOptions), "shape",
                             cl::desc("Logical shape override NAME=NxK"));

/// Whether any --mlir-print-ir-* option was given: its output must not
/// interleave, so codegen then runs on one thread.
bool printsIR() {
  for (auto &option : cl::getRegisteredOptions())
    if (option.first.starts_with("mlir-print-ir") &&
        option.second->getNumOccurrences() > 0)
      return true;
  return false;
}

double roundMillis(double seconds) {
  return std::round(seconds * 1000.0) / 1000.0;
}

/// The final summary: one line on stderr (none with --quiet) and, with
/// --json, the machine-readable form on stdout.
void reportSummary(const CompileResult &r, double seconds) {
  uint64_t bytes = 0;
  for (const auto &[file, size] : r.files)
    bytes += size;
  if (!quiet)
    llvm::errs() << "comfyquant-compile: wrote " << r.artifact << ": "
                 << r.modules.size() << " modules, " << r.entries
                 << " entries, " << bytes << " bytes, "
                 << llvm::format("%.2f", seconds) << " s\n";
  if (!asJson)
    return;
  nlohmann::ordered_json summary;
  summary["schema"] = "comfyquant-compile";
  summary["schema_version"] = 1;
  summary["artifact"] = r.artifact;
  summary["bytes"] = bytes;
  summary["files"] = r.files;
  summary["entries"] = r.entries;
  nlohmann::ordered_json modules = nlohmann::ordered_json::array();
  for (const CompiledModule &c : r.modules) {
    nlohmann::ordered_json m;
    m["name"] = c.name;
    m["kind"] = c.kind;
    m["format"] = c.format;
    m["out_features"] = c.outFeatures;
    m["in_features"] = c.inFeatures;
    nlohmann::ordered_json entry;
    for (auto &[dt, symbols] : c.cpuEntries)
      entry[dt] = symbols;
    m["entry"] = entry;
    m["seconds"] = roundMillis(c.seconds);
    modules.push_back(m);
  }
  summary["modules"] = modules;
  // What ptxas reported of every CUDA kernel, per arch (spills included:
  // they are reported, not refused).
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const KernelResourceReport &k : r.cudaKernels) {
    nlohmann::ordered_json j;
    j["arch"] = k.arch;
    j["kernel"] = k.kernel;
    j["registers"] = k.registers;
    j["spill_store_bytes"] = k.spillStoreBytes;
    j["spill_load_bytes"] = k.spillLoadBytes;
    j["shared_bytes"] = k.sharedBytes;
    j["block_threads"] = k.blockThreads;
    kernels.push_back(j);
  }
  summary["cuda_kernels"] = kernels;
  summary["seconds"] = roundMillis(seconds);
  llvm::outs() << summary.dump(2) << "\n";
  llvm::outs().flush();
}

/// Flags -> options, compile, report. Returns the error ("" on success).
std::string compileMain(int argc, char **argv) {
  const auto start = std::chrono::steady_clock::now();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  ::comfyquant::tools::setVersionPrinter();
  cl::HideUnrelatedOptions(toolOptions);
  cl::ParseCommandLineOptions(argc, argv,
                              "comfyquant compiler: checkpoint -> kernels.so, "
                              "cuda/ images + manifest.json\n\n"
                              "  The standard --mlir-* pass manager options "
                              "(--mlir-print-ir-after-all, --mlir-timing,\n"
                              "  ...) apply to every pass manager.\n");
  std::string error;
  CompileOptions o;
  o.checkpoint = inputFile;
  o.outputDir = outputDir;
  o.overwrite = overwrite;
  if (!parseGemmTiles(gemmTiles, o.gemmTiles, error) ||
      !parseCompileTargets(target, o.targets, error))
    return error;
  std::optional<EmitKind> kind = parseEmitKind(emit);
  if (!kind)
    return "unknown --emit '" + emit + "' (so, mlir, llvm, asm, ptx)";
  o.emit = *kind;
  if (o.emit != EmitKind::Artifact && asJson)
    return "--json applies only to --emit=so (an artifact directory)";
  o.cpuVariants.assign(variants.begin(), variants.end());
  o.dtypes.assign(dtypes.begin(), dtypes.end());
  o.moduleGlobs.assign(moduleGlobs.begin(), moduleGlobs.end());
  o.kindOverrides.assign(kinds.begin(), kinds.end());
  o.shapeOverrides.assign(shapes.begin(), shapes.end());
  o.ukernel = ukernel;
  o.cpuTune = cpuTune;
  o.amxMinRows = amxMinRows;
  o.gemmDecode = gemmDecode;
  o.gemmForm = gemmForm;
  o.gemmRow = gemmRow;
  o.jobs = compileJobs > 0 ? unsigned(compileJobs) : 0;
  o.serialize = printsIR();
  o.progress = quiet ? nullptr : &llvm::errs();
  o.out = &llvm::outs();
  o.passManagers.configure = [](PassManager &pm) {
    return applyPassManagerCLOptions(pm);
  };
  DefaultTimingManager timingManager;
  applyDefaultTimingManagerCLOptions(timingManager);
  std::optional<TimingScope> timingRoot;
  if (timingManager.isEnabled()) {
    timingRoot.emplace(timingManager.getRootScope());
    o.passManagers.timing = &*timingRoot;
  }
  CompileResult result;
  if (!compileCheckpoint(o, result, error))
    return error;
  if (o.emit == EmitKind::Artifact)
    reportSummary(result, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  return "";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  std::string error = compileMain(argc, argv);
  if (error.empty())
    return 0;
  llvm::outs().flush();
  llvm::errs() << "comfyquant-compile: error: " << error << "\n";
  return 1;
}
