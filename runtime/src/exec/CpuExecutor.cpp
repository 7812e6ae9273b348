//===- CpuExecutor.cpp - kernels.so entries of one CPU variant ------------===//
//
// Picks the variant (the option or $COMFYQUANT_CPU_VARIANT, which pin it,
// else the best this CPU supports), binds every module's entries of that
// variant, and of the variants below it that calls with fewer rows than
// an entry's min_rows run (CpuDispatch.h), and its weights as memref
// descriptors into the mapped checkpoint (zero copy), and runs linear/MoE
// calls split across threads: by columns of y when the kernel computes a
// given column range (each thread decodes only its share of the weights),
// else by rows of x when they are independent.
//===----------------------------------------------------------------------===//
#include "exec/Executor.h"

#include "exec/CpuDispatch.h"
#include "MemRefDescriptor.h"
#include "comfyquant/runtime/CpuFeatures.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Targets.h"
#include "comfyquant/runtime/ThreadPool.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <functional>

namespace comfyquant::rt {

namespace {

/// Column split granularity: every part but the last is a multiple of it.
/// A multiple of the CPU kernels' f32/i32 lanes (8 or 16), so a column's
/// tile form, and with it its float sums, is the same for every split.
constexpr int64_t kColumnChunk = 16;

/// Rows per thread from which independent rows are split rather than
/// columns: about one M block of the CPU kernels (their mc).
constexpr int64_t kRowSplitRows = 256;

/// A positive integer, or 0.
int parseThreadCount(const char *text) {
  char *end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (!end || end == text || *end != '\0' || v < 1 || v > 4096)
    return 0;
  return static_cast<int>(v);
}

std::vector<int64_t> descriptor(const void *data,
                                const std::vector<int64_t> &shape) {
  return memrefDescriptor(reinterpret_cast<uintptr_t>(data), shape);
}

class CpuExecutor final : public Executor {
public:
  explicit CpuExecutor(const ExecutorInputs &in);

  SessionBackend backend() const override { return SessionBackend::Cpu; }
  const std::string &target() const override { return variant_; }
  const std::string &targetFor(size_t module, DType dtype,
                               int64_t m) const override {
    const BoundEntry &e = entryFor(bound_[module], dtype);
    return e.entries[entryForRows(e.entries, m)]->variant;
  }
  const std::vector<std::string> &warnings() const override {
    return warnings_;
  }
  int threads() const override {
    return threads_.load(std::memory_order_relaxed);
  }
  void setThreads(int threads) override {
    threads_.store(std::max(1, threads), std::memory_order_relaxed);
  }

  void run(size_t module, DType dtype, const void *x, int64_t m, void *y,
           int64_t expert) const override;
  void lookup(size_t module, DType dtype, const int64_t *indices, int64_t m,
              void *y) const override;

private:
  /// One variant's entry for one activation dtype.
  struct Kernel {
    KernelEntry fn;
    bool columns; ///< computes only the column range it is given
  };
  /// The entries of one activation dtype calls choose among, best first
  /// (the session's variant, then those with no floor on rows).
  struct BoundEntry {
    std::string dtype;
    std::vector<Kernel> kernels;
    /// Each kernel's manifest entry (its variant and min_rows).
    std::vector<const CpuEntry *> entries;
  };
  struct Bound {
    const ManifestModule *m = nullptr;
    std::vector<BoundEntry> entries;
    /// One descriptor per weight, in argument order.
    std::vector<std::vector<int64_t>> weights;
  };
  void chooseVariant(const Manifest &mf, const SessionOptions &options);
  const BoundEntry &entryFor(const Bound &b, DType dtype) const;
  void runParts(const std::vector<std::array<int64_t, 4>> &parts,
                const std::function<void(int)> &part) const;

