//===- Emitter.h - scalar and tensor building blocks ------------*- C++ -*-===//
//
// Internal to the comfyquant -> linalg lowering: a thin ImplicitLocOpBuilder
// wrapper with the scalar arithmetic the bodies need (constants, roundings,
// the FP8/FP4/E8M0 bit-level decoders and encoders) and helpers that build
// linalg.generic ops on tensors. Every encoder/decoder mirrors the reference
// (runtime/src/Numerics.cpp) bit for bit on finite inputs.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_LIB_CONVERSION_EMITTER_H
#define COMFYQUANT_LIB_CONVERSION_EMITTER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::comfyquant::detail {

class Emitter {
public:
  Emitter(OpBuilder &b, Location loc) : b(loc, b) {}
  ImplicitLocOpBuilder b;

  // Constants.
  Value f32(double v);
  Value i32(int64_t v);
  Value i8(int64_t v);
  Value idx(int64_t v);
  Value intOf(Type t, int64_t v);

  // Conversions.
  /// `v` (any float or signless integer) as f32; integers are signed.
  Value toF32(Value v);
  /// f32 `v` rounded once (RNE) to float type `t` (identity for f32).
  Value fromF32(Value v, Type t);
  /// An f32 that is a bf16 exactly (or a NaN) as that bf16: its high 16
  /// bits, no rounding.
  Value exactBF16(Value v);
  /// f32 `v` rounded to `t` and widened back to f32.
  Value roundThrough(Value v, Type t);

  // Bit-level formats (storage bytes are i8).
  Value decodeE4M3(Value byte);
  Value decodeE5M2(Value byte);
  Value decodeE2M1(Value code);
  Value decodeE8M0(Value byte);
  /// f32 -> FP8 code (RNE, subnormals, saturating to the max finite value,
  /// NaN -> 0x7F), as i8.
  Value encodeE4M3(Value v);
  Value encodeE5M2(Value v);
  /// f32 -> E2M1 code 0..15 in an i8 (nearest, ties to the even code, sign
  /// of -0 kept, NaN saturates).
  Value encodeE2M1(Value v);
  /// mxfp8 block exponent of an amax: clamp(ceil(log2(max(amax/448,
  /// 2^-127))) + 127, 0, 254), 0 for a zero block; i8 (E8M0 byte).
  Value mxfp8Exponent(Value amax);

  /// Swizzled (cuBLAS 128x4 blocked) scale offset of (r, c) with `cols`
  /// logical columns; index arithmetic.
  Value swizzledOffset(Value r, Value c, int64_t cols);

  // Shorthands.
  Value add(Value a, Value c);
  Value sub(Value a, Value c);
  Value mul(Value a, Value c);
  Value select(Value cond, Value a, Value c);
  /// min(hi, max(lo, v)) for f32 `v` (NaN-ignoring min/max).
  Value clampF32(Value v, double lo, double hi);
  Value index(unsigned dim);

  /// RNE of a positive finite f32 (bits `absBits`) to `mantBits` mantissa
  /// bits as a normal code: (exponent - biasDelta) << mantBits | mantissa.
  Value normalFloatCode(Value absBits, int mantBits, int biasDelta);
};

/// The sizes of `v` (static or tensor.dim).
SmallVector<OpFoldResult> mixedSizes(OpBuilder &b, Location loc, Value v);

/// tensor.empty of `sizes` x `elt`.
Value emptyTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                  Type elt);

/// linalg.fill of a scalar into a fresh tensor.
Value filledTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                   Value scalar);

using BodyFn = function_ref<Value(Emitter &, ValueRange)>;

/// An all-parallel linalg.generic over `init`'s shape: `body` receives the
/// input elements then the output element and returns the result element.
Value buildParallel(OpBuilder &b, Location loc, ValueRange inputs,
                    ArrayRef<AffineMap> inputMaps, Value init, BodyFn body);

/// A linalg.generic that reduces the innermost dimension of `input` (rank
/// r) into `init` (rank r-1, identity maps otherwise); `body` receives the
/// input element and the accumulator.
Value buildInnerReduction(OpBuilder &b, Location loc, Value input, Value init,
                          BodyFn body);

/// The element at all-zero indices of a one-element tensor.
Value extractScalar(OpBuilder &b, Location loc, Value t);

/// A 1-D view of a static tensor (collapse; rank 0 expands to [1]).
Value flatten(OpBuilder &b, Location loc, Value t);

/// The ConvRot butterfly of docs/CpuCodegen.md §1 along the last dimension
/// of `x` (float elements, any rank >= 1, static last dimension divisible by
/// `group`): log4(group) stages in f32, stride 1 first; the result has
/// element type `outElt` (one rounding at the end).
Value buildButterfly(OpBuilder &b, Location loc, Value x, int64_t group,
                     Type outElt);

} // namespace mlir::comfyquant::detail

#endif // COMFYQUANT_LIB_CONVERSION_EMITTER_H
