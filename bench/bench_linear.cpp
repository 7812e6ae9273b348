//===- bench_linear.cpp - Linear forward throughput vs peers --------------===//
//
// For each module of a bench checkpoint (make_bench_checkpoint) and each M:
//   ours       compiled kernels through the artifact Session API (Ours.cpp;
//              "n/a" until it exists), full forward incl. rotation and
//              activation quantization;
//   reference  rt::referenceLinear (plain scalar loops; only M <= --ref-max-m);
// and, once per (N, K, M) since their cost does not depend on the format,
// the peers on pre-dequantized / pre-quantized weights:
//   OpenBLAS   cblas_sgemm, f32 x · f32 Wᵀ;
//   oneDNN     int8 matmul (s8×s8 and u8×s8 → f32 with per-N weight scales
//              as output scales, then the per-row activation scale applied
//              in the timed loop: oneDNN 2.6 takes only per-N output scales
//              and a [M,1] binary post-op drops it to ref_int8);
//              bf16 matmul (bf16 x · bf16 W → bf16) and f32 matmul, weights
//              reordered once into the layout each primitive asks for;
//   stream     a read of the module's weight bytes (M = 1 decode bound).
// --openblas-probe times one sgemm and prints OpenBLAS's core name: the
// script runs it once per OPENBLAS_CORETYPE candidate and keeps the fastest.
// Timing: one warm-up run, then at least --reps runs (more until --min-time
// seconds), median. GOPS = 2·M·N·K / median / 1e9.
// Output: markdown tables on stdout; progress on stderr.
//===----------------------------------------------------------------------===//
#include "BenchCommon.h"
#include "Ours.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Forward.h"
#include "comfyquant/runtime/ModuleResolver.h"
#include "comfyquant/runtime/Numerics.h"
#include "comfyquant/runtime/Reference.h"
#include "comfyquant/runtime/Safetensors.h"

#include <cblas.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace rt = comfyquant::rt;
using rt::DType;

namespace {

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

struct Options {
  std::string checkpoint;
  std::string artifact;
  std::vector<int64_t> ms = {1, 16, 256, 4096};
  std::vector<std::string> formats;                  // empty: all
  std::vector<std::pair<int64_t, int64_t>> shapes;   // empty: all
  int minReps = 5;
  int maxReps = 50;
  double minTime = 0.3; // seconds of timed runs per measurement, at least
  double budget = 120;  // seconds per measurement, at most (see timeIt)
  int64_t refMaxM = 16;
  bool singleThread = false;
  int64_t singleThreadMaxM = 256;
  int threads = 0; // 0: all cores
  DType act = DType::BF16;
};

void usage() {
  std::cerr <<
      "usage: bench_linear CHECKPOINT [options]\n"
      "  CHECKPOINT           bench.safetensors.index.json from make_bench_checkpoint\n"
      "  --m LIST             rows of x (default 1,16,256,4096)\n"
      "  --formats LIST       format labels (default: all in the checkpoint)\n"
      "  --shapes NxK,...     (default: all in the checkpoint)\n"
      "  --reps N             minimum timed runs, median reported (default 5)\n"
      "  --min-time S         keep running until S seconds (default 0.3)\n"
      "  --budget S           seconds per measurement at most (default 120): fewer\n"
      "                       runs past it, skipped if one run is predicted over S/2\n"
      "  --ref-max-m M        run the reference path only for M <= M (default 16)\n"
      "  --single-thread      also time the peers on one thread, for M <= 256\n"
      "  --single-thread-max-m M  (default 256)\n"
      "  --threads T          threads for 'all threads' (default: all cores)\n"
      "  --act bf16|f32|f16   activation dtype of ours / reference (default bf16)\n"
      "  --artifact DIR       compiled artifact for 'ours' (comfyquant-compile -o DIR)\n"
      "  --openblas-probe     only: time one sgemm, print OpenBLAS's core and GFLOP/s\n";
}

//===----------------------------------------------------------------------===//
// Threads, timing
//===----------------------------------------------------------------------===//

using OmpSetFn = void (*)(int);
using OmpGetFn = int (*)();

enum class Lib { OpenBLAS, OneDNN };

/// Threads of one library only (setting OpenBLAS's wakes its workers).
/// oneDNN (Debian) uses libgomp; reach it without linking a second OpenMP.
void setThreads(Lib lib, int t) {
  static auto ompSet =
      reinterpret_cast<OmpSetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (lib == Lib::OpenBLAS)
    openblas_set_num_threads(t);
  else if (ompSet)
    ompSet(t);
}

/// Lets idle worker threads of the previous measurement stop spinning
/// (OpenBLAS's spin ~2^28 TSC cycles after a call, libgomp's briefly): on a
/// 2-core machine one spinning worker halves a multi-threaded peer.
void quiesce() { std::this_thread::sleep_for(std::chrono::milliseconds(250)); }

int ompMaxThreads() {
  static auto ompGet =
      reinterpret_cast<OmpGetFn>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return ompGet ? ompGet() : -1;
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Timing {
  bool ran = false;
  double median = 0; // seconds
  int reps = 0;
  std::string note; // why not run, or a caveat
};

/// Warm-up + >= minReps timed runs (until minTime), median. Skips when the
/// predicted time per run (<= 0: unknown) exceeds budget / 2 (a safety
/// valve for reference implementations, whose throughput does not grow with
/// M); runs fewer than minReps when the warm-up shows the budget would be
/// exceeded (noted).
Timing timeIt(const std::function<void()> &f, const Options &o,
              double predicted) {
  Timing t;
  if (predicted > 0 && predicted * 2 > o.budget) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "skipped: ~%.0f s/run predicted",
                  predicted);
    t.note = buf;
    return t;
  }
  double t0 = now();
  f();
  double warm = now() - t0;
  int reps = std::max(o.minReps,
                      static_cast<int>(std::ceil(o.minTime / std::max(warm, 1e-9))));
  reps = std::min(reps, std::max(o.maxReps, o.minReps));
  if (warm * reps > o.budget) {
    reps = std::max(1, static_cast<int>(o.budget / std::max(warm, 1e-9)));
    if (reps < o.minReps)
      t.note = "only " + std::to_string(reps) + " run(s): over budget";
  }
  std::vector<double> ts;
  ts.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    double a = now();
    f();
    ts.push_back(now() - a);
  }
  std::sort(ts.begin(), ts.end());
  t.ran = true;
  t.reps = reps;
  t.median = ts.size() % 2 ? ts[ts.size() / 2]
                           : 0.5 * (ts[ts.size() / 2 - 1] + ts[ts.size() / 2]);
  return t;
}

double gopsOf(int64_t M, int64_t N, int64_t K, double sec) {
  return 2.0 * M * N * K / sec / 1e9;
}

