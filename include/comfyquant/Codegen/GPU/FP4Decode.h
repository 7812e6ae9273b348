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
/// the low nibble first) times `scale` (f16), the codes looked up with
/// byte permutes (nvvm.prmt). Both factors are built as normal f16s (or
/// zero) and their product is at least 2^-10, so no step depends on
/// subnormal f16 arithmetic (a flush-to-zero mode could not change the
/// result).
Value decodeFP4Word(OpBuilder &b, Location loc, Value word, Value scale);

/// The word of 8 E2M1 codes `codes` (i8 each, the code in its low
/// nibble): code e in nibble e, the low nibble first, the order of the FP4
/// MMA registers and of decodeFP4Word.
Value packE2M1Word(OpBuilder &b, Location loc, ArrayRef<Value> codes);
/// The f16 value of a UE4M3 byte (i8; bit 7 ignored), exact and normal:
/// the normal codes' bits rebiased in place, the subnormal ones m * 2^-9;
/// 0x7F is NaN.
Value ue4m3ToF16(OpBuilder &b, Location loc, Value byte);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_FP4DECODE_H
