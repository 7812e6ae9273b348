//===- Encoders.h - the encoder of each format family ----------*- C++ -*-===//
//
// Private to the quantizer: WeightEncoder::create picks one of these.
//===----------------------------------------------------------------------===//

#ifndef COMFYQUANT_RUNTIME_QUANTIZE_ENCODERS_H
#define COMFYQUANT_RUNTIME_QUANTIZE_ENCODERS_H

#include "comfyquant/runtime/quantize/WeightEncoder.h"

#include <cstring>

namespace comfyquant::rt {

std::unique_ptr<WeightEncoder> createFP8Encoder(const EncodeOptions &opts,
                                                int64_t n, int64_t k,
                                                DType source);
std::unique_ptr<WeightEncoder> createNVFP4Encoder(const EncodeOptions &opts,
                                                  int64_t n, int64_t k,
                                                  DType source);
std::unique_ptr<WeightEncoder> createMXFP8Encoder(const EncodeOptions &opts,
                                                  int64_t n, int64_t k,
                                                  DType source);
std::unique_ptr<WeightEncoder> createInt8Encoder(const EncodeOptions &opts,
                                                 int64_t n, int64_t k,
                                                 DType source);
std::unique_ptr<WeightEncoder> createW4A4Encoder(const EncodeOptions &opts,
                                                 int64_t n, int64_t k,
                                                 DType source);
std::unique_ptr<WeightEncoder> createGroupedEncoder(const EncodeOptions &opts,
                                                    int64_t n, int64_t k,
                                                    DType source);

/// Kitchen rotates a weight as torch.matmul(W_group, Hᵀ) in W's dtype: each
/// output the f32 sum of K products (exact: H's entries are powers of two),
/// rounded to W's dtype. Here the sum is formed once in double and rounded
/// (docs/Quantize.md §3: the f32 sum order of torch's GEMM is not
/// reproducible, so ConvRot codes may differ from kitchen's in rare ties).
void rotateRowInDType(float *row, int64_t k, int64_t group, DType dtype);

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Little-endian stores into an output buffer.
inline void storeF32(std::vector<uint8_t> &buf, uint64_t index, float v) {
  std::memcpy(buf.data() + index * 4, &v, 4);
}

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_QUANTIZE_ENCODERS_H
