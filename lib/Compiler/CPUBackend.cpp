//===- CPUBackend.cpp - every kernel x CPU variant into kernels.so --------===//
//
// One codegen job per (kernel, variant), run on worker threads that each
// parse the kernel text into their own MLIRContext (pass managers,
// diagnostics and the LLVM translation registry are per context). Objects
// are linked in job order, so the library does not depend on the worker
// count.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/CPU/CPUCodegen.h"
#include "comfyquant/Codegen/Host/HostCodegen.h"
#include "comfyquant/Compiler/Backend.h"
#include "comfyquant/Conversion/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/Pipelines/Pipelines.h"

#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <tuple>

using namespace mlir;
using namespace mlir::comfyquant;
namespace rt = ::comfyquant::rt;

namespace {

/// One kernel compiled for one CPU variant.
struct CodegenJob {
  const BackendKernel *kernel = nullptr;
  const CPUVariant *variant = nullptr;
  std::string entry;
  std::string error;
  bool columnSplit = false; ///< the entry honours its column range
  int64_t minRows = 1;      ///< fewest rows its config is meant for
};

class CPUBackend final : public Backend {
public:
  explicit CPUBackend(const CompileOptions &options) : options(options) {
    if (options.cpuVariants.empty())
      for (const CPUVariant &v : getCPUVariants())
        variants.push_back(&v);
    for (const std::string &name : options.cpuVariants)
      variants.push_back(lookupCPUVariant(name)); // checked by the options
  }

  StringRef name() const override { return "cpu"; }

  ConvertComfyQuantToLinalgOptions linalgOptions() const override {
    // CPU micro-kernels read GEMM operands decoded to f32; a rotated
    // activation is quantized row by row.
    ConvertComfyQuantToLinalgOptions o;
    o.rotatedQuantize = RotatedQuantize::Rows;
    return o;
  }

  bool compile(MLIRContext &ctx, ArrayRef<BackendKernel> kernels,
               const std::string &dir, const BackendProgress &progress,
               std::string &error) override;

  void addSection(rt::Manifest &manifest) const override {
    rt::CpuBackend cpu;
    for (const CPUVariant *v : variants)
      cpu.variants.push_back(v->name);
    manifest.cpu = std::move(cpu);
  }

  void addEntries(rt::ManifestModule &module, const std::string &dtype,
                  int index) const override {
    auto it = entries.find(index);
    if (it == entries.end())
      return;
    for (auto &[variant, symbol] : it->second) {
      rt::CpuEntry e;
      e.dtype = dtype;
      e.variant = variant;
      e.symbol = symbol;
      e.columnSplit = columnSplit.count(symbol) != 0;
      auto floor = minRows.find(symbol);
      e.minRows = floor == minRows.end() ? 1 : floor->second;
      module.cpuEntries.push_back(std::move(e));
    }
  }

  std::map<std::string, std::string> entriesOf(int index) const override {
    auto it = entries.find(index);
    return it == entries.end() ? std::map<std::string, std::string>()
                               : it->second;
  }

  std::vector<std::string> files() const override { return {"kernels.so"}; }
  size_t entryCount() const override { return entryTotal; }

private:
  /// Parses the kernel, runs the CPU pipeline for the job's variant and
  /// writes `<entry>.o` into `dir` (or prints the requested form).
  bool run(MLIRContext &ctx, CodegenJob &job, const std::string &dir,
           std::mutex &outMutex);

  const CompileOptions &options;
  std::vector<const CPUVariant *> variants;
  /// kernel index -> variant -> symbol.
  std::map<int, std::map<std::string, std::string>> entries;
  std::set<std::string> columnSplit;
  std::map<std::string, int64_t> minRows; ///< symbol -> floor above 1
  size_t entryTotal = 0;
};

} // namespace

