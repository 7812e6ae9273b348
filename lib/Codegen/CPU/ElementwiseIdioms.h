//===- ElementwiseIdioms.h - x86 idioms of vectorized element-wise ops -*- C++ -*-===//
//
// What comfyquant-cpu-vectorize-elementwise rewrites its vector tiles into
// where x86 has a better instruction than the generic lowering: small
// tables as register permutes, byte-row tables as byte shuffles
// (TableLookups.cpp), bitfield and nibble-pair extraction as vpmultishiftqb
// and rounding as vrndscaleps / vroundps (X86Idioms.cpp).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_LIB_CODEGEN_CPU_ELEMENTWISEIDIOMS_H
#define COMFYQUANT_LIB_CODEGEN_CPU_ELEMENTWISEIDIOMS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::comfyquant::detail {

/// The 16 f32 entries `lo` (AVX-512: all 16; AVX2: entries 0-7) and `hi`
/// (AVX2: entries 8-15) permuted by `idx` (i32 lanes < 16): one vpermps on
/// AVX-512, two and a blend on bit 3 of the index on AVX2.
Value permute16(RewriterBase &rw, Location loc, Value lo, Value hi, Value idx,
                int64_t lanes);

/// `v` mapped register by register into a vector of type `result`: `f(at,
/// reg)` gets the register of lanes [at, at + width) and returns `width`
/// lanes.
Value mapRegisters(RewriterBase &rw, Location loc, Value v, VectorType result,
                   int64_t width,
                   function_ref<Value(int64_t at, Value reg)> f);

/// Gathers from small and row-indexed tables in `func` as register
/// permutes and byte shuffles (`lanes` f32 lanes per register: 8 or 16).
void lowerTableLookups(func::FuncOp func, int64_t lanes, bool bytePermute,
                       bool affineWords);

/// math.roundeven of `width`-lane registers as vrndscaleps / vroundps.
void populateX86RoundPatterns(RewritePatternSet &patterns, int64_t width);
/// Bitfield and nibble-pair extraction as vpmultishiftqb (AVX512-VBMI).
void populateMultishiftPatterns(RewritePatternSet &patterns);

} // namespace mlir::comfyquant::detail

#endif // COMFYQUANT_LIB_CODEGEN_CPU_ELEMENTWISEIDIOMS_H
