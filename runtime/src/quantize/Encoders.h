//===- Encoders.h - the encoder of each format family ----------*- C++ -*-===//
//
// Private to the quantizer: WeightEncoder::create picks one of these.
//===----------------------------------------------------------------------===//

#ifndef COMFYQUANT_RUNTIME_QUANTIZE_ENCODERS_H
#define COMFYQUANT_RUNTIME_QUANTIZE_ENCODERS_H

#include "VectorClones.h"

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
/// output the sum of G products (exact: H's entries are powers of two),
/// rounded to W's dtype. Here a radix-4 butterfly in double forms the sums
/// (exactly, unless a group spans more than about 2^29 in magnitude) and
/// rounds once: the correctly rounded rotation, which kitchen's bf16/f16
/// GEMM also gives; its f32 sgemm does not always (docs/Quantize.md §3).
void rotateRowInDType(float *row, int64_t k, int64_t group, DType dtype);

/// Largest |x| of n values (torch's amax: exact); NaN when one is NaN.
float amaxOf(const float *x, int64_t n);

/// Little-endian stores into an output buffer.
inline void storeF32(std::vector<uint8_t> &buf, uint64_t index, float v) {
  std::memcpy(buf.data() + index * 4, &v, 4);
}

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_QUANTIZE_ENCODERS_H
