//===- CudaApi.h - the few CUDA driver API declarations we use --*- C++ -*-===//
//
// The runtime loads libcuda.so.1 at run time and never includes cuda.h, so
// it builds and starts on machines without the CUDA toolkit or a driver.
// These are the types, enumerators and signatures it calls, with the values
// of cuda.h (CUDA 12/13); CudaApiTest checks them against cuda.h wherever
// that header is installed. Names are cuda.h's, inside comfyquant::rt::cuda;
// the few cuda.h #defines get other names so that this header and cuda.h
// can share a translation unit.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_CUDA_CUDAAPI_H
#define COMFYQUANT_RUNTIME_CUDA_CUDAAPI_H

#include <cstddef>
#include <cstdint>

namespace comfyquant::rt::cuda {

enum CUresult_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_LAUNCH_FAILED = 719,
};
// cuda.h's CUresult is an enum of the same width; an int-sized alias keeps
// codes this header does not name representable.
using CUresult = int;

using CUdevice = int;
using CUdeviceptr = unsigned long long;
using cuuint64_t = uint64_t;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st *;
using CUmodule = CUmod_st *;
using CUfunction = CUfunc_st *;
using CUstream = CUstream_st *;
using CUevent = CUevent_st *;

enum CUdevice_attribute {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum CUfunction_attribute {
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum CUjit_option {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

enum CUstream_flags { CU_STREAM_NON_BLOCKING = 0x1 };
enum CUevent_flags { CU_EVENT_DISABLE_TIMING = 0x2 };
enum CUdriverProcAddressQueryResult {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};
enum CUdriverProcAddress_flags { CU_GET_PROC_ADDRESS_DEFAULT = 0 };

/// Dynamic shared memory a kernel may use without opting in
/// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
constexpr int64_t kDefaultDynamicSmemLimit = 48 * 1024;

/// The CUDA version whose function signatures we request through
/// cuGetProcAddress: every signature below is that of CUDA 12.0.
constexpr int kRequestedApiVersion = 12000;

/// cuGetProcAddress_v2 (exported by drivers of CUDA 12.0 and later).
using PFN_cuGetProcAddress = CUresult (*)(const char *symbol, void **pfn,
                                          int cudaVersion, cuuint64_t flags,
                                          CUdriverProcAddressQueryResult *status);

// X(name, exported symbol, return type, parameters): every driver function
// the runtime calls. `name` is what cuGetProcAddress resolves (at
// kRequestedApiVersion); the exported symbol is the dlsym fallback, the
// versioned one where cuda.h #defines the name to it.
#define COMFYQUANT_CUDA_FUNCTIONS(X)                                           \
  X(cuInit, cuInit, CUresult, (unsigned int flags))                            \
  X(cuDriverGetVersion, cuDriverGetVersion, CUresult, (int *version))          \
  X(cuGetErrorName, cuGetErrorName, CUresult, (CUresult error,                 \
                                               const char **text))             \
  X(cuGetErrorString, cuGetErrorString, CUresult, (CUresult error,             \
                                                   const char **text))         \
  X(cuDeviceGetCount, cuDeviceGetCount, CUresult, (int *count))                \
  X(cuDeviceGet, cuDeviceGet, CUresult, (CUdevice * device, int ordinal))      \
  X(cuDeviceGetName, cuDeviceGetName, CUresult,                                \
    (char *name, int length, CUdevice device))                                 \
  X(cuDeviceGetAttribute, cuDeviceGetAttribute, CUresult,                      \
    (int *value, CUdevice_attribute attribute, CUdevice device))               \
  X(cuDeviceTotalMem, cuDeviceTotalMem_v2, CUresult,                           \
    (size_t * bytes, CUdevice device))                                         \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, CUresult,              \
    (CUcontext * context, CUdevice device))                                    \
  X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, CUresult,         \
    (CUdevice device))                                                         \
  X(cuCtxPushCurrent, cuCtxPushCurrent_v2, CUresult, (CUcontext context))      \
  X(cuCtxPopCurrent, cuCtxPopCurrent_v2, CUresult, (CUcontext * context))      \
  X(cuStreamCreate, cuStreamCreate, CUresult,                                  \
    (CUstream * stream, unsigned int flags))                                   \
  X(cuStreamDestroy, cuStreamDestroy_v2, CUresult, (CUstream stream))          \
  X(cuStreamSynchronize, cuStreamSynchronize, CUresult, (CUstream stream))     \
  X(cuEventCreate, cuEventCreate, CUresult,                                    \
    (CUevent * event, unsigned int flags))                                     \
  X(cuEventRecord, cuEventRecord, CUresult, (CUevent event, CUstream stream))  \
  X(cuEventSynchronize, cuEventSynchronize, CUresult, (CUevent event))         \
  X(cuEventDestroy, cuEventDestroy_v2, CUresult, (CUevent event))              \
  X(cuModuleLoadDataEx, cuModuleLoadDataEx, CUresult,                          \
    (CUmodule * module, const void *image, unsigned int numOptions,            \
     CUjit_option *options, void **optionValues))                              \
  X(cuModuleUnload, cuModuleUnload, CUresult, (CUmodule module))               \
  X(cuModuleGetFunction, cuModuleGetFunction, CUresult,                        \
    (CUfunction * function, CUmodule module, const char *name))                \
  X(cuFuncSetAttribute, cuFuncSetAttribute, CUresult,                          \
    (CUfunction function, CUfunction_attribute attribute, int value))          \
  X(cuMemAlloc, cuMemAlloc_v2, CUresult, (CUdeviceptr * ptr, size_t bytes))    \
  X(cuMemFree, cuMemFree_v2, CUresult, (CUdeviceptr ptr))                      \
  X(cuMemHostAlloc, cuMemHostAlloc, CUresult,                                  \
    (void **ptr, size_t bytes, unsigned int flags))                            \
  X(cuMemFreeHost, cuMemFreeHost, CUresult, (void *ptr))                       \
  X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, CUresult,                         \
    (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))         \
  X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, CUresult,                         \
    (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))               \
  X(cuLaunchKernel, cuLaunchKernel, CUresult,                                  \
    (CUfunction function, unsigned int gridX, unsigned int gridY,              \
     unsigned int gridZ, unsigned int blockX, unsigned int blockY,             \
     unsigned int blockZ, unsigned int sharedMemBytes, CUstream stream,        \
     void **kernelParams, void **extra))

/// cuFuncGetParamInfo (CUDA 12.4): optional, resolved at its own version;
/// the executor checks each launch's parameter count with it.
using PFN_cuFuncGetParamInfo = CUresult (*)(CUfunction function,
                                            size_t paramIndex,
                                            size_t *paramOffset,
                                            size_t *paramSize);
constexpr int kParamInfoApiVersion = 12040;

#define COMFYQUANT_CUDA_PFN(name, symbol, ret, params)                         \
  using PFN_##name = ret(*) params;
COMFYQUANT_CUDA_FUNCTIONS(COMFYQUANT_CUDA_PFN)
#undef COMFYQUANT_CUDA_PFN

} // namespace comfyquant::rt::cuda

#endif // COMFYQUANT_RUNTIME_CUDA_CUDAAPI_H