std::string fmtNum(double v, int prec = 1) {
  char buf[64];
  if (v >= 100 || prec == 0)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (v >= 10)
    std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  else if (v >= 0.1)
    std::snprintf(buf, sizeof buf, "%.*f", prec + 1, v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string gopsCell(const Timing &t, int64_t M, int64_t N, int64_t K) {
  if (!t.ran)
    return t.note.empty() ? "—" : t.note;
  std::string s = fmtNum(gopsOf(M, N, K, t.median));
  if (!t.note.empty())
    s += " (" + t.note + ")";
  return s;
}

//===----------------------------------------------------------------------===//
// bf16 helpers
//===----------------------------------------------------------------------===//

std::vector<uint16_t> toBf16(const std::vector<float> &v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    o[i] = rt::floatToBFloat16(v[i]);
  return o;
}

//===----------------------------------------------------------------------===//
// Streaming-read bandwidth
//===----------------------------------------------------------------------===//

using U64x4 = uint64_t __attribute__((vector_size(32)));

/// XOR of every 32-byte word of [b, e) (four independent chains, so the
/// loop is bound by the loads, not by the reduction). Inlined into each
/// ISA's entry below, which decides the load width.
__attribute__((always_inline)) inline uint64_t xorBody(const uint8_t *b,
                                                       const uint8_t *e) {
  U64x4 acc[4] = {};
  const uint8_t *p = b;
  for (; p + 128 <= e; p += 128)
    for (int j = 0; j < 4; ++j) {
      U64x4 v;
      std::memcpy(&v, p + 32 * j, 32);
      acc[j] ^= v;
    }
  uint64_t r = 0;
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 4; ++l)
      r ^= acc[j][l];
  for (; p < e; ++p)
    r ^= *p;
  return r;
}
uint64_t xorRangeSse2(const uint8_t *b, const uint8_t *e) {
  return xorBody(b, e);
}
__attribute__((target("avx2"))) uint64_t xorRangeAvx2(const uint8_t *b,
                                                      const uint8_t *e) {
  return xorBody(b, e);
}
uint64_t xorRange(const uint8_t *b, const uint8_t *e) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? xorRangeAvx2(b, e) : xorRangeSse2(b, e);
}

/// Persistent reader threads (thread creation would cost as much as
/// reading a cache-resident weight once): worker i reads slice i when the
/// generation changes.
class ReadPool {
public:
  explicit ReadPool(int threads) : part_(threads) {
    for (int i = 1; i < threads; ++i)
      ws_.emplace_back([this, i] { work(i); });
  }
  ~ReadPool() {
    stop_ = true;
    gen_.fetch_add(1);
    for (std::thread &w : ws_)
      w.join();
  }
  uint64_t read(const uint8_t *src, size_t bytes) {
    src_ = src;
    bytes_ = bytes;
    done_.store(0);
    gen_.fetch_add(1);
    part_[0] = slice(0);
    while (done_.load() != static_cast<int>(ws_.size()))
      ;
    uint64_t r = 0;
    for (uint64_t v : part_)
      r ^= v;
    return r;
  }

private:
  uint64_t slice(int i) {
    const size_t n = part_.size();
    size_t chunk = ((bytes_ + n - 1) / n + 63) / 64 * 64;
    size_t b = std::min(bytes_, chunk * i), e = std::min(bytes_, b + chunk);
    return xorRange(src_ + b, src_ + e);
  }
  void work(int i) {
    uint64_t seen = 0;
    while (true) {
      uint64_t g;
      while ((g = gen_.load()) == seen)
        ;
      seen = g;
      if (stop_)
        return;
      part_[i] = slice(i);
      done_.fetch_add(1);
    }
  }
  std::vector<uint64_t> part_;
  std::vector<std::thread> ws_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> stop_{false};
  const uint8_t *src_ = nullptr;
  size_t bytes_ = 0;
};

/// GB/s (bytes read / s) for a read of `bytes`, cached by size. Like a
/// decode at M = 1, the same bytes are read again on every run (so they
/// are cache-resident when they fit, as the weights are for ours).
double streamGBs(size_t bytes, int threads, const Options &o) {
  static std::map<std::pair<size_t, int>, double> cache;
  auto key = std::make_pair(bytes, threads);
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  std::vector<uint8_t> src(bytes);
  for (size_t i = 0; i < bytes; ++i)
    src[i] = static_cast<uint8_t>(i * 131u);
  volatile uint64_t sink = 0;
  ReadPool pool(threads);
  Timing t = timeIt([&] { sink = sink ^ pool.read(src.data(), bytes); }, o, -1);
  double gbs = bytes / t.median / 1e9;
  cache[key] = gbs;
  return gbs;
}

//===----------------------------------------------------------------------===//
// Peers
//===----------------------------------------------------------------------===//

/// Weights and activations of one (N, K[, M]) for the peers.
struct PeerWeights {
  int64_t N = 0, K = 0;
  std::vector<float> f32;  // [N, K], dequantized (rotated basis for ConvRot)
  std::vector<int8_t> i8;  // [N, K], per-row symmetric int8 of f32
  std::vector<float> sw;   // [N]
  std::string source;      // module it was dequantized from
};

struct PeerActs {
  int64_t M = 0, K = 0;
  std::vector<float> f32;   // [M, K], values exact in bf16
  std::vector<uint16_t> bf16;
  std::vector<int8_t> s8;   // per-row symmetric
  std::vector<uint8_t> u8;  // s8 + 128 (timing only)
  std::vector<float> sx;    // [M]
};

/// Per-row symmetric quantization to [-qmax, qmax].
void quantizeRows(const float *x, int64_t rows, int64_t cols, int8_t *q,
                  float *s, float qmax = 127.0f) {
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c)
      amax = std::max(amax, std::fabs(x[r * cols + c]));
    float sc = std::max(amax / qmax, 1e-30f);
    s[r] = sc;
    for (int64_t c = 0; c < cols; ++c)
      q[r * cols + c] = static_cast<int8_t>(
          std::clamp(std::nearbyint(x[r * cols + c] / sc), -qmax, qmax));
  }
}

PeerActs makeActs(int64_t M, int64_t K, uint64_t seed) {
  PeerActs a;
  a.M = M;
  a.K = K;
  cqbench::Rng rng(seed);
  a.f32.resize(M * K);
  for (float &v : a.f32)
    v = rt::bfloat16ToFloat(
        rt::floatToBFloat16(static_cast<float>(rng.uniform(-1.0, 1.0))));
  a.bf16 = toBf16(a.f32);
  a.s8.resize(M * K);
  a.sx.resize(M);
  quantizeRows(a.f32.data(), M, K, a.s8.data(), a.sx.data());
  a.u8.resize(M * K);
  for (size_t i = 0; i < a.s8.size(); ++i)
    a.u8[i] = static_cast<uint8_t>(a.s8[i] + 128);
  return a;
}

/// Sampled output check: (m, n) pairs spread over the output.
std::vector<std::pair<int64_t, int64_t>> samplePoints(int64_t M, int64_t N) {
  std::vector<std::pair<int64_t, int64_t>> p;
  cqbench::Rng rng(M * 1315423911ull + N);
  for (int i = 0; i < 16; ++i)
    p.push_back({rng.below(static_cast<uint32_t>(M)),
                 rng.below(static_cast<uint32_t>(N))});
  return p;
}

