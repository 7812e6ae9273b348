//===- ComfyQuantAttrs.cpp - comfyquant attributes ------------------------===//
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "comfyquant/runtime/Numerics.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/TargetParser/X86TargetParser.h"

using namespace mlir;
using namespace mlir::comfyquant;
namespace rt = ::comfyquant::rt;

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantAttrInterfaces.cpp.inc"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantAttrs.cpp.inc"

void ComfyQuantDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// FormatAttr
//===----------------------------------------------------------------------===//

FormatAttr FormatAttr::get(MLIRContext *ctx, FormatKind kind,
                           ScaleGranularity granularity, int64_t group) {
  rt::FormatParams p = rt::defaultFormatParams(toRegistry(kind));
  Type scale = p.scaleDType ? getElementType(ctx, *p.scaleDType) : Type();
  return Base::get(ctx, kind, granularity, group, scale,
                   static_cast<NibbleOrder>(p.nibbles));
}

const rt::FormatInfo &FormatAttr::getInfo() const {
  return rt::formatInfo(toRegistry(getKind()));
}

LogicalResult
FormatAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                   FormatKind kind, ScaleGranularity granularity, int64_t group,
                   Type scale, NibbleOrder nibbles) {
  rt::FormatParams p;
  p.granularity = static_cast<rt::ScaleGranularity>(granularity);
  p.group = group;
  p.nibbles = static_cast<rt::NibbleOrder>(nibbles);
  if (scale) {
    std::optional<rt::DType> d = getDType(scale);
    if (!d)
      return emitError() << "scale type " << scale
                         << " is not a safetensors element type";
    p.scaleDType = *d;
  }
  if (auto err = rt::verifyFormatParams(toRegistry(kind), p))
    return emitError() << *err;
  return success();
}

//===----------------------------------------------------------------------===//
// RotationAttr
//===----------------------------------------------------------------------===//

LogicalResult
RotationAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     int64_t group) {
  if (!rt::isPowerOf4(group))
    return emitError() << "convrot group size " << group
                       << " must be a power of 4 >= 4";
  return success();
}

//===----------------------------------------------------------------------===//
// ActQuantAttr
//===----------------------------------------------------------------------===//

namespace {
/// The block-scaled format whose activation quantization a scheme is.
std::optional<rt::Format> blockFormatOf(ActScheme scheme) {
  switch (scheme) {
  case ActScheme::nvfp4_block:
    return rt::Format::NVFP4;
  case ActScheme::mxfp8_block:
    return rt::Format::MXFP8;
  default:
    return std::nullopt;
  }
}
} // namespace

std::optional<rt::Format> ActQuantAttr::getBlockFormat() const {
  return blockFormatOf(getScheme());
}

