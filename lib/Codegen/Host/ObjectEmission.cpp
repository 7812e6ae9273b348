//===- ObjectEmission.cpp - x86 objects, shared libraries, load checks ----===//
#include "comfyquant/Codegen/Host/HostCodegen.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <mutex>

#include <dlfcn.h>

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

void initLLVMTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

bool emitFile(llvm::Module &m, llvm::TargetMachine &tm,
              llvm::CodeGenFileType kind, std::string &out,
              std::string &error) {
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, kind)) {
    error = "the target cannot emit this file type";
    return false;
  }
  pm.run(m);
  out.assign(buffer.begin(), buffer.end());
  return true;
}

} // namespace

bool mlir::comfyquant::emitHostObject(ModuleOp module, std::string &object,
                                      std::string &error,
                                      std::string *assembly,
                                      std::string *llvmIR) {
  // The one statement of the CPU the code is for: the module's target.
  auto targetAttr = module->getAttrOfType<TargetAttr>(
      ComfyQuantDialect::getTargetAttrName());
  const ::comfyquant::rt::CpuVariantInfo *found =
      targetAttr ? targetAttr.getCpuVariant() : nullptr;
  if (!found) {
    error = "the module has no CPU target (#comfyquant.target<cpu, ...>) to "
            "emit an object for";
    return false;
  }
  const ::comfyquant::rt::CpuVariantInfo &variant = *found;
  module->removeAttr(ComfyQuantDialect::getTargetAttrName());
  initLLVMTargets();
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  module->getContext()->appendDialectRegistry(registry);

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> m =
      translateModuleToLLVMIR(module, llvmContext, "comfyquant_kernels");
  if (!m) {
    error = "translation to LLVM IR failed";
    return false;
  }
  llvm::Triple triple("x86_64-unknown-linux-gnu");
  std::string lookupError;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!target) {
    error = "no LLVM target for " + triple.str() + ": " + lookupError;
    return false;
  }
  llvm::TargetOptions options; // FP contraction: only explicit fmuladd/fma
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, variant.cpu, variant.features, options, llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm) {
    error = std::string("cannot create a target machine for -mcpu=") +
            variant.cpu;
    return false;
  }
  m->setTargetTriple(triple);
  m->setDataLayout(tm->createDataLayout());
  for (llvm::Function &f : *m) {
    if (f.isDeclaration())
      continue;
    f.addFnAttr("target-cpu", variant.cpu);
    if (*variant.features)
      f.addFnAttr("target-features", variant.features);
  }
  if (llvm::verifyModule(*m, &llvm::errs())) {
    error = "invalid LLVM IR";
    return false;
  }

  // O3 (loop vectorization of the element-wise stages, unrolling, ...).
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(tm.get(), tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm =
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(*m, mam);

  if (llvmIR) {
    llvmIR->clear();
    llvm::raw_string_ostream os(*llvmIR);
    m->print(os, nullptr);
  }
  if (assembly) {
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*m);
    if (!emitFile(*copy, *tm, llvm::CodeGenFileType::AssemblyFile, *assembly,
                  error))
      return false;
  }
  return emitFile(*m, *tm, llvm::CodeGenFileType::ObjectFile, object, error);
}

bool mlir::comfyquant::linkSharedLibrary(
    const std::vector<std::string> &objectPaths, const std::string &outputPath,
    std::string &error) {
  std::string lld;
  for (const char *name : {"ld.lld-22", "ld.lld"}) {
    if (auto p = llvm::sys::findProgramByName(name, {"/usr/lib/llvm-22/bin"})) {
      lld = *p;
      break;
    }
    if (auto p = llvm::sys::findProgramByName(name)) {
      lld = *p;
      break;
    }
  }
  if (lld.empty()) {
    error = "ld.lld not found (install lld-22)";
    return false;
  }
  llvm::SmallString<128> log;
  if (auto ec = llvm::sys::fs::createTemporaryFile("comfyquant-lld", "log", log)) {
    error = "cannot create a temporary file: " + ec.message();
    return false;
  }
  // -z defs: every symbol the kernels use must resolve at link time, so a
  // library that would fail to load is never produced. They need libc
  // (malloc, free, memcpy, memset) and libm, by soname, and the compiler's
  // runtime builtins (e.g. __truncsfbf2) linked in statically, since the
  // host's libgcc may not have them.
  std::vector<std::string> args = {lld,  "-shared", "-o",     outputPath,
                                   "-z", "noexecstack", "-z", "now",
                                   "-z", "defs", "--hash-style=gnu", "-O2"};
  args.insert(args.end(), objectPaths.begin(), objectPaths.end());
#ifdef COMFYQUANT_COMPILER_BUILTINS
  if (llvm::sys::fs::exists(COMFYQUANT_COMPILER_BUILTINS))
    args.push_back(COMFYQUANT_COMPILER_BUILTINS);
#endif
  for (const char *dir : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                          "/lib64", "/usr/lib64"})
    if (llvm::sys::fs::is_directory(dir))
      args.push_back(std::string("-L") + dir);
  args.insert(args.end(), {"-l:libm.so.6", "-l:libc.so.6"});
  std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.str(),
                                                log.str()};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(lld, argRefs, std::nullopt, redirects, 0,
                                     0, &execError);
  std::string output;
  if (auto buf = llvm::MemoryBuffer::getFile(log))
    output = (*buf)->getBuffer().str();
  llvm::sys::fs::remove(log);
  if (rc != 0) {
    error = "ld.lld failed";
    if (!execError.empty())
      error += ": " + execError;
    if (!output.empty())
      error += ":\n" + output;
    return false;
  }
  return true;
}

bool mlir::comfyquant::verifySharedLibrary(
    const std::string &path, const std::vector<std::string> &entries,
    std::string &error) {
  // RTLD_LOCAL: nothing of the probe leaks into the compiler's namespace.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    error = "the linked kernels do not load: " +
            std::string(why ? why : "unknown dlopen error");
    return false;
  }
  bool ok = true;
  for (const std::string &e : entries)
    if (!dlsym(handle, e.c_str())) {
      error = "the linked kernels lack the entry symbol '" + e + "'";
      ok = false;
      break;
    }
  dlclose(handle);
  return ok;
}
