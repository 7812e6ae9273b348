//===- Session.h - run compiled modules on a mapped checkpoint --*- C++ -*-===//
//
// A Session joins an Artifact (kernels + manifest) with the checkpoint it
// was compiled for: it refuses a checkpoint whose size or header hash differs
// from the manifest's, checks the arguments every backend shares, and hands
// each call to the one executor of its backend (runtime/src/exec/Executor.h):
//
// cpu: the best CPU variant this machine supports (or the one asked for);
// modules run with memref descriptors that point into the mapped file (zero
// copy). Linear/MoE calls split the columns of y across threads when the
// kernel computes a given column range (each thread then decodes only its
// share of the weights), else the rows of x when they are independent. The
// parts run on a WorkerPool the session owns, or on the host's scheduler
// (SessionOptions::parallelFor).
//
// cuda: the artifact's CUDA entries on one device: the weights are uploaded
// once when it opens, and calls take host pointers (run, lookup: copied in
// and out, then waited for) or device pointers (runDevice, lookupDevice:
// enqueued on the session's stream, not waited for).
//
// Thread safety: every const member may be called from several threads at
// once; setThreads too (a call uses the count in effect when it starts).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_SESSION_H
#define COMFYQUANT_RUNTIME_SESSION_H

#include "comfyquant/runtime/Artifact.h"
#include "comfyquant/runtime/DType.h"
#include "comfyquant/runtime/Safetensors.h"
#include "comfyquant/runtime/SessionOptions.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace comfyquant::rt {

class Executor;

class Session {
public:
  /// Throws Error (unloadable artifact, mismatched checkpoint, unsupported
  /// variant, ...).
  static std::unique_ptr<Session> open(const std::string &artifactDir,
                                       const SessionOptions &options = {});
  ~Session();

  const Manifest &manifest() const;
  const std::string &artifactDir() const;
  const Checkpoint &checkpoint() const { return *checkpoint_; }
  SessionBackend backend() const;
  /// "cpu" or "cuda".
  const char *backendName() const { return sessionBackendName(backend()); }
  /// The CPU variant, or on cuda the arch of the kernel image loaded.
  const std::string &variant() const;
  /// The variant whose kernel a call of `m` rows of module `index` in
  /// `dtype` runs: variant(), except on a CPU whose best variant's entry is
  /// meant for more rows (an AMX entry's min_rows): then the variant below
  /// that runs it. Throws Error for a bad index or dtype.
  const std::string &variantFor(size_t index, DType dtype, int64_t m) const;
  /// cuda: "0: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)" and how its image
  /// was loaded ("sm_90a cubin", "sm_80 PTX (JIT)"); "" on the CPU.
  std::string deviceDescription() const;
  /// Threads per call (1 on cuda).
  int threads() const;
  void setThreads(int threads);
  /// Set-up warnings (an ignored $COMFYQUANT_THREADS, a checkpoint found
  /// only through the manifest's absolute path, ...).
  const std::vector<std::string> &warnings() const { return warnings_; }
  /// The checkpoint file the session opened.
  const std::string &checkpointPath() const { return checkpointPath_; }

  size_t moduleCount() const;
  const ManifestModule &module(size_t index) const;
  /// Index of a module by name, or -1.
  int64_t findModule(const std::string &name) const;

  /// y [m, N] = module(x [m, K]), x and y row-major in `dtype` (F32, BF16 or
  /// F16); `expert` selects the slice of a MoE bank. Throws Error.
  void run(size_t module, DType dtype, const void *x, int64_t m, void *y,
           int64_t expert = 0) const;
  /// Embedding rows: y [m, D] = table rows indices[0..m) in `dtype`.
  void lookup(size_t module, DType dtype, const int64_t *indices, int64_t m,
              void *y) const;

  /// cuda only: run / lookup with DEVICE addresses (CUdeviceptr values) of
  /// x (or the int64 indices) and y, enqueued on the session's stream; the
  /// call returns before the kernels finish (synchronize() waits).
  /// Embedding indices must be in range: they are not checked on the host.
  void runDevice(size_t module, DType dtype, uint64_t x, int64_t m,
                 uint64_t y, int64_t expert = 0) const;
  void lookupDevice(size_t module, DType dtype, uint64_t indices, int64_t m,
                    uint64_t y) const;
  /// cuda: waits for every call enqueued; a no-op on the CPU.
  void synchronize() const;

private:
  Session() = default;
  /// The module at `index` if it is (`embedding`) or is not an embedding;
  /// throws Error.
  const ManifestModule &checked(size_t index, bool embedding) const;

  std::unique_ptr<Artifact> artifact_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::string checkpointPath_;
  std::vector<std::string> warnings_;
  std::unique_ptr<Executor> executor_;
};

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_SESSION_H