LogicalResult
ActQuantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     ActScheme scheme, Type type, int64_t block) {
  // Block schemes quantize like their format's weight: the registry's block.
  std::optional<rt::Format> blockFormat = blockFormatOf(scheme);
  int64_t wantBlock = blockFormat ? rt::formatInfo(*blockFormat).blockSize : 0;
  if (block != wantBlock)
    return emitError() << stringifyActScheme(scheme) << " takes block size "
                       << wantBlock << ", not " << block;
  if (scheme == ActScheme::fp8_static) {
    if (!type || !llvm::isa<Float8E4M3FNType, Float8E5M2Type>(type))
      return emitError()
             << "fp8_static needs type = f8E4M3FN or f8E5M2 (the weight's)";
  } else if (type) {
    return emitError() << stringifyActScheme(scheme)
                       << " has a fixed code type; drop `type`";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ModuleInfoAttr
//===----------------------------------------------------------------------===//

LogicalResult
ModuleInfoAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       ModuleKind kind, FormatAttr format, int64_t outFeatures,
                       int64_t inFeatures, int64_t experts,
                       RotationAttr rotation, OptionsAttr options) {
  if (!format)
    return emitError() << "module info needs a format";
  if (outFeatures <= 0 || inFeatures <= 0)
    return emitError() << "logical shape [" << outFeatures << ", "
                       << inFeatures << "] must be positive";
  if ((kind == ModuleKind::moe) != (experts > 0))
    return emitError() << "experts must be > 0 exactly for moe, got "
                       << experts;
  return success();
}

//===----------------------------------------------------------------------===//
// TargetAttr
//===----------------------------------------------------------------------===//

bool mlir::comfyquant::isCpuTuneName(StringRef tune) {
  return tune == "generic" || tune == "host" ||
         llvm::X86::parseArchX86(tune, /*Only64Bit=*/true) !=
             llvm::X86::CK_None;
}

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 TargetKind kind, StringRef name,
                                 StringRef tune) {
  if (kind == TargetKind::cuda && tune != "generic")
    return emitError() << "tune = \"" << tune
                       << "\" applies to CPU targets only";
  if (!isCpuTuneName(tune))
    return emitError() << "tune = \"" << tune
                       << "\" is not generic, host or an LLVM x86-64 CPU name";
  if (kind == TargetKind::cpu ? !rt::findCpuVariant(name.str())
                              : !rt::findCudaArch(name.str())) {
    InFlightDiagnostic d = emitError();
    d << "unknown " << stringifyTargetKind(kind) << " target '" << name
      << "' (known:";
    if (kind == TargetKind::cpu)
      for (const rt::CpuVariantInfo &v : rt::cpuVariants())
        d << " " << v.name;
    else
      for (const rt::CudaArchInfo &a : rt::cudaArchs())
        d << " " << a.name;
    return d << ")";
  }
  return success();
}

const rt::CpuVariantInfo *TargetAttr::getCpuVariant() const {
  return getKind() == TargetKind::cpu ? rt::findCpuVariant(getName().str())
                                      : nullptr;
}

const rt::CudaArchInfo *TargetAttr::getCudaArch() const {
  return getKind() == TargetKind::cuda ? rt::findCudaArch(getName().str())
                                       : nullptr;
}

TargetAttr mlir::comfyquant::resolveTarget(Operation *op, StringRef option,
                                           TargetKind kind, StringRef fallback,
                                           StringRef what) {
  const bool cpu = kind == TargetKind::cpu;
  const std::string prefix = what.empty() ? "" : what.str() + ": ";
  auto pinned =
      op->getAttrOfType<TargetAttr>(ComfyQuantDialect::getTargetAttrName());
  if (option.empty() && pinned && pinned.getKind() != kind) {
    StringRef opName =
        isa<ModuleOp>(op) ? StringRef("module") : op->getName().getStringRef();
    op->emitError(prefix) << "the " << opName << "'s target " << pinned << " is not a "
                          << (cpu ? "CPU variant" : "CUDA arch");
    return nullptr;
  }
  StringRef name = !option.empty() ? option
                   : pinned        ? pinned.getName()
                                   : fallback;
  const bool known = cpu ? rt::findCpuVariant(name.str()) != nullptr
                         : rt::findCudaArch(name.str()) != nullptr;
  if (!known) {
    op->emitError(prefix) << (cpu ? "unknown CPU variant '" : "unknown arch '")
                          << name << "'";
    return nullptr;
  }
  // A pinned target's tuning stays with it while the name is its own.
  StringRef tune = pinned && pinned.getKind() == kind && pinned.getName() == name
                       ? pinned.getTune()
                       : StringRef("generic");
  return TargetAttr::get(op->getContext(), kind, name, tune);
}

//===----------------------------------------------------------------------===//
// GemmInfoAttr
//===----------------------------------------------------------------------===//

