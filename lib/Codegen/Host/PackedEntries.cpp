//===- PackedEntries.cpp - void entry(void **args) wrappers ---------------===//
#include "comfyquant/Codegen/Host/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTEMITPACKEDENTRIES
#include "comfyquant/Codegen/Host/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

struct EmitPackedEntriesPass
    : mlir::comfyquant::impl::ComfyQuantEmitPackedEntriesBase<EmitPackedEntriesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto entries = module->getAttrOfType<DictionaryAttr>("comfyquant.entries");
    SymbolTable symbols(module);
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    llvm::StringSet<> exported;
    // Entries that honour their column-range arguments, for the manifest
    // (the one comfyquant.* attribute kept on the module).
    SmallVector<Attribute> columnSplit;
    // Entries with a floor on their rows, for the manifest.
    SmallVector<NamedAttribute> minRows;
    if (entries) {
      for (NamedAttribute e : entries) {
        if (auto fn = symbols.lookup(e.getName())) {
          if (fn->hasAttr("comfyquant.column_range"))
            columnSplit.push_back(e.getValue());
          if (auto floor = fn->getAttrOfType<IntegerAttr>(
                  ComfyQuantDialect::getMinRowsAttrName()))
            minRows.emplace_back(cast<StringAttr>(e.getValue()), floor);
        }
        std::string ciface = ("_mlir_ciface_" + e.getName().strref()).str();
        auto target = symbols.lookup<LLVM::LLVMFuncOp>(ciface);
        if (!target) {
          module.emitError("no C interface function for '")
              << e.getName().strref() << "' (was it lowered to the LLVM dialect?)";
          return signalPassFailure();
        }
        StringRef name = cast<StringAttr>(e.getValue()).getValue();
        if (symbols.lookup(name)) {
          module.emitError("entry symbol '") << name << "' is already defined";
          return signalPassFailure();
        }
        OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
        Location loc = target.getLoc();
        auto fnType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                                  {ptr});
        auto entry = LLVM::LLVMFuncOp::create(b, loc, name, fnType);
        Block *body = entry.addEntryBlock(b);
        b.setInsertionPointToStart(body);
        SmallVector<Value> args;
        for (unsigned i = 0; i < target.getNumArguments(); ++i) {
          // args[i] points to the memref descriptor (pointer parameters of
          // the C interface) or to the scalar (e.g. the MoE expert index).
          Type param = target.getArgumentTypes()[i];
          if (!isa<LLVM::LLVMPointerType, IntegerType, FloatType>(param)) {
            target.emitError("argument ")
                << i << " has no packed-entry representation: " << param;
            return signalPassFailure();
          }
          Value slot = LLVM::GEPOp::create(
              b, loc, ptr, ptr, body->getArgument(0),
              ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
          Value p = LLVM::LoadOp::create(b, loc, ptr, slot);
          args.push_back(isa<LLVM::LLVMPointerType>(param)
                             ? p
                             : Value(LLVM::LoadOp::create(b, loc, param, p)));
        }
        LLVM::CallOp::create(b, loc, target, args);
        LLVM::ReturnOp::create(b, loc, ValueRange{});
        exported.insert(name);
      }
    }
    // Everything but the entries (and declarations of external helpers such
    // as malloc) is internal to the shared library.
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
      if (!fn.isExternal() && !exported.contains(fn.getSymName()))
        fn.setLinkage(LLVM::Linkage::Internal);
    // The checkpoint description (and any other non-LLVM top-level op) has
    // served its purpose: weights are arguments now.
    SmallVector<Operation *> foreign;
    for (Operation &op : module.getBody()->getOperations())
      if (op.getDialect() && op.getDialect()->getNamespace() == "comfyquant")
        foreign.push_back(&op);
    for (Operation *op : foreign)
      op->erase();
    // The functions' CPU target becomes the module's (object emission reads
    // it there); a module whose functions disagree has no one target.
    StringAttr targetName =
        StringAttr::get(ctx, ComfyQuantDialect::getTargetAttrName());
    Attribute target = module->getAttr(targetName);
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
      if (Attribute t = fn->getAttr(targetName)) {
        if (target && target != t) {
          fn.emitError("its target ")
              << t << " differs from the module's " << target;
          return signalPassFailure();
        }
        target = t;
      }
    // comfyquant.* attributes have no LLVM IR meaning.
    auto strip = [](Operation *op) {
      SmallVector<StringAttr> drop;
      for (NamedAttribute a : op->getDiscardableAttrs())
        if (a.getName().strref().starts_with("comfyquant."))
          drop.push_back(a.getName());
      for (StringAttr n : drop)
        op->removeDiscardableAttr(n);
    };
    module.walk(strip);
    module->setAttr(ComfyQuantDialect::getColumnSplitAttrName(), ArrayAttr::get(ctx, columnSplit));
    if (!minRows.empty())
      module->setAttr(ComfyQuantDialect::getMinRowsAttrName(),
                      DictionaryAttr::get(ctx, minRows));
    if (target)
      module->setAttr(targetName, target);
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>()) {
      auto iface = cast<FunctionOpInterface>(fn.getOperation());
      for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
        SmallVector<StringAttr> drop;
        for (NamedAttribute a : iface.getArgAttrs(i))
          if (a.getName().strref().starts_with("comfyquant.") ||
              a.getName().strref().starts_with("bufferization."))
            drop.push_back(a.getName());
        for (StringAttr n : drop)
          iface.removeArgAttr(i, n);
      }
    }
  }
};

} // namespace

LogicalResult mlir::comfyquant::recordPackedEntries(
    ModuleOp module, function_ref<LogicalResult(func::FuncOp)> prepare) {
  Builder b(module.getContext());
  SmallVector<NamedAttribute> entries;
  if (auto existing = module->getAttrOfType<DictionaryAttr>("comfyquant.entries"))
    entries.append(existing.begin(), existing.end());
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || !func.isPublic())
      continue;
    if (failed(prepare(func)))
      return failure();
    func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  b.getUnitAttr());
    StringAttr entry = func->getAttrOfType<StringAttr>(ComfyQuantDialect::getEntryAttrName());
    if (!entry)
      entry = b.getStringAttr(func.getSymName() + "_entry");
    entries.push_back(b.getNamedAttr(func.getSymName(), entry));
  }
  module->setAttr("comfyquant.entries", b.getDictionaryAttr(entries));
  return success();
}
