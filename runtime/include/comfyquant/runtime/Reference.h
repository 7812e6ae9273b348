//===- Reference.h - reference dequantization (the oracle) ------*- C++ -*-===//
//
// Plain, obviously-right dequantization of every format and module kind,
// exactly docs/Formats.md §4 and §7: f32 products with one rounding (CUDA
// semantics), the int8 grid of W4A8/W6A8, and ConvRot un-rotation in f32 as a
// dense per-group sum. Compiled kernels are tested against this code.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_REFERENCE_H
#define COMFYQUANT_RUNTIME_REFERENCE_H

#include "comfyquant/runtime/ModuleResolver.h"

#include <cstdint>
#include <vector>

namespace comfyquant::rt {

/// Dequantizes logical rows [rowBegin, rowEnd) of expert `expert` (0 unless
/// MoE) into `out` (row-major, K columns). For embeddings this is the lookup
/// of those rows. With `unrotate` false, ConvRot weights stay in the rotated
/// basis (Wrot, exactly defined by the file; docs/Formats.md §10). Throws
/// Error on an out-of-range request.
void dequantizeRows(const ResolvedModule &m, int64_t expert, int64_t rowBegin,
                    int64_t rowEnd, float *out, bool unrotate = true);

/// The GEMM operand of the quantized forward (docs/CpuCodegen.md §1) for
/// logical rows [rowBegin, rowEnd) of `expert`, K columns, every value exact
/// in f32: fp8 codes decoded; nvfp4 e2m1·block scale; mxfp8 code·2^(e−127);
/// int8 codes; convrot_w4a4 signed nibbles; W4A8/W6A8 the int8 grid g8.
/// Still in the rotated basis for ConvRot formats.
void weightOperandRows(const ResolvedModule &m, int64_t expert,
                       int64_t rowBegin, int64_t rowEnd, float *out);
/// The per-output-row factor the epilogue applies with the operand above:
/// fp8 weight_scale, nvfp4 weight_scale_2, mxfp8 1, int8 weight_scale
/// (scalar or row), convrot_w4a4 weight_scale[n], W4A8/W6A8 s_channel[n].
float weightRowScale(const ResolvedModule &m, int64_t expert, int64_t row);

/// The whole weight: [N, K], or [E, N, K] for MoE banks.
std::vector<float> dequantizeModule(const ResolvedModule &m,
                                    bool unrotate = true);
/// Its logical shape.
std::vector<int64_t> dequantizedShape(const ModuleDesc &m);

/// Rounds f32 values once (RNE) to bf16 / f16 bit patterns.
std::vector<uint16_t> toBFloat16(const std::vector<float> &v);
std::vector<uint16_t> toHalf(const std::vector<float> &v);

/// int8 grid value of W4A8 / W6A8 (docs/Formats.md §4.6 step 3):
/// clamp(RNE(f32(v) * sRel), -127, 127).
int8_t groupedInt8Grid(float level, float sRel);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_REFERENCE_H