LogicalResult GemmInfoAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   GemmKind kind, Type aType, Type bType,
                                   int64_t block) {
  auto isFP8 = [](Type t) { return isa<Float8E4M3FNType, Float8E5M2Type>(t); };
  auto isAct = [](Type t) { return t.isF32() || t.isBF16() || t.isF16(); };
  bool ok = false;
  switch (kind) {
  case GemmKind::I8I8I32:
    ok = aType.isSignlessInteger(8) && bType.isSignlessInteger(8) && !block;
    break;
  case GemmKind::FloatF32:
    ok = isAct(aType) && isAct(bType) && !block;
    break;
  case GemmKind::F8F8F32:
    ok = isFP8(aType) && isFP8(bType) && block >= 0;
    break;
  case GemmKind::F4F4F32:
    ok = isa<Float4E2M1FNType>(aType) && isa<Float4E2M1FNType>(bType) &&
         block > 0;
    break;
  }
  if (!ok)
    return emitError() << "a " << stringifyGemmKind(kind) << " GEMM does not "
                       << "multiply " << aType << " x " << bType
                       << (block ? " in blocks of " + std::to_string(block)
                                 : std::string());
  return success();
}

//===----------------------------------------------------------------------===//
// CpuGemmAttr
//===----------------------------------------------------------------------===//

LogicalResult CpuGemmAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  CpuMicroKernel ukernel, int64_t mr,
                                  int64_t nr, int64_t kv, int64_t mc,
                                  int64_t kc, CpuDecode decode,
                                  CpuGemmForm form, CpuRowKernel row,
                                  int64_t minRows) {
  if (mr <= 0 || nr <= 0 || kv <= 0 || mc <= 0)
    return emitError() << "mr, nr, kv and mc must be positive";
  if (minRows < 1)
    return emitError() << "min_rows = " << minRows << " must be at least 1";
  if (mc % mr)
    return emitError() << "mc = " << mc << " must be a multiple of mr = " << mr;
  if (kc < 0 || kc % kv)
    return emitError()
           << "kc = " << kc
           << " must be 0 (all of K) or a positive multiple of kv = " << kv;
  if (kc && form != CpuGemmForm::outer)
    return emitError() << "kc = " << kc
                       << ": K blocks are for the outer form (its panel)";
  bool amxBF16 = ukernel == CpuMicroKernel::bf16_amx ||
                 ukernel == CpuMicroKernel::bf16_amx_emulated;
  bool amx = ukernel == CpuMicroKernel::i8_amx ||
             ukernel == CpuMicroKernel::i8_amx_emulated || amxBF16;
  // AMX tiles are built after bufferization from a whole decoded B; the
  // vector micro-kernels decode per tile or per step, never whole.
  if (amx && decode != CpuDecode::none && decode != CpuDecode::whole)
    return emitError() << stringifyCpuMicroKernel(ukernel)
                       << " reads B as stored or decoded whole, not decode = "
                       << stringifyCpuDecode(decode);
  if (!amx && decode == CpuDecode::whole)
    return emitError() << stringifyCpuMicroKernel(ukernel)
                       << " decodes B per tile or per step, not whole";
  if (amx && ((mr != 16 && mr != 32) || (nr != 16 && nr != 32) ||
              kv != (amxBF16 ? 32 : 64)))
    return emitError() << stringifyCpuMicroKernel(ukernel)
                       << " computes one or two 16 x 16 tiles per direction "
                          "(mr, nr = 16 or 32) with K steps of "
                       << (amxBF16 ? 32 : 64);
  bool vnni = ukernel == CpuMicroKernel::i8_vnni ||
              ukernel == CpuMicroKernel::i8_vnni_emulated;
  if (vnni && kv != 64)
    return emitError() << stringifyCpuMicroKernel(ukernel)
                       << " takes K steps of 64";
  // One vector register of K: i16 pairs or f32 lanes of a 256- or 512-bit
  // register.
  bool i16Lanes = ukernel == CpuMicroKernel::i8_pmaddwd ||
                  ukernel == CpuMicroKernel::i8_generic;
  if (i16Lanes && kv != 16 && kv != 32)
    return emitError() << stringifyCpuMicroKernel(ukernel)
                       << " takes K steps of 16 or 32 (one register)";
  if (ukernel == CpuMicroKernel::f32_fma && kv != 8 && kv != 16)
    return emitError() << "f32_fma takes K steps of 8 or 16 (one register)";
  // bf16 pairs of one register: 512 bits for vdpbf16ps.
  bool bf16 = ukernel == CpuMicroKernel::bf16_dot ||
              ukernel == CpuMicroKernel::bf16_dot_emulated;
  if (ukernel == CpuMicroKernel::bf16_dot && kv != 32)
    return emitError() << "bf16_dot takes K steps of 32 (one 512-bit register)";
  if (ukernel == CpuMicroKernel::bf16_dot_emulated && kv != 16 && kv != 32)
    return emitError()
           << "bf16_dot_emulated takes K steps of 16 or 32 (one register)";
  // The outer form reads B from a K-major panel it packs per N tile; a
  // decoder in the K loop would decode each element once per M tile.
  if (form == CpuGemmForm::outer) {
    if (ukernel != CpuMicroKernel::f32_fma &&
        ukernel != CpuMicroKernel::i8_pmaddwd && !vnni && !bf16)
      return emitError() << "form = outer needs f32_fma, i8_pmaddwd, a VNNI "
                            "or a bf16 micro-kernel, not "
                         << stringifyCpuMicroKernel(ukernel);
    if (decode == CpuDecode::reg)
      return emitError() << "form = outer packs B per N tile; decode = "
                            "register does not apply";
  }
  // One-row calls: a bf16 kernel's f32 FMAs, or an f32 kernel's vdpbf16ps
  // on a B decoded in registers.
  if (row == CpuRowKernel::f32_fma && !bf16)
    return emitError() << "row = f32_fma is for a bf16 micro-kernel, not "
                       << stringifyCpuMicroKernel(ukernel);
  if (row == CpuRowKernel::bf16_dot &&
      (ukernel != CpuMicroKernel::f32_fma ||
       (decode != CpuDecode::reg && decode != CpuDecode::adaptive)))
    return emitError() << "row = bf16_dot is for f32_fma decoding B in "
                          "registers (decode = register or adaptive)";
  // Nibble planes: an exact integer sum taken in another order.
  if (row == CpuRowKernel::i8_planes &&
      (!isVectorIntegerDot(ukernel) ||
       (decode != CpuDecode::reg && decode != CpuDecode::adaptive)))
    return emitError() << "row = i8_planes is for an integer dot product "
                          "(VNNI, pmaddwd or generic) decoding B in registers "
                          "(decode = register or adaptive)";
  return success();
}

