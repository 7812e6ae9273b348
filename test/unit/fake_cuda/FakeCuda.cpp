//===- FakeCuda.cpp - a CUDA driver over host memory, for tests -----------===//
//
// Built only for the tests and loaded through $COMFYQUANT_LIBCUDA: the
// driver functions the runtime uses, over host memory. Device memory is
// malloc'ed (so a test can read it), copies are memcpy, events and streams
// complete at once. An image is kept as text; cuModuleGetFunction finds only
// names that occur as `.entry NAME` in it, and takes the parameter sizes
// from that `.entry` line so cuLaunchKernel can log each value:
//
//   launch NAME grid=X,Y,Z block=X,Y,Z smem=S params=V0,V1,...
//
// (integers in decimal, wider parameters as hex bytes). An image containing
// FAKE_JIT_ERROR fails to load with a JIT log. The fakecuda_* functions let
// a test configure the device, inject a launch failure and read counters.
//
// Environment (read by cuInit): FAKE_CUDA_DEVICES (default 1),
// FAKE_CUDA_CC ("90" = compute capability 9.0).
//===----------------------------------------------------------------------===//
#include "cuda/CudaApi.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

using namespace comfyquant::rt::cuda;

struct comfyquant::rt::cuda::CUctx_st {
  int device;
};
struct comfyquant::rt::cuda::CUmod_st {
  std::string image;
};
struct comfyquant::rt::cuda::CUfunc_st {
  std::string name;
  std::vector<size_t> paramBytes;
  int maxDynamicSmem = 48 * 1024;
};
struct comfyquant::rt::cuda::CUstream_st {
  unsigned flags;
};
struct comfyquant::rt::cuda::CUevent_st {
  unsigned flags;
};

namespace {
constexpr CUresult kInvalidContext = 201; // CUDA_ERROR_INVALID_CONTEXT

struct State {
  std::mutex mutex;
  bool initialized = false;
  int devices = 1, major = 9, minor = 0;
  std::map<uintptr_t, size_t> allocations; // device memory
  std::set<void *> pinned;
  int liveStreams = 0, liveModules = 0, contextRefs = 0, procLookups = 0;
  uint64_t htodBytes = 0, htodCalls = 0, dtohBytes = 0;
  int failLaunch = -1; // launches to let through before one fails
  std::string log;
  CUctx_st contexts[8];
  std::vector<std::unique_ptr<CUfunc_st>> functions;
};

State &state() {
  static State s;
  return s;
}

thread_local std::vector<CUcontext> contextStack;

bool hasContext() { return !contextStack.empty(); }

/// The log, and $FAKE_CUDA_LOG (appended) for tests that run a tool.
void appendLog(State &s, const std::string &line) {
  s.log += line;
  if (const char *path = std::getenv("FAKE_CUDA_LOG"))
    if (FILE *f = std::fopen(path, "a")) {
      std::fputs(line.c_str(), f);
      std::fclose(f);
    }
}

/// The allocation holding [p, p + n), if any.
bool inAllocation(const State &s, uintptr_t p, size_t n) {
  auto it = s.allocations.upper_bound(p);
  if (it == s.allocations.begin())
    return false;
  --it;
  return p >= it->first && p + n <= it->first + it->second;
}

size_t ptxTypeBytes(const std::string &t) {
  if (t.size() < 3)
    return 0;
  return static_cast<size_t>(std::atoi(t.c_str() + 2)) / 8;
}

/// `.entry NAME(` ... `)` in `image`: the parameter sizes, or false.
bool findEntry(const std::string &image, const std::string &name,
               std::vector<size_t> &params) {
  const std::string key = ".entry " + name;
  for (size_t at = image.find(key); at != std::string::npos;
       at = image.find(key, at + 1)) {
    size_t end = at + key.size();
    if (end < image.size() &&
        (std::isalnum(static_cast<unsigned char>(image[end])) ||
         image[end] == '_' || image[end] == '$'))
      continue;
    size_t open = image.find('(', end), close = image.find(')', end);
    params.clear();
    if (open == std::string::npos || close == std::string::npos || close < open)
      return true;
    // ".param .u64 a, .param .align 8 .b8 b[16]"
    std::string list = image.substr(open + 1, close - open - 1);
    size_t p = 0;
    while ((p = list.find(".param", p)) != std::string::npos) {
      p += 6;
      size_t next = list.find(".param", p);
      std::string one =
          list.substr(p, next == std::string::npos ? next : next - p);
      size_t bytes = 0, count = 1;
      for (const char *t : {".u", ".s", ".b", ".f"}) {
        for (size_t q = one.find(t); q != std::string::npos;
             q = one.find(t, q + 1)) {
          if (q + 2 < one.size() &&
              std::isdigit(static_cast<unsigned char>(one[q + 2]))) {
            bytes = ptxTypeBytes(one.substr(q, 4));
            break;
          }
        }
        if (bytes)
          break;
      }
      if (size_t b = one.find('['); b != std::string::npos)
        count = static_cast<size_t>(std::atoi(one.c_str() + b + 1));
      params.push_back(bytes * count);
    }
    return true;
  }
  return false;
}

const char *errorName(CUresult r) {
  switch (r) {
  case CUDA_SUCCESS:
    return "CUDA_SUCCESS";
  case CUDA_ERROR_INVALID_VALUE:
    return "CUDA_ERROR_INVALID_VALUE";
  case CUDA_ERROR_OUT_OF_MEMORY:
    return "CUDA_ERROR_OUT_OF_MEMORY";
  case CUDA_ERROR_NOT_INITIALIZED:
    return "CUDA_ERROR_NOT_INITIALIZED";
  case CUDA_ERROR_NO_DEVICE:
    return "CUDA_ERROR_NO_DEVICE";
  case CUDA_ERROR_INVALID_DEVICE:
    return "CUDA_ERROR_INVALID_DEVICE";
  case kInvalidContext:
    return "CUDA_ERROR_INVALID_CONTEXT";
  case CUDA_ERROR_INVALID_PTX:
    return "CUDA_ERROR_INVALID_PTX";
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
    return "CUDA_ERROR_NO_BINARY_FOR_GPU";
  case CUDA_ERROR_INVALID_HANDLE:
    return "CUDA_ERROR_INVALID_HANDLE";
  case CUDA_ERROR_NOT_FOUND:
    return "CUDA_ERROR_NOT_FOUND";
  case CUDA_ERROR_LAUNCH_FAILED:
    return "CUDA_ERROR_LAUNCH_FAILED";
  }
  return nullptr;
}
} // namespace

