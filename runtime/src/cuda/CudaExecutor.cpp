//===- CudaExecutor.cpp - run an artifact's CUDA entries ------------------===//
#include "cuda/CudaExecutor.h"

#include "MemRefDescriptor.h"
#include "comfyquant/runtime/Error.h"

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <dlfcn.h>

namespace comfyquant::rt {

using namespace cuda;

namespace {
constexpr uint64_t kAlignment = 256;

uint64_t alignUp(uint64_t v) {
  return (v + kAlignment - 1) / kAlignment * kAlignment;
}

std::string readFile(const std::string &path, const std::string &what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(path, "",
                "cannot open the " + what + ": " + std::strerror(errno),
                ErrorKind::Io);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string dims(const int64_t v[3]) {
  return "[" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " +
         std::to_string(v[2]) + "]";
}

/// `a * b + c` when it fits in int64, else -1.
int64_t mulAdd(int64_t a, int64_t b, int64_t c) {
  if (a < 0 || b < 0 || c < 0)
    return -1;
  if (b != 0 && a > (std::numeric_limits<int64_t>::max() - c) / b)
    return -1;
  return a * b + c;
}
} // namespace

/// Makes the executor's context current on this thread for a scope, and
/// restores the caller's afterwards: the host may have its own.
struct CudaExecutor::ContextScope {
  const CudaDriver &driver;
  explicit ContextScope(const CudaExecutor &e) : driver(*e.driver_) {
    driver.check(driver.cuCtxPushCurrent(e.context_), "cuCtxPushCurrent");
  }
  ~ContextScope() {
    CUcontext previous = nullptr;
    driver.cuCtxPopCurrent(&previous);
  }
};

struct CudaExecutor::BoundEntry {
  Entry spec;
  HostEntry fn = nullptr;
  std::vector<CUfunction> functions;
  /// Each kernel's parameter count, -1 when the driver cannot tell.
  std::vector<int> paramCounts;
  std::vector<std::vector<int64_t>> weights; ///< descriptors, argument order
};

struct CudaExecutor::LaunchState {
  cq_gpu_launcher iface{};
  const CudaExecutor *executor = nullptr;
  const BoundEntry *entry = nullptr;
  int launches = 0;
  bool failed = false;
  std::unique_ptr<Error> error; ///< the first failure
};

std::unique_ptr<CudaExecutor> CudaExecutor::open(
    std::shared_ptr<const CudaDriver> driver, const std::string &artifactDir,
    const std::vector<Image> &images, const std::string &hostLibrary,
    const CudaExecutorOptions &options) {
  std::unique_ptr<CudaExecutor> e(new CudaExecutor());
  e->driver_ = std::move(driver);
  e->dir_ = artifactDir;
  e->stagingBytes_ = std::max<size_t>(options.stagingBytes, 4096);
  const CudaDriver &d = *e->driver_;
  e->device_ = d.device(options.device);
  d.check(d.cuDeviceGet(&e->cuDevice_, options.device), "cuDeviceGet");
  // The primary context is the one the CUDA runtime (and so PyTorch) uses:
  // device pointers of the host are valid in it.
  d.check(d.cuDevicePrimaryCtxRetain(&e->context_, e->cuDevice_),
          "cuDevicePrimaryCtxRetain");
  ContextScope scope(*e);
  if (options.stream) {
    e->stream_ = static_cast<CUstream>(options.stream);
  } else {
    d.check(d.cuStreamCreate(&e->stream_, CU_STREAM_NON_BLOCKING),
            "cuStreamCreate");
    e->ownStream_ = true;
  }
  e->loadImage(images);
  if (!hostLibrary.empty()) {
    e->hostLibraryPath_ = hostLibrary;
    e->hostLibrary_ = ::dlopen(hostLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!e->hostLibrary_) {
      const char *why = ::dlerror();
      throw Error(hostLibrary, "",
                  std::string("cannot load the CUDA host library: ") +
                      (why ? why : "unknown dlopen error"),
                  ErrorKind::Io);
    }
  }
  return e;
}

void CudaExecutor::loadImage(const std::vector<Image> &images) {
  const CudaDriver &d = *driver_;
  const int devMajor = device_.ccMajor, devMinor = device_.ccMinor;
  struct Candidate {
    const Image *image = nullptr;
    int major = 0, minor = 0;
    bool specific = false, family = false;
    // The code runs on the device: arch-specific ("a") only on its own
    // capability, family ("f") on its own and the later minors of its
    // major (sm_100f on sm_103), portable on its own and every later one.
    bool runsOn(int devMajor, int devMinor) const {
      const bool exact = major == devMajor && minor == devMinor;
      const bool older =
          std::make_pair(major, minor) < std::make_pair(devMajor, devMinor);
      if (specific)
        return exact;
      if (family)
        return exact || (older && major == devMajor);
      return exact || older;
    }
    int rank() const { return specific ? 2 : family ? 1 : 0; }
    // Newer capability first; on a tie the arch-specific image, then the
    // family one, which may use instructions the portable one cannot.
    bool better(const Candidate &o) const {
      if (!o.image)
        return true;
      if (major != o.major || minor != o.minor)
        return std::make_pair(major, minor) > std::make_pair(o.major, o.minor);
      return rank() > o.rank();
    }
  };
  Candidate cubin, ptx;
  std::string have;
  // COMFYQUANT_CUDA_IMAGE=ARCH: that arch's PTX, JIT-compiled by the driver,
  // instead of the best image (the sm_80 / sm_89 kernels on a Hopper GPU,
  // say). Explicit: an arch the artifact lacks, or whose PTX cannot run on
  // this device, is an error, never a fallback.
  const char *forced = std::getenv("COMFYQUANT_CUDA_IMAGE");
  const std::string forcedArch = forced ? forced : "";
  for (const Image &img : images) {
    std::string kinds;
    if (!img.cubin.empty())
      kinds = "cubin";
    if (!img.ptx.empty())
      kinds += kinds.empty() ? "ptx" : "+ptx";
    have += (have.empty() ? "" : ", ") + img.arch + " (" +
            (kinds.empty() ? "no image" : kinds) + ")";
    Candidate c;
    c.image = &img;
    if (!parseCudaArch(img.arch, c.major, c.minor, c.specific, c.family))
      continue;
    const bool exact = c.major == devMajor && c.minor == devMinor;
    if (!forcedArch.empty()) {
      if (img.arch == forcedArch && !img.ptx.empty())
        ptx = c;
      continue;
    }
    // A cubin runs on its own capability, a family cubin on its family's
    // later members too.
    if (!img.cubin.empty() && (exact || (c.family && c.runsOn(devMajor, devMinor))) &&
        c.better(cubin))
      cubin = c;
    if (!img.ptx.empty() && c.runsOn(devMajor, devMinor) && c.better(ptx))
      ptx = c;
  }
  const std::string deviceText =
      "CUDA device " + std::to_string(device_.index) + " '" + device_.name +
      "' (" + device_.arch() + ", compute capability " +
      std::to_string(devMajor) + "." + std::to_string(devMinor) + ")";
  if (!forcedArch.empty()) {
    const std::string what = "COMFYQUANT_CUDA_IMAGE=" + forcedArch;
    if (!ptx.image)
      throw Error(dir_, "",
                  what + ": the artifact has no PTX for that arch (it has " +
                      (have.empty() ? "none" : have) + ")",
                  ErrorKind::Unsupported);
    if (!ptx.runsOn(devMajor, devMinor))
      throw Error(dir_, "",
                  what + ": " + forcedArch + " PTX does not run on " +
                      deviceText +
                      (ptx.specific ? " (arch-specific PTX runs only on its "
                                      "own arch)"
                       : ptx.family ? " (family PTX runs on its arch and the "
                                      "later ones of its major version)"
                                    : " (PTX runs on its capability and newer "
                                      "ones)"),
                  ErrorKind::Unsupported);
    warnings_.push_back(what + ": running the " + forcedArch +
                        " PTX, JIT-compiled by the driver");
  }
  if (!cubin.image && !ptx.image)
    throw Error(dir_, "",
                "no kernel image runs on " + deviceText +
                    ": the artifact has " + (have.empty() ? "none" : have) +
                    "; compile it with --target cuda:" + device_.arch() +
                    (devMajor >= 9 ? "a" : ""),
                ErrorKind::Unsupported);

  std::string cubinFailure;
  if (cubin.image) {
    std::string image = readFile(cubin.image->cubin, "cubin");
    CUmodule m = nullptr;
    CUresult r = d.cuModuleLoadDataEx(&m, image.c_str(), 0, nullptr, nullptr);
    if (r == CUDA_SUCCESS) {
      module_ = m;
      imageArch_ = cubin.image->arch;
      imagePath_ = cubin.image->cubin;
      return;
    }
    cubinFailure =
        cubin.image->cubin + ": cuModuleLoadDataEx failed: " + d.errorText(r);
    warnings_.push_back("the " + cubin.image->arch + " cubin did not load (" +
                        cubinFailure + "); running PTX compiled by the driver");
    if (!ptx.image)
      throw Error(dir_, "",
                  "cannot load the kernels for " + deviceText + ": " +
                      cubinFailure,
                  ErrorKind::Unsupported);
  }
  // The driver JIT-compiles PTX (NUL-terminated: std::string's c_str()).
  std::string image = readFile(ptx.image->ptx, "PTX");
  std::vector<char> log(16384, '\0');
  CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log.data(),
                    reinterpret_cast<void *>(uintptr_t(log.size() - 1))};
  CUmodule m = nullptr;
  CUresult r = d.cuModuleLoadDataEx(&m, image.c_str(), 2, keys, values);
  if (r != CUDA_SUCCESS) {
    std::string jitLog(log.data());
    while (!jitLog.empty() && (jitLog.back() == '\n' || jitLog.back() == ' '))
      jitLog.pop_back();
    std::replace(jitLog.begin(), jitLog.end(), '\n', ' ');
    throw Error(dir_, "",
                "the driver cannot JIT-compile " + ptx.image->ptx + " (" +
                    ptx.image->arch + ") for " + deviceText + ": " +
                    d.errorText(r) +
                    (jitLog.empty() ? "" : "; JIT log: " + jitLog) +
                    (cubinFailure.empty() ? "" : "; " + cubinFailure),
                ErrorKind::Unsupported);
  }
  module_ = m;
  imageArch_ = ptx.image->arch;
  imagePath_ = ptx.image->ptx;
  jit_ = true;
}

CudaExecutor::~CudaExecutor() {
  if (!context_)
    return;
  const CudaDriver &d = *driver_;
  if (d.cuCtxPushCurrent(context_) == CUDA_SUCCESS) {
    if (stream_)
      d.cuStreamSynchronize(stream_);
    for (uint64_t p : {workspace_, hostX_, hostY_})
      if (p)
        d.cuMemFree(p);
    for (uint64_t p : weightArenas_)
      d.cuMemFree(p);
    if (module_)
      d.cuModuleUnload(module_);
    if (ownStream_ && stream_)
      d.cuStreamDestroy(stream_);
    CUcontext previous = nullptr;
    d.cuCtxPopCurrent(&previous);
  }
  d.cuDevicePrimaryCtxRelease(cuDevice_);
  if (hostLibrary_)
    ::dlclose(hostLibrary_);
}

void *CudaExecutor::stream() const { return stream_; }

size_t CudaExecutor::addWeight(const Weight &weight) {
  for (size_t i = 0; i < weights_.size(); ++i)
    if (weights_[i].host == weight.host && weights_[i].bytes == weight.bytes &&
        weights_[i].host)
      return i;
  weights_.push_back(weight);
  weightDevice_.push_back(0);
  return weights_.size() - 1;
}

void CudaExecutor::upload() {
  std::lock_guard<std::mutex> lock(mutex_);
  const CudaDriver &d = *driver_;
  std::vector<size_t> pending;
  uint64_t total = 0, largest = 0;
  for (size_t i = 0; i < weights_.size(); ++i)
    if (!weightDevice_[i] && weights_[i].bytes) {
      pending.push_back(i);
      total += alignUp(weights_[i].bytes);
      largest = std::max(largest, weights_[i].bytes);
    }
  if (pending.empty())
    return;
  ContextScope scope(*this);
  CUdeviceptr arena = 0;
  d.check(d.cuMemAlloc(&arena, total), "cuMemAlloc",
          "weights (" + std::to_string(total) + " bytes)");
  weightArenas_.push_back(arena);

  // Two pinned chunks in turn: one is filled while the other is copied.
  struct Staging {
    const CudaDriver &d;
    void *buffer[2] = {nullptr, nullptr};
    CUevent done[2] = {nullptr, nullptr};
    ~Staging() {
      for (int i = 0; i < 2; ++i) {
        if (done[i]) {
          d.cuEventSynchronize(done[i]);
          d.cuEventDestroy(done[i]);
        }
        if (buffer[i])
          d.cuMemFreeHost(buffer[i]);
      }
    }
  } staging{d};
  const size_t chunk = static_cast<size_t>(
      std::min<uint64_t>(stagingBytes_, std::max<uint64_t>(largest, 1)));
  for (int i = 0; i < 2; ++i) {
    d.check(d.cuMemHostAlloc(&staging.buffer[i], chunk, 0), "cuMemHostAlloc",
            "weight staging");
    d.check(d.cuEventCreate(&staging.done[i], CU_EVENT_DISABLE_TIMING),
            "cuEventCreate");
  }
  bool used[2] = {false, false};
  int turn = 0;
  uint64_t offset = 0;
  for (size_t i : pending) {
    const Weight &w = weights_[i];
    const uint64_t address = arena + offset;
    const auto *src = static_cast<const uint8_t *>(w.host);
    for (uint64_t done = 0; done < w.bytes; done += chunk) {
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(chunk, w.bytes - done));
      if (used[turn])
        d.check(d.cuEventSynchronize(staging.done[turn]), "cuEventSynchronize",
                tensorSubject(w.name));
      std::memcpy(staging.buffer[turn], src + done, n);
      d.check(
          d.cuMemcpyHtoDAsync(address + done, staging.buffer[turn], n, stream_),
          "cuMemcpyHtoDAsync", tensorSubject(w.name));
      d.check(d.cuEventRecord(staging.done[turn], stream_), "cuEventRecord");
      used[turn] = true;
      turn ^= 1;
    }
    offset += alignUp(w.bytes);
  }
  d.check(d.cuStreamSynchronize(stream_), "cuStreamSynchronize",
          "weight upload");
  offset = 0;
  for (size_t i : pending) {
    weightDevice_[i] = arena + offset;
    offset += alignUp(weights_[i].bytes);
  }
  weightBytes_ += total;
}