TargetKind CpuGemmAttr::getBackend() const { return TargetKind::cpu; }
int64_t CpuGemmAttr::getTileRows() const { return getMr(); }
int64_t CpuGemmAttr::getTileCols() const { return getNr(); }
int64_t CpuGemmAttr::getStepK() const { return getKv(); }

//===----------------------------------------------------------------------===//
// GpuGemmAttr
//===----------------------------------------------------------------------===//

LogicalResult GpuGemmAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  GpuMmaKind kind, ArrayRef<int64_t> block,
                                  ArrayRef<int64_t> warp, int64_t kBytes,
                                  int64_t stages, int64_t splitK,
                                  int64_t decodeRows) {
  if (block.size() != 2 || warp.size() != 2)
    return emitError() << "block and warp are [rows, columns]";
  if (block[0] <= 0 || block[1] <= 0 || warp[0] <= 0 || warp[1] <= 0 ||
      block[0] % warp[0] || block[1] % warp[1])
    return emitError() << "the block tile [" << block[0] << ", " << block[1]
                       << "] must be a positive multiple of the warp tile ["
                       << warp[0] << ", " << warp[1] << "]";
  if (warp[0] % 16 || warp[1] % 8)
    return emitError() << "a warp tile is made of 16 x 8 MMA fragments";
  if (kBytes != 32)
    return emitError() << "a K step is 32 bytes (one 8-bit MMA K)";
  if (stages < 1)
    return emitError() << "stages must be at least 1";
  if (splitK < 1 || splitK > kMaxSplitK)
    return emitError() << "split_k must be in [1, " << kMaxSplitK << "]";
  // Split K applies up to kSplitRows rows, where B stays fused.
  if (decodeRows != 0 && decodeRows <= kSplitRows)
    return emitError() << "decode_rows must be 0 (never) or above "
                       << kSplitRows << ", the rows split K covers";
  return success();
}

