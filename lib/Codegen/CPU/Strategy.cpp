//===- Strategy.cpp - CPU variant and GEMM micro-kernel selection ---------===//
#include "GemmConfig.h"

#include "comfyquant/Codegen/CPU/CPUCodegen.h"
#include "comfyquant/Codegen/CPU/Passes.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUSELECTSTRATEGY
#include "comfyquant/Codegen/CPU/Passes.h.inc"
} // namespace mlir::comfyquant

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
  auto d = op->getAttrOfType<DictionaryAttr>("comfyquant.gemm");
  if (!d)
    return std::nullopt;
  GemmConfig c;
  auto uk = d.getAs<StringAttr>("ukernel");
  auto get = [&](StringRef n) -> std::optional<int64_t> {
    if (auto a = d.getAs<IntegerAttr>(n))
      return a.getInt();
    return std::nullopt;
  };
  auto mr = get("mr"), nr = get("nr"), kv = get("kv"), mc = get("mc");
  if (!uk || !mr || !nr || !kv || !mc)
    return std::nullopt;
  c.ukernel = uk.str();
  c.mr = *mr;
  c.nr = *nr;
  c.kv = *kv;
  c.mc = *mc;
  return c;
}

DictionaryAttr mlir::comfyquant::detail::gemmConfigAttr(MLIRContext *ctx,
                                                        const GemmConfig &c) {
  Builder b(ctx);
  return b.getDictionaryAttr({
      b.getNamedAttr("ukernel", b.getStringAttr(c.ukernel)),
      b.getNamedAttr("mr", b.getI64IntegerAttr(c.mr)),
      b.getNamedAttr("nr", b.getI64IntegerAttr(c.nr)),
      b.getNamedAttr("kv", b.getI64IntegerAttr(c.kv)),
      b.getNamedAttr("mc", b.getI64IntegerAttr(c.mc)),
  });
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

struct SelectStrategyPass
    : mlir::comfyquant::impl::ComfyQuantCPUSelectStrategyBase<SelectStrategyPass> {
  using Base::Base;

  /// The default micro-kernel and tiles for a GEMM kind on a variant.
  LogicalResult choose(const CPUVariant &v, const GemmMatch &m,
                       linalg::GenericOp op, GemmConfig &c) {
    const bool wide = v.vectorBits >= 512;
    const bool isFloat = m.kind == GemmMatch::Kind::FloatF32;
    // Register budget: 16 ymm (AVX2) or 32 zmm (AVX-512) registers hold
    // mr*nr accumulators plus mr A vectors and the B vectors; a B tile of
    // nr rows should stay in L1 while the M block streams past it. Measured
    // on AVX2 (3072x3072, M = 256, one core): f32 4x3 (~65 GFLOP/s) over
    // 3x4 (~40); i8 pmaddwd 4x2 (~125 GOPS) over 3x4 (~95).
    c.mr = 4;
    c.nr = wide ? 4 : (isFloat ? 3 : 2);
    // A B operand decoded per N tile is worth a larger M block.
    bool decoded = op.getDpsInputs()[1].getDefiningOp<linalg::GenericOp>();
    c.mc = decoded ? 256 : 64;
    const bool amxVariant = v.amxTiles;
    const bool amxShape = m.n % 16 == 0 && m.k % 64 == 0;
    if (m.kind == GemmMatch::Kind::FloatF32) {
      c.ukernel = "f32-fma";
      c.kv = v.vectorBits / 32;
    } else if (amxVariant && amxShape) {
      // 16 x 16 i32 tiles of C, 64-byte K steps (tdpbssd).
      c.ukernel = "i8-amx";
      c.mr = 16;
      c.nr = 16;
      c.kv = 64;
    } else if (wide) {
      c.ukernel = "i8-vnni";
      c.kv = 64;
    } else {
      c.ukernel = "i8-pmaddwd";
      c.kv = 16;
    }
    if (!ukernel.empty()) {
      c.ukernel = ukernel;
      bool f = m.kind == GemmMatch::Kind::FloatF32;
      if (ukernel == "f32-fma" && f)
        c.kv = v.vectorBits / 32;
      else if (ukernel == "i8-generic" && !f)
        c.kv = v.vectorBits / 16;
      else if (ukernel == "i8-pmaddwd" && !f)
        c.kv = v.vectorBits / 16;
      else if ((ukernel == "i8-vnni" || ukernel == "i8-vnni-emulated") && !f)
        c.kv = 64;
      else if ((ukernel == "i8-amx" || ukernel == "i8-amx-emulated") && !f &&
               amxShape)
        c.mr = c.nr = 16, c.kv = 64;
      else
        return op.emitError("micro-kernel '")
               << ukernel << "' does not apply to this GEMM";
      if (ukernel == "i8-vnni" && !wide)
        return op.emitError("micro-kernel 'i8-vnni' needs a 512-bit variant");
      if (ukernel == "i8-amx" && !amxVariant)
        return op.emitError("micro-kernel 'i8-amx' needs the amx variant");
    }
    const bool amxKernel = StringRef(c.ukernel).starts_with("i8-amx");
    if (mr > 0 && !amxKernel)
      c.mr = mr;
    if (nr > 0 && !amxKernel)
      c.nr = nr;
    if (mc > 0)
      c.mc = mc;
    if (c.mc % c.mr)
      c.mc = (c.mc + c.mr - 1) / c.mr * c.mr;
    return success();
  }

  void runOnOperation() override {
    const CPUVariant *v = lookupCPUVariant(variant);
    if (!v) {
      getOperation().emitError("unknown CPU variant '") << variant << "'";
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<Attribute> gemms;
      WalkResult r = func.walk([&](linalg::GenericOp op) {
        std::optional<GemmMatch> m = matchGemm(op);
        if (!m)
          return WalkResult::advance();
        // The CPU lowering decodes FP8 before the contraction.
        if (m->kind == GemmMatch::Kind::F8F8F32) {
          op.emitError("FP8 codes as GEMM operands: the CPU back end needs "
                       "convert-comfyquant-to-linalg{gemm-operands=decoded}");
          return WalkResult::interrupt();
        }
        GemmConfig c;
        if (failed(choose(*v, *m, op, c)))
          return WalkResult::interrupt();
        DictionaryAttr d = gemmConfigAttr(ctx, c);
        op->setAttr("comfyquant.gemm", d);
        gemms.push_back(d);
        return WalkResult::advance();
      });
      if (r.wasInterrupted())
        return signalPassFailure();
      func->setAttr(
          "comfyquant.strategy",
          b.getDictionaryAttr({
              b.getNamedAttr("variant", b.getStringAttr(v->name)),
              b.getNamedAttr("cpu", b.getStringAttr(v->cpu)),
              b.getNamedAttr("features", b.getStringAttr(v->features)),
              b.getNamedAttr("vector_bits", b.getI64IntegerAttr(v->vectorBits)),
              b.getNamedAttr("gemms", b.getArrayAttr(gemms)),
          }));
    }
  }
};

} // namespace
