//===- CudaDriver.cpp - the CUDA driver, loaded at run time ---------------===//
#include "cuda/CudaDriver.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Targets.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include <dlfcn.h>

namespace comfyquant::rt {

using namespace cuda;

namespace {
constexpr const char *kDefaultLibrary = "libcuda.so.1";

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}
} // namespace

bool parseCudaArch(const std::string &arch, int &major, int &minor,
                   bool &archSpecific, bool &family) {
  CudaArchName parsed;
  if (!parseCudaArchName(arch, parsed))
    return false;
  major = parsed.computeCapability / 10;
  minor = parsed.computeCapability % 10;
  archSpecific = parsed.suffix == 'a';
  family = parsed.suffix == 'f';
  return true;
}

std::string CudaDeviceInfo::arch() const {
  return "sm_" + std::to_string(ccMajor) + std::to_string(ccMinor);
}

std::string CudaDeviceInfo::describe() const {
  return std::to_string(index) + ": " + name + " (" + arch() + ", " +
         std::to_string(smCount) + " SMs, " + gib(totalMemory) + ")";
}

std::shared_ptr<const CudaDriver> CudaDriver::load() {
  const char *env = std::getenv("COMFYQUANT_LIBCUDA");
  const bool overridden = env && *env;
  const std::string library = overridden ? env : kDefaultLibrary;

  // A driver is never unloaded (libcuda does not support it), so the loaded
  // one is kept for the process.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const CudaDriver>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(library); it != loaded.end())
    return it->second;

  void *handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    if (!overridden)
      throw Error("", "",
                  std::string(kDefaultLibrary) +
                      " not found: no NVIDIA driver on this machine; "
                      "--backend cuda needs one",
                  ErrorKind::Unsupported);
    const char *why = ::dlerror();
    throw Error("", "",
                library + " ($COMFYQUANT_LIBCUDA) cannot be loaded: " +
                    (why ? why : "unknown dlopen error") +
                    "; --backend cuda needs a CUDA driver",
                ErrorKind::Unsupported);
  }
  std::shared_ptr<CudaDriver> d(new CudaDriver());
  d->library_ = library;

  // cuGetProcAddress returns the variant of each function that matches the
  // CUDA version we request, whatever the driver's own version; older
  // drivers have only the exported, versioned symbols.
  auto getProc = reinterpret_cast<PFN_cuGetProcAddress>(
      ::dlsym(handle, "cuGetProcAddress_v2"));
  auto lookup = [&](const char *name, const char *symbol,
                    int version) -> void * {
    void *fn = nullptr;
    if (getProc) {
      CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
      if (getProc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
              CUDA_SUCCESS &&
          status == CU_GET_PROC_ADDRESS_SUCCESS && fn)
        return fn;
    }
    return ::dlsym(handle, symbol);
  };
  auto resolve = [&](const char *name, const char *symbol) -> void * {
    void *fn = lookup(name, symbol, kRequestedApiVersion);
    if (!fn)
      throw Error(library, "",
                  std::string("the CUDA driver lacks ") + symbol +
                      " (a driver for CUDA 12.0 or later is needed)",
                  ErrorKind::Unsupported);
    return fn;
  };
#define COMFYQUANT_CUDA_RESOLVE(name, symbol, ret, params)                     \
  d->name = reinterpret_cast<PFN_##name>(resolve(#name, #symbol));
  COMFYQUANT_CUDA_FUNCTIONS(COMFYQUANT_CUDA_RESOLVE)
#undef COMFYQUANT_CUDA_RESOLVE
  d->cuFuncGetParamInfo = reinterpret_cast<PFN_cuFuncGetParamInfo>(
      lookup("cuFuncGetParamInfo", "cuFuncGetParamInfo", kParamInfoApiVersion));

  const CUresult init = d->cuInit(0);
  if (init == CUDA_ERROR_NO_DEVICE)
    throw Error("", "",
                "no CUDA device on this machine (" + library +
                    " is loaded; cuInit: " + d->errorText(init) + ")",
                ErrorKind::Unsupported);
  if (init != CUDA_SUCCESS)
    throw Error("", "",
                library + ": cuInit failed: " + d->errorText(init) +
                    " (is the NVIDIA kernel module loaded?)",
                ErrorKind::Unsupported);
  d->check(d->cuDriverGetVersion(&d->version_), "cuDriverGetVersion");
  loaded.emplace(library, d);
  return d;
}

std::string CudaDriver::errorText(CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (cuGetErrorName && cuGetErrorName(result, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (cuGetErrorString && cuGetErrorString(result, &text) != CUDA_SUCCESS)
    text = nullptr;
  std::string s = name ? name : "CUresult " + std::to_string(result);
  if (text)
    s += std::string(": ") + text;
  return s;
}

void CudaDriver::check(CUresult result, const char *call,
                       const std::string &subject) const {
  if (result == CUDA_SUCCESS)
    return;
  ErrorKind kind = result == CUDA_ERROR_OUT_OF_MEMORY ? ErrorKind::Io
                                                      : ErrorKind::Unsupported;
  throw Error("", subject, std::string(call) + " failed: " + errorText(result),
              kind);
}

int CudaDriver::deviceCount() const {
  int count = 0;
  CUresult r = cuDeviceGetCount(&count);
  if (r == CUDA_ERROR_NO_DEVICE)
    return 0;
  check(r, "cuDeviceGetCount");
  return count;
}

CudaDeviceInfo CudaDriver::device(int index) const {
  const int count = deviceCount();
  if (count == 0)
    throw Error("", "",
                "no CUDA device on this machine (" + library_ +
                    " is loaded but reports none)",
                ErrorKind::Unsupported);
  if (index < 0 || index >= count)
    throw Error("", "",
                "CUDA device " + std::to_string(index) +
                    " does not exist: this machine has " +
                    std::to_string(count) + " (0.." +
                    std::to_string(count - 1) + ")",
                ErrorKind::InvalidArgument);
  CUdevice dev = 0;
  check(cuDeviceGet(&dev, index), "cuDeviceGet");
  CudaDeviceInfo info;
  info.index = index;
  char name[256] = {0};
  check(cuDeviceGetName(name, sizeof name - 1, dev), "cuDeviceGetName");
  info.name = name;
  int smem = 0;
  check(cuDeviceGetAttribute(&info.ccMajor,
                             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
        "cuDeviceGetAttribute");
  check(cuDeviceGetAttribute(&info.ccMinor,
                             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
        "cuDeviceGetAttribute");
  check(cuDeviceGetAttribute(&info.smCount,
                             CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
        "cuDeviceGetAttribute");
  check(cuDeviceGetAttribute(
            &smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
        "cuDeviceGetAttribute");
  info.maxDynamicSmem = smem;
  size_t total = 0;
  check(cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
  info.totalMemory = total;
  return info;
}

std::vector<CudaDeviceInfo> cudaDevices() {
  return CudaDriver::load()->devices();
}

std::vector<CudaDeviceInfo> CudaDriver::devices() const {
  const int count = deviceCount();
  if (count == 0)
    throw Error("", "",
                "no CUDA device on this machine (" + library_ +
                    " is loaded but reports none)",
                ErrorKind::Unsupported);
  std::vector<CudaDeviceInfo> all;
  for (int i = 0; i < count; ++i)
    all.push_back(device(i));
  return all;
}

} // namespace comfyquant::rt
