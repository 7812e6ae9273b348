//===- comfyquant-translate.cpp - checkpoint import and inspection --------===//
//
//   comfyquant-translate --import-checkpoint FILE [--module NAME]...
//                        [--only-referenced-tensors] [-o OUT [--overwrite]]
//   comfyquant-translate --inspect FILE [--json] [-o OUT [--overwrite]]
//
// FILE is a .safetensors file or a *.safetensors.index.json. The checkpoint
// is mapped, never read whole. OUT (default: stdout) is written atomically;
// it may not be the checkpoint or one of its shards, and an existing OUT is
// replaced only with --overwrite. An option that does not apply to the mode
// is an error. Any error: message on stderr, exit code 1.
//===----------------------------------------------------------------------===//
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/Import/CheckpointImporter.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Inspect.h"
#include "comfyquant/runtime/ModuleResolver.h"
#include "comfyquant/runtime/OutputFile.h"
#include "ToolVersion.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
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
static cl::opt<std::string> outputFile(cl::cat(toolOptions), "o",
    cl::desc("Output file (default: stdout; written atomically)"),
    cl::init("-"));
static cl::opt<bool> overwrite(cl::cat(toolOptions), "overwrite",
                               cl::desc("Replace an existing output file"));

static int fail(const std::string &msg) {
  llvm::errs() << "comfyquant-translate: error: " << msg << "\n";
  return 1;
}

/// Writes `text` to stdout or, atomically, to the output file (checked
/// against the inputs before any work: see main).
static int emit(const std::string &text) {
  if (outputFile == "-") {
    llvm::outs() << text;
    llvm::outs().flush();
    return 0;
  }
  rt::writeFileAtomically(outputFile, text);
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  ::comfyquant::tools::setVersionPrinter();
  cl::HideUnrelatedOptions(toolOptions);
  cl::ParseCommandLineOptions(argc, argv,
                              "comfyquant checkpoint import and inspection\n");
  if (importCheckpoint == inspect)
    return fail("give exactly one of --import-checkpoint and --inspect");
  // Options of the other mode are errors, not silently ignored.
  if (inspect && !moduleNames.empty())
    return fail("--module applies only to --import-checkpoint (--inspect "
                "reports every module)");
  if (inspect && onlyReferenced)
    return fail("--only-referenced-tensors applies only to "
                "--import-checkpoint");
  if (importCheckpoint && asJson)
    return fail("--json applies only to --inspect");
  if (outputFile == "-" && overwrite)
    return fail("--overwrite applies only with -o FILE");

  rt::ResolveOptions opts;
  for (const std::string &k : kinds)
    if (std::string err = rt::addKindOverride(opts, k); !err.empty())
      return fail(err);
  for (const std::string &s : shapes)
    if (std::string err = rt::addShapeOverride(opts, s); !err.empty())
      return fail(err);

  try {
    auto checkpoint = rt::Checkpoint::open(inputFile);
    if (outputFile != "-") {
      rt::checkNotAnInput(outputFile, rt::checkpointFiles(*checkpoint));
      rt::checkOverwrite(outputFile, overwrite);
    }
    rt::ResolvedCheckpoint resolved = rt::resolveCheckpoint(*checkpoint, opts);
    if (inspect) {
      if (asJson) {
        // The schema first, so a reader can check it before anything else.
        nlohmann::ordered_json report;
        report["schema"] = "comfyquant-inspect";
        report["schema_version"] = 1;
        report.update(rt::inspectJson(resolved));
        return emit(report.dump(2) + "\n");
      }
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
