//===- TensorAccess.h - element reads from tensor views ---------*- C++ -*-===//
#ifndef COMFYQUANT_RUNTIME_TENSORACCESS_H
#define COMFYQUANT_RUNTIME_TENSORACCESS_H

#include "comfyquant/runtime/Safetensors.h"

namespace comfyquant::rt {

/// Element `i` (flat, row-major) of a tensor, converted exactly to f32
/// where the dtype allows it (F32, F16, BF16, the FP8 kinds, E8M0, integers
/// up to 2^24 magnitude); F64 is rounded once. Bounds are checked by the
/// caller (the registry validated the shape).
float loadF32(const TensorInfo &t, int64_t i);
/// Element `i` as a raw byte (1-byte dtypes only).
inline uint8_t loadByte(const TensorInfo &t, int64_t i) { return t.data[i]; }

} // namespace comfyquant::rt

#endif
