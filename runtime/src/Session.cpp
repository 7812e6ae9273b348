//===- Session.cpp - run compiled modules on a mapped checkpoint ----------===//
#include "comfyquant/runtime/Session.h"

#include "MemRefDescriptor.h"
#include "comfyquant/runtime/CpuFeatures.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Targets.h"
#include "comfyquant/runtime/ThreadPool.h"
#include "cuda/CudaExecutor.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include <sys/stat.h>

namespace comfyquant::rt {

namespace {

std::vector<int64_t> descriptor(const void *data,
                                const std::vector<int64_t> &shape) {
  return memrefDescriptor(reinterpret_cast<uintptr_t>(data), shape);
}

const char *dtypeKey(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  default:
    return nullptr;
  }
}

std::string hashString(uint64_t h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016" PRIx64, h);
  return buf;
}

/// Column split granularity: every part but the last is a multiple of it.
/// A multiple of the CPU kernels' f32/i32 lanes (8 or 16), so a column's
/// tile form, and with it its float sums, is the same for every split.
constexpr int64_t kColumnChunk = 16;

/// Rows per thread from which independent rows are split rather than
/// columns: about one M block of the CPU kernels (their mc).
constexpr int64_t kRowSplitRows = 256;

std::string baseName(const std::string &p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

bool isFile(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// A positive integer, or 0.
int parseThreadCount(const char *text) {
  char *end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (!end || end == text || *end != '\0' || v < 1 || v > 4096)
    return 0;
  return static_cast<int>(v);
}

/// The checkpoint tensor `w` binds, checked against the manifest's record
/// of it (`path` is the checkpoint's, for messages).
const TensorInfo &boundTensor(const Checkpoint &checkpoint,
                              const std::string &path,
                              const std::string &subject,
                              const ManifestWeight &w) {
  const TensorInfo *t = checkpoint.find(w.tensor);
  auto mismatch = [&](const std::string &what) {
    return Error(path, subject,
                 "tensor '" + w.tensor + "' " + what +
                     " differs from the artifact (was the checkpoint "
                     "rewritten?)",
                 ErrorKind::Mismatch);
  };
  if (!t)
    throw Error(path, subject,
                "tensor '" + w.tensor + "' the kernels bind is missing",
                ErrorKind::Mismatch);
  if (dtypeName(t->dtype) != w.dtype)
    throw mismatch("dtype");
  if (t->shape != w.shape)
    throw mismatch("shape");
  if (t->fileOffset != w.offset)
    throw mismatch("offset");
  if (!w.shard.empty() && t->file && baseName(*t->file) != baseName(w.shard))
    throw mismatch("shard");
  return *t;
}
} // namespace

/// An entry of the session's variant for one activation dtype.
struct Session::BoundEntry {
  std::string dtype;
  KernelEntry fn;
  bool columns; ///< computes only the column range it is given
};

struct Session::Bound {
  const ManifestModule *m = nullptr;
  std::vector<BoundEntry> entries;
  /// cuda: (dtype, CudaExecutor entry index) per activation dtype.
  std::vector<std::pair<std::string, size_t>> cudaEntries;
  /// One descriptor per weight, in argument order.
  std::vector<std::vector<int64_t>> weights;
};

std::unique_ptr<Session> Session::open(const std::string &artifactDir,
                                       const SessionOptions &options) {
  std::unique_ptr<Session> s(new Session());
  s->artifact_ = Artifact::open(artifactDir);
  const Manifest &mf = s->artifact_->manifest();

  // The checkpoint, and its identity against the manifest. Without an
  // explicit one: the manifest's path relative to the artifact first (the
  // pair was moved together), then its absolute path.
  auto openChecked = [&](const std::string &path) {
    std::unique_ptr<Checkpoint> c = Checkpoint::open(path);
    const uint64_t size = c->totalSize();
    const std::string hash = hashString(c->headerHash());
    if (size != mf.checkpointSize || hash != mf.checkpointHash)
      throw Error(path, "",
                  "checkpoint does not match the artifact '" + artifactDir +
                      "' (compiled for " + mf.checkpointPath + ": size " +
                      std::to_string(mf.checkpointSize) + ", " +
                      mf.checkpointHash + "; this file: size " +
                      std::to_string(size) + ", " + hash + ")",
                  ErrorKind::Mismatch);
    return c;
  };
  std::string path = options.checkpoint;
  if (!path.empty()) {
    s->checkpoint_ = openChecked(path);
  } else {
    std::vector<std::string> candidates;
    if (!mf.checkpointRelativePath.empty())
      candidates.push_back(artifactDir + "/" + mf.checkpointRelativePath);
    candidates.push_back(mf.checkpointPath);
    std::unique_ptr<Error> firstMismatch;
    for (const std::string &c : candidates) {
      if (!isFile(c))
        continue;
      try {
        s->checkpoint_ = openChecked(c);
        path = c;
        break;
      } catch (const Error &e) {
        if (!firstMismatch)
          firstMismatch = std::make_unique<Error>(e);
      }
    }
    if (!s->checkpoint_) {
      if (firstMismatch)
        throw *firstMismatch;
      std::string tried;
      for (const std::string &c : candidates)
        tried += (tried.empty() ? "'" : ", '") + c + "'";
      throw Error(artifactDir, "",
                  "the checkpoint the artifact was compiled for is not at " +
                      tried,
                  ErrorKind::Io);
    }
    if (path != candidates.front())
      s->warnings_.push_back("checkpoint not found next to the artifact ('" +
                             candidates.front() + "'); opened '" + path + "'");
  }
  s->checkpointPath_ = path;

  if (options.backend == "cuda") {
    s->bindCuda(options);
    return s;
  }
  if (!options.backend.empty() && options.backend != "cpu")
    throw Error(artifactDir, "",
                "unknown backend '" + options.backend + "' (cpu or cuda)",
                ErrorKind::InvalidArgument);

  // The CPU variant.
  std::string variant = options.variant;
  if (variant.empty())
    if (const char *env = std::getenv("COMFYQUANT_CPU_VARIANT"))
      variant = env;
  if (!mf.cpu)
    throw Error(artifactDir, "", "the artifact has no CPU kernels",
                ErrorKind::Unsupported);
  const std::vector<std::string> &variants = mf.cpu->variants;
  if (variant.empty()) {
    variant = bestCpuVariant(variants);
    if (variant.empty())
      throw Error(artifactDir, "",
                  "this CPU supports none of the artifact's variants (" +
                      cpuFeatures().describe() + ")",
                  ErrorKind::Unsupported);
  } else {
    if (std::find(variants.begin(), variants.end(), variant) ==
        variants.end())
      throw Error(artifactDir, "",
                  "the artifact has no kernels for CPU variant '" + variant +
                      "'",
                  ErrorKind::Unsupported);
    std::string why;
    if (!cpuSupportsVariant(variant, &why))
      throw Error(artifactDir, "", why, ErrorKind::Unsupported);
    if (findCpuVariant(variant)->amxTiles && !enableAmx(&why))
      throw Error(artifactDir, "", why, ErrorKind::Unsupported);
  }
  s->variant_ = variant;

  int threads = options.threads;
  if (threads <= 0)
    if (const char *env = std::getenv("COMFYQUANT_THREADS")) {
      threads = parseThreadCount(env);
      if (threads == 0)
        s->warnings_.push_back(std::string("$COMFYQUANT_THREADS='") + env +
                               "' is not a thread count in [1, 4096]; "
                               "ignored");
    }
  if (threads <= 0)
    threads = availableCores();
  s->threads_ = threads;
  s->parallelFor_ = options.parallelFor;
  if (!s->parallelFor_)
    s->pool_ = std::make_unique<WorkerPool>();

  // Bind every module: entries of the variant, weights into the mapping.
  for (const ManifestModule &m : mf.modules) {
    Bound b;
    b.m = &m;
    const std::string subject = moduleSubject(m.name);
    for (const std::string &dt : m.cpuDTypes()) {
      const CpuEntry *e = m.findCpuEntry(dt, variant);
      if (!e)
        throw Error(artifactDir, subject,
                    "no " + dt + " kernel for CPU variant '" + variant + "'",
                    ErrorKind::Unsupported);
      b.entries.push_back(
          {dt, s->artifact_->entry(e->symbol), e->columnSplit});
    }
    for (const ManifestWeight &w : m.weights)
      b.weights.push_back(descriptor(
          boundTensor(*s->checkpoint_, path, subject, w).data, w.shape));
    s->bound_.push_back(std::move(b));
  }
  return s;
}

void Session::bindCuda(const SessionOptions &options) {
  const Manifest &mf = artifact_->manifest();
  const std::string &dir = artifact_->dir();
  if (!mf.cuda)
    throw Error(dir, "",
                "the artifact has no CUDA kernels (compile it with --target "
                "cuda:ARCH)",
                ErrorKind::Unsupported);
  backend_ = "cuda";
  threads_ = 1;
  auto inDir = [&](const std::string &p) {
    return p.empty() || p[0] == '/' ? p : dir + "/" + p;
  };
  std::vector<CudaExecutor::Image> images;
  for (const CudaImage &i : mf.cuda->images)
    images.push_back({i.arch, inDir(i.cubin), inDir(i.ptx)});
  CudaExecutorOptions eo;
  eo.device = options.device;
  eo.stream = options.cudaStream;
  cuda_ = CudaExecutor::open(CudaDriver::load(), dir, images,
                             inDir(mf.cuda->hostLibrary), eo);
  const std::string arch = cuda_->imageArch();
  variant_ = arch;
  warnings_.insert(warnings_.end(), cuda_->warnings().begin(),
                   cuda_->warnings().end());

  // Every bound tensor goes to the device once, before any call.
  std::vector<std::vector<size_t>> weights(mf.modules.size());
  for (size_t i = 0; i < mf.modules.size(); ++i)
    for (const ManifestWeight &w : mf.modules[i].weights) {
      const TensorInfo &t = boundTensor(
          *checkpoint_, checkpointPath_, moduleSubject(mf.modules[i].name), w);
      weights[i].push_back(
          cuda_->addWeight({w.tensor, t.data, t.nbytes(), w.shape}));
    }
  cuda_->upload();

  for (size_t i = 0; i < mf.modules.size(); ++i) {
    const ManifestModule &m = mf.modules[i];
    Bound b;
    b.m = &m;
    for (const std::string &dt : mf.dtypes) {
      auto ofDType = [&](const CudaEntry &e) {
        return e.modules.empty() && e.dtype == dt;
      };
      if (std::none_of(m.cudaEntries.begin(), m.cudaEntries.end(), ofDType))
        continue;
      const CudaEntry *e = m.findCudaEntry(dt, arch);
      if (!e)
        throw Error(dir, moduleSubject(m.name),
                    "no " + dt + " CUDA kernels for " + arch,
                    ErrorKind::Unsupported);
      CudaExecutor::Entry spec;
      spec.module = m.name;
      spec.kind = m.kind == "moe"         ? CudaExecutor::Kind::MoE
                  : m.kind == "embedding" ? CudaExecutor::Kind::Embedding
                                          : CudaExecutor::Kind::Linear;
      spec.inFeatures = m.inFeatures;
      spec.outFeatures = m.outFeatures;
      spec.experts = m.experts;
      spec.elementSize = dt == "f32" ? 4 : 2;
      spec.symbol = e->host;
      spec.kernels = e->kernels;
      spec.workspacePerRow = e->workspacePerRow;
      spec.workspaceFixed = e->workspaceFixed;
      spec.weights = weights[i];
      b.cudaEntries.emplace_back(dt, cuda_->addEntry(spec));
    }
    bound_.push_back(std::move(b));
  }
}

std::string Session::deviceDescription() const {
  if (!cuda_)
    return "";
  return cuda_->device().describe() + ", " + cuda_->imageArch() +
         (cuda_->jitCompiled() ? " PTX (JIT)" : " cubin");
}

Session::~Session() = default; // stops the pool's workers

const Manifest &Session::manifest() const { return artifact_->manifest(); }

const std::string &Session::artifactDir() const { return artifact_->dir(); }

void Session::setThreads(int threads) {
  threads_.store(std::max(1, threads), std::memory_order_relaxed);
}

size_t Session::moduleCount() const { return bound_.size(); }

const ManifestModule &Session::module(size_t index) const {
  return *bound(index).m;
}

int64_t Session::findModule(const std::string &name) const {
  for (size_t i = 0; i < bound_.size(); ++i)
    if (bound_[i].m->name == name)
      return static_cast<int64_t>(i);
  return -1;
}

const Session::Bound &Session::bound(size_t module) const {
  if (module >= bound_.size())
    throw Error(artifact_->dir(), "",
                "module index " + std::to_string(module) + " out of range [0, " +
                    std::to_string(bound_.size()) + ")",
                ErrorKind::InvalidArgument);
  return bound_[module];
}

const Session::BoundEntry &Session::entryFor(const Bound &b,
                                               DType dtype) const {
  const char *key = dtypeKey(dtype);
  if (!key)
    throw Error(artifact_->dir(), moduleSubject(b.m->name),
                std::string("activations must be F32, BF16 or F16, got ") +
                    dtypeName(dtype),
                ErrorKind::InvalidArgument);
  for (const BoundEntry &e : b.entries)
    if (e.dtype == key)
      return e;
  throw Error(artifact_->dir(), moduleSubject(b.m->name),
              std::string("the artifact has no ") + key +
                  " kernels (compile with --dtypes including " + key + ")",
              ErrorKind::Unsupported);
}

size_t Session::cudaEntryFor(const Bound &b, DType dtype) const {
  const char *key = dtypeKey(dtype);
  if (!key)
    throw Error(artifact_->dir(), moduleSubject(b.m->name),
                std::string("activations must be F32, BF16 or F16, got ") +
                    dtypeName(dtype),
                ErrorKind::InvalidArgument);
  for (const auto &[dt, index] : b.cudaEntries)
    if (dt == key)
      return index;
  throw Error(artifact_->dir(), moduleSubject(b.m->name),
              std::string("the artifact has no ") + key +
                  " CUDA kernels (compile with --dtypes including " + key +
                  ")",
              ErrorKind::Unsupported);
}

const CudaExecutor &Session::cudaExecutor() const {
  if (!cuda_)
    throw Error(artifact_->dir(), "",
                "device pointers need a session on the cuda backend",
                ErrorKind::InvalidArgument);
  return *cuda_;
}

void Session::runDevice(size_t module, DType dtype, uint64_t x, int64_t m,
                        uint64_t y, int64_t expert) const {
  const Bound &b = bound(module);
  const CudaExecutor &cuda = cudaExecutor();
  if (b.m->kind == "embedding")
    throw Error(artifact_->dir(), moduleSubject(b.m->name),
                "an embedding takes indices (lookup)",
                ErrorKind::InvalidArgument);
  cuda.run(cudaEntryFor(b, dtype), x, y, m, expert);
}

void Session::lookupDevice(size_t module, DType dtype, uint64_t indices,
                           int64_t m, uint64_t y) const {
  const Bound &b = bound(module);
  const CudaExecutor &cuda = cudaExecutor();
  if (b.m->kind != "embedding")
    throw Error(artifact_->dir(), moduleSubject(b.m->name),
                "is not an embedding", ErrorKind::InvalidArgument);
  cuda.run(cudaEntryFor(b, dtype), indices, y, m);
}

void Session::synchronize() const {
  if (cuda_)
    cuda_->synchronize();
}

void Session::run(size_t module, DType dtype, const void *x, int64_t m,
                  void *y, int64_t expert) const {
  const Bound &b = bound(module);
  const ManifestModule &am = *b.m;
  const std::string subject = moduleSubject(am.name);
  if (am.kind == "embedding")
    throw Error(artifact_->dir(), subject, "an embedding takes indices (lookup)",
                ErrorKind::InvalidArgument);
  if (cuda_) {
    cuda_->runHost(cudaEntryFor(b, dtype), x, y, m, expert);
    return;
  }
  const BoundEntry &entry = entryFor(b, dtype);
  if (m < 0 || (m > 0 && (!x || !y)))
    throw Error(artifact_->dir(), subject, "bad activation rows or pointers",
                ErrorKind::InvalidArgument);
  const bool moe = am.kind == "moe";
  if (moe && (expert < 0 || expert >= am.experts))
    throw Error(artifact_->dir(), subject,
                "expert " + std::to_string(expert) + " is out of range [0, " +
                    std::to_string(am.experts) + ")",
                ErrorKind::InvalidArgument);
  if (m == 0)
    return;
  const size_t esize = dtypeSize(dtype);
  const int64_t K = am.inFeatures, N = am.outFeatures;
  // rows [row0, row0 + rows) x columns [c0, c1) of y.
  auto call = [&](int64_t row0, int64_t rows, int64_t c0, int64_t c1) {
    // {allocated, aligned, offset, sizes[2], strides[2]}, on the stack: a
    // small call should not allocate.
    auto matrix = [](const void *data, int64_t r, int64_t c) {
      auto p = static_cast<int64_t>(reinterpret_cast<uintptr_t>(data));
      return std::array<int64_t, 7>{p, p, 0, r, c, c, 1};
    };
    std::array<int64_t, 7> xd = matrix(
        static_cast<const uint8_t *>(x) + row0 * K * esize, rows, K);
    std::array<int64_t, 7> yd =
        matrix(static_cast<uint8_t *>(y) + row0 * N * esize, rows, N);
    int64_t e = expert;
    constexpr size_t kInline = 32;
    std::array<void *, kInline> inlineArgs;
    std::vector<void *> heapArgs;
    const size_t nargs = 5 + (moe ? 1 : 0) + b.weights.size();
    void **args = inlineArgs.data();
    if (nargs > kInline) {
      heapArgs.resize(nargs);
      args = heapArgs.data();
    }
    size_t a = 0;
    args[a++] = xd.data();
    args[a++] = yd.data();
    if (moe)
      args[a++] = &e;
    for (const std::vector<int64_t> &w : b.weights)
      args[a++] = const_cast<int64_t *>(w.data());
    args[a++] = &c0;
    args[a++] = &c1;
    entry.fn(args);
  };
  // Threads split the columns when the kernel honours a column range: each
  // decodes only its share of the weights. With enough rows for every
  // thread to fill M blocks of its own, independent rows are split instead:
  // the kernel decodes weights per M block either way, and a column split
  // would have every thread repeat the activation side (quantization,
  // ConvRot) for all rows. Otherwise rows, at least 16 per thread, when
  // rows are independent. A row's result does not depend on the split (the
  // kernels' forms depend on M = 1 only, not on where a share ends).
  const int threads = threads_.load(std::memory_order_relaxed);
  if (threads <= 1 || (!entry.columns && !(am.rowIndependent && m > 16))) {
    call(0, m, 0, N); // one part: no hand-off at all
    return;
  }
  const bool rowsFillBlocks =
      am.rowIndependent && m >= int64_t(threads) * kRowSplitRows;
  std::vector<std::array<int64_t, 4>> parts; // row0, rows, c0, c1
  if (entry.columns && N >= 2 * kColumnChunk && !rowsFillBlocks) {
    int64_t n = std::min<int64_t>(threads, N / kColumnChunk);
    int64_t chunk = ((N + n - 1) / n + kColumnChunk - 1) / kColumnChunk *
                    kColumnChunk;
    for (int64_t c0 = 0; c0 < N; c0 += chunk)
      parts.push_back({0, m, c0, std::min(N, c0 + chunk)});
  } else if (am.rowIndependent) {
    int64_t n = std::min<int64_t>(threads, (m + 15) / 16);
    int64_t chunk = (m + n - 1) / n;
    for (int64_t r0 = 0; r0 < m; r0 += chunk)
      parts.push_back({r0, std::min(chunk, m - r0), 0, N});
  } else {
    parts.push_back({0, m, 0, N});
  }
  std::function<void(int)> part = [&](int p) {
    call(parts[p][0], parts[p][1], parts[p][2], parts[p][3]);
  };
  const int count = static_cast<int>(parts.size());
  if (count == 1)
    part(0);
  else if (parallelFor_)
    parallelFor_(count, part);
  else
    pool_->parallelFor(count, part);
}

void Session::lookup(size_t module, DType dtype, const int64_t *indices,
                     int64_t m, void *y) const {
  const Bound &b = bound(module);
  const ManifestModule &am = *b.m;
  const std::string subject = moduleSubject(am.name);
  if (am.kind != "embedding")
    throw Error(artifact_->dir(), subject, "is not an embedding",
                ErrorKind::InvalidArgument);
  if (cuda_) {
    cuda_->runHost(cudaEntryFor(b, dtype), indices, y, m);
    return;
  }
  const BoundEntry &entry = entryFor(b, dtype);
  if (m < 0 || (m > 0 && (!indices || !y)))
    throw Error(artifact_->dir(), subject, "bad index count or pointers",
                ErrorKind::InvalidArgument);
  for (int64_t i = 0; i < m; ++i)
    if (indices[i] < 0 || indices[i] >= am.outFeatures)
      throw Error(artifact_->dir(), subject,
                  "index " + std::to_string(indices[i]) +
                      " is out of range [0, " +
                      std::to_string(am.outFeatures) + ")",
                  ErrorKind::InvalidArgument);
  if (m == 0)
    return;
  std::vector<int64_t> id = descriptor(indices, {m});
  std::vector<int64_t> yd = descriptor(y, {m, am.inFeatures});
  std::vector<void *> args = {id.data(), yd.data()};
  for (const std::vector<int64_t> &w : b.weights)
    args.push_back(const_cast<int64_t *>(w.data()));
  int64_t c0 = 0, c1 = am.inFeatures; // every column of the rows
  args.push_back(&c0);
  args.push_back(&c1);
  entry.fn(args.data());
}

} // namespace comfyquant::rt
