//===- FP8Decode.h - exact f16 values of FP8 codes --------------*- C++ -*-===//
//
// Where no FP8 MMA exists (sm_80, sm_86), FP8 operands are multiplied as
// f16, which holds every e4m3 and e5m2 value exactly.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_FP8DECODE_H
#define COMFYQUANT_CODEGEN_GPU_FP8DECODE_H

#include "mlir/IR/Builders.h"

namespace mlir::comfyquant {

/// The vector<4xf16> of the FP8 codes of type `fp8` (e4m3 or e5m2) in
/// `word` (i32, code e in byte e), each exact; a NaN code gives a NaN.
/// Two byte permutes put codes 2i, 2i + 1 in the high bytes of f16 pair
/// i: e5m2 is then the f16 of the same value; e4m3 (bias 7) with its
/// magnitude shifted right by one is an f16 (bias 15) of 2^-8 times its
/// value, subnormals included, and one f16x2 multiply by 2^8 rebiases a
/// pair exactly. A NaN e4m3 code (magnitude 0x7F) gets 0x7E in its high
/// byte first: magnitude + 1 reaches bit 7 for 0x7F alone, and
/// 0x80 - 0x80 / 64 = 0x7E, byte by byte without a carry.
Value decodeFP8Word(OpBuilder &b, Location loc, Value word, Type fp8);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_FP8DECODE_H
