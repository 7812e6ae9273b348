//===- FP4Decode.h - exact f16 values of FP4 codes and scales --*- C++ -*-===//
//
// Where no FP4 MMA exists, NVFP4 operands are multiplied as f16: an E2M1
// value (at most 2 significant bits, |x| <= 6) times an E4M3 block scale
// (4 significant bits, 2^-9 <= |s| <= 448) has at most 6 significant bits,
// magnitude at most 2688 and no bit below 2^-10, so it is exact in f16.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_FP4DECODE_H
#define COMFYQUANT_CODEGEN_GPU_FP4DECODE_H

#include "mlir/IR/Builders.h"

namespace mlir::comfyquant {

/// The vector<8xf16> of the E2M1 codes in `word` (i32; code e in nibble e,
/// the low nibble first) times `scale` (f16). The code placed at the top of
/// an f16's fields is x * 2^-14 (0.5 is the subnormal 2^-15); times the
/// scale it is x * s * 2^-14, which has no bit below 2^-24, so it and the
/// rescale by 2^14 are exact.
Value decodeFP4Word(OpBuilder &b, Location loc, Value word, Value scale);

/// The f16 value of a UE4M3 byte (i8; bit 7 ignored): its 7 bits placed
/// under an f16's (bias 15) are 2^-8 of it, subnormals included; 0x7F is
/// NaN.
Value ue4m3ToF16(OpBuilder &b, Location loc, Value byte);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_FP4DECODE_H
