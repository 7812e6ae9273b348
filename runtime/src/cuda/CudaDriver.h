//===- CudaDriver.h - the CUDA driver, loaded at run time -------*- C++ -*-===//
//
// libcuda.so.1 is dlopen'ed on first use ($COMFYQUANT_LIBCUDA overrides the
// path, for tests) and every function is resolved through cuGetProcAddress,
// falling back to dlsym of the exported symbol; nothing links against CUDA,
// so every tool starts on a machine without a driver and says why the cuda
// backend cannot run there. Every failure is an Error with one line.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_CUDA_CUDADRIVER_H
#define COMFYQUANT_RUNTIME_CUDA_CUDADRIVER_H

#include "comfyquant/runtime/Cuda.h"
#include "cuda/CudaApi.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace comfyquant::rt {

class CudaDriver {
public:
  /// Loads and initializes the driver once per process and library path.
  /// Throws Error (no driver, a driver lacking a function, cuInit failed).
  static std::shared_ptr<const CudaDriver> load();

  CudaDriver(const CudaDriver &) = delete;
  CudaDriver &operator=(const CudaDriver &) = delete;

  /// The library that was loaded ("libcuda.so.1" or $COMFYQUANT_LIBCUDA).
  const std::string &library() const { return library_; }
  /// cuDriverGetVersion: 13000 for CUDA 13.0.
  int version() const { return version_; }

  int deviceCount() const;
  /// Throws Error when `index` is not a device of this machine.
  CudaDeviceInfo device(int index) const;
  /// Every device; throws Error when there is none.
  std::vector<CudaDeviceInfo> devices() const;

  /// "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected".
  std::string errorText(cuda::CUresult result) const;
  /// Throws Error "<subject>: <call> failed: <errorText>" unless `result` is
  /// CUDA_SUCCESS.
  void check(cuda::CUresult result, const char *call,
             const std::string &subject = "") const;

#define COMFYQUANT_CUDA_MEMBER(name, symbol, ret, params)                      \
  cuda::PFN_##name name = nullptr;
  COMFYQUANT_CUDA_FUNCTIONS(COMFYQUANT_CUDA_MEMBER)
#undef COMFYQUANT_CUDA_MEMBER
  /// Null on drivers older than CUDA 12.4.
  cuda::PFN_cuFuncGetParamInfo cuFuncGetParamInfo = nullptr;

private:
  CudaDriver() = default;
  std::string library_;
  int version_ = 0;
};

/// The compute capability of an arch name ("sm_90a" -> 9.0, "sm_120a" ->
/// 12.0) and its suffix ("a": arch-specific, "f": family); false when
/// `arch` is not of the form sm_<digits>[a|f].
bool parseCudaArch(const std::string &arch, int &major, int &minor,
                   bool &archSpecific, bool &family);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_CUDA_CUDADRIVER_H