/// max |got - want| / max(|want|) over the samples, as text if too large.
std::string checkSamples(const std::function<double(int64_t, int64_t)> &got,
                         const std::function<double(int64_t, int64_t)> &want,
                         int64_t M, int64_t N, double tol) {
  double maxErr = 0, maxRef = 1e-30;
  for (auto [m, n] : samplePoints(M, N)) {
    double w = want(m, n), g = got(m, n);
    maxErr = std::max(maxErr, std::fabs(g - w));
    maxRef = std::max(maxRef, std::fabs(w));
  }
  double rel = maxErr / maxRef;
  if (std::isfinite(rel) && rel <= tol)
    return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, "CHECK FAILED (rel err %.2g)", rel);
  return buf;
}

const char *isaName(dnnl::cpu_isa isa) {
  using I = dnnl::cpu_isa;
  switch (isa) {
  case I::sse41: return "sse41";
  case I::avx: return "avx";
  case I::avx2: return "avx2";
  case I::avx2_vnni: return "avx2_vnni";
  case I::avx512_mic: return "avx512_mic";
  case I::avx512_mic_4ops: return "avx512_mic_4ops";
  case I::avx512_core: return "avx512_core";
  case I::avx512_core_vnni: return "avx512_core_vnni";
  case I::avx512_core_bf16: return "avx512_core_bf16";
  case I::avx512_core_amx: return "avx512_core_amx";
  default: return "unknown";
  }
}

/// Whether oneDNN's int8 kernels accumulate u8·s8 pairs exactly (VNNI /
/// AMX). Without it (AVX2, AVX-512 without VNNI) they use vpmaddubsw, whose
/// s16 pair sums saturate for full-range weights: oneDNN's documented
/// remedy is 7-bit weights, which the peer then uses.
bool dnnlExactInt8() {
  using I = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
  case I::sse41:
  case I::avx:
  case I::avx2:
  case I::avx512_mic:
  case I::avx512_mic_4ops:
  case I::avx512_core:
    return false;
  default:
    return true;
  }
}

struct PeerResult {
  Timing mt, st;       // all threads, one thread
  std::string impl;    // oneDNN impl_info_str, or "" for non-oneDNN
  std::string problem; // creation error / check failure
};

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

class Peers {
public:
  Peers(const Options &o) : o_(o), eng_(dnnl::engine::kind::cpu, 0), s_(eng_) {}

  /// Every peer for one (N, K, M). Results keyed by peer name.
  std::map<std::string, PeerResult> run(const PeerWeights &w,
                                        const PeerActs &a, int mtThreads) {
    std::map<std::string, PeerResult> r;
    const int64_t M = a.M, N = w.N, K = w.K;
    auto both = [&](const std::string &peer, Lib lib,
                    const std::function<void()> &f, PeerResult &res) {
      quiesce();
      setThreads(lib, mtThreads);
      res.mt = timeIt(f, o_, predict(peer + "/mt", M, N, K));
      remember(peer + "/mt", M, N, K, res.mt);
      if (o_.singleThread && M <= o_.singleThreadMaxM) {
        setThreads(lib, 1);
        res.st = timeIt(f, o_, predict(peer + "/st", M, N, K));
        remember(peer + "/st", M, N, K, res.st);
        setThreads(lib, mtThreads);
      }
    };

    // OpenBLAS sgemm.
    {
      std::vector<float> y(M * N);
      auto f = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f,
                    a.f32.data(), K, w.f32.data(), K, 0.0f, y.data(), N);
      };
      PeerResult &res = r["sgemm"];
      both("sgemm", Lib::OpenBLAS, f, res);
      if (res.mt.ran)
        res.problem = checkSamples(
            [&](int64_t m, int64_t n) { return y[m * N + n]; },
            [&](int64_t m, int64_t n) { return dotF32(a, w, m, n); }, M, N,
            1e-4);
    }

    // oneDNN int8: s8 and u8 sources.
    for (bool u8 : {false, true}) {
      std::string name = u8 ? "dnnl_u8s8" : "dnnl_s8s8";
      PeerResult &res = r[name];
      try {
        dnnl::memory::desc src({M, K}, u8 ? dt::u8 : dt::s8, tag::ab);
        dnnl::memory::desc wei({K, N}, dt::s8, tag::any);
        dnnl::memory::desc dst({M, N}, dt::f32, tag::ab);
        // The per-row activation scale (ours-style epilogue) as a binary
        // post-op, multiplied inside the kernel, where oneDNN has a
        // non-reference kernel for it; else applied after the timed calls,
        // as if it were fused for free (the peer at its best: a pass over
        // y, single-threaded, cost AMX's 4000-GOPS kernel a quarter of its
        // time at M = 4096).
        dnnl::memory::desc rowScaleMd({M, 1}, dt::f32, tag::ab);
        auto makePd = [&](bool fuseRows) {
          dnnl::primitive_attr attr;
          attr.set_output_scales(1 << 1, w.sw); // per-N weight scales
          if (fuseRows) {
            dnnl::post_ops ops;
            ops.append_binary(dnnl::algorithm::binary_mul, rowScaleMd);
            attr.set_post_ops(ops);
          }
          return dnnl::matmul::primitive_desc(
              dnnl::matmul::desc(src, wei, dst), attr, eng_);
        };
        bool fuseRows = true;
        dnnl::matmul::primitive_desc pd;
        try {
          pd = makePd(true);
          fuseRows = std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
        } catch (const dnnl::error &) {
          fuseRows = false;
        }
        if (!fuseRows)
          pd = makePd(false);
        res.impl = std::string(pd.impl_info_str()) +
                   (fuseRows ? " (row scale: post-op)"
                             : " (row scale: after timing)");
        dnnl::memory rowScaleM(rowScaleMd, eng_,
                               const_cast<float *>(a.sx.data()));
        dnnl::memory srcM(src, eng_,
                          u8 ? static_cast<void *>(const_cast<uint8_t *>(a.u8.data()))
                             : static_cast<void *>(const_cast<int8_t *>(a.s8.data())));
        dnnl::memory weiM = reorderWeights(
            dnnl::memory::desc({K, N}, dt::s8, tag::ba),
            const_cast<int8_t *>(w.i8.data()), pd.weights_desc());
        dnnl::memory dstM(pd.dst_desc(), eng_);
        dnnl::matmul prim(pd);
        float *y = static_cast<float *>(dstM.get_data_handle());
        auto f = [&] {
          std::unordered_map<int, dnnl::memory> args = {
              {DNNL_ARG_SRC, srcM},
              {DNNL_ARG_WEIGHTS, weiM},
              {DNNL_ARG_DST, dstM}};
          if (fuseRows)
            args.insert({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                         rowScaleM});
          prim.execute(s_, args);
          s_.wait();
        };
        both(name, Lib::OneDNN, f, res);
        if (!fuseRows && res.mt.ran)
          for (int64_t m = 0; m < M; ++m) {
            float sx = a.sx[m];
            float *row = y + m * N;
            for (int64_t n = 0; n < N; ++n)
              row[n] *= sx;
          }
        if (res.mt.ran)
          res.problem = checkSamples(
              [&](int64_t m, int64_t n) { return y[m * N + n]; },
              [&](int64_t m, int64_t n) {
                double acc = 0;
                for (int64_t c = 0; c < K; ++c)
                  acc += (u8 ? double(a.u8[m * K + c]) : double(a.s8[m * K + c])) *
                         w.i8[n * K + c];
                return acc * w.sw[n] * a.sx[m];
              },
              M, N, 1e-5);
      } catch (const dnnl::error &e) {
        res.problem = std::string("unsupported: ") + e.what();
      }
    }

    // oneDNN bf16 (x bf16, W bf16 pre-dequantized, y bf16) and f32.
    floatMatmul(r["dnnl_bf16"], "dnnl_bf16", dt::bf16, w, a, both);
    floatMatmul(r["dnnl_f32"], "dnnl_f32", dt::f32, w, a, both);
    return r;
  }

