//===- comfyquant-translate.cpp - checkpoint import and inspection --------===//
//
//   comfyquant-translate --import-checkpoint FILE [--module NAME]... [-o OUT]
//   comfyquant-translate --inspect FILE [--json] [-o OUT]
//
// FILE is a .safetensors file or a *.safetensors.index.json. The checkpoint
// is mapped, never read whole. Any error: message on stderr, exit code 1.
//===----------------------------------------------------------------------===//
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/Import/CheckpointImporter.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Inspect.h"
#include "comfyquant/runtime/ModuleResolver.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
namespace rt = ::comfyquant::rt;

/// Our options: --help lists only these (LLVM and MLIR ones stay under
/// --help-hidden).
static cl::OptionCategory toolOptions("comfyquant-translate options");

static cl::opt<std::string> inputFile(cl::cat(toolOptions), cl::Positional, cl::desc("<checkpoint>"),
                                      cl::Required);
static cl::opt<bool> importCheckpoint(cl::cat(toolOptions),
    "import-checkpoint",
    cl::desc("Print the comfyquant IR of the checkpoint's modules"));
static cl::opt<bool> inspect(cl::cat(toolOptions), "inspect",
                             cl::desc("Print the inspection report"));
static cl::opt<bool> asJson(cl::cat(toolOptions), "json", cl::desc("With --inspect: JSON output"));
static cl::list<std::string>
    moduleNames(cl::cat(toolOptions), "module", cl::desc("Import only this module (repeatable)"));
static cl::opt<bool> onlyReferenced(cl::cat(toolOptions),
    "only-referenced-tensors",
    cl::desc("List only the tensors the imported modules bind"));
static cl::list<std::string>
    kinds(cl::cat(toolOptions), "kind", cl::desc("Module kind override NAME=linear|embedding|moe"));
static cl::list<std::string>
    shapes(cl::cat(toolOptions), "shape", cl::desc("Logical shape override NAME=NxK"));
static cl::opt<std::string> outputFile(cl::cat(toolOptions), "o", cl::desc("Output file"),
                                       cl::init("-"));

static int fail(const std::string &msg) {
  llvm::errs() << "comfyquant-translate: error: " << msg << "\n";
  return 1;
}

/// Writes `text` to the output (atomically: ToolOutputFile writes a temp
/// file and renames it on keep()).
static int emit(const std::string &text) {
  std::error_code ec;
  llvm::ToolOutputFile out(outputFile, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return fail(outputFile + ": " + ec.message());
  out.os() << text;
  out.keep();
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(toolOptions);
  cl::ParseCommandLineOptions(argc, argv,
                              "comfyquant checkpoint import and inspection\n");
  if (importCheckpoint == inspect)
    return fail("give exactly one of --import-checkpoint and --inspect");

  rt::ResolveOptions opts;
  for (const std::string &k : kinds)
    if (std::string err = rt::addKindOverride(opts, k); !err.empty())
      return fail(err);
  for (const std::string &s : shapes)
    if (std::string err = rt::addShapeOverride(opts, s); !err.empty())
      return fail(err);

  try {
    auto checkpoint = rt::Checkpoint::open(inputFile);
    rt::ResolvedCheckpoint resolved = rt::resolveCheckpoint(*checkpoint, opts);
    if (inspect) {
      if (asJson)
        return emit(rt::inspectJson(resolved).dump(2) + "\n");
      return emit(rt::inspectText(resolved));
    }
    mlir::MLIRContext ctx;
    mlir::comfyquant::ImportOptions importOpts;
    importOpts.modules.assign(moduleNames.begin(), moduleNames.end());
    importOpts.onlyReferencedTensors = onlyReferenced;
    std::string diag;
    mlir::OwningOpRef<mlir::ModuleOp> module;
    {
      mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
        diag += d.str();
        return mlir::success();
      });
      module = mlir::comfyquant::importCheckpoint(&ctx, resolved, importOpts);
    }
    if (!module)
      return fail(diag.empty() ? "import failed" : diag);
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return emit(text);
  } catch (const rt::Error &e) {
    return fail(e.what());
  } catch (const std::exception &e) {
    return fail(inputFile + ": " + e.what());
  }
}
