//===- KernelText.cpp - kernels as text, pass managers, worker pools ------===//
#include "comfyquant/Compiler/KernelText.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <atomic>
#include <fstream>
#include <limits>
#include <thread>
#include <vector>

using namespace mlir;
using namespace mlir::comfyquant;

OpPrintingFlags mlir::comfyquant::fixedPrintingFlags(bool genericForm) {
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  OpPrintingFlags flags;
  flags.printGenericOpForm(genericForm)
      .enableDebugInfo(false)
      .elideLargeElementsAttrs(kNever)
      .elideLargeResourceString(kNever)
      .skipRegions(false)
      .assumeVerified(false)
      .useLocalScope(false)
      .printValueUsers(false)
      .printUniqueSSAIDs(false)
      .printNameLocAsPrefix(false);
  return flags;
}

std::string mlir::comfyquant::printOp(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os, fixedPrintingFlags(/*genericForm=*/false));
  return s;
}

std::string mlir::comfyquant::kernelKey(func::FuncOp fn) {
  OwningOpRef<func::FuncOp> copy(fn.clone());
  copy->setSymName("kernel");
  (*copy)->removeAttr(ComfyQuantDialect::getWeightsAttrName());
  (*copy)->removeAttr(ComfyQuantDialect::getLoweredModuleAttrName());
  for (unsigned i = 0; i < copy->getNumArguments(); ++i)
    for (StringRef a :
         {"comfyquant.tensor", "comfyquant.offset", "comfyquant.shard"})
      copy->removeArgAttr(i, a);
  return printOp(copy.get());
}

std::string mlir::comfyquant::printForWorker(func::FuncOp fn) {
  OwningOpRef<ModuleOp> m(ModuleOp::create(fn.getLoc()));
  m->push_back(cast<func::FuncOp>(fn->clone()));
  std::string s;
  llvm::raw_string_ostream os(s);
  OpPrintingFlags flags = fixedPrintingFlags(/*genericForm=*/true);
  flags.enableDebugInfo(true);
  m->print(os, flags);
  return s;
}

bool mlir::comfyquant::runPipeline(
    ModuleOp module, const PassManagerSetup &setup, StringRef what,
    function_ref<void(OpPassManager &)> build, std::string &error) {
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  // As MLIR's default handler prints them: "LOC: error: MESSAGE".
  auto severity = [](DiagnosticSeverity s) {
    switch (s) {
    case DiagnosticSeverity::Error:
      return "error";
    case DiagnosticSeverity::Warning:
      return "warning";
    case DiagnosticSeverity::Note:
      return "note";
    case DiagnosticSeverity::Remark:
      return "remark";
    }
    return "error";
  };
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    os << d.getLocation() << ": " << severity(d.getSeverity()) << ": " << d
       << "\n";
    for (Diagnostic &n : d.getNotes())
      os << n.getLocation() << ": note: " << n << "\n";
    return success();
  });
  PassManager pm(module.getContext());
  if (setup.configure && failed(setup.configure(pm))) {
    error = what.str() + ": invalid --mlir-* pass manager options";
    return false;
  }
  std::optional<TimingScope> timing;
  if (setup.timing) {
    timing.emplace(setup.timing->nest(what.str()));
    pm.enableTiming(*timing);
  }
  build(pm);
  if (failed(pm.run(module))) {
    error = what.str() + " failed";
    if (!diagnostics.empty())
      error += ":\n" + StringRef(diagnostics).rtrim().str();
    return false;
  }
  return true;
}

unsigned mlir::comfyquant::workerCount(unsigned requested, size_t jobs) {
  unsigned n =
      requested > 0 ? requested : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(
      std::max<size_t>(1, std::min<size_t>(n, jobs)));
}

void mlir::comfyquant::parallelForEachContext(
    const DialectRegistry &registry, size_t count, unsigned workers,
    const std::function<bool(MLIRContext &, size_t)> &body) {
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  auto work = [&]() {
    MLIRContext local(registry, MLIRContext::Threading::DISABLED);
    for (size_t i; !stop && (i = next++) < count;)
      if (!body(local, i))
        stop = true;
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < workerCount(workers, count); ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();
}

bool mlir::comfyquant::writeFile(const std::string &path, StringRef bytes,
                                 std::string &error) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    error = path + ": cannot write";
    return false;
  }
  return true;
}
