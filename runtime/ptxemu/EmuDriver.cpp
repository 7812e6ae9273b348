//===- EmuDriver.cpp - the CUDA driver API over the PTX emulator ----------===//
//
// libcomfyquant-ptxemu.so: exactly the driver functions the runtime calls
// (cuda/CudaApi.h), loaded through $COMFYQUANT_LIBCUDA. Device memory is
// host memory the emulator tracks; cuLaunchKernel runs the kernel to
// completion on the CPU. Only PTX loads: a cubin is refused as a driver
// refuses one for another GPU.
//
// Environment, read by cuInit:
//   COMFYQUANT_EMU_ARCH   the emulated device: sm_80, sm_86, sm_89, sm_90a,
//                         sm_100a, sm_120a (required)
//   COMFYQUANT_EMU_STATS  a file that receives the --emu-stats JSON after
//                         every launch (written atomically)
//   COMFYQUANT_EMU_SUMS   "hardware" (default) or "exact": tensor-core float
//                         sums (docs/Testing.md)
// A hazard fails the launch with CUDA_ERROR_LAUNCH_FAILED; cuGetErrorString
// then returns what the emulator found (kernel, PTX line, CTA, thread).
//===----------------------------------------------------------------------===//
#include "cuda/CudaApi.h"
#include "ptxemu/Emulator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

using namespace comfyquant::rt::cuda;
namespace emu = comfyquant::ptxemu;

struct comfyquant::rt::cuda::CUctx_st {
  int device;
};
struct comfyquant::rt::cuda::CUmod_st {
  emu::Module module;
};
struct comfyquant::rt::cuda::CUfunc_st {
  const emu::Module *module;
  const emu::Kernel *kernel;
  int maxDynamicSmem = 48 * 1024;
};
struct comfyquant::rt::cuda::CUstream_st {
  unsigned flags;
};
struct comfyquant::rt::cuda::CUevent_st {
  unsigned flags;
};

namespace {
constexpr CUresult kInvalidContext = 201;
constexpr int kMaxDynamicSmem = 232448;

struct State {
  std::mutex mutex;
  bool initialized = false;
  std::string arch, initError;
  int sm = 0;
  bool archSpecific = false;
  std::unique_ptr<emu::Emulator> emulator;
  std::set<void *> pinned;
  std::vector<std::unique_ptr<CUfunc_st>> functions;
  CUctx_st context{0};
  std::string statsPath;
};

State &state() {
  static State s;
  return s;
}

thread_local std::vector<CUcontext> contextStack;
thread_local std::string lastLaunchError;

bool hasContext() { return !contextStack.empty(); }

/// The emulated device of an arch name: its capability, and whether it runs
/// that capability's arch-specific code ("sm_90a"). A family name
/// ("sm_100f") emulates the family's first member, which runs the family's
/// code and, being that very arch, its arch-specific code too.
bool parseArch(const std::string &a, int &sm, bool &specific) {
  if (a.compare(0, 3, "sm_") != 0)
    return false;
  size_t i = 3;
  sm = 0;
  while (i < a.size() && a[i] >= '0' && a[i] <= '9')
    sm = sm * 10 + (a[i++] - '0');
  specific = i < a.size() && (a[i] == 'a' || a[i] == 'f');
  if (specific)
    ++i;
  return i == a.size() && i > 3 && sm >= 70;
}

/// Whether PTX for `target` runs on the emulated device: arch-specific PTX
/// only on that very arch, family PTX on the later archs of its major
/// version (sm_100f on sm_103), portable PTX on that arch and later.
bool runsOn(const emu::Module &m, const State &s) {
  if (m.archSpecific)
    return m.smVersion == s.sm && s.archSpecific;
  if (m.family)
    return m.smVersion / 10 == s.sm / 10 && m.smVersion <= s.sm;
  return m.smVersion <= s.sm;
}

void writeStats(State &s) {
  if (s.statsPath.empty())
    return;
  std::string json = s.emulator->statsJson(s.arch);
  std::string tmp = s.statsPath + ".tmp." + std::to_string(::getpid());
  if (FILE *f = std::fopen(tmp.c_str(), "w")) {
    bool ok = std::fwrite(json.data(), 1, json.size(), f) == json.size();
    ok &= std::fclose(f) == 0;
    if (ok)
      std::rename(tmp.c_str(), s.statsPath.c_str());
    else
      std::remove(tmp.c_str());
  }
}

const char *errorName(CUresult r) {
  switch (r) {
  case CUDA_SUCCESS: return "CUDA_SUCCESS";
  case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
  case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
  case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
  case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
  case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
  case kInvalidContext: return "CUDA_ERROR_INVALID_CONTEXT";
  case CUDA_ERROR_INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
  case CUDA_ERROR_NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
  case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
  case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
  case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
  }
  return nullptr;
}

void jitLog(unsigned n, CUjit_option *options, void **values,
            const std::string &text) {
  char *buffer = nullptr;
  size_t size = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
      buffer = static_cast<char *>(values[i]);
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      size = reinterpret_cast<uintptr_t>(values[i]);
  }
  if (buffer && size)
    std::snprintf(buffer, size, "%s", text.c_str());
}
} // namespace