private:
  static double dotF32(const PeerActs &a, const PeerWeights &w, int64_t m,
                       int64_t n) {
    double acc = 0;
    for (int64_t c = 0; c < w.K; ++c)
      acc += double(a.f32[m * w.K + c]) * w.f32[n * w.K + c];
    return acc;
  }

  dnnl::memory reorderWeights(const dnnl::memory::desc &userMd, void *data,
                              const dnnl::memory::desc &want) {
    dnnl::memory user(userMd, eng_, data);
    dnnl::memory out(want, eng_);
    dnnl::reorder(user, out).execute(s_, user, out);
    s_.wait();
    return out;
  }

  template <typename Both>
  bool floatMatmul(PeerResult &res, const std::string &name, dt type,
                   const PeerWeights &w, const PeerActs &a, Both &both) {
    const int64_t M = a.M, N = w.N, K = w.K;
    try {
      dnnl::memory::desc src({M, K}, type, tag::ab);
      dnnl::memory::desc wei({K, N}, type, tag::any);
      dnnl::memory::desc dst({M, N}, type, tag::ab);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), eng_);
      res.impl = pd.impl_info_str();
      dnnl::memory srcM(src, eng_,
                        type == dt::bf16
                            ? static_cast<void *>(const_cast<uint16_t *>(a.bf16.data()))
                            : static_cast<void *>(const_cast<float *>(a.f32.data())));
      // f32 -> bf16 conversion happens in the (untimed) weight reorder.
      dnnl::memory weiM =
          reorderWeights(dnnl::memory::desc({K, N}, dt::f32, tag::ba),
                         const_cast<float *>(w.f32.data()), pd.weights_desc());
      dnnl::memory dstM(pd.dst_desc(), eng_);
      dnnl::matmul prim(pd);
      auto f = [&] {
        prim.execute(s_, {{DNNL_ARG_SRC, srcM},
                          {DNNL_ARG_WEIGHTS, weiM},
                          {DNNL_ARG_DST, dstM}});
        s_.wait();
      };
      both(name, Lib::OneDNN, f, res);
      if (res.mt.ran) {
        const void *y = dstM.get_data_handle();
        res.problem = checkSamples(
            [&](int64_t m, int64_t n) -> double {
              if (type == dt::f32)
                return static_cast<const float *>(y)[m * N + n];
              return rt::bfloat16ToFloat(static_cast<const uint16_t *>(y)[m * N + n]);
            },
            [&](int64_t m, int64_t n) { return dotF32(a, w, m, n); }, M, N,
            type == dt::f32 ? 1e-4 : 2e-2);
      }
      return true;
    } catch (const dnnl::error &e) {
      res.problem = std::string("unsupported on this CPU (") + e.what() + ")";
      return false;
    }
  }

  /// Predicted seconds per run from the last GOPS of (peer, N, K).
  double predict(const std::string &peer, int64_t M, int64_t N, int64_t K) {
    auto it = lastGops_.find(key(peer, N, K));
    if (it == lastGops_.end() || it->second <= 0)
      return -1;
    return 2.0 * M * N * K / (it->second * 1e9);
  }
  void remember(const std::string &peer, int64_t M, int64_t N, int64_t K,
                const Timing &t) {
    if (t.ran)
      lastGops_[key(peer, N, K)] = gopsOf(M, N, K, t.median);
  }
  static std::string key(const std::string &p, int64_t N, int64_t K) {
    return p + "/" + std::to_string(N) + "x" + std::to_string(K);
  }

  const Options &o_;
  dnnl::engine eng_;
  dnnl::stream s_;
  std::map<std::string, double> lastGops_;
};

/// Peer weights for (N, K): dequantize `m` (without the ConvRot
/// un-rotation: same GEMM cost, and O(N·K) instead of O(N·K·Gr)), then
/// per-row int8.
PeerWeights makePeerWeights(const rt::ResolvedModule &m) {
  PeerWeights w;
  w.N = m.desc.outFeatures;
  w.K = m.desc.inFeatures;
  w.source = m.desc.name;
  w.f32.resize(w.N * w.K);
  rt::dequantizeRows(m, 0, 0, w.N, w.f32.data(), /*unrotate=*/false);
  // Round to bf16 so that the f32 and bf16 peers multiply the same values.
  for (float &v : w.f32)
    v = rt::bfloat16ToFloat(rt::floatToBFloat16(v));
  w.i8.resize(w.N * w.K);
  w.sw.resize(w.N);
  quantizeRows(w.f32.data(), w.N, w.K, w.i8.data(), w.sw.data(),
               dnnlExactInt8() ? 127.0f : 63.0f);
  return w;
}

//===----------------------------------------------------------------------===//
// Rows of the result table
//===----------------------------------------------------------------------===//

struct Row {
  std::string label;
  bool integer = false;
  int64_t N = 0, K = 0, M = 0;
  uint64_t weightBytes = 0;
  Timing ours, ref;
  std::string oursNote, oursCheck;
  double streamGBs = 0; // M = 1 only
};

std::string cpuModelName() {
  FILE *f = std::fopen("/proc/cpuinfo", "r");
  if (!f)
    return "?";
  char line[512];
  std::string name = "?";
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "model name", 10) == 0) {
      const char *c = std::strchr(line, ':');
      if (c) {
        name = c + 2;
        while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
          name.pop_back();
      }
      break;
    }
  std::fclose(f);
  return name;
}

} // namespace

/// --openblas-probe: one-thread sgemm at M = 256, N = K = 3072 (the
/// smallest bench shape), printed as "CORE GFLOPS" for scripts/bench.
int openblasProbe() {
  const int M = 256, N = 3072, K = 3072;
  std::vector<float> a(size_t(M) * K, 0.5f), w(size_t(N) * K, 0.25f),
      y(size_t(M) * N);
  openblas_set_num_threads(1);
  Options o;
  o.minReps = 3;
  Timing t = timeIt(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f,
                    a.data(), K, w.data(), K, 0.0f, y.data(), N);
      },
      o, -1);
  std::printf("%s %.1f\n", openblas_get_corename(), gopsOf(M, N, K, t.median));
  return 0;
}

