//===- CudaApiTest.cpp - cuda/CudaApi.h against cuda.h --------------------===//
//
// The runtime declares the driver API it calls itself (no CUDA headers at
// build time); where the toolkit is installed, every value, size and symbol
// name is compared with cuda.h's.
//===----------------------------------------------------------------------===//
#ifdef COMFYQUANT_HAVE_CUDA_H
#include <cuda.h>
#endif

// Not CudaDriver.h: cuda.h #defines some of the member names it declares.
#include "cuda/CudaApi.h"

#include <gtest/gtest.h>

#include <type_traits>

namespace cq = comfyquant::rt::cuda;

#ifdef COMFYQUANT_HAVE_CUDA_H
// Enumerators: ours are in comfyquant::rt::cuda, cuda.h's global.
#define SAME_VALUE(name)                                                       \
  static_assert(static_cast<long long>(cq::name) ==                            \
                    static_cast<long long>(::name),                            \
                #name " differs from cuda.h");
SAME_VALUE(CUDA_SUCCESS)
SAME_VALUE(CUDA_ERROR_INVALID_VALUE)
SAME_VALUE(CUDA_ERROR_OUT_OF_MEMORY)
SAME_VALUE(CUDA_ERROR_NOT_INITIALIZED)
SAME_VALUE(CUDA_ERROR_NO_DEVICE)
SAME_VALUE(CUDA_ERROR_INVALID_DEVICE)
SAME_VALUE(CUDA_ERROR_INVALID_IMAGE)
SAME_VALUE(CUDA_ERROR_NO_BINARY_FOR_GPU)
SAME_VALUE(CUDA_ERROR_INVALID_PTX)
SAME_VALUE(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
SAME_VALUE(CUDA_ERROR_INVALID_HANDLE)
SAME_VALUE(CUDA_ERROR_NOT_FOUND)
SAME_VALUE(CUDA_ERROR_LAUNCH_FAILED)
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
SAME_VALUE(CU_JIT_INFO_LOG_BUFFER)
SAME_VALUE(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER)
SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
SAME_VALUE(CU_STREAM_NON_BLOCKING)
SAME_VALUE(CU_EVENT_DISABLE_TIMING)
SAME_VALUE(CU_GET_PROC_ADDRESS_SUCCESS)
SAME_VALUE(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
SAME_VALUE(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)
SAME_VALUE(CU_GET_PROC_ADDRESS_DEFAULT)
#undef SAME_VALUE

// Types passed by value or through pointers.
static_assert(sizeof(cq::CUresult) == sizeof(::CUresult));
static_assert(sizeof(cq::CUdevice) == sizeof(::CUdevice) &&
              std::is_signed_v<cq::CUdevice> == std::is_signed_v<::CUdevice>);
static_assert(std::is_same_v<cq::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<cq::cuuint64_t, ::cuuint64_t>);
static_assert(sizeof(cq::CUdevice_attribute) == sizeof(::CUdevice_attribute));
static_assert(sizeof(cq::CUfunction_attribute) ==
              sizeof(::CUfunction_attribute));
static_assert(sizeof(cq::CUjit_option) == sizeof(::CUjit_option));
static_assert(sizeof(cq::CUdriverProcAddressQueryResult) ==
              sizeof(::CUdriverProcAddressQueryResult));
static_assert(sizeof(cq::CUcontext) == sizeof(::CUcontext));

// Every dlsym fallback names a function cuda.h declares, and its parameter
// count is cuda.h's (types differ only by namespace).
template <typename R, typename... A> constexpr size_t arity(R (*)(A...)) {
  return sizeof...(A);
}
#define SAME_SYMBOL(name, symbol, ret, params)                                 \
  static_assert(arity(&::symbol) == arity(cq::PFN_##name{}),                   \
                #symbol " has another parameter count in cuda.h");
COMFYQUANT_CUDA_FUNCTIONS(SAME_SYMBOL)
#undef SAME_SYMBOL
static_assert(arity(&::cuGetProcAddress_v2) ==
              arity(cq::PFN_cuGetProcAddress{}));
static_assert(arity(&::cuFuncGetParamInfo) ==
              arity(cq::PFN_cuFuncGetParamInfo{}));

TEST(CudaApi, MatchesCudaH) {
  // The checks are static_asserts above; reaching here means they held.
  EXPECT_GE(CUDA_VERSION, cq::kRequestedApiVersion);
}
#else
TEST(CudaApi, MatchesCudaH) {
  GTEST_SKIP() << "cuda.h not found at configure time: the declarations in "
                  "cuda/CudaApi.h were not compared";
}
#endif
