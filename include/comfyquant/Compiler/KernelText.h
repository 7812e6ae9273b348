//===- KernelText.h - kernels as text, pass managers, worker pools -*- C++ -*-===//
//
// What every back end and the driver do with kernel functions outside the
// passes: print them with fixed flags (identity keys, hand-off to worker
// threads), run a pipeline with the caller's --mlir-* configuration and
// collected diagnostics, run jobs on worker threads with a context each, and
// write files. Nothing here reads the command line: the printing flags are
// set explicitly, since OpPrintingFlags() takes --mlir-elide-* and
// --mlir-print-* from it once a tool registers them.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_COMPILER_KERNELTEXT_H
#define COMFYQUANT_COMPILER_KERNELTEXT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"

#include <functional>
#include <string>

namespace mlir::comfyquant {

/// Printing flags that ignore every --mlir-print-* / --mlir-elide-* option:
/// no elided constants or resources, no debug info, custom or generic form
/// as asked, regions printed, the IR verified first.
OpPrintingFlags fixedPrintingFlags(bool genericForm);

/// `op` printed with fixedPrintingFlags (custom form).
std::string printOp(Operation *op);

/// The kernel text with its symbol and tensor bindings left out: two kernel
/// functions with equal keys compile to the same code, whatever --mlir-*
/// flags the tool was given.
std::string kernelKey(func::FuncOp fn);

/// The function alone in a module, generic form with locations, so that a
/// worker thread can parse it into its own context.
std::string printForWorker(func::FuncOp fn);

/// How a library pass manager is set up by its caller (the tool's --mlir-*
/// options; none by default) and timed.
struct PassManagerSetup {
  std::function<LogicalResult(PassManager &)> configure;
  TimingScope *timing = nullptr; ///< pipelines nest under it when set
};

/// Runs `build`'s pipeline on `module`. On failure returns false with
/// `error` = "<what> failed" followed by the diagnostics of the run (they are
/// collected, not printed, so worker threads never interleave them).
bool runPipeline(ModuleOp module, const PassManagerSetup &setup,
                 llvm::StringRef what,
                 llvm::function_ref<void(OpPassManager &)> build,
                 std::string &error);

/// Runs `body(context, i)` for i in [0, count) on up to `workers` threads
/// (the caller's thread among them), each with its own MLIRContext built
/// from `registry` (threading disabled). Stops taking new work once `body`
/// returns false.
void parallelForEachContext(
    const DialectRegistry &registry, size_t count, unsigned workers,
    const std::function<bool(MLIRContext &, size_t)> &body);

/// The worker count for `requested` (0: all hardware threads), at most
/// `jobs`, at least 1.
unsigned workerCount(unsigned requested, size_t jobs);

/// Writes `bytes` to `path`. Returns false with `error` set.
bool writeFile(const std::string &path, llvm::StringRef bytes,
               std::string &error);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_COMPILER_KERNELTEXT_H