int main(int argc, char **argv) {
  Options o;
  if (argc == 2 && std::string(argv[1]) == "--openblas-probe")
    return openblasProbe();
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc)
          throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--m")
        o.ms = cqbench::parseIntList(value());
      else if (a == "--formats")
        o.formats = cqbench::parseStringList(value());
      else if (a == "--shapes")
        o.shapes = cqbench::parseShapeList(value());
      else if (a == "--reps")
        o.minReps = std::max(1, std::stoi(value()));
      else if (a == "--min-time")
        o.minTime = std::stod(value());
      else if (a == "--budget")
        o.budget = std::stod(value());
      else if (a == "--ref-max-m")
        o.refMaxM = std::stoll(value());
      else if (a == "--single-thread")
        o.singleThread = true;
      else if (a == "--single-thread-max-m")
        o.singleThreadMaxM = std::stoll(value());
      else if (a == "--threads")
        o.threads = std::stoi(value());
      else if (a == "--artifact")
        o.artifact = value();
      else if (a == "--act") {
        std::string v = value();
        if (v == "bf16")
          o.act = DType::BF16;
        else if (v == "f32")
          o.act = DType::F32;
        else if (v == "f16")
          o.act = DType::F16;
        else
          throw std::invalid_argument("--act takes bf16, f32 or f16");
      } else if (a == "-h" || a == "--help") {
        usage();
        return 0;
      } else if (!a.empty() && a[0] == '-')
        throw std::invalid_argument("unknown option " + a);
      else if (o.checkpoint.empty())
        o.checkpoint = a;
      else
        throw std::invalid_argument("more than one checkpoint given");
    }
    if (o.checkpoint.empty())
      throw std::invalid_argument("no checkpoint given");
  } catch (const std::exception &e) {
    std::cerr << "bench_linear: " << e.what() << "\n";
    usage();
    return 1;
  }

  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int mt = o.threads > 0 ? o.threads : hw;
  setThreads(Lib::OpenBLAS, mt);
  setThreads(Lib::OneDNN, mt);

  std::unique_ptr<rt::Checkpoint> ckpt;
  rt::ResolvedCheckpoint rc;
  try {
    ckpt = rt::Checkpoint::open(o.checkpoint);
    rc = rt::resolveCheckpoint(*ckpt);
  } catch (const std::exception &e) {
    std::cerr << "bench_linear: " << e.what() << "\n";
    return 1;
  }

  // Modules to run, grouped by shape in (N, K) order of first appearance in
  // --shapes (or checkpoint order), formats in table order.
  struct Mod {
    const rt::ResolvedModule *m;
    const cqbench::Variant *v;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Mod>> byShape;
  for (const rt::ResolvedModule &m : rc.modules) {
    std::string label;
    int64_t n = 0, k = 0;
    if (m.desc.kind != rt::ModuleKind::Linear ||
        !cqbench::parseModuleName(m.desc.name, label, n, k))
      continue;
    if (!o.formats.empty() &&
        std::find(o.formats.begin(), o.formats.end(), label) == o.formats.end())
      continue;
    byShape[{n, k}].push_back({&m, cqbench::findVariant(label)});
  }
  std::vector<std::pair<int64_t, int64_t>> shapes = o.shapes;
  if (shapes.empty()) {
    // Small first: a quick look at everything before the long runs.
    for (auto &[s, _] : byShape)
      shapes.push_back(s);
    std::sort(shapes.begin(), shapes.end(), [](auto a, auto b) {
      return std::make_pair(a.first * a.second, a.first) <
             std::make_pair(b.first * b.second, b.first);
    });
  }
  for (auto &[s, mods] : byShape)
    std::sort(mods.begin(), mods.end(), [](const Mod &a, const Mod &b) {
      return a.v - &cqbench::allVariants()[0] < b.v - &cqbench::allVariants()[0];
    });
  if (byShape.empty()) {
    std::cerr << "bench_linear: no bench modules in " << o.checkpoint << "\n";
    return 1;
  }

  // Environment.
  const char *coretype = std::getenv("OPENBLAS_CORETYPE");
  const char *l2 = std::getenv("OPENBLAS_L2_SIZE");
  auto ver = dnnl::version();
  std::ostringstream env;
  env << "- CPU: " << cpuModelName() << ", " << hw << " hardware threads\n"
      << "- threads: all-threads columns use " << mt
      << " (OpenBLAS " << openblas_get_num_threads() << ", oneDNN/OpenMP "
      << ompMaxThreads() << ")"
      << (o.singleThread ? "; single-thread columns use 1 (M <= " +
                               std::to_string(o.singleThreadMaxM) + ")"
                         : std::string())
      << "\n"
      << "- OpenBLAS core: " << openblas_get_corename() << " ("
      << openblas_get_config() << "); OPENBLAS_CORETYPE "
      << (coretype ? std::string("= ") + coretype : std::string("unset"))
      << ", OPENBLAS_L2_SIZE "
      << (l2 ? std::string("= ") + l2 : std::string("unset")) << "\n"
      << "- oneDNN " << ver->major << "." << ver->minor << "." << ver->patch
      << " (cpu runtime " << (ver->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other")
      << "), effective ISA " << isaName(dnnl::get_effective_cpu_isa()) << "\n"
      << "- activations of ours / reference: " << rt::dtypeName(o.act)
      << "; timing: warm-up + median of >= " << o.minReps << " runs (>= "
      << o.minTime << " s), budget " << o.budget << " s per measurement\n"
      << "- reference path (scalar, single thread) only for M <= "
      << o.refMaxM << "\n";
  std::cerr << env.str();

  Peers peers(o);
  cqbench::OursContext octx;
  octx.checkpoint = o.checkpoint;
  octx.artifactDir = o.artifact;
  octx.activation = o.act;
  octx.threads = mt;

  std::vector<Row> rows;
  // (N, K, M) -> peer results.
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::map<std::string, PeerResult>>
      peerResults;
  std::map<std::string, std::map<std::string, int>> implsSeen; // peer -> impl -> count
  std::map<std::string, std::set<int64_t>> oursSeen; // variant -> M
  std::set<std::string> oursWhyNot;
  std::map<std::string, std::string> peerSources;

  for (auto [N, K] : shapes) {
    auto it = byShape.find({N, K});
    if (it == byShape.end()) {
      std::cerr << "bench_linear: no modules of shape " << N << "x" << K
                << " (skipped)\n";
      continue;
    }
    const std::vector<Mod> &mods = it->second;
    std::fprintf(stderr, "== N=%lld K=%lld: peer weights from %s\n",
                 (long long)N, (long long)K, mods[0].m->desc.name.c_str());
    PeerWeights pw = makePeerWeights(*mods[0].m);
    peerSources[std::to_string(N) + "x" + std::to_string(K)] = pw.source;

    // Ours per module (created once per module).
    std::vector<std::unique_ptr<cqbench::OursKernel>> ours(mods.size());
    std::vector<std::string> whyNot(mods.size());
    for (size_t i = 0; i < mods.size(); ++i) {
      ours[i] = cqbench::makeOurs(octx, *mods[i].m, whyNot[i]);
      if (!ours[i])
        oursWhyNot.insert(whyNot[i]);
    }

    std::map<size_t, double> refLast; // module -> seconds at the last M
    std::map<size_t, int64_t> refLastM;
    for (int64_t M : o.ms) {
      std::fprintf(stderr, "   M=%lld: peers...\n", (long long)M);
      PeerActs acts = makeActs(M, K, 1000 + M);
      auto &pr = peerResults[{N, K, M}];
      pr = peers.run(pw, acts, mt);
      {
        // The int8 target: the faster of s8×s8 and u8×s8 (all threads).
        const PeerResult &s8 = pr["dnnl_s8s8"], &u8 = pr["dnnl_u8s8"];
        bool useU8 = u8.mt.ran && (!s8.mt.ran || u8.mt.median < s8.mt.median);
        PeerResult best = useU8 ? u8 : s8;
        best.impl.clear(); // counted under its own name
        best.mt.note += best.mt.note.empty() ? "" : "; ";
        best.mt.note += useU8 ? "u8" : "s8";
        pr["dnnl_int8"] = best;
      }
      for (auto &[name, res] : pr) {
        if (name == "dnnl_int8")
          continue;
        if (!res.impl.empty())
          implsSeen[name][res.impl]++;
        std::fprintf(stderr, "      %-10s %s%s%s\n", name.c_str(),
                     gopsCell(res.mt, M, N, K).c_str(),
                     res.impl.empty() ? "" : ("  [" + res.impl + "]").c_str(),
                     res.problem.empty() ? "" : ("  " + res.problem).c_str());
      }

      const void *x = o.act == DType::F32
                          ? static_cast<const void *>(acts.f32.data())
                          : static_cast<const void *>(acts.bf16.data());
      std::vector<uint16_t> xf16;
      if (o.act == DType::F16) {
        xf16.resize(acts.f32.size());
        for (size_t i = 0; i < xf16.size(); ++i)
          xf16[i] = rt::floatToHalf(acts.f32[i]);
        x = xf16.data();
      }
      rt::ActivationView xv{o.act, M, K, x};
      const size_t esz = rt::dtypeSize(o.act);
      quiesce();

      for (size_t i = 0; i < mods.size(); ++i) {
        const rt::ResolvedModule &m = *mods[i].m;
        Row row;
        row.label = mods[i].v->label;
        row.integer = mods[i].v->integer;
        row.N = N;
        row.K = K;
        row.M = M;
        row.weightBytes = static_cast<uint64_t>(rt::moduleBytes(m.desc));
        if (M == 1)
          row.streamGBs = streamGBs(row.weightBytes, mt, o);

        // Reference.
        std::vector<uint8_t> refY;
        if (M <= o.refMaxM) {
          double predicted = -1;
          if (refLast.count(i))
            predicted = refLast[i] * double(M) / double(refLastM[i]);
          try {
            row.ref = timeIt([&] { refY = rt::referenceLinear(m, xv); }, o,
                             predicted);
          } catch (const std::exception &e) {
            row.ref.note = std::string("error: ") + e.what();
          }
          if (row.ref.ran) {
            refLast[i] = row.ref.median;
            refLastM[i] = M;
          }
        } else {
          row.ref.note = "not run (M > " + std::to_string(o.refMaxM) + ")";
        }

        // Ours.
        if (ours[i]) {
          std::vector<uint8_t> y(static_cast<size_t>(M * N) * esz);
          row.ours = timeIt([&] { ours[i]->run(x, y.data(), M); }, o, -1);
          row.oursNote = ours[i]->describe(M);
          oursSeen[row.oursNote.substr(0, row.oursNote.find(','))]
              .insert(M);
          if (!refY.empty()) {
            auto val = [&](const std::vector<uint8_t> &b, size_t j) -> double {
              if (o.act == DType::F32) {
                float f;
                std::memcpy(&f, b.data() + 4 * j, 4);
                return f;
              }
              uint16_t h;
              std::memcpy(&h, b.data() + 2 * j, 2);
              return o.act == DType::BF16 ? rt::bfloat16ToFloat(h)
                                          : rt::halfToFloat(h);
            };
            double maxErr = 0, maxRef = 1e-30;
            for (size_t j = 0; j < static_cast<size_t>(M * N); ++j) {
              maxErr = std::max(maxErr, std::fabs(val(y, j) - val(refY, j)));
              maxRef = std::max(maxRef, std::fabs(val(refY, j)));
            }
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.2g", maxErr / maxRef);
            row.oursCheck = buf;
          }
        } else {
          row.ours.note = "n/a";
        }
        std::fprintf(stderr, "      %-27s ours %s [%s] | ref %s\n",
                     row.label.c_str(), gopsCell(row.ours, M, N, K).c_str(),
                     row.oursNote.c_str(), gopsCell(row.ref, M, N, K).c_str());
        rows.push_back(row);
      }
    }
  }

  // ---- Output -------------------------------------------------------------
  auto peerCell = [&](int64_t N, int64_t K, int64_t M, const std::string &p,
                      bool st = false) -> std::string {
    auto it = peerResults.find({N, K, M});
    if (it == peerResults.end() || !it->second.count(p))
      return "—";
    const PeerResult &r = it->second.at(p);
    const Timing &t = st ? r.st : r.mt;
    if (!t.ran && !r.problem.empty())
      return r.problem.rfind("unsupported", 0) == 0 ? "unsup." : r.problem;
    std::string s = gopsCell(t, M, N, K);
    if (!r.problem.empty() && t.ran)
      s += " ⚠"; // output check failed: see the notes
    return s;
  };
  auto peerGops = [&](int64_t N, int64_t K, int64_t M,
                      const std::string &p) -> std::optional<double> {
    auto it = peerResults.find({N, K, M});
    if (it == peerResults.end() || !it->second.count(p))
      return std::nullopt;
    const Timing &t = it->second.at(p).mt;
    if (!t.ran)
      return std::nullopt;
    return gopsOf(M, N, K, t.median);
  };
  auto ratio = [](std::optional<double> a, std::optional<double> b) {
    if (!a || !b || *b <= 0)
      return std::string("n/a");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f×", *a / *b);
    return std::string(buf);
  };

  // The float formats' target is the fastest float peer: oneDNN f32,
  // OpenBLAS sgemm and, on machines with native bf16 dot products, oneDNN
  // bf16 (which is not always the fastest there: an Emerald Rapids Xeon's
  // vdpbf16ps runs at half its f32 FMA rate).
  const bool nativeBf16 = [] {
    using I = dnnl::cpu_isa;
    I isa = dnnl::get_effective_cpu_isa();
    return isa == I::avx512_core_bf16 || isa == I::avx512_core_amx;
  }();
  auto int8Gemv = [&](int64_t N, int64_t K) -> std::optional<double> {
    // oneDNN int8 GEMV's weight stream: N·K bytes per call at M = 1.
    auto g = peerGops(N, K, 1, "dnnl_int8");
    if (!g)
      return std::nullopt;
    return *g / 2.0; // 2·N·K ops per N·K bytes
  };
  auto floatTarget = [&](int64_t N, int64_t K, int64_t M)
      -> std::pair<std::optional<double>, std::string> {
    std::pair<std::optional<double>, std::string> best;
    auto consider = [&](const char *peer, const char *name) {
      auto g = peerGops(N, K, M, peer);
      if (g && (!best.first || *g > *best.first))
        best = {g, name};
    };
    if (nativeBf16)
      consider("dnnl_bf16", "oneDNN bf16");
    consider("dnnl_f32", "oneDNN f32");
    consider("sgemm", "OpenBLAS sgemm");
    return best;
  };
  auto oursGops = [&](const std::string &label, int64_t N, int64_t K,
                      int64_t M) -> std::optional<double> {
    for (const Row &r : rows)
      if (r.label == label && r.N == N && r.K == K && r.M == M && r.ours.ran)
        return gopsOf(M, N, K, r.ours.median);
    return std::nullopt;
  };

  // The cause profiling found for each kind of missed target (bench/
  // README.md, "Missed targets"), with this run's figures where it has them.
  auto whyMissed = [&](const std::string &what, const Row &r) -> std::string {
    const bool subByte = r.label == "convrot_w4a4" ||
                         r.label == "asym_w4a8_int8" || r.label == "w6a8_int8";
    const bool rotated = r.integer && r.label != "int8_tensorwise";
    if (r.M == 1) {
      if (!r.ours.ran)
        return "not run";
      const double weights = double(r.N) * double(r.K) / r.ours.median / 1e9;
      const double bytesPer = double(r.weightBytes) / (double(r.N) * r.K);
      if (r.integer && !subByte)
        return "no weight decode (" + fmtNum(weights) +
               " G weights/s): the call's fixed work (x quantized" +
               (rotated ? std::string(" and rotated") : std::string()) +
               ", threads woken) over a " + fmtNum(r.ours.median * 1e6) +
               " µs call";
      std::string s = "decode-bound one-row kernel: " + fmtNum(weights) +
                      " G weights/s at " + fmtNum(bytesPer) +
                      " stored bytes each; the peer reads 1 byte per weight "
                      "with nothing to decode";
      if (r.weightBytes < (uint64_t(32) << 20))
        s += ", here from cache (module < 32 MB)";
      return s;
    }
    if (what == "sub-byte vs our INT8")
      return "weight decode into the B panel (per N tile, every call) not "
             "hidden under the multiply";
    if (!r.integer)
      return "weights decoded into a panel per N tile on every call, on "
             "top of a multiply loop (vdpbf16ps or f32 FMAs, as the CPU "
             "tuning chose) at about the peer's rate; the peer multiplies "
             "weights converted once";
    std::string s = "per call: the B panel packed (vpdpbusd's unsigned "
                    "operand) and x quantized by every thread of the column "
                    "split; the peer gets x and weights prepared";
    if (rotated)
      s += "; ConvRot of every row, also repeated per thread";
    if (subByte)
      s += "; the weight's codes decoded into the panel";
    return s;
  };

  std::ostringstream out;
  out << "### Environment\n\n" << env.str() << "\n";

  out << "### Linear forward, GOPS (2·M·N·K / median time), all threads\n\n"
      << "oneDNN int8 = the faster of s8×s8 and u8×s8 (marked s8 / u8); "
         "oneDNN weights are pre-packed (reordered once to the layout the "
         "primitive asks for). Peers do not depend on the format: one "
         "measurement per (N, K, M), repeated on each format's row. Weight "
         "GB/s (M = 1): ours = the module's stored bytes (weights + scales) / "
         "time; stream = a multi-threaded read of as many bytes; oneDNN int8 "
         "= N·K bytes / its GEMV time. The target column is the peer of the "
         "format's target (see Targets).\n\n";
  out << "| format | N | K | M | ours GOPS | oneDNN int8 GOPS | oneDNN bf16 GOPS |"
         " oneDNN f32 GOPS | OpenBLAS sgemm GOPS | reference GOPS |"
         " ours weight GB/s | stream GB/s | oneDNN int8 GEMV weight GB/s |"
         " ours / target | ours vs ref (max rel err) |\n";
  out << "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const Row &r : rows) {
    std::optional<double> ours;
    if (r.ours.ran)
      ours = gopsOf(r.M, r.N, r.K, r.ours.median);
    std::optional<double> oursBW, target;
    if (r.M == 1 && r.ours.ran)
      oursBW = r.weightBytes / r.ours.median / 1e9;
    std::string tcell;
    if (r.M == 1) {
      tcell = ratio(oursBW, int8Gemv(r.N, r.K)) + " (GB/s)";
    } else {
      target = r.integer ? peerGops(r.N, r.K, r.M, "dnnl_int8")
                         : floatTarget(r.N, r.K, r.M).first;
      tcell = ratio(ours, target);
    }
    out << "| " << r.label << " | " << r.N << " | " << r.K << " | " << r.M
        << " | " << gopsCell(r.ours, r.M, r.N, r.K)
        << " | " << peerCell(r.N, r.K, r.M, "dnnl_int8")
        << " | " << peerCell(r.N, r.K, r.M, "dnnl_bf16")
        << " | " << peerCell(r.N, r.K, r.M, "dnnl_f32")
        << " | " << peerCell(r.N, r.K, r.M, "sgemm")
        << " | " << gopsCell(r.ref, r.M, r.N, r.K)
        << " | " << (oursBW ? fmtNum(*oursBW) : (r.M == 1 ? "n/a" : ""))
        << " | " << (r.M == 1 ? fmtNum(r.streamGBs) : "")
        << " | " << (r.M == 1 && int8Gemv(r.N, r.K) ? fmtNum(*int8Gemv(r.N, r.K)) : "")
        << " | " << tcell
        << " | " << (r.oursCheck.empty() ? "" : r.oursCheck) << " |\n";
  }

  // The targets, one line per (format, shape, M) they apply to.
  out << "\n### Targets\n\n"
      << "Integer formats at M ≥ 256: ours ≥ "
      << (dnnlExactInt8() ? "1.0" : "0.7")
      << "× oneDNN int8 ("
      << (dnnlExactInt8() ? "VNNI/AMX machine" : "no VNNI: the exact route has half the peak")
      << "). W4A4 / W4A8 / W6A8 at M ≥ 256: ≥ 0.9× our INT8 with the same "
         "ConvRot (int8_tensorwise_convrot256). Float formats at M ≥ 256: ≥ "
         "1.0× "
      << (nativeBf16 ? "the best of oneDNN bf16, oneDNN f32 and OpenBLAS "
                       "sgemm (this CPU has bf16 dot products)"
                     : "the best of oneDNN f32 and OpenBLAS sgemm (no bf16 dot "
                       "products here)")
      << ". M = 1: ours' weight bytes/s ≥ 0.9× oneDNN int8 GEMV's.\n\n";
  out << "| target | format | N | K | M | ours | peer | peer value | ratio | "
         "needed | met | why not (bench/README.md, Missed targets) |\n"
         "|---|---|--:|--:|--:|--:|---|--:|--:|--:|---|---|\n";
  int met = 0, missed = 0;
  auto line = [&](const std::string &what, const Row &r,
                  std::optional<double> ours, const std::string &peer,
                  std::optional<double> peerV, double need) {
    bool ok = ours && peerV && *peerV > 0 && *ours / *peerV >= need;
    (ok ? met : missed)++;
    out << "| " << what << " | " << r.label << " | " << r.N << " | " << r.K
        << " | " << r.M << " | " << (ours ? fmtNum(*ours) : "n/a") << " | "
        << peer << " | " << (peerV ? fmtNum(*peerV) : "n/a") << " | "
        << ratio(ours, peerV) << " | " << need << "× | "
        << (ok ? "yes" : "**no**") << " | "
        << (ok ? std::string() : whyMissed(what, r)) << " |\n";
  };
  for (const Row &r : rows) {
    std::optional<double> ours;
    if (r.ours.ran)
      ours = gopsOf(r.M, r.N, r.K, r.ours.median);
    if (r.M == 1) {
      std::optional<double> bw;
      if (r.ours.ran)
        bw = r.weightBytes / r.ours.median / 1e9;
      line("M = 1 weight GB/s", r, bw, "oneDNN int8 GEMV", int8Gemv(r.N, r.K),
           0.9);
      continue;
    }
    if (r.M < 256)
      continue;
    if (r.integer) {
      line("integer GOPS", r, ours, "oneDNN int8",
           peerGops(r.N, r.K, r.M, "dnnl_int8"), dnnlExactInt8() ? 1.0 : 0.7);
      if (r.label == "convrot_w4a4" || r.label == "asym_w4a8_int8" ||
          r.label == "w6a8_int8")
        line("sub-byte vs our INT8", r, ours, "ours int8 + ConvRot",
             oursGops("int8_tensorwise_convrot256", r.N, r.K, r.M), 0.9);
    } else {
      auto [v, name] = floatTarget(r.N, r.K, r.M);
      line("float GOPS", r, ours, name, v, 1.0);
    }
  }
  out << "\n" << met << " met, " << missed << " missed.\n";

  out << "\n### Peers per shape, GOPS" << (o.singleThread ? " (all threads / 1 thread)" : "")
      << "\n\n";
  std::vector<std::string> peerNames = {"sgemm", "dnnl_s8s8", "dnnl_u8s8",
                                       "dnnl_bf16", "dnnl_f32"};
  out << "| N | K | M |";
  for (auto &p : peerNames)
    out << " " << p << " |";
  out << " weight GB/s at M=1 (sgemm f32 / oneDNN int8) |\n|--:|--:|--:|";
  for (size_t i = 0; i < peerNames.size(); ++i)
    out << "--:|";
  out << "--:|\n";
  for (const auto &kv : peerResults) {
    const auto &pr = kv.second;
    const int64_t N = std::get<0>(kv.first), K = std::get<1>(kv.first),
                  M = std::get<2>(kv.first);
    out << "| " << N << " | " << K << " | " << M << " |";
    for (auto &p : peerNames) {
      std::string c = peerCell(N, K, M, p);
      if (o.singleThread && pr.count(p) && pr.at(p).st.ran)
        c += " / " + gopsCell(pr.at(p).st, M, N, K);
      out << " " << c << " |";
    }
    if (M == 1) {
      auto bw = [&](const std::string &p, double bytesPerElem) -> std::string {
        if (!pr.count(p) || !pr.at(p).mt.ran)
          return "—";
        return fmtNum(N * K * bytesPerElem / pr.at(p).mt.median / 1e9);
      };
      out << " " << bw("sgemm", 4) << " / " << bw("dnnl_int8", 1) << " |\n";
    } else {
      out << " |\n";
    }
  }

  out << "\n### Notes\n\n";
  // Calls choose their CPU variant by rows (an AMX entry's min_rows).
  out << "- ours: the variant each M ran (Session::variantFor):";
  for (auto &[variant, ms] : oursSeen) {
    out << " `" << variant << "` M =";
    bool first = true;
    for (int64_t m : ms) {
      out << (first ? " " : ", ") << m;
      first = false;
    }
    out << ";";
  }
  out << "\n";
  out << "- oneDNN implementations (impl_info_str, all shapes):";
  for (auto &[p, impls] : implsSeen) {
    out << " " << p << ":";
    bool first = true;
    for (auto &[impl, n] : impls) {
      out << (first ? " " : ", ") << "`" << impl << "` ×" << n;
      first = false;
    }
    out << ";";
  }
  out << "\n";
  bool anyRef = false;
  for (auto &[p, impls] : implsSeen)
    for (auto &[impl, n] : impls)
      if (impl.rfind("ref", 0) == 0)
        anyRef = true;
  if (anyRef)
    out << "- WARNING: oneDNN fell back to a reference implementation for "
           "some shapes: those peer numbers are not oneDNN's best.\n";
  {
    // Problems per peer: unsupported (once), failed output checks (⚠).
    std::map<std::string, std::string> unsup;
    std::map<std::string, std::vector<std::string>> failed;
    for (const auto &kv : peerResults)
      for (auto &[p, r] : kv.second) {
        if (r.problem.empty() || p == "dnnl_int8")
          continue;
        if (r.mt.ran)
          failed[p].push_back(std::to_string(std::get<0>(kv.first)) + "x" +
                              std::to_string(std::get<1>(kv.first)) + " M=" +
                              std::to_string(std::get<2>(kv.first)) + ": " +
                              r.problem);
        else
          unsup[p] = r.problem;
      }
    for (auto &[p, why] : unsup)
      out << "- " << p << ": " << why << "\n";
    for (auto &[p, list] : failed) {
      out << "- ⚠ " << p << " output check (16 sampled outputs vs a double "
             "dot product of the same operands):";
      for (const std::string &f : list)
        out << " " << f << ";";
      out << "\n";
    }
  }
  out << "- peer weights: dequantized from";
  for (auto &[s, src] : peerSources)
    out << " " << s << " `" << src << "`";
  out << " (no ConvRot un-rotation; rounded to bf16 so every float peer "
         "multiplies the same values); int8 peers: per-row symmetric int8 of "
         "those weights, activations per-row symmetric int8 (u8 = s8 + 128, "
         "timing only). oneDNN weights are reordered to the layout the "
         "primitive asks for (format_tag::any) outside the timed region.\n";
  out << "- oneDNN int8: per-N weight scales as output scales; the per-row "
         "activation scale is a separate scalar loop inside the timed region "
         "(a [M,1] binary post-op makes oneDNN 2.6 pick ref_int8).\n";
  if (!dnnlExactInt8())
    out << "- oneDNN's effective ISA has no VNNI/AMX: its int8 kernels sum "
           "u8·s8 pairs in saturating s16 (vpmaddubsw), so the int8 peer "
           "weights are 7-bit ([-63, 63], oneDNN's documented remedy) to keep "
           "its outputs exact; same speed as 8-bit.\n";
  out << "- reference = rt::referenceLinear: scalar loops, one thread, decodes "
         "the whole weight on every call; run only for M <= "
      << o.refMaxM << ".\n";
  if (!oursWhyNot.empty()) {
    out << "- ours: n/a —";
    for (const std::string &w : oursWhyNot)
      out << " " << w << ";";
    out << "\n";
  }
  std::cout << out.str();
  return 0;
}
