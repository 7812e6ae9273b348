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
/// e5m2 is the high byte of the f16 of the same value: two byte permutes
/// with a zero word. e4m3 (bias 7) with its magnitude at f16 bits 13..7 is
/// an f16 (bias 15) of 2^-8 times its value, subnormals included, and one
/// f16x2 multiply by 2^8 per pair rebiases exactly. The word is cut into
/// the high and low bytes of those f16s for all four codes at once (the
/// high byte: sign, NaN flag, magnitude >> 1; the low byte: the
/// magnitude's last bit), and one permute per pair interleaves them. The
/// NaN flag (magnitude 0x7F alone carries into bit 7 when 1 is added, byte
/// by byte) lands on exponent bit 14, so a NaN code's exponent is all ones
/// with a nonzero mantissa.
Value decodeFP8Word(OpBuilder &b, Location loc, Value word, Type fp8);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_FP8DECODE_H
