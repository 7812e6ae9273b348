//===- CompileOptions.cpp - parsing and checking compile options ----------===//
#include "comfyquant/Compiler/CompileOptions.h"
#include "comfyquant/Codegen/CPU/CPUCodegen.h"
#include "comfyquant/Codegen/GPU/GPUCodegen.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// The table's names joined by `separator`.
template <typename Range>
std::string joinNames(const Range &table, llvm::StringRef separator) {
  std::string list;
  for (const auto &entry : table)
    list += (list.empty() ? "" : separator.str()) + entry.name;
  return list;
}

} // namespace

llvm::StringRef mlir::comfyquant::emitKindName(EmitKind kind) {
  switch (kind) {
  case EmitKind::Artifact:
    return "so";
  case EmitKind::MLIR:
    return "mlir";
  case EmitKind::LLVM:
    return "llvm";
  case EmitKind::Assembly:
    return "asm";
  case EmitKind::PTX:
    return "ptx";
  }
  return "so";
}

std::optional<EmitKind> mlir::comfyquant::parseEmitKind(llvm::StringRef name) {
  for (EmitKind k : {EmitKind::Artifact, EmitKind::MLIR, EmitKind::LLVM,
                     EmitKind::Assembly, EmitKind::PTX})
    if (name == emitKindName(k))
      return k;
  return std::nullopt;
}

bool mlir::comfyquant::parseCompileTargets(llvm::StringRef spec,
                                           CompileTargets &targets,
                                           std::string &error) {
  targets = CompileTargets();
  const std::string archList = joinNames(getCUDAArchs(), ",");
  bool wantCuda = false, inCuda = false;
  SmallVector<StringRef> items;
  spec.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    item = item.trim();
    if (item == "cpu") {
      targets.cpu = true;
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
    if (!arch) {
      error = "unknown --target '" + item.str() + "' (cpu, cuda[:" + archList +
              "])";
      return false;
    }
    if (!llvm::is_contained(targets.cudaArchs, arch))
      targets.cudaArchs.push_back(arch);
  }
  if (wantCuda && targets.cudaArchs.empty())
    for (const CUDAArch &a : getCUDAArchs())
      targets.cudaArchs.push_back(&a);
  if (!targets.cpu && !wantCuda) {
    error = "--target names no target (cpu, cuda[:ARCH,...])";
    return false;
  }
  return true;
}

bool mlir::comfyquant::parseGemmTiles(llvm::StringRef spec,
                                      GemmTileOverride &tiles,
                                      std::string &error) {
  tiles = GemmTileOverride();
  if (spec.empty())
    return true;
  int64_t t[4] = {0, 0, 0, -1};
  SmallVector<StringRef> parts;
  spec.split(parts, 'x');
  if (parts.size() < 2 || parts.size() > 4) {
    error = "--gemm-tiles takes MRxNR, MRxNRxMC or MRxNRxMCxKC, not '" +
            spec.str() + "'";
    return false;
  }
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].getAsInteger(10, t[i]) || t[i] < 0) {
      error = "--gemm-tiles: '" + parts[i].str() + "' is not a count";
      return false;
    }
  tiles.mr = t[0];
  tiles.nr = t[1];
  tiles.mc = t[2];
  tiles.kc = t[3];
  return true;
}

bool mlir::comfyquant::checkCompileOptions(const CompileOptions &o,
                                           std::string &error) {
  if (!isCpuTuneName(o.cpuTune)) {
    error = "--cpu-tune takes generic, host or an LLVM x86-64 CPU name, not '" +
            o.cpuTune + "'";
    return false;
  }
  if (o.amxMinRows < 1) {
    error = "--amx-min-rows must be at least 1, not " +
            std::to_string(o.amxMinRows);
    return false;
  }
  if (o.gemmDecode && (*o.gemmDecode == CpuDecode::none ||
                       *o.gemmDecode == CpuDecode::whole)) {
    error = "--gemm-decode takes panel, register or adaptive, not '" +
            stringifyCpuDecode(*o.gemmDecode).str() + "'";
    return false;
  }
  const bool cuda = !o.targets.cudaArchs.empty();
  const std::string emit = emitKindName(o.emit).str();
  if (o.emit == EmitKind::PTX && !cuda) {
    error = "--emit=ptx needs a cuda target";
    return false;
  }
  if ((o.emit == EmitKind::LLVM || o.emit == EmitKind::Assembly) &&
      !o.targets.cpu) {
    error = "--emit=" + emit + " applies to the cpu target";
    return false;
  }
  const bool artifact = o.emit == EmitKind::Artifact;
  if (artifact && o.outputDir.empty()) {
    error = "-o DIR is required";
    return false;
  }
  if (!artifact && !o.outputDir.empty()) {
    error = "-o applies only to --emit=so (--emit=" + emit +
            " prints to stdout)";
    return false;
  }
  if (!artifact && o.overwrite) {
    error = "--overwrite applies only to --emit=so (an artifact directory)";
    return false;
  }
  if (!artifact && !o.out) {
    error = "--emit=" + emit + " needs an output stream";
    return false;
  }
  for (const std::string &d : o.dtypes)
    if (!symbolizeActivationType(d)) {
      error = "unknown dtype '" + d + "' (f32, bf16, f16)";
      return false;
    }
  for (const std::string &v : o.cpuVariants)
    if (!lookupCPUVariant(v)) {
      error = "unknown CPU variant '" + v + "' (" +
              joinNames(getCPUVariants(), ", ") + ")";
      return false;
    }
  if (!o.targets.cpu && !o.cpuVariants.empty()) {
    error = "--variants applies to the cpu target";
    return false;
  }
  return true;
}