#define EMU_API extern "C" __attribute__((visibility("default")))

EMU_API CUresult cuInit(unsigned int flags) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (s.initialized)
    return s.emulator ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
  s.initialized = true;
  const char *arch = std::getenv("COMFYQUANT_EMU_ARCH");
  if (!arch || !parseArch(arch, s.sm, s.archSpecific)) {
    std::fprintf(stderr,
                 "comfyquant PTX emulator: COMFYQUANT_EMU_ARCH must name the "
                 "emulated device (sm_80, sm_86, sm_89, sm_90a, sm_100a, "
                 "sm_120a, sm_100f, sm_120f)%s%s\n",
                 arch ? ", not " : "", arch ? arch : "");
    return CUDA_ERROR_NO_DEVICE;
  }
  s.arch = arch;
  emu::DeviceConfig config;
  config.sm = s.sm;
  config.archSpecific = s.archSpecific;
  if (const char *sums = std::getenv("COMFYQUANT_EMU_SUMS"))
    config.sumModel = std::string(sums) == "exact" ? emu::SumModel::Exact
                                                   : emu::SumModel::Hardware;
  s.emulator = std::make_unique<emu::Emulator>(config);
  if (const char *stats = std::getenv("COMFYQUANT_EMU_STATS"))
    s.statsPath = stats;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuDriverGetVersion(int *version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuGetErrorName(CUresult error, const char **text) {
  const char *n = errorName(error);
  if (!n || !text)
    return CUDA_ERROR_INVALID_VALUE;
  *text = n;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuGetErrorString(CUresult error, const char **text) {
  if (!errorName(error) || !text)
    return CUDA_ERROR_INVALID_VALUE;
  if (error == CUDA_ERROR_LAUNCH_FAILED && !lastLaunchError.empty())
    *text = lastLaunchError.c_str();
  else
    *text = error == CUDA_ERROR_NO_BINARY_FOR_GPU
                ? "the PTX emulator runs PTX only (no cubin), for its arch"
                : "PTX emulator error";
  return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceGetCount(int *count) {
  State &s = state();
  if (!s.initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  *count = s.emulator ? 1 : 0;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  State &s = state();
  if (!s.initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal != 0 || !s.emulator)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
  if (device != 0 || length < 1)
    return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(length),
                "comfyquant PTX emulator (%s)", state().arch.c_str());
  return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                                      CUdevice device) {
  State &s = state();
  if (device != 0 || !s.emulator)
    return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = s.sm / 10; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = s.sm % 10; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = s.emulator->config().smCount;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *value = kMaxDynamicSmem;
    break;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
  if (device != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *bytes = size_t(16) << 30;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  if (device != 0 || !state().emulator)
    return CUDA_ERROR_INVALID_DEVICE;
  *context = &state().context;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  return device == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EMU_API CUresult cuCtxPushCurrent_v2(CUcontext context) {
  if (!context)
    return kInvalidContext;
  contextStack.push_back(context);
  return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxPopCurrent_v2(CUcontext *context) {
  if (contextStack.empty())
    return kInvalidContext;
  if (context)
    *context = contextStack.back();
  contextStack.pop_back();
  return CUDA_SUCCESS;
}

EMU_API CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
  if (!hasContext())
    return kInvalidContext;
  *stream = new CUstream_st{flags};
  return CUDA_SUCCESS;
}

EMU_API CUresult cuStreamDestroy_v2(CUstream stream) {
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  delete stream;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuStreamSynchronize(CUstream) {
  return hasContext() ? CUDA_SUCCESS : kInvalidContext;
}

EMU_API CUresult cuEventCreate(CUevent *event, unsigned int flags) {
  if (!hasContext())
    return kInvalidContext;
  *event = new CUevent_st{flags};
  return CUDA_SUCCESS;
}
EMU_API CUresult cuEventRecord(CUevent event, CUstream) {
  return event ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
EMU_API CUresult cuEventSynchronize(CUevent event) {
  return event ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
EMU_API CUresult cuEventDestroy_v2(CUevent event) {
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  delete event;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                    unsigned int numOptions,
                                    CUjit_option *options, void **values) {
  if (!hasContext())
    return kInvalidContext;
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  const char *text = static_cast<const char *>(image);
  if (std::strncmp(text, "\x7f" "ELF", 4) == 0)
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  State &s = state();
  try {
    auto m = std::make_unique<CUmod_st>();
    m->module = emu::parsePtx(text, "ptx");
    if (!runsOn(m->module, s)) {
      jitLog(numOptions, options, values,
             "PTX for " + m->module.target + " does not run on the emulated " +
                 s.arch);
      return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    m->module.source = m->module.target + ".ptx";
    *module = m.release();
  } catch (const emu::PtxError &e) {
    jitLog(numOptions, options, values,
           std::string("comfyquant PTX emulator: ") + e.what());
    return CUDA_ERROR_INVALID_PTX;
  }
  return CUDA_SUCCESS;
}

EMU_API CUresult cuModuleUnload(CUmodule module) {
  if (!module)
    return CUDA_ERROR_INVALID_HANDLE;
  delete module;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuModuleGetFunction(CUfunction *function, CUmodule module,
                                     const char *name) {
  if (!hasContext())
    return kInvalidContext;
  if (!module || !name)
    return CUDA_ERROR_INVALID_HANDLE;
  const emu::Kernel *k = module->module.find(name);
  if (!k)
    return CUDA_ERROR_NOT_FOUND;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.functions.push_back(std::make_unique<CUfunc_st>());
  s.functions.back()->module = &module->module;
  s.functions.back()->kernel = k;
  *function = s.functions.back().get();
  return CUDA_SUCCESS;
}

EMU_API CUresult cuFuncSetAttribute(CUfunction function,
                                    CUfunction_attribute attribute, int value) {
  if (!function)
    return CUDA_ERROR_INVALID_HANDLE;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ||
      value < 0 || value > kMaxDynamicSmem)
    return CUDA_ERROR_INVALID_VALUE;
  function->maxDynamicSmem = value;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t *offset,
                                    size_t *size) {
  if (!f || !offset || index >= f->kernel->params.size())
    return CUDA_ERROR_INVALID_VALUE;
  *offset = f->kernel->params[index].offset;
  if (size)
    *size = f->kernel->params[index].bytes;
  return CUDA_SUCCESS;
}

EMU_API CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
  if (!hasContext())
    return kInvalidContext;
  if (!ptr || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  void *p = state().emulator->allocate(bytes);
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = reinterpret_cast<uintptr_t>(p);
  return CUDA_SUCCESS;
}

EMU_API CUresult cuMemFree_v2(CUdeviceptr ptr) {
  if (!hasContext())
    return kInvalidContext;
  return state().emulator->release(reinterpret_cast<void *>(ptr))
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_VALUE;
}

EMU_API CUresult cuMemHostAlloc(void **ptr, size_t bytes, unsigned int) {
  if (!hasContext())
    return kInvalidContext;
  if (!ptr || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  *ptr = std::malloc(bytes);
  if (!*ptr)
    return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(state().mutex);
  state().pinned.insert(*ptr);
  return CUDA_SUCCESS;
}

EMU_API CUresult cuMemFreeHost(void *ptr) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().pinned.erase(ptr))
    return CUDA_ERROR_INVALID_VALUE;
  std::free(ptr);
  return CUDA_SUCCESS;
}

EMU_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
                                      size_t bytes, CUstream) {
  if (!hasContext())
    return kInvalidContext;
  if (bytes && !state().emulator->contains(dst, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return CUDA_SUCCESS;
}

EMU_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes,
                                      CUstream) {
  if (!hasContext())
    return kInvalidContext;
  if (bytes && !state().emulator->contains(src, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
  return CUDA_SUCCESS;
}

EMU_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
                                unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned smem, CUstream,
                                void **params, void **extra) {
  if (!hasContext())
    return kInvalidContext;
  if (!f || extra || !gx || !gy || !gz || !bx || !by || !bz ||
      uint64_t(bx) * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<int>(smem) > f->maxDynamicSmem)
    return CUDA_ERROR_INVALID_VALUE;
  const emu::Kernel &k = *f->kernel;
  if (k.maxntid[0] &&
      uint64_t(bx) * by * bz >
          uint64_t(k.maxntid[0]) * std::max(1, k.maxntid[1]) *
              std::max(1, k.maxntid[2])) {
    lastLaunchError = k.name + ": block of " +
                      std::to_string(uint64_t(bx) * by * bz) +
                      " threads exceeds its .maxntid";
    return CUDA_ERROR_LAUNCH_FAILED;
  }
  std::vector<uint8_t> buffer(k.paramBytes, 0);
  for (size_t i = 0; i < k.params.size(); ++i) {
    if (!params || !params[i])
      return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(buffer.data() + k.params[i].offset, params[i],
                k.params[i].bytes);
  }
  const uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  lastLaunchError.clear();
  CUresult result = CUDA_SUCCESS;
  try {
    s.emulator->launch(*f->module, k, grid, block, smem, buffer);
  } catch (const emu::Hazard &h) {
    lastLaunchError = std::string("PTX emulator: ") + h.what();
    result = CUDA_ERROR_LAUNCH_FAILED;
  }
  writeStats(s);
  return result;
}

EMU_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int,
                                     cuuint64_t,
                                     CUdriverProcAddressQueryResult *status) {
  static const std::map<std::string, void *> table = {
#define EMU_ENTRY(name, exported, ret, params)                                 \
  {#name, reinterpret_cast<void *>(&exported)},
      COMFYQUANT_CUDA_FUNCTIONS(EMU_ENTRY)
#undef EMU_ENTRY
          {"cuFuncGetParamInfo", reinterpret_cast<void *>(&cuFuncGetParamInfo)},
  };
  auto it = table.find(symbol ? symbol : "");
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
