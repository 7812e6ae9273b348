//===- FP4DecodeTest.cpp - the f16 decode of NVFP4 operands, folded -------===//
//
// The IR that decodes NVFP4 tiles to f16 where no FP4 MMA exists, built for
// constant inputs and folded: every E2M1 code in every nibble, times every
// UE4M3 scale, must be the exact product (which f16 must hold without
// rounding).
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/BytePermute.h"
#include "comfyquant/Codegen/GPU/FP4Decode.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

APFloat toFloat(const llvm::fltSemantics &from, unsigned bits, unsigned width) {
  APFloat v(from, APInt(width, bits));
  bool lost = false;
  v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return v;
}

struct Decoded {
  OwningOpRef<ModuleOp> module;
  /// Per scale byte, per rotation r: the 8 f16 values of the word whose
  /// nibble e holds code (e + r) % 16.
  std::vector<std::vector<Attribute>> values;
};

/// decodeFP4Word(word, ue4m3ToF16(scale)) for every scale byte and 16
/// rotations of the codes, folded.
Decoded decodeAll(MLIRContext &ctx) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  Decoded d{ModuleOp::create(loc), {}};
  b.setInsertionPointToEnd(d.module->getBody());
  auto f16s = VectorType::get({8}, b.getF16Type());
  for (unsigned scale = 0; scale < 256; ++scale) {
    auto fn = func::FuncOp::create(
        b, loc, "decode" + std::to_string(scale),
        b.getFunctionType({}, SmallVector<Type>(16, f16s)));
    OpBuilder fb = OpBuilder::atBlockEnd(fn.addEntryBlock());
    Value byte = arith::ConstantIntOp::create(fb, loc, fb.getI8Type(), scale);
    Value s = comfyquant::ue4m3ToF16(fb, loc, byte);
    SmallVector<Value> results;
    for (unsigned r = 0; r < 16; ++r) {
      uint32_t word = 0;
      for (unsigned e = 0; e < 8; ++e)
        word |= ((e + r) % 16) << (4 * e);
      Value w = arith::ConstantIntOp::create(fb, loc, fb.getI32Type(),
                                             static_cast<int32_t>(word));
      results.push_back(comfyquant::decodeFP4Word(fb, loc, w, s));
    }
    func::ReturnOp::create(fb, loc, results);
  }
  // The byte permutes fold by their stated byte function (the emulator's
  // runs of the decoded GEMMs check that function against PTX).
  RewritePatternSet patterns(&ctx);
  comfyquant::populateDecoderFoldPatterns(patterns);
  (void)applyPatternsGreedily(d.module->getOperation(), std::move(patterns));
  for (auto fn : d.module->getOps<func::FuncOp>()) {
    std::vector<Attribute> row;
    for (Value v : fn.getBody().front().getTerminator()->getOperands()) {
      Attribute a;
      row.push_back(matchPattern(v, m_Constant(&a)) ? a : Attribute());
    }
    d.values.push_back(row);
  }
  return d;
}

TEST(FP4Decode, EveryCodeTimesEveryScaleIsExactInF16) {
  MLIRContext ctx;
  ctx.loadDialect<arith::ArithDialect, func::FuncDialect, NVVM::NVVMDialect,
                  vector::VectorDialect>();
  Decoded d = decodeAll(ctx);
  ASSERT_EQ(d.values.size(), 256u);
  unsigned checked = 0;
  for (unsigned scale = 0; scale < 256; ++scale) {
    // UE4M3: bit 7 is not part of the value.
    APFloat s = toFloat(APFloat::Float8E4M3FN(), scale & 0x7F, 8);
    for (unsigned r = 0; r < 16; ++r) {
      auto dense = dyn_cast_or_null<DenseFPElementsAttr>(d.values[scale][r]);
      ASSERT_TRUE(dense) << "scale " << scale << ": the decode did not fold";
      std::vector<APFloat> got(dense.value_begin<APFloat>(),
                               dense.value_end<APFloat>());
      ASSERT_EQ(got.size(), 8u);
      for (unsigned e = 0; e < 8; ++e) {
        unsigned code = (e + r) % 16;
        APFloat x = toFloat(APFloat::Float4E2M1FN(), code, 4);
        APFloat expected = x;
        expected.multiply(s, APFloat::rmNearestTiesToEven);
        bool lost = false;
        APFloat::opStatus status = expected.convert(
            APFloat::IEEEhalf(), APFloat::rmNearestTiesToEven, &lost);
        if (s.isNaN()) {
          EXPECT_TRUE(got[e].isNaN()) << "code " << code << " scale " << scale;
          continue;
        }
        // The claim the f16 path rests on: the product needs no rounding.
        EXPECT_FALSE(lost) << "code " << code << " scale " << scale;
        EXPECT_EQ(status & ~APFloat::opOK, 0) << "code " << code;
        EXPECT_EQ(got[e].bitcastToAPInt(), expected.bitcastToAPInt())
            << "code " << code << " (nibble " << e << ") scale " << scale
            << ": got " << got[e].convertToFloat() << ", expected "
            << expected.convertToFloat();
        ++checked;
      }
    }
  }
  // 254 non-NaN scale bytes x 16 codes x 8 nibbles.
  EXPECT_EQ(checked, 254u * 16 * 8);
}

} // namespace
