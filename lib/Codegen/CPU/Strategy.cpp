//===- Strategy.cpp - CPU variant and GEMM micro-kernel selection ---------===//
#include "GemmConfig.h"
#include "NibblePlanes.h"

#include "comfyquant/Codegen/CPU/CPUCodegen.h"
#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUSELECTSTRATEGY
#include "comfyquant/Codegen/CPU/Passes.h.inc"
} // namespace mlir::comfyquant

#include "llvm/ADT/STLExtras.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;

//===----------------------------------------------------------------------===//
// Variants
//===----------------------------------------------------------------------===//

const std::vector<CPUVariant> &mlir::comfyquant::getCPUVariants() {
  return ::comfyquant::rt::cpuVariants();
}

const CPUVariant *mlir::comfyquant::lookupCPUVariant(StringRef name) {
  return ::comfyquant::rt::findCpuVariant(name.str());
}

//===----------------------------------------------------------------------===//
// comfyquant.gemm
//===----------------------------------------------------------------------===//

std::optional<GemmConfig> mlir::comfyquant::detail::readGemmConfig(
    Operation *op) {
  auto attr = op->getAttrOfType<CpuGemmAttr>(ComfyQuantDialect::getGemmAttrName());
  if (!attr)
    return std::nullopt;
  GemmConfig c;
  c.ukernel = attr.getUkernel();
  c.mr = attr.getMr();
  c.nr = attr.getNr();
  c.kv = attr.getKv();
  c.mc = attr.getMc();
  c.kc = attr.getKc();
  c.decode = attr.getDecode();
  c.form = attr.getForm();
  c.row = attr.getRow();
  c.minRows = attr.getMinRows();
  return c;
}

CpuGemmAttr mlir::comfyquant::detail::gemmConfigAttr(MLIRContext *ctx,
                                                     const GemmConfig &c) {
  return CpuGemmAttr::get(ctx, c.ukernel, c.mr, c.nr, c.kv, c.mc, c.kc,
                          c.decode, c.form, c.row, c.minRows);
}

/// The function's #comfyquant.target, else its module's.
static TargetAttr targetOf(func::FuncOp func) {
  auto target =
      func->getAttrOfType<TargetAttr>(ComfyQuantDialect::getTargetAttrName());
  if (!target)
    if (auto module = func->getParentOfType<ModuleOp>())
      target = module->getAttrOfType<TargetAttr>(
          ComfyQuantDialect::getTargetAttrName());
  return target;
}

const ::comfyquant::rt::CpuVariantInfo *
mlir::comfyquant::detail::targetVariant(func::FuncOp func) {
  TargetAttr target = targetOf(func);
  return target ? target.getCpuVariant() : nullptr;
}

CpuTuning mlir::comfyquant::detail::targetTuning(func::FuncOp func) {
  TargetAttr target = targetOf(func);
  return cpuTuning(target && target.getKind() == TargetKind::cpu
                       ? target.getTune()
                       : StringRef("generic"));
}

int64_t mlir::comfyquant::detail::targetLanes(func::FuncOp func,
                                              int64_t requested) {
  if (requested > 0)
    return requested;
  const ::comfyquant::rt::CpuVariantInfo *v = targetVariant(func);
  return v ? v->vectorBits / 32 : 0;
}


//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Tuning
//===----------------------------------------------------------------------===//

CpuTuning mlir::comfyquant::detail::cpuTuning(StringRef tune) {
  std::string cpu =
      tune == "host" ? llvm::sys::getHostCPUName().str() : tune.str();
  CpuTuning t;
  // Golden Cove-derived server cores (measured on Emerald Rapids): two
  // 512-bit FMA ports but vdpbf16ps at about one per 2.4 cycles, so f32
  // FMAs on the widened bf16 values do the same products twice as fast;
  // vpermi2w about one per 2.6 cycles against one for vpermw.
  if (llvm::is_contained({"sapphirerapids", "emeraldrapids", "graniterapids",
                          "graniterapids-d"},
                         cpu)) {
    t.halfRateBF16Dot = true;
    t.slowTwoTableWordPermute = true;
  }
  return t;
}

FailureOr<CpuTuning> mlir::comfyquant::detail::lookupCpuTuning(Operation *op,
                                                               StringRef tune) {
  if (!isCpuTuneName(tune))
    return op->emitError("tune = '")
           << tune << "' is not generic, host or an LLVM x86-64 CPU name";
  return cpuTuning(tune);
}

