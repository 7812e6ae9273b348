//===- FP8DecodeTest.cpp - the f16 decode of FP8 operands, folded ---------===//
//
// The IR that decodes FP8 tiles to f16 on sm_80/86, built for constant
// words and folded (byte permutes by their stated byte function): every
// e4m3 and e5m2 code in every byte position must give its exact value as
// an f16, and a NaN code a NaN.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/BytePermute.h"
#include "comfyquant/Codegen/GPU/FP8Decode.h"

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

/// For each word of codes (4c, 4c + 1, 4c + 2, 4c + 3) rotated by r
/// bytes, its four decoded f16 values, folded.
std::vector<std::vector<APFloat>> decodeAll(MLIRContext &ctx, Type fp8,
                                            unsigned r) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto f16s = VectorType::get({4}, b.getF16Type());
  auto fn = func::FuncOp::create(
      b, loc, "decode", b.getFunctionType({}, SmallVector<Type>(64, f16s)));
  OpBuilder fb = OpBuilder::atBlockEnd(fn.addEntryBlock());
  SmallVector<Value> results;
  for (uint32_t word = 0; word < 64; ++word) {
    uint32_t bits = 0;
    for (uint32_t e = 0; e < 4; ++e)
      bits |= (4 * word + (e + r) % 4) << (8 * e);
    Value w = arith::ConstantIntOp::create(fb, loc, fb.getI32Type(),
                                           static_cast<int32_t>(bits));
    results.push_back(comfyquant::decodeFP8Word(fb, loc, w, fp8));
  }
  func::ReturnOp::create(fb, loc, results);
  RewritePatternSet patterns(&ctx);
  comfyquant::populateDecoderFoldPatterns(patterns);
  (void)applyPatternsGreedily(module->getOperation(), std::move(patterns));
  std::vector<std::vector<APFloat>> out;
  for (Value v : fn.getBody().front().getTerminator()->getOperands()) {
    Attribute a;
    auto dense = matchPattern(v, m_Constant(&a))
                     ? dyn_cast<DenseFPElementsAttr>(a)
                     : DenseFPElementsAttr();
    if (!dense)
      return {};
    out.emplace_back(dense.value_begin<APFloat>(), dense.value_end<APFloat>());
  }
  return out;
}

void checkEveryCode(Type fp8, const llvm::fltSemantics &sem) {
  MLIRContext &ctx = *fp8.getContext();
  unsigned checked = 0;
  for (unsigned r = 0; r < 4; ++r) {
    std::vector<std::vector<APFloat>> got = decodeAll(ctx, fp8, r);
    ASSERT_EQ(got.size(), 64u) << "the decode did not fold";
    for (unsigned word = 0; word < 64; ++word)
      for (unsigned e = 0; e < 4; ++e) {
        unsigned code = 4 * word + (e + r) % 4;
        APFloat expected(sem, APInt(8, code));
        if (expected.isNaN()) {
          EXPECT_TRUE(got[word][e].isNaN()) << "code " << code;
          continue;
        }
        bool lost = false;
        expected.convert(APFloat::IEEEhalf(), APFloat::rmNearestTiesToEven,
                         &lost);
        ASSERT_FALSE(lost) << "code " << code;
        EXPECT_EQ(got[word][e].bitcastToAPInt(), expected.bitcastToAPInt())
            << "code " << code << " in byte " << e << ": got "
            << got[word][e].convertToFloat() << ", expected "
            << expected.convertToFloat();
        ++checked;
      }
  }
  EXPECT_GT(checked, 4u * 240);
}

struct FP8Decode : ::testing::Test {
  void SetUp() override {
    ctx.loadDialect<arith::ArithDialect, func::FuncDialect, NVVM::NVVMDialect,
                    vector::VectorDialect>();
  }
  MLIRContext ctx;
};

TEST_F(FP8Decode, EveryE4M3CodeIsExactInF16) {
  checkEveryCode(Float8E4M3FNType::get(&ctx), APFloat::Float8E4M3FN());
}

TEST_F(FP8Decode, EveryE5M2CodeIsExactInF16) {
  checkEveryCode(Float8E5M2Type::get(&ctx), APFloat::Float8E5M2());
}

} // namespace
