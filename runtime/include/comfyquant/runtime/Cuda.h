//===- Cuda.h - the CUDA devices of this machine ----------------*- C++ -*-===//
//
// The runtime's CUDA backend loads libcuda.so.1 at run time (never linked;
// $COMFYQUANT_LIBCUDA overrides the path). This is what the tools need to
// know about it without the backend's private headers.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_CUDA_H
#define COMFYQUANT_RUNTIME_CUDA_H

#include <cstdint>
#include <string>
#include <vector>

namespace comfyquant::rt {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int ccMajor = 0, ccMinor = 0; ///< compute capability
  int smCount = 0;
  uint64_t totalMemory = 0;   ///< bytes
  int64_t maxDynamicSmem = 0; ///< opt-in shared memory per block, bytes

  /// "sm_90": the portable arch name of the compute capability.
  std::string arch() const;
  /// "0: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)".
  std::string describe() const;
};

/// Every CUDA device of this machine (loading the driver on first use).
/// Throws Error with a one-line reason when there is none: no driver, a
/// driver that cannot initialize, no device.
std::vector<CudaDeviceInfo> cudaDevices();

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_CUDA_H