namespace {

struct SelectStrategyPass
    : mlir::comfyquant::impl::ComfyQuantCPUSelectStrategyBase<SelectStrategyPass> {
  using Base::Base;

  /// What `tune` says of the CPU.
  CpuTuning tuning;

  /// The micro-kernel and tiles the strategy picks for a GEMM kind on a
  /// variant, before overrides.
  void chooseMicroKernel(const CPUVariant &v, const GemmMatch &m,
                         bool bf16Operands, GemmConfig &c) {
    const bool wide = v.vectorBits >= 512;
    const bool isFloat = m.kind == GemmMatch::Kind::FloatF32;
    // Register budget: 16 ymm (AVX2) or 32 zmm (AVX-512) registers hold
    // mr*nr accumulators plus mr A vectors and the B vectors; a B tile of
    // nr rows should stay in L1 while the M block streams past it. Measured
    // on AVX2 (3072x3072, M = 256, one core): f32 4x3 (~65 GFLOP/s) over
    // 3x4 (~40); i8 pmaddwd 4x2 (~125 GOPS) over 3x4 (~95). On AVX-512
    // (Zen 5, same shape, one core, comfyquant-compile --gemm-tiles): 4x6
    // over 4x4 for VNNI (537 vs 434 GOPS) and f32 (118 vs 94); 8x2, 8x3,
    // 3x8, 4x8 and 5x6 were slower.
    c.mr = 4;
    c.nr = wide ? 6 : (isFloat ? 3 : 2);
    // bf16 x bf16 products are exact in f32: tdpbf16ps takes 16 x 16 x 32
    // of them per instruction, vdpbf16ps two per lane.
    if (bf16Operands && v.amxTiles && amxShape(m, /*bf16=*/true)) {
      c.ukernel = CpuMicroKernel::bf16_amx;
      c.mr = 32;
      c.nr = 32;
      c.kv = 32;
    } else if (bf16Operands && v.bf16Dot && !tuning.halfRateBF16Dot) {
      c.ukernel = CpuMicroKernel::bf16_dot;
      c.kv = 32;
    } else if (isFloat) {
      c.ukernel = CpuMicroKernel::f32_fma;
      c.kv = v.vectorBits / 32;
    } else if (v.amxTiles && amxShape(m, /*bf16=*/false)) {
      // 2 x 2 tiles of 16 x 16 i32 (tdpbssd, 64-byte K steps): four
      // multiplies per four tile loads, where one tile loads two.
      c.ukernel = CpuMicroKernel::i8_amx;
      c.mr = 32;
      c.nr = 32;
      c.kv = 64;
    } else if (wide) {
      c.ukernel = CpuMicroKernel::i8_vnni;
      c.kv = 64;
    } else {
      c.ukernel = CpuMicroKernel::i8_pmaddwd;
      c.kv = 16;
    }
  }

  /// Whole tiles: 16 rows of B, 64-byte K steps (64 i8 or 32 bf16).
  static bool amxShape(const GemmMatch &m, bool bf16) {
    return m.n % 16 == 0 && m.k % (bf16 ? 32 : 64) == 0;
  }

  /// The `ukernel` option's micro-kernel, where it applies to the GEMM and
  /// the variant has its instructions.
  LogicalResult forceMicroKernel(const CPUVariant &v, const GemmMatch &m,
                                 bool bf16Operands, linalg::GenericOp op,
                                 GemmConfig &c) {
    const CpuMicroKernel k = *ukernel;
    c.ukernel = k;
    const bool isFloat = m.kind == GemmMatch::Kind::FloatF32;
    bool applies = !isFloat;
    switch (k) {
    case CpuMicroKernel::f32_fma:
      applies = isFloat;
      c.kv = v.vectorBits / 32;
      break;
    case CpuMicroKernel::bf16_dot:
    case CpuMicroKernel::bf16_dot_emulated:
      applies = bf16Operands;
      c.kv = v.vectorBits / 16;
      break;
    case CpuMicroKernel::i8_generic:
    case CpuMicroKernel::i8_pmaddwd:
      c.kv = v.vectorBits / 16;
      break;
    case CpuMicroKernel::i8_vnni:
    case CpuMicroKernel::i8_vnni_emulated:
      c.kv = 64;
      break;
    case CpuMicroKernel::i8_amx:
    case CpuMicroKernel::i8_amx_emulated:
      applies = !isFloat && amxShape(m, /*bf16=*/false);
      c.mr = c.nr = 32, c.kv = 64;
      break;
    case CpuMicroKernel::bf16_amx:
    case CpuMicroKernel::bf16_amx_emulated:
      applies = bf16Operands && amxShape(m, /*bf16=*/true);
      c.mr = c.nr = 32, c.kv = 32;
      break;
    }
    if (!applies)
      return op.emitError("micro-kernel '")
             << ukernel.getValue().str() << "' does not apply to this GEMM";
    if (k == CpuMicroKernel::i8_vnni && v.vectorBits < 512)
      return op.emitError("micro-kernel 'i8-vnni' needs a 512-bit variant");
    if (k == CpuMicroKernel::bf16_dot && !v.bf16Dot)
      return op.emitError("micro-kernel 'bf16-dot' needs a variant with "
                          "AVX512-BF16");
    if ((k == CpuMicroKernel::i8_amx || k == CpuMicroKernel::bf16_amx) &&
        !v.amxTiles)
      return op.emitError("micro-kernel '")
             << ukernel.getValue().str() << "' needs the amx variant";
    return success();
  }

  /// The accumulator form: the outer-product form (N along the lanes,
  /// broadcast A, a K-major B panel) wherever the micro-kernel has one: no
  /// horizontal reduction per tile, one B load per mr multiply-adds
  /// (pmaddwd: on i16 pairs, A widened once per call). 6 rows x 4 vectors
  /// (AVX-512) or 6 x 2 (AVX2) leave registers for the B vectors and the
  /// broadcast.
  LogicalResult chooseForm(const CPUVariant &v, linalg::GenericOp op,
                           GemmConfig &c) {
    const bool outerKernel = c.ukernel == CpuMicroKernel::f32_fma ||
                             c.ukernel == CpuMicroKernel::i8_pmaddwd ||
                             c.ukernel == CpuMicroKernel::i8_vnni ||
                             c.ukernel == CpuMicroKernel::i8_vnni_emulated ||
                             c.ukernel == CpuMicroKernel::bf16_dot ||
                             c.ukernel == CpuMicroKernel::bf16_dot_emulated;
    // decode = register (asked for) keeps the inner form unless the outer
    // one is asked for too (then it is an error in chooseDecode).
    const bool registerDecode = decode && *decode == CpuDecode::reg;
    c.form = outerKernel && !registerDecode ? CpuGemmForm::outer
                                            : CpuGemmForm::inner;
    if (form) {
      if (*form == CpuGemmForm::outer && !outerKernel)
        return op.emitError("form = outer needs the f32-fma, pmaddwd, a "
                            "VNNI or a "
                            "bf16 micro-kernel, not ")
               << stringifyCpuMicroKernel(c.ukernel);
      c.form = *form;
    }
    if (c.isOuter()) {
      c.mr = 6;
      c.nr = v.vectorBits >= 512 ? 4 : 2;
    }
    return success();
  }

  /// The M block and the K block, with the tile options applied.
  LogicalResult chooseBlocks(const CPUVariant &v, const GemmMatch &m,
                             bool decoded, linalg::GenericOp op,
                             GemmConfig &c) {
    // A B operand decoded per N tile is worth a larger M block. On 512-bit
    // variants the int8 GEMM on stored weights also gains from it (Zen 5,
    // 3072², M = 256, one core, 4x6: mc = 256 639 GOPS, 128: 488, 64:
    // 477).
    c.mc = decoded || v.vectorBits >= 512 ? 256 : 64;
    // The tile options are the vector kernels' (AMX tiles are fixed).
    if (mr > 0 && !c.isAmx())
      c.mr = mr;
    if (nr > 0 && !c.isAmx())
      c.nr = nr;
    // AMX: the packed codes of an M block (mc x K bytes) stay in L2 while
    // every N tile's B rows pass over them once, so B is read from memory
    // M / mc times, not M / 16 (all of M was one block: at M = 4096 the
    // 12 MB of packed codes were read from L3 once per 16 columns). 1 MB
    // of block leaves half of a 2 MB L2 for B and C.
    if (c.isAmx()) {
      const int64_t rowBytes = m.k * (c.isAmxBF16() ? 2 : 1);
      const int64_t fit = (int64_t(1) << 20) / rowBytes / c.mr * c.mr;
      c.mc = std::clamp<int64_t>(fit, c.mr, 512);
      c.minRows = amxMinRows;
    }
    if (mc > 0)
      c.mc = mc;

    if (c.mc % c.mr)
      c.mc = (c.mc + c.mr - 1) / c.mr * c.mr;
    // K blocks (outer form; the inner one streams K once per tile, so the
    // option leaves it alone): a panel of kc K-elements per N tile. None by
    // default: on Zen 5 (1 MB L2; FP8 and int8, N = 3072, K = 3072 and
    // 12288, M = 256, one core) kc = 256 to 2048 was within the noise of
    // whole-K panels, which then live in L2.
    if (kc >= 0 && c.isOuter()) {
      const int64_t k = kc;
      if (k % c.kv)
        return op.emitError("kc = ")
               << k << " must be a multiple of kv = " << c.kv;
      c.kc = k;
    }
    // The outer pmaddwd kernel reads i16 A pairs and a panel of i16 pairs,
    // twice the bytes of the int8 operands: K blocks of 512 keep a block's
    // panel (16 KB at nr = 2) in L1 (Zen 3, 512 KB L2, 3072², M = 256, two
    // cores: kc = 512 ~5-10 % over the inner form, whole-K panels slower
    // than it for W4A8).
    if (kc < 0 && c.isOuter() && c.ukernel == CpuMicroKernel::i8_pmaddwd)
      c.kc = 512;
    // A whole-K panel of one N tile over 1 MB (f32 at K = 12288: 3 MB)
    // leaves L2 while the M block's tiles stream past it: K blocks of at
    // most 512 KB of panel. Emerald Rapids (2 MB L2), 3072 x 12288, M = 256,
    // one core: FP8 and NVFP4 on f32 FMAs 72-73 GOPS whole, 136-155 with
    // kc = 1024-4096; on vdpbf16ps (a 1.5 MB panel) 84-88 whole, 85-94
    // with kc = 2048-4096.
    if (kc < 0 && c.isOuter() && c.kc == 0) {
      int64_t bytes = c.ukernel == CpuMicroKernel::f32_fma ? 4
                      : c.ukernel == CpuMicroKernel::i8_vnni ||
                              c.ukernel == CpuMicroKernel::i8_vnni_emulated
                          ? 1
                          : 2;
      const int64_t panelPerK = c.nr * (v.vectorBits / 32) * bytes;
      if (panelPerK * m.k > (int64_t(1) << 20))
        c.kc = std::max<int64_t>(c.kv, (int64_t(512) << 10) / panelPerK / c.kv *
                                           c.kv);
    }
    // One block covering K is no blocking.
    if (c.kc >= m.k)
      c.kc = 0;
    return success();
  }

  /// B's decoder: AMX tiles read it decoded whole; the vector kernels
  /// decode it in registers when the M block is one row (decoded values
  /// used once: a panel would be written and read back once) and into a
  /// panel shared by the block's rows otherwise.
  LogicalResult chooseDecode(bool decoded, linalg::GenericOp op,
                             GemmConfig &c) {
    if (!decoded)
      c.decode = CpuDecode::none;
    else if (c.isAmx())
      c.decode = CpuDecode::whole;
    else if (decode) {
      if (*decode == CpuDecode::none || *decode == CpuDecode::whole)
        return op.emitError("decode must be panel, register or adaptive, not '")
               << decode.getValue().str() << "'";
      if (*decode == CpuDecode::reg && c.isOuter())
        return op.emitError("decode = register needs form = inner (the "
                            "outer form packs B per N tile)");
      c.decode = *decode;
    } else
      c.decode = CpuDecode::adaptive;
    return success();
  }

  /// The whole decision for one GEMM.
  LogicalResult choose(const CPUVariant &v, const GemmMatch &m,
                       linalg::GenericOp op, GemmConfig &c) {
    const bool isFloat = m.kind == GemmMatch::Kind::FloatF32;
    const bool bf16Operands = isFloat && m.aElt.isBF16() && m.bElt.isBF16();
    const bool decoded =
        op.getDpsInputs()[1].getDefiningOp<linalg::GenericOp>() != nullptr;
    chooseMicroKernel(v, m, bf16Operands, c);
    if (ukernel && failed(forceMicroKernel(v, m, bf16Operands, op, c)))
      return failure();
    if (failed(chooseForm(v, op, c)) ||
        failed(chooseBlocks(v, m, decoded, op, c)) ||
        failed(chooseDecode(decoded, op, c)))
      return failure();
    c.row = chooseRowKernel(v, c, op, bf16Operands);
    if (row) {
      c.row = *row;
      auto producer = op.getDpsInputs()[1].getDefiningOp<linalg::GenericOp>();
      if (c.row == CpuRowKernel::i8_planes &&
          !decodesNibblePlanes(producer, c.kv))
        return op.emitError("row = i8_planes needs B's decoder to read K "
                            "only as k / 2, k % 2 and k / d, d a multiple of ")
               << 2 * c.kv;
      auto error = [&] { return op.emitError(); };
      if (failed(CpuGemmAttr::verify(error, c.ukernel, c.mr, c.nr, c.kv, c.mc,
                                     c.kc, c.decode, c.form, c.row,
                                     c.minRows)))
        return failure();
    }
    return success();
  }

  /// The micro-kernel of one-row calls, which multiply each decoded element
  /// of B once: on bf16 operands, vdpbf16ps where B's decoder is a table of
  /// bf16s read in registers (two products per lane; FP8 e4m3 one-row on
  /// Emerald Rapids, where the tuning makes the GEMM take FMAs: 25.6 against
  /// 18.6 GOPS on FMAs), else f32 FMAs (widening a bf16 folds into the
  /// decoder).
  static CpuRowKernel chooseRowKernel(const CPUVariant &v, const GemmConfig &c,
                                      linalg::GenericOp op, bool bf16Operands) {
    const bool bf16Kernel = c.ukernel == CpuMicroKernel::bf16_dot ||
                            c.ukernel == CpuMicroKernel::bf16_dot_emulated;
    const bool fmaOnBF16 =
        c.ukernel == CpuMicroKernel::f32_fma && bf16Operands && v.bf16Dot;
    // The decoder the vectorizer reads per tile (decode != none).
    auto producer = op.getDpsInputs()[1].getDefiningOp<linalg::GenericOp>();
    const bool inRegisters =
        c.decode == CpuDecode::reg || c.decode == CpuDecode::adaptive;
    // Integer dots of nibble codes: each packed byte feeds two dot products
    // whole, not an unpack that repeats it into two lanes (W4A4 at M = 1,
    // 3072², 2 threads on Zen 4: see docs/CpuCodegen.md).
    if (isVectorIntegerDot(c.ukernel) && inRegisters &&
        decodesNibblePlanes(producer, c.kv))
      return CpuRowKernel::i8_planes;
    if (!bf16Kernel && !fmaOnBF16)
      return CpuRowKernel::ukernel;
    const bool table =
        producer && c.decode != CpuDecode::none &&
        c.decode != CpuDecode::panel && producer.getNumResults() == 1 &&
        producer.getNumReductionLoops() == 0 && producer.getNumLoops() == 2 &&
        (c.ukernel == CpuMicroKernel::bf16_dot || fmaOnBF16) &&
        decodesThroughTable(producer, fmaOnBF16 ? 2 * c.kv : c.kv);
    if (bf16Kernel)
      return table ? CpuRowKernel::ukernel : CpuRowKernel::f32_fma;
    return table ? CpuRowKernel::bf16_dot : CpuRowKernel::ukernel;
  }

  void runOnOperation() override {
    if (amxMinRows < 1) {
      getOperation().emitError("amx-min-rows = ")
          << static_cast<int64_t>(amxMinRows) << " must be at least 1";
      return signalPassFailure();
    }
    TargetAttr target =
        resolveTarget(getOperation(), variant, TargetKind::cpu, "x86-64-v3");
    if (!target)
      return signalPassFailure();
    // The tune option overrides the pinned target's; the functions record
    // the result, where the vectorizers read it.
    if (!tune.empty()) {
      if (failed(lookupCpuTuning(getOperation(), tune)))
        return signalPassFailure();
      target = TargetAttr::get(&getContext(), TargetKind::cpu,
                               target.getName(), tune);
    }
    const CPUVariant *v = target.getCpuVariant();
    tuning = cpuTuning(target.getTune());
    MLIRContext *ctx = &getContext();
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      int64_t minRows = 1;
      WalkResult r = func.walk([&](linalg::GenericOp op) {
        std::optional<GemmMatch> m = taggedGemm(op);
        if (!m)
          return WalkResult::advance();
        // The CPU lowering decodes FP8 and FP4 before the contraction.
        if (m->kind == GemmMatch::Kind::F8F8F32 ||
            m->kind == GemmMatch::Kind::F4F4F32) {
          op.emitError("FP8 or FP4 codes as GEMM operands: the CPU back end "
                       "needs "
                       "convert-comfyquant-to-linalg{gemm-operands=decoded}");
          return WalkResult::interrupt();
        }
        GemmConfig c;
        if (failed(choose(*v, *m, op, c)))
          return WalkResult::interrupt();
        op->setAttr(ComfyQuantDialect::getGemmAttrName(), gemmConfigAttr(ctx, c));
        minRows = std::max(minRows, c.minRows);
        return WalkResult::advance();
      });
      if (r.wasInterrupted())
        return signalPassFailure();
      func->setAttr(ComfyQuantDialect::getTargetAttrName(), target);
      // The entry's floor on rows, for the manifest (the runtime's
      // per-call choice among variants).
      if (minRows > 1)
        func->setAttr(ComfyQuantDialect::getMinRowsAttrName(),
                      IntegerAttr::get(IntegerType::get(ctx, 64), minRows));
    }
  }
};

} // namespace