std::string CudaExecutor::subject(const BoundEntry &e) const {
  return moduleSubject(e.spec.module);
}

size_t CudaExecutor::addEntry(const Entry &entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  const CudaDriver &d = *driver_;
  auto b = std::make_unique<BoundEntry>();
  b->spec = entry;
  const std::string subj = moduleSubject(entry.module);
  const std::string name = "entry '" + entry.symbol + "'";
  b->fn = entry.fn;
  if (!b->fn) {
    if (!hostLibrary_)
      throw Error(dir_, subj, name + ": no CUDA host library is loaded",
                  ErrorKind::InvalidInput);
    b->fn = reinterpret_cast<HostEntry>(
        ::dlsym(hostLibrary_, entry.symbol.c_str()));
    if (!b->fn)
      throw Error(hostLibraryPath_, subj,
                  name + " is not defined in the CUDA host library",
                  ErrorKind::InvalidInput);
  }
  ContextScope scope(*this);
  for (const std::string &k : entry.kernels) {
    // One handle per kernel name: entries that share a kernel share its
    // function (and its shared-memory opt-in).
    if (auto known = functions_.find(k); known != functions_.end()) {
      b->functions.push_back(known->second.first);
      b->paramCounts.push_back(known->second.second);
      continue;
    }
    CUfunction f = nullptr;
    CUresult r = d.cuModuleGetFunction(&f, module_, k.c_str());
    if (r == CUDA_ERROR_NOT_FOUND)
      throw Error(dir_, subj,
                  name + ": kernel '" + k + "' is not in the " + imageArch_ +
                      " image (" + imagePath_ + ")",
                  ErrorKind::InvalidInput);
    d.check(r, "cuModuleGetFunction",
            subj + ": " + name + ": kernel '" + k + "'");
    b->functions.push_back(f);
    // The count is the first index the driver refuses. Every kernel we
    // emit takes parameters, so a refusal at 0 means the driver cannot
    // tell: the check is then skipped rather than failing every launch.
    int count = 0;
    if (d.cuFuncGetParamInfo) {
      size_t offset = 0, size = 0;
      while (count < 65536 &&
             d.cuFuncGetParamInfo(f, static_cast<size_t>(count), &offset,
                                  &size) == CUDA_SUCCESS)
        ++count;
    }
    b->paramCounts.push_back(count > 0 ? count : -1);
    functions_.emplace(k, std::make_pair(f, b->paramCounts.back()));
  }
  for (size_t w : entry.weights) {
    if (w >= weights_.size())
      throw Error(dir_, subj,
                  name + ": weight index " + std::to_string(w) +
                      " was not registered",
                  ErrorKind::InvalidArgument);
    if (!weightDevice_[w] && weights_[w].bytes)
      throw Error(dir_, subj,
                  name + ": weight '" + weights_[w].name +
                      "' is not uploaded (upload() before addEntry())",
                  ErrorKind::InvalidArgument);
    b->weights.push_back(memrefDescriptor(weightDevice_[w], weights_[w].shape));
  }
  entries_.push_back(std::move(b));
  return entries_.size() - 1;
}

