//===- CheckpointImporter.cpp - checkpoint -> comfyquant IR ---------------===//
#include "comfyquant/Import/CheckpointImporter.h"

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"

#include <set>

using namespace mlir;
using namespace mlir::comfyquant;
namespace rt = ::comfyquant::rt;

namespace {

constexpr llvm::StringLiteral kCheckpointSymbol = "checkpoint";

/// The format attribute that states exactly what the module's tensors hold.
FormatAttr formatAttrFor(MLIRContext *ctx, const rt::ResolvedModule &m) {
  const rt::ModuleDesc &d = m.desc;
  rt::FormatParams p = rt::defaultFormatParams(d.format);
  if (d.format == rt::Format::Int8Tensorwise) {
    const rt::TensorInfo *s = m.tensor("weight_scale");
    p.granularity = s ? rt::int8ScaleGranularity(s->shape)
                      : rt::ScaleGranularity::Tensor;
  }
  if (p.granularity == rt::ScaleGranularity::Group) {
    p.group = d.groupSize;
    if (const rt::TensorInfo *s = m.tensor("weight_s_rel"))
      p.scaleDType = s->dtype == rt::DType::F32 ? rt::DType::F32
                                                : rt::DType::F8_E4M3;
  }
  Type scale = p.scaleDType ? getElementType(ctx, *p.scaleDType) : Type();
  return FormatAttr::get(ctx, fromRegistry(d.format),
                         static_cast<ScaleGranularity>(p.granularity), p.group,
                         scale, static_cast<NibbleOrder>(p.nibbles));
}

std::string hashString(uint64_t h) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "fnv1a64:" << llvm::format_hex_no_prefix(h, 16);
  return s;
}

} // namespace

OwningOpRef<ModuleOp>
mlir::comfyquant::importCheckpoint(MLIRContext *ctx,
                                   const rt::ResolvedCheckpoint &ckpt,
                                   const ImportOptions &options) {
  ctx->loadDialect<ComfyQuantDialect>();
  const rt::Checkpoint &file = *ckpt.checkpoint;
  Location loc = FileLineColLoc::get(ctx, file.path(), 0, 0);
  OpBuilder b(ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);

  // Selected modules.
  std::vector<const rt::ResolvedModule *> selected;
  if (options.modules.empty()) {
    for (const rt::ResolvedModule &m : ckpt.modules)
      selected.push_back(&m);
  } else {
    for (const std::string &name : options.modules) {
      const rt::ResolvedModule *m = ckpt.find(name);
      if (!m) {
        emitError(loc) << file.path() << ": module '" << name
                       << "': no such quantized module";
        return nullptr;
      }
      selected.push_back(m);
    }
  }
  std::set<std::string> referenced;
  for (const rt::ResolvedModule *m : selected)
    for (const auto &[role, t] : m->tensors)
      referenced.insert(t->name);

  // The checkpoint and its tensors (configuration tensors are stated by the
  // module ops' attributes instead).
  b.setInsertionPointToEnd(module->getBody());
  auto checkpoint = CheckpointOp::create(b, loc, kCheckpointSymbol, file.path(),
      static_cast<int64_t>(file.totalSize()), hashString(file.headerHash()));
  b.setInsertionPointToEnd(&checkpoint.getBody().front());
  const bool sharded = file.shards().size() > 1;
  for (const rt::TensorInfo *t : file.tensors()) {
    if (ckpt.config.configKeys.count(t->name))
      continue;
    if (options.onlyReferencedTensors && !referenced.count(t->name))
      continue;
    auto type = RankedTensorType::get(t->shape, getElementType(ctx, t->dtype));
    StringAttr shard;
    if (sharded)
      shard = b.getStringAttr(llvm::sys::path::filename(*t->file));
    TensorOp::create(b, loc, b.getStringAttr(t->name), TypeAttr::get(type),
                       b.getI64IntegerAttr(static_cast<int64_t>(t->fileOffset)),
                       shard);
  }

  b.setInsertionPointToEnd(module->getBody());
  if (options.modules.empty())
    for (const rt::AttentionPreference &p : ckpt.config.attention)
      AttentionOp::create(b, loc, p.module, p.rawJson);

  for (const rt::ResolvedModule *m : selected) {
    const rt::ModuleDesc &d = m->desc;
    SmallVector<NamedAttribute> bindings;
    for (const auto &[role, t] : m->tensors)
      bindings.push_back(b.getNamedAttr(
          role, SymbolRefAttr::get(
                    b.getStringAttr(kCheckpointSymbol),
                    {FlatSymbolRefAttr::get(b.getStringAttr(t->name))})));
    DictionaryAttr tensors = b.getDictionaryAttr(bindings);
    FormatAttr format = formatAttrFor(ctx, *m);
    RotationAttr rotation =
        d.rotationGroup ? RotationAttr::get(ctx, d.rotationGroup) : nullptr;
    std::optional<LinearDtype> linearDtype;
    if (!d.linearDtype.empty() && d.linearDtype != "int4")
      linearDtype = symbolizeLinearDtype(d.linearDtype);
    OptionsAttr opts;
    if (d.fullPrecision || linearDtype)
      opts = OptionsAttr::get(ctx, d.fullPrecision, linearDtype);
    StringAttr name = b.getStringAttr(d.name);
    switch (d.kind) {
    case rt::ModuleKind::Linear:
      LinearOp::create(b, loc, name, format, d.outFeatures, d.inFeatures,
                         rotation, opts, tensors);
      break;
    case rt::ModuleKind::Embedding:
      EmbeddingOp::create(b, loc, name, format, d.outFeatures, d.inFeatures,
                            rotation, opts, tensors);
      break;
    case rt::ModuleKind::MoE:
      MoEOp::create(b, loc, name, format, d.experts, d.outFeatures,
                      d.inFeatures, rotation, opts, tensors);
      break;
    }
  }
  if (failed(verify(*module)))
    return nullptr;
  return module;
}
