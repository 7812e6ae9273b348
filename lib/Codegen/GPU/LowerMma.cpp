//===- LowerMma.cpp - comfyquant.mma_fp8 for one CUDA arch ----------------===//
//
// Kernel formation is the same for every arch; the FP8 instruction is not.
// sm_89+ get the FP8 mma.sync as inline PTX (MLIR 22's mma.sync ops reject
// FP8 operands); sm_80/sm_86 convert the codes to f16 exactly and issue two
// m16n8k16 MMAs.
//
// K order of the emulation: the 8-bit layout gives lane t, in register r of
// A (and r of B), the K columns 4t + 16 * (r / 2) + [0, 4) (B: 4t + 16r +
// [0, 4)). The f16 m16n8k16 layout gives lane t the columns 2t + [0, 2)
// (registers 0, 1 of A; 0 of B) and 2t + 8 + [0, 2) (registers 2, 3 of A;
// 1 of B). Bytes 0-1 of each 8-bit register go to the first pair, bytes 2-3
// to the second, the low half of K to the first MMA and the high half to
// the second: A and B columns map alike, so every product is taken once.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/GPUCodegen.h"
#include "comfyquant/Codegen/GPU/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/IR/Matchers.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPULOWERMMA
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// The f16 values of the four FP8 codes in `reg` (vector<4xi8>).
SmallVector<Value> codesToF16(OpBuilder &b, Location loc, Value reg,
                              Type fp8) {
  auto i16s = VectorType::get({4}, b.getI16Type());
  auto f16s = VectorType::get({4}, b.getF16Type());
  auto splat16 = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(i16s, b.getI16IntegerAttr(v)));
  };
  Value wide = arith::ExtUIOp::create(b, loc, i16s, reg);
  Value halves;
  if (isa<Float8E5M2Type>(fp8)) {
    // e5m2 is the high byte of the f16 with the same value.
    Value bits = arith::ShLIOp::create(b, loc, wide, splat16(8));
    halves = arith::BitcastOp::create(b, loc, f16s, bits);
  } else {
    // e4m3 (bias 7) placed in an f16 (bias 15) is 2^-8 of its value,
    // subnormals included; the multiply by 2^8 is exact. 0x7f/0xff is NaN.
    Value sign = arith::AndIOp::create(b, loc, wide, splat16(0x80));
    Value signHigh = arith::ShLIOp::create(b, loc, sign, splat16(8));
    Value magnitude = arith::AndIOp::create(b, loc, wide, splat16(0x7f));
    Value placed = arith::ShLIOp::create(b, loc, magnitude, splat16(7));
    Value bits = arith::OrIOp::create(b, loc, signHigh, placed);
    Value scaled = arith::BitcastOp::create(b, loc, f16s, bits);
    Value rebias = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(f16s, b.getF16FloatAttr(256.0f)));
    Value value = arith::MulFOp::create(b, loc, scaled, rebias);
    Value isNaN = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        magnitude, splat16(0x7f));
    Value nan = arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(
            f16s, b.getFloatAttr(b.getF16Type(),
                                 APFloat::getQNaN(APFloat::IEEEhalf()))));
    halves = arith::SelectOp::create(b, loc, isNaN, nan, value);
  }
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(vector::ExtractOp::create(b, loc, halves, i));
  return out;
}

/// Row `r` of a 2-D vector.
Value row(OpBuilder &b, Location loc, Value v, int64_t r) {
  return vector::ExtractOp::create(b, loc, v, r);
}

/// sm_80/sm_86: two exact f16 m16n8k16 MMAs.
Value emulate(OpBuilder &b, Location loc, MmaFP8Op op) {
  SmallVector<SmallVector<Value>> a, bv;
  for (int64_t r = 0; r < 4; ++r)
    a.push_back(codesToF16(b, loc, row(b, loc, op.getA(), r), op.getAType()));
  for (int64_t r = 0; r < 2; ++r)
    bv.push_back(codesToF16(b, loc, row(b, loc, op.getB(), r), op.getBType()));
  auto aType = VectorType::get({4, 2}, b.getF16Type());
  auto bType = VectorType::get({2, 2}, b.getF16Type());
  Value acc = op.getAcc();
  if (!acc)
    acc = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(op.getResult().getType(),
                                       b.getF32FloatAttr(0.0f)));
  for (int64_t half = 0; half < 2; ++half) {
    // 8-bit registers 2*half (row g) and 2*half + 1 (row g + 8).
    const SmallVector<Value> &lo = a[2 * half], &hi = a[2 * half + 1];
    Value fragA = vector::FromElementsOp::create(
        b, loc, aType,
        ValueRange{lo[0], lo[1], hi[0], hi[1], lo[2], lo[3], hi[2], hi[3]});
    const SmallVector<Value> &col = bv[half];
    Value fragB = vector::FromElementsOp::create(
        b, loc, bType, ValueRange{col[0], col[1], col[2], col[3]});
    acc = nvgpu::MmaSyncOp::create(b, loc, fragA, fragB, acc,
                                   ArrayRef<int64_t>{16, 8, 16});
  }
  return acc;
}