bool CPUBackend::run(MLIRContext &ctx, CodegenJob &j, const std::string &dir,
                     std::mutex &outMutex) {
  const BackendKernel &k = *j.kernel;
  const std::string what =
      "codegen of '" + k.owner + "' (" + k.dtype + ", " + j.variant->name + ")";
  OwningOpRef<ModuleOp> km = parseSourceString<ModuleOp>(k.text, &ctx);
  if (!km) {
    j.error = what + ": the kernel IR does not parse";
    return false;
  }
  auto fn = cast<func::FuncOp>(km->getBody()->front());
  fn->setAttr(ComfyQuantDialect::getEntryAttrName(), StringAttr::get(&ctx, j.entry));
  const bool toLLVM = options.emit != EmitKind::MLIR;
  if (!runPipeline(*km, options.passManagers, what,
                   [&](OpPassManager &pm) {
                     CPUCodegenOptions o;
                     o.variant = j.variant->name;
                     o.ukernel = options.ukernel;
                     o.tune = options.cpuTune;
                     o.amxMinRows = options.amxMinRows;
                     o.mr = options.gemmTiles.mr;
                     o.nr = options.gemmTiles.nr;
                     o.mc = options.gemmTiles.mc;
                     o.kc = options.gemmTiles.kc;
                     o.decode = options.gemmDecode;
                     o.form = options.gemmForm;
                     o.row = options.gemmRow;
                     o.lowerComfyQuant = false;
                     o.lowerToLLVM = toLLVM;
                     buildComfyQuantCPUCodegenPipeline(pm, o);
                   },
                   j.error))
    return false;
  if (options.emit == EmitKind::MLIR) {
    std::lock_guard<std::mutex> lock(outMutex);
    *options.out << "// " << k.owner << " " << k.dtype << " "
                 << j.variant->name << "\n"
                 << printOp(*km) << "\n";
    return true;
  }
  if (auto split = (*km)->getAttrOfType<ArrayAttr>(ComfyQuantDialect::getColumnSplitAttrName())) {
    for (Attribute a : split)
      if (cast<StringAttr>(a).getValue() == j.entry)
        j.columnSplit = true;
    (*km)->removeAttr(ComfyQuantDialect::getColumnSplitAttrName());
  }
  if (auto floors = (*km)->getAttrOfType<DictionaryAttr>(
          ComfyQuantDialect::getMinRowsAttrName())) {
    if (auto floor = floors.getAs<IntegerAttr>(j.entry))
      j.minRows = floor.getInt();
    (*km)->removeAttr(ComfyQuantDialect::getMinRowsAttrName());
  }
  std::string object, text;
  // The variant reaches object emission through the IR: the strategy pass
  // records it as the functions' #comfyquant.target, packed entries lift it
  // onto the module.
  if (!emitHostObject(*km, object, j.error,
                      options.emit == EmitKind::Assembly ? &text : nullptr,
                      options.emit == EmitKind::LLVM ? &text : nullptr)) {
    j.error = "module '" + k.owner + "' (" + k.dtype + ", " +
              j.variant->name + "): " + j.error;
    return false;
  }
  if (options.emit != EmitKind::Artifact) {
    std::lock_guard<std::mutex> lock(outMutex);
    *options.out << "; " << k.owner << " " << k.dtype << " "
                 << j.variant->name << "\n"
                 << text << "\n";
    return true;
  }
  return writeFile(dir + "/" + j.entry + ".o", object, j.error);
}

bool CPUBackend::compile(MLIRContext &ctx, ArrayRef<BackendKernel> kernels,
                         const std::string &dir,
                         const BackendProgress &progress, std::string &error) {
  // Jobs in module order (then dtype), each kernel for every variant: the
  // objects are linked in this order.
  std::vector<const BackendKernel *> ordered;
  for (const BackendKernel &k : kernels)
    ordered.push_back(&k);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const BackendKernel *a, const BackendKernel *b) {
                     return std::tie(a->ownerRank, a->dtype) <
                            std::tie(b->ownerRank, b->dtype);
                   });
  std::vector<CodegenJob> jobs;
  for (const BackendKernel *kp : ordered) {
    const BackendKernel &k = *kp;
    for (const CPUVariant *v : variants) {
      CodegenJob j;
      j.kernel = &k;
      j.variant = v;
      j.entry = "cq_" + std::to_string(k.index) + "_" + k.dtype + "_" +
                v->shortName;
      jobs.push_back(std::move(j));
    }
    if (progress.planned)
      progress.planned(k.index, static_cast<int>(variants.size()));
  }
  // Printing (--emit other than so, --mlir-print-ir-*) keeps job order.
  const bool oneThread =
      options.emit != EmitKind::Artifact || options.serialize;
  std::mutex outMutex;
  parallelForEachContext(
      ctx.getDialectRegistry(), jobs.size(),
      oneThread ? 1u : workerCount(options.jobs, jobs.size()),
      [&](MLIRContext &local, size_t i) {
        auto t0 = std::chrono::steady_clock::now();
        if (!run(local, jobs[i], dir, outMutex))
          return false;
        if (progress.finished)
          progress.finished(jobs[i].kernel->index,
                            std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - t0)
                                .count());
        return true;
      });
  for (const CodegenJob &j : jobs)
    if (!j.error.empty()) {
      error = j.error;
      return false;
    }
  std::vector<std::string> objects, symbols;
  for (const CodegenJob &j : jobs) {
    entries[j.kernel->index][j.variant->name] = j.entry;
    if (j.columnSplit)
      columnSplit.insert(j.entry);
    if (j.minRows > 1)
      minRows[j.entry] = j.minRows;
    objects.push_back(dir + "/" + j.entry + ".o");
    symbols.push_back(j.entry);
  }
  entryTotal = jobs.size();
  if (options.emit != EmitKind::Artifact)
    return true;
  // Never publish a library the runtime could not load.
  const std::string library = dir + "/kernels.so";
  if (!linkSharedLibrary(objects, library, error) ||
      !verifySharedLibrary(library, symbols, error))
    return false;
  for (const std::string &o : objects)
    llvm::sys::fs::remove(o);
  return true;
}

std::unique_ptr<Backend>
mlir::comfyquant::createCPUBackend(const CompileOptions &options) {
  return std::make_unique<CPUBackend>(options);
}