#define FAKE_API extern "C" __attribute__((visibility("default")))

FAKE_API CUresult cuInit(unsigned int flags) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!s.initialized) {
    if (const char *n = std::getenv("FAKE_CUDA_DEVICES"))
      s.devices = std::atoi(n);
    if (const char *cc = std::getenv("FAKE_CUDA_CC")) {
      s.major = std::atoi(cc) / 10;
      s.minor = std::atoi(cc) % 10;
    }
  }
  s.initialized = true;
  return s.devices > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

FAKE_API CUresult cuDriverGetVersion(int *version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGetErrorName(CUresult error, const char **text) {
  const char *n = errorName(error);
  if (!n || !text)
    return CUDA_ERROR_INVALID_VALUE;
  *text = n;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGetErrorString(CUresult error, const char **text) {
  if (!errorName(error) || !text)
    return CUDA_ERROR_INVALID_VALUE;
  *text = error == CUDA_ERROR_LAUNCH_FAILED ? "unspecified launch failure"
                                            : "fake driver error";
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetCount(int *count) {
  State &s = state();
  if (!s.initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  *count = s.devices;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  State &s = state();
  if (!s.initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= s.devices)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
  if (device < 0 || device >= state().devices || length < 1)
    return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(length), "Fake CUDA Device %d",
                device);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                                       CUdevice device) {
  State &s = state();
  if (device < 0 || device >= s.devices)
    return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = s.major;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = s.minor;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = 132;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *value = 232448;
    break;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
  if (device < 0 || device >= state().devices)
    return CUDA_ERROR_INVALID_DEVICE;
  *bytes = size_t(80) << 30;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *context,
                                           CUdevice device) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (device < 0 || device >= s.devices || device >= 8)
    return CUDA_ERROR_INVALID_DEVICE;
  s.contexts[device].device = device;
  *context = &s.contexts[device];
  ++s.contextRefs;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (device < 0 || device >= s.devices || s.contextRefs == 0)
    return CUDA_ERROR_INVALID_DEVICE;
  --s.contextRefs;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext context) {
  if (!context)
    return kInvalidContext;
  contextStack.push_back(context);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext *context) {
  if (contextStack.empty())
    return kInvalidContext;
  if (context)
    *context = contextStack.back();
  contextStack.pop_back();
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
  if (!hasContext())
    return kInvalidContext;
  std::lock_guard<std::mutex> lock(state().mutex);
  *stream = new CUstream_st{flags};
  ++state().liveStreams;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamDestroy_v2(CUstream stream) {
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(state().mutex);
  delete stream;
  --state().liveStreams;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamSynchronize(CUstream) {
  return hasContext() ? CUDA_SUCCESS : kInvalidContext;
}

FAKE_API CUresult cuEventCreate(CUevent *event, unsigned int flags) {
  if (!hasContext())
    return kInvalidContext;
  *event = new CUevent_st{flags};
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventRecord(CUevent event, CUstream) {
  return event ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
FAKE_API CUresult cuEventSynchronize(CUevent event) {
  return event ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
FAKE_API CUresult cuEventDestroy_v2(CUevent event) {
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  delete event;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                     unsigned int numOptions,
                                     CUjit_option *options, void **values) {
  if (!hasContext())
    return kInvalidContext;
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  std::string text(static_cast<const char *>(image));
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // A real cubin (ELF) carries its kernels' signatures in sections this
  // fake does not read: it is refused, as a driver refuses a cubin of
  // another GPU, and the executor falls back to the PTX.
  if (text.rfind("\x7f"
                 "ELF",
                 0) == 0) {
    appendLog(s, "load ELF refused\n");
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  appendLog(s, "load " + text.substr(0, text.find('\n')) + "\n");
  if (text.find("FAKE_JIT_ERROR") != std::string::npos) {
    char *buffer = nullptr;
    size_t size = 0;
    for (unsigned i = 0; i < numOptions; ++i) {
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
        buffer = static_cast<char *>(values[i]);
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        size = reinterpret_cast<uintptr_t>(values[i]);
    }
    if (buffer && size)
      std::snprintf(buffer, size, "ptxas fatal   : fake JIT failure\n");
    return CUDA_ERROR_INVALID_PTX;
  }
  *module = new CUmod_st{text};
  ++s.liveModules;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuModuleUnload(CUmodule module) {
  if (!module)
    return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(state().mutex);
  delete module;
  --state().liveModules;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuModuleGetFunction(CUfunction *function, CUmodule module,
                                      const char *name) {
  if (!hasContext())
    return kInvalidContext;
  if (!module || !name)
    return CUDA_ERROR_INVALID_HANDLE;
  std::vector<size_t> params;
  if (!findEntry(module->image, name, params))
    return CUDA_ERROR_NOT_FOUND;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.functions.push_back(std::make_unique<CUfunc_st>());
  s.functions.back()->name = name;
  s.functions.back()->paramBytes = params;
  *function = s.functions.back().get();
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuFuncSetAttribute(CUfunction function,
                                     CUfunction_attribute attribute,
                                     int value) {
  if (!function)
    return CUDA_ERROR_INVALID_HANDLE;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ||
      value > 232448)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  function->maxDynamicSmem = value;
  appendLog(state(), "attribute " + function->name +
                         " max_dynamic_smem=" + std::to_string(value) + "\n");
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
  if (!hasContext())
    return kInvalidContext;
  if (!ptr || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  void *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations[reinterpret_cast<uintptr_t>(p)] = bytes;
  *ptr = reinterpret_cast<uintptr_t>(p);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr ptr) {
  if (!hasContext())
    return kInvalidContext;
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().allocations.find(static_cast<uintptr_t>(ptr));
  if (it == state().allocations.end())
    return CUDA_ERROR_INVALID_VALUE;
  std::free(reinterpret_cast<void *>(it->first));
  state().allocations.erase(it);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostAlloc(void **ptr, size_t bytes, unsigned int) {
  if (!hasContext())
    return kInvalidContext;
  if (!ptr || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  *ptr = std::malloc(bytes);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().pinned.insert(*ptr);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFreeHost(void *ptr) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().pinned.erase(ptr))
    return CUDA_ERROR_INVALID_VALUE;
  std::free(ptr);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
                                       size_t bytes, CUstream) {
  if (!hasContext())
    return kInvalidContext;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!inAllocation(s, static_cast<uintptr_t>(dst), bytes))
    return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  s.htodBytes += bytes;
  ++s.htodCalls;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes,
                                       CUstream) {
  if (!hasContext())
    return kInvalidContext;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!inAllocation(s, static_cast<uintptr_t>(src), bytes))
    return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
  s.dtohBytes += bytes;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
                                 unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned smem, CUstream,
                                 void **params, void **extra) {
  if (!hasContext())
    return kInvalidContext;
  if (!f || extra)
    return CUDA_ERROR_INVALID_VALUE;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.failLaunch == 0) {
    s.failLaunch = -1;
    appendLog(s, "launch " + f->name + " FAILED\n");
    return CUDA_ERROR_LAUNCH_FAILED;
  }
  if (s.failLaunch > 0)
    --s.failLaunch;
  if (static_cast<int>(smem) > f->maxDynamicSmem)
    return CUDA_ERROR_INVALID_VALUE;
  std::string line = "launch " + f->name + " grid=" + std::to_string(gx) + "," +
                     std::to_string(gy) + "," + std::to_string(gz) +
                     " block=" + std::to_string(bx) + "," + std::to_string(by) +
                     "," + std::to_string(bz) +
                     " smem=" + std::to_string(smem) + " params=";
  for (size_t i = 0; i < f->paramBytes.size(); ++i) {
    const size_t n = f->paramBytes[i];
    const auto *p = static_cast<const uint8_t *>(params[i]);
    if (i)
      line += ",";
    if (n == 8 || n == 4 || n == 2 || n == 1) {
      uint64_t v = 0;
      std::memcpy(&v, p, n); // little endian
      line += std::to_string(v);
    } else {
      char hex[3];
      line += "0x";
      for (size_t b = 0; b < n; ++b) {
        std::snprintf(hex, sizeof hex, "%02x", p[b]);
        line += hex;
      }
    }
  }
  appendLog(s, line + "\n");
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t *offset,
                                     size_t *size) {
  if (!f || !offset || index >= f->paramBytes.size())
    return CUDA_ERROR_INVALID_VALUE;
  size_t at = 0;
  for (size_t i = 0; i < index; ++i)
    at += f->paramBytes[i];
  *offset = at;
  if (size)
    *size = f->paramBytes[index];
  return CUDA_SUCCESS;
}

// cuGetProcAddress_v2: every function above by its base name.
FAKE_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int,
                                      cuuint64_t,
                                      CUdriverProcAddressQueryResult *status) {
  static const std::map<std::string, void *> table = {
#define FAKE_ENTRY(name, exported, ret, params)                                \
  {#name, reinterpret_cast<void *>(&exported)},
      COMFYQUANT_CUDA_FUNCTIONS(FAKE_ENTRY)
#undef FAKE_ENTRY
          {"cuFuncGetParamInfo", reinterpret_cast<void *>(&cuFuncGetParamInfo)},
  };
  auto it = table.find(symbol ? symbol : "");
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().procLookups;
  }
  if (it == table.end()) {
    if (status)
      *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = it->second;
  if (status)
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Test controls
//===----------------------------------------------------------------------===//

FAKE_API void fakecuda_set_device(int count, int major, int minor) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.devices = count;
  s.major = major;
  s.minor = minor;
}

/// The `after`-th launch from now (0: the next) fails.
FAKE_API void fakecuda_fail_launch(int after) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().failLaunch = after;
}

/// Returns the log since the last call and clears it; the text is valid
/// until the next call.
FAKE_API const char *fakecuda_take_log() {
  static std::string taken;
  std::lock_guard<std::mutex> lock(state().mutex);
  taken.swap(state().log);
  state().log.clear();
  return taken.c_str();
}

FAKE_API uint64_t fakecuda_counter(const char *name) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const std::string n = name;
  if (n == "htod_bytes")
    return s.htodBytes;
  if (n == "htod_calls")
    return s.htodCalls;
  if (n == "dtoh_bytes")
    return s.dtohBytes;
  if (n == "allocations")
    return s.allocations.size();
  if (n == "pinned")
    return s.pinned.size();
  if (n == "streams")
    return static_cast<uint64_t>(s.liveStreams);
  if (n == "modules")
    return static_cast<uint64_t>(s.liveModules);
  if (n == "context_refs")
    return static_cast<uint64_t>(s.contextRefs);
  if (n == "proc_lookups")
    return static_cast<uint64_t>(s.procLookups);
  if (n == "context_depth")
    return contextStack.size();
  return ~uint64_t(0);
}

/// Bytes of the device allocation holding `ptr` from `ptr` on, or 0.
FAKE_API uint64_t fakecuda_allocation_bytes(uint64_t ptr) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.upper_bound(ptr);
  if (it == s.allocations.begin())
    return 0;
  --it;
  if (ptr < it->first || ptr >= it->first + it->second)
    return 0;
  return it->first + it->second - ptr;
}
