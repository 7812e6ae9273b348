//===- Numerics.h - Scalar decoders and rounding (reference path) -*- C++ -*-===//
//
// Plain, obviously-right scalar primitives of docs/Formats.md §4.0. They are
// the oracle that compiled kernels are tested against, so they favour clarity:
// table-free bit decoding, explicit RNE.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_NUMERICS_H
#define COMFYQUANT_RUNTIME_NUMERICS_H

#include <cstdint>
#include <vector>

namespace comfyquant::rt {

/// FP8 E4M3FN (bias 7, no inf, S.1111.111 = NaN, max 448). Exact.
float decodeE4M3(uint8_t bits);
/// FP8 E5M2 (bias 15, IEEE-like inf/NaN, max 57344). Exact.
float decodeE5M2(uint8_t bits);
/// E8M0: 2^(e-127), also for e == 0; e == 255 -> NaN (docs/Formats.md §4.0).
float decodeE8M0(uint8_t bits);
/// E2M1 nibble (low 4 bits of `code`): 0,.5,1,1.5,2,3,4,6 and negatives.
float decodeE2M1(uint8_t code);

/// IEEE half / bfloat16 bit patterns to f32 (exact).
float halfToFloat(uint16_t bits);
float bfloat16ToFloat(uint16_t bits);
/// f32 to half / bfloat16 with one round-to-nearest-even (NaN stays NaN,
/// overflow to inf as IEEE RNE does).
uint16_t floatToHalf(float f);
uint16_t floatToBFloat16(float f);

/// Encoders used by tests and activation quantization (RNE, saturating to
/// the finite range; NaN -> NaN code).
uint8_t encodeE4M3(float f);
uint8_t encodeE5M2(float f);

/// Swizzled ("cuBLAS blocked", SWIZZLE_32_4_4) block-scale offset of logical
/// entry (r, c) for a scale matrix with `cols` logical columns (docs/Formats.md
/// §4.0). Storage holds roundup(rows,128) * roundup(cols,4) entries.
uint64_t swizzledScaleOffset(uint64_t r, uint64_t c, uint64_t cols);
/// Largest finite magnitudes of the code formats, and the E8M0 exponent
/// bias and largest non-NaN code. Shared by the reference path and the
/// compiled lowering.
constexpr double kE4M3Max = 448.0;
constexpr double kE5M2Max = 57344.0;
constexpr double kE2M1Max = 6.0;
constexpr int kE8M0Bias = 127, kE8M0MaxCode = 254;

/// Number of stored entries of a swizzled scale matrix.
uint64_t swizzledScaleCount(uint64_t rows, uint64_t cols);

/// True if g is a power of 4 and >= 4.
bool isPowerOf4(int64_t g);
/// Entry (i, j) of the regular Hadamard matrix of size `g` (power of 4),
/// normalised: (-1)^t / 2^(log4 g), t = #base-4 digit positions with
/// i_d + j_d == 3. Exact in f32.
float hadamardEntry(int64_t g, int64_t i, int64_t j);
/// In-place rotation of one row of length k (k % g == 0): each group of g
/// consecutive f32 values x becomes x·H, the dense sum formed in double and
/// rounded once to f32: the correctly rounded sum (double's own error is far
/// below an f32 ulp). docs/Formats.md leaves the f32 sum order unspecified;
/// kitchen's f32 matmul lands within a few u·Σ|terms| (u = 2^-24) of this.
/// The same operation rotates and un-rotates (H·H = I).
void rotateRowF32(float *row, int64_t k, int64_t g);

/// E2M1 encoder (RNE, ties to the even code, saturating to ±6, keeps the
/// sign of -0), as kitchen's float_utils: 0.25->0, 0.75->1.0, 2.5->2, 5->4.
uint8_t encodeE2M1(float f);

/// The activation rotation of compiled kernels and the reference forward:
/// radix-4 fast Walsh–Hadamard butterfly per group of g (power of 4), in f32,
/// stages of stride 1, 4, 16, ..., each output
/// 0.5f * (((h0*a + h1*b) + h2*c) + h3*d) with H4 signs (docs/CpuCodegen.md).
/// O(k log g). Differs from rotateRowF32 only in f32 rounding.
void fwhtRowF32(float *row, int64_t k, int64_t g);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_NUMERICS_H
