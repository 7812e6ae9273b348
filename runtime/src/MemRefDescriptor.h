//===- MemRefDescriptor.h - ranked memref descriptors -----------*- C++ -*-===//
//
// The argument form of the compiled entries (CPU kernels and CUDA host
// entries alike): {allocated, aligned, int64 offset, int64 sizes[R], int64
// strides[R]} as 8-byte words.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_MEMREFDESCRIPTOR_H
#define COMFYQUANT_RUNTIME_MEMREFDESCRIPTOR_H

#include <cstdint>
#include <vector>

namespace comfyquant::rt {

/// The descriptor of a contiguous row-major array at `address` (a host
/// pointer's value or a device address).
inline std::vector<int64_t>
memrefDescriptor(uint64_t address, const std::vector<int64_t> &shape) {
  std::vector<int64_t> d(3 + 2 * shape.size());
  d[0] = d[1] = static_cast<int64_t>(address);
  d[2] = 0;
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    d[3 + i] = shape[i];
    d[3 + shape.size() + i] = stride;
    stride *= shape[i];
  }
  return d;
}

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_MEMREFDESCRIPTOR_H