  std::string variant_;
  /// The variants calls may run, best first (variant_ first).
  std::vector<std::string> variants_;
  std::vector<std::string> warnings_;
  std::atomic<int> threads_{1};
  std::vector<Bound> bound_;
  std::function<void(int, const std::function<void(int)> &)> parallelFor_;
  std::unique_ptr<WorkerPool> pool_;
};

} // namespace

void CpuExecutor::chooseVariant(const Manifest &mf,
                                const SessionOptions &options) {
  std::string variant = options.variant;
  if (variant.empty())
    if (const char *env = std::getenv("COMFYQUANT_CPU_VARIANT"))
      variant = env;
  if (!mf.cpu)
    throw Error(dir_, "", "the artifact has no CPU kernels",
                ErrorKind::Unsupported);
  const std::vector<std::string> &variants = mf.cpu->variants;
  if (variant.empty()) {
    variants_ = supportedCpuVariants(variants, cpuFeatures(),
                                     [] { return enableAmx(); });
    if (variants_.empty())
      throw Error(dir_, "",
                  "this CPU supports none of the artifact's variants (" +
                      cpuFeatures().describe() + ")",
                  ErrorKind::Unsupported);
    variant = variants_.front();
  } else {
    if (std::find(variants.begin(), variants.end(), variant) ==
        variants.end())
      throw Error(dir_, "",
                  "the artifact has no kernels for CPU variant '" + variant +
                      "'",
                  ErrorKind::Unsupported);
    std::string why;
    if (!cpuSupportsVariant(variant, &why))
      throw Error(dir_, "", why, ErrorKind::Unsupported);
    if (findCpuVariant(variant)->amxTiles && !enableAmx(&why))
      throw Error(dir_, "", why, ErrorKind::Unsupported);
    variants_ = {variant}; // pinned: every call runs it
  }
  variant_ = variant;
}

CpuExecutor::CpuExecutor(const ExecutorInputs &in)
    : Executor(in.artifact.dir()) {
  const Manifest &mf = in.artifact.manifest();
  chooseVariant(mf, in.options);
  int threads = in.options.threads;
  if (threads <= 0)
    if (const char *env = std::getenv("COMFYQUANT_THREADS")) {
      threads = parseThreadCount(env);
      if (threads == 0)
        warnings_.push_back(std::string("$COMFYQUANT_THREADS='") + env +
                            "' is not a thread count in [1, 4096]; ignored");
    }
  if (threads <= 0)
    threads = availableCores();
  threads_ = threads;
  parallelFor_ = in.options.parallelFor;
  if (!parallelFor_)
    pool_ = std::make_unique<WorkerPool>();

  // Bind every module: entries of the variant, weights into the mapping.
  for (const ManifestModule &m : mf.modules) {
    Bound b;
    b.m = &m;
    const std::string subject = moduleSubject(m.name);
    for (const std::string &dt : m.cpuDTypes()) {
      std::vector<const CpuEntry *> es = dispatchEntries(m, dt, variants_);
      if (es.empty())
        throw Error(dir_, subject,
                    "no " + dt + " kernel for CPU variant '" + variant_ + "'",
                    ErrorKind::Unsupported);
      BoundEntry be{dt, {}, es};
      for (const CpuEntry *e : es)
        be.kernels.push_back({in.artifact.entry(e->symbol), e->columnSplit});
      b.entries.push_back(std::move(be));
    }
    for (const ManifestWeight &w : m.weights)
      b.weights.push_back(descriptor(
          boundTensor(in.checkpoint, in.checkpointPath, subject, w).data,
          w.shape));
    bound_.push_back(std::move(b));
  }
}

const CpuExecutor::BoundEntry &CpuExecutor::entryFor(const Bound &b,
                                                     DType dtype) const {
  const char *key = activationKey(b.m->name, dtype);
  for (const BoundEntry &e : b.entries)
    if (e.dtype == key)
      return e;
  throw Error(dir_, moduleSubject(b.m->name),
              std::string("the artifact has no ") + key +
                  " kernels (compile with --dtypes including " + key + ")",
              ErrorKind::Unsupported);
}

void CpuExecutor::runParts(const std::vector<std::array<int64_t, 4>> &parts,
                           const std::function<void(int)> &part) const {
  const int count = static_cast<int>(parts.size());
  if (count == 1)
    part(0);
  else if (parallelFor_)
    parallelFor_(count, part);
  else
    pool_->parallelFor(count, part);
}

void CpuExecutor::run(size_t module, DType dtype, const void *x, int64_t m,
                      void *y, int64_t expert) const {
  const Bound &b = bound_[module];
  const ManifestModule &am = *b.m;
  const std::string subject = moduleSubject(am.name);
  const BoundEntry &bound = entryFor(b, dtype);
  if (m < 0 || (m > 0 && (!x || !y)))
    throw Error(dir_, subject, "bad activation rows or pointers",
                ErrorKind::InvalidArgument);
  // The variant by the call's rows (all of them, before any split).
  const Kernel &entry = bound.kernels[entryForRows(bound.entries, m)];
  const bool moe = am.kind == ModuleKind::MoE;
  if (moe && (expert < 0 || expert >= am.experts))
    throw Error(dir_, subject,
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
    int64_t chunk =
        ((N + n - 1) / n + kColumnChunk - 1) / kColumnChunk * kColumnChunk;
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
  runParts(parts, [&](int p) {
    call(parts[p][0], parts[p][1], parts[p][2], parts[p][3]);
  });
}

void CpuExecutor::lookup(size_t module, DType dtype, const int64_t *indices,
                         int64_t m, void *y) const {
  const Bound &b = bound_[module];
  const ManifestModule &am = *b.m;
  const std::string subject = moduleSubject(am.name);
  const Kernel &entry = entryFor(b, dtype).kernels.front();
  if (m < 0 || (m > 0 && (!indices || !y)))
    throw Error(dir_, subject, "bad index count or pointers",
                ErrorKind::InvalidArgument);
  for (int64_t i = 0; i < m; ++i)
    if (indices[i] < 0 || indices[i] >= am.outFeatures)
      throw Error(dir_, subject,
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

std::unique_ptr<Executor> openCpuExecutor(const ExecutorInputs &inputs) {
  return std::make_unique<CpuExecutor>(inputs);
}

} // namespace comfyquant::rt