void CudaExecutor::reserve(uint64_t &buffer, uint64_t &capacity,
                           uint64_t bytes) const {
  if (bytes <= capacity)
    return;
  const CudaDriver &d = *driver_;
  // Kernels already enqueued may still use the old buffer.
  d.check(d.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  if (buffer)
    d.cuMemFree(buffer);
  buffer = 0;
  capacity = 0;
  CUdeviceptr p = 0;
  d.check(d.cuMemAlloc(&p, alignUp(bytes)), "cuMemAlloc",
          "device buffer of " + std::to_string(bytes) + " bytes");
  buffer = p;
  capacity = alignUp(bytes);
}

uint64_t CudaExecutor::workspaceBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return workspaceCapacity_;
}

void CudaExecutor::launchThunk(void *self, int32_t kernel, int64_t gx,
                               int64_t gy, int64_t gz, int64_t bx, int64_t by,
                               int64_t bz, int64_t smem, void **params,
                               int32_t numParams) noexcept {
  auto *state = static_cast<LaunchState *>(self);
  if (!state || state->failed)
    return;
  // Nothing may leave this C callback; a failure to record the error (out
  // of memory) still marks the call failed.
  try {
    try {
      const int64_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
      state->executor->launch(*state, kernel, grid, block, smem, params,
                              numParams);
    } catch (const Error &e) {
      state->failed = true;
      state->error = std::make_unique<Error>(e);
    } catch (const std::exception &e) {
      state->failed = true;
      state->error = std::make_unique<Error>(
          state->executor->dir_, "",
          std::string("kernel launch failed: ") + e.what(), ErrorKind::Io);
    }
  } catch (...) {
    state->failed = true;
  }
}