/// The 32-bit register holding row `r` of an 8-bit fragment.
Value packed(OpBuilder &b, Location loc, Value v, int64_t r) {
  Value bytes = row(b, loc, v, r);
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), bytes);
  return vector::ExtractOp::create(b, loc, word, 0);
}

/// sm_89+: the FP8 mma.sync itself.
FailureOr<Value> native(OpBuilder &b, Location loc, MmaFP8Op op) {
  if (op.getAcc() && matchPattern(op.getAcc(), m_Constant()) &&
      !matchPattern(op.getAcc(), m_PosZeroFloat()))
    return op.emitOpError("a constant accumulator other than zero cannot "
                          "be an inline-PTX operand");
  SmallVector<Value> operands;
  for (int64_t r = 0; r < 4; ++r)
    operands.push_back(packed(b, loc, op.getA(), r));
  for (int64_t r = 0; r < 2; ++r)
    operands.push_back(packed(b, loc, op.getB(), r));
  std::string instruction = llvm::formatv(
      "mma.sync.aligned.m16n8k32.row.col.f32.{0}.{1}.f32 {{$0, $1, $2, $3}, "
      "{{$4, $5, $6, $7}, {{$8, $9}, ",
      MmaFP8Op::getPtxTypeName(op.getAType()),
      MmaFP8Op::getPtxTypeName(op.getBType()));
  std::string ptx;
  // A zero C (none, or a zero constant: the first K step of a kernel whose
  // accumulators start at zero, once a one-step loop is folded) is a
  // register of the asm's own; constant asm operands would become
  // immediates, 'n', which f32 values cannot be.
  if (!op.getAcc() || matchPattern(op.getAcc(), m_PosZeroFloat())) {
    ptx = "{\n.reg .f32 zero;\nmov.f32 zero, 0f00000000;\n" + instruction +
          "{zero, zero, zero, zero};\n}";
  } else {
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t e = 0; e < 2; ++e)
        operands.push_back(vector::ExtractOp::create(
            b, loc, op.getAcc(), ArrayRef<int64_t>{r, e}));
    ptx = instruction + "{$10, $11, $12, $13};";
  }
  Type f32 = b.getF32Type();
  auto mma = NVVM::InlinePtxOp::create(b, loc, TypeRange{f32, f32, f32, f32},
                                       operands, ValueRange{},
                                       b.getStringAttr(ptx), Value());
  Value result = vector::FromElementsOp::create(
      b, loc, op.getResult().getType(), mma.getResults());
  return result;
}

struct LowerMmaPass
    : mlir::comfyquant::impl::ComfyQuantGPULowerMmaBase<LowerMmaPass> {
  using Base::Base;
  void runOnOperation() override {
    const CUDAArch *arch = lookupCUDAArch(chip);
    if (!arch) {
      getOperation().emitError("comfyquant-gpu-lower-mma: unknown arch '")
          << chip << "'";
      return signalPassFailure();
    }
    SmallVector<MmaFP8Op> mmas;
    getOperation().walk([&](MmaFP8Op op) { mmas.push_back(op); });
    for (MmaFP8Op op : mmas) {
      OpBuilder b(op);
      FailureOr<Value> result = arch->fp8Mma
                                    ? native(b, op.getLoc(), op)
                                    : FailureOr<Value>(emulate(b, op.getLoc(), op));
      if (failed(result))
        return signalPassFailure();
      op.getResult().replaceAllUsesWith(*result);
      op.erase();
    }
  }
};

} // namespace