/// `<kind, block = [r, c], warp = [r, c], k_bytes = K, stages = S`
/// then, in either order and each at most once, `, split_k = Z` and
/// `, decode_rows = R` (omitted at their defaults), `>`.
Attribute GpuGemmAttr::parse(AsmParser &parser, Type) {
  FailureOr<GpuMmaKind> kind;
  SmallVector<int64_t> block, warp;
  int64_t kBytes = 0, stages = 0, splitK = 1, decodeRows = 0;
  auto parseList = [&](StringRef key, SmallVector<int64_t> &into) {
    return failure(parser.parseComma() || parser.parseKeyword(key) ||
                   parser.parseEqual() ||
                   parser.parseCommaSeparatedList(
                       AsmParser::Delimiter::Square, [&]() -> ParseResult {
                         return parser.parseInteger(into.emplace_back());
                       }));
  };
  auto parseValue = [&](StringRef key, int64_t &into) {
    return failure(parser.parseComma() || parser.parseKeyword(key) ||
                   parser.parseEqual() || parser.parseInteger(into));
  };
  if (parser.parseLess())
    return {};
  kind = FieldParser<GpuMmaKind>::parse(parser);
  if (failed(kind) || failed(parseList("block", block)) ||
      failed(parseList("warp", warp)) ||
      failed(parseValue("k_bytes", kBytes)) ||
      failed(parseValue("stages", stages)))
    return {};
  bool seenSplit = false, seenDecode = false;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    SMLoc at = parser.getCurrentLocation();
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return {};
    bool &seen = key == "split_k" ? seenSplit : seenDecode;
    if ((key != "split_k" && key != "decode_rows") || seen) {
      parser.emitError(at) << "expected split_k or decode_rows, each once";
      return {};
    }
    seen = true;
    if (parser.parseInteger(key == "split_k" ? splitK : decodeRows))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), *kind, block, warp, kBytes, stages,
                    splitK, decodeRows);
}

void GpuGemmAttr::print(AsmPrinter &printer) const {
  auto list = [&](ArrayRef<int64_t> values) {
    printer << "[";
    llvm::interleaveComma(values, printer);
    printer << "]";
  };
  printer << "<" << stringifyGpuMmaKind(getKind()) << ", block = ";
  list(getBlock());
  printer << ", warp = ";
  list(getWarp());
  printer << ", k_bytes = " << getKBytes() << ", stages = " << getStages();
  if (getSplitK() != 1)
    printer << ", split_k = " << getSplitK();
  if (getDecodeRows() != 0)
    printer << ", decode_rows = " << getDecodeRows();
  printer << ">";
}

TargetKind GpuGemmAttr::getBackend() const { return TargetKind::cuda; }
int64_t GpuGemmAttr::getTileRows() const { return getBlock()[0]; }
int64_t GpuGemmAttr::getTileCols() const { return getBlock()[1]; }
int64_t GpuGemmAttr::getStepK() const {
  switch (getKind()) {
  case GpuMmaKind::f16:
  case GpuMmaKind::bf16:
    return getKBytes() / 2;
  case GpuMmaKind::fp4_ue4m3_scaled:
    return getKBytes() * 2;
  default:
    return getKBytes();
  }
}