void CudaExecutor::launch(LaunchState &state, int32_t kernel,
                          const int64_t grid[3], const int64_t block[3],
                          int64_t smem, void **params,
                          int32_t numParams) const {
  const BoundEntry &e = *state.entry;
  const CudaDriver &d = *driver_;
  const std::string name = "entry '" + e.spec.symbol + "'";
  const int launch = state.launches++;
  auto fail = [&](const std::string &why) {
    throw Error(dir_, subject(e),
                name + ": launch " + std::to_string(launch) + ": " + why,
                ErrorKind::InvalidInput);
  };
  if (kernel < 0 || static_cast<size_t>(kernel) >= e.functions.size())
    fail("kernel index " + std::to_string(kernel) + " is out of range [0, " +
         std::to_string(e.functions.size()) + ")");
  const std::string &kernelName = e.spec.kernels[kernel];
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
    return; // M = 0: nothing to compute
  constexpr int64_t kMax = std::numeric_limits<unsigned int>::max();
  for (int i = 0; i < 3; ++i)
    if (grid[i] < 0 || grid[i] > kMax || block[i] < 1 || block[i] > kMax)
      fail("kernel '" + kernelName + "': grid " + dims(grid) + " or block " +
           dims(block) + " is not launchable");
  // A count the kernel does not take would make the driver read past the
  // parameter array (or miss parameters): refuse it before the launch.
  if (e.paramCounts[kernel] >= 0 && numParams != e.paramCounts[kernel])
    fail("kernel '" + kernelName + "' takes " +
         std::to_string(e.paramCounts[kernel]) +
         " parameters; the host entry passes " + std::to_string(numParams));
  if (numParams > 0 && !params)
    fail("kernel '" + kernelName + "': no parameter array");
  if (smem < 0 || smem > kMax)
    fail("kernel '" + kernelName + "': dynamic shared memory " +
         std::to_string(smem) + " bytes is not launchable");
  CUfunction f = e.functions[kernel];
  auto optedIn =
      smemOptIn_.try_emplace(kernelName, kDefaultDynamicSmemLimit).first;
  if (smem > optedIn->second) {
    if (smem > device_.maxDynamicSmem)
      fail("kernel '" + kernelName + "' needs " + std::to_string(smem) +
           " bytes of dynamic shared memory; " + device_.name + " allows " +
           std::to_string(device_.maxDynamicSmem));
    CUresult r =
        d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             static_cast<int>(smem));
    if (r != CUDA_SUCCESS)
      fail("kernel '" + kernelName + "': cuFuncSetAttribute(" +
           "MAX_DYNAMIC_SHARED_SIZE_BYTES, " + std::to_string(smem) +
           ") failed: " + d.errorText(r));
    optedIn->second = smem;
  }
  CUresult r = d.cuLaunchKernel(
      f, static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
      static_cast<unsigned>(grid[2]), static_cast<unsigned>(block[0]),
      static_cast<unsigned>(block[1]), static_cast<unsigned>(block[2]),
      static_cast<unsigned>(smem), stream_, params, nullptr);
  if (r != CUDA_SUCCESS)
    fail("kernel '" + kernelName + "' (grid " + dims(grid) + ", block " +
         dims(block) + ", " + std::to_string(smem) +
         " bytes dynamic shared memory): cuLaunchKernel failed: " +
         d.errorText(r));
}

