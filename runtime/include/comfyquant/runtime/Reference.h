//===- Reference.h - reference dequantization (the oracle) ------*- C++ -*-===//
//
// Plain, obviously-right dequantization of every format and module kind,
// exactly formats.md §4 and §7: f32 products with one rounding (CUDA
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
/// basis (Wrot, exactly defined by the file; formats.md §10). Throws Error on
/// an out-of-range request.
void dequantizeRows(const ResolvedModule &m, int64_t expert, int64_t rowBegin,
                    int64_t rowEnd, float *out, bool unrotate = true);

/// The whole weight: [N, K], or [E, N, K] for MoE banks.
std::vector<float> dequantizeModule(const ResolvedModule &m,
                                    bool unrotate = true);
/// Its logical shape.
std::vector<int64_t> dequantizedShape(const ModuleDesc &m);

/// Rounds f32 values once (RNE) to bf16 / f16 bit patterns.
std::vector<uint16_t> toBFloat16(const std::vector<float> &v);
std::vector<uint16_t> toHalf(const std::vector<float> &v);

/// int8 grid value of W4A8 / W6A8 (formats.md §4.6 step 3):
/// clamp(RNE(f32(v) * sRel), -127, 127).
int8_t groupedInt8Grid(float level, float sRel);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_REFERENCE_H