void CudaExecutor::runLocked(const BoundEntry &e, uint64_t x, uint64_t y,
                             int64_t m, int64_t expert) const {
  const Entry &s = e.spec;
  const std::string subj = subject(e);
  if (m < 0 || (m > 0 && (!x || !y)))
    throw Error(dir_, subj, "bad activation rows or device pointers",
                ErrorKind::InvalidArgument);
  if (s.kind == Kind::MoE && (expert < 0 || expert >= s.experts))
    throw Error(dir_, subj,
                "expert " + std::to_string(expert) + " is out of range [0, " +
                    std::to_string(s.experts) + ")",
                ErrorKind::InvalidArgument);
  if (m == 0)
    return;
  const int64_t wsBytes = mulAdd(s.workspacePerRow, m, s.workspaceFixed);
  if (wsBytes < 0)
    throw Error(dir_, subj,
                "workspace of " + std::to_string(m) + " rows overflows",
                ErrorKind::InvalidArgument);
  reserve(workspace_, workspaceCapacity_, static_cast<uint64_t>(wsBytes));

  const bool embedding = s.kind == Kind::Embedding;
  const int64_t yCols = embedding ? s.inFeatures : s.outFeatures;
  std::vector<int64_t> xd = embedding ? memrefDescriptor(x, {m})
                                      : memrefDescriptor(x, {m, s.inFeatures});
  std::vector<int64_t> yd = memrefDescriptor(y, {m, yCols});
  std::vector<int64_t> wd =
      memrefDescriptor(wsBytes ? workspace_ : 0, {wsBytes});
  LaunchState state;
  state.iface = {&state, &CudaExecutor::launchThunk};
  state.executor = this;
  state.entry = &e;
  const cq_gpu_launcher *launcher = &state.iface;
  int64_t expertArg = expert;
  std::vector<void *> args;
  args.reserve(5 + e.weights.size());
  args.push_back(&launcher);
  args.push_back(xd.data());
  args.push_back(yd.data());
  if (s.kind == Kind::MoE)
    args.push_back(&expertArg);
  for (const std::vector<int64_t> &w : e.weights)
    args.push_back(const_cast<int64_t *>(w.data()));
  args.push_back(wd.data());
  e.fn(args.data());
  if (state.failed) {
    if (state.error)
      throw *state.error;
    throw Error(dir_, subj, "entry '" + s.symbol + "': a kernel launch failed",
                ErrorKind::Io);
  }
}

void CudaExecutor::run(size_t entry, uint64_t x, uint64_t y, int64_t m,
                       int64_t expert) const {
  if (entry >= entries_.size())
    throw Error(dir_, "",
                "CUDA entry index " + std::to_string(entry) +
                    " is out of range",
                ErrorKind::InvalidArgument);
  std::lock_guard<std::mutex> lock(mutex_);
  ContextScope scope(*this);
  runLocked(*entries_[entry], x, y, m, expert);
}

void CudaExecutor::runHost(size_t entry, const void *x, void *y, int64_t m,
                           int64_t expert) const {
  if (entry >= entries_.size())
    throw Error(dir_, "",
                "CUDA entry index " + std::to_string(entry) +
                    " is out of range",
                ErrorKind::InvalidArgument);
  const BoundEntry &e = *entries_[entry];
  const Entry &s = e.spec;
  const std::string subj = subject(e);
  if (m < 0 || (m > 0 && (!x || !y)))
    throw Error(dir_, subj, "bad activation rows or pointers",
                ErrorKind::InvalidArgument);
  const bool embedding = s.kind == Kind::Embedding;
  if (embedding)
    for (int64_t i = 0; i < m; ++i) {
      const int64_t index = static_cast<const int64_t *>(x)[i];
      if (index < 0 || index >= s.outFeatures)
        throw Error(dir_, subj,
                    "index " + std::to_string(index) + " is out of range [0, " +
                        std::to_string(s.outFeatures) + ")",
                    ErrorKind::InvalidArgument);
    }
  if (m == 0) {
    run(entry, 0, 0, 0, expert); // argument checks only
    return;
  }
  const int64_t xBytes = embedding
                             ? mulAdd(m, 8, 0)
                             : mulAdd(mulAdd(m, s.inFeatures, 0),
                                      static_cast<int64_t>(s.elementSize), 0);
  const int64_t yBytes =
      mulAdd(mulAdd(m, embedding ? s.inFeatures : s.outFeatures, 0),
             static_cast<int64_t>(s.elementSize), 0);
  if (xBytes < 0 || yBytes < 0)
    throw Error(dir_, subj, "activation size overflows",
                ErrorKind::InvalidArgument);
  const CudaDriver &d = *driver_;
  std::lock_guard<std::mutex> lock(mutex_);
  ContextScope scope(*this);
  reserve(hostX_, hostXCapacity_, static_cast<uint64_t>(xBytes));
  reserve(hostY_, hostYCapacity_, static_cast<uint64_t>(yBytes));
  d.check(d.cuMemcpyHtoDAsync(hostX_, x, static_cast<size_t>(xBytes), stream_),
          "cuMemcpyHtoDAsync", subj + ": x");
  runLocked(e, hostX_, hostY_, m, expert);
  d.check(d.cuMemcpyDtoHAsync(y, hostY_, static_cast<size_t>(yBytes), stream_),
          "cuMemcpyDtoHAsync", subj + ": y");
  CUresult r = d.cuStreamSynchronize(stream_);
  if (r != CUDA_SUCCESS)
    throw Error(dir_, subj,
                "entry '" + s.symbol +
                    "' failed on the device: " + d.errorText(r),
                ErrorKind::Unsupported);
}

void CudaExecutor::synchronize() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ContextScope scope(*this);
  CUresult r = driver_->cuStreamSynchronize(stream_);
  if (r != CUDA_SUCCESS)
    throw Error(dir_, "", "the device failed: " + driver_->errorText(r),
                ErrorKind::Unsupported);
}

} // namespace comfyquant::rt
