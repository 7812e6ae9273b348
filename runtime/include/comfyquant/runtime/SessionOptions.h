//===- SessionOptions.h - how a Session is opened ---------------*- C++ -*-===//
//
// What a host asks of a Session (Session.h) and of the executor that runs
// its calls (runtime/src/exec/Executor.h): the backend, the CPU variant and
// threads, or the CUDA device and stream.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_SESSIONOPTIONS_H
#define COMFYQUANT_RUNTIME_SESSIONOPTIONS_H

#include <functional>
#include <string>

namespace comfyquant::rt {

/// Where a session runs its modules.
enum class SessionBackend { Cpu, Cuda };
/// "cpu" or "cuda".
const char *sessionBackendName(SessionBackend backend);
/// "" and "cpu": Cpu; "cuda": Cuda; false for anything else.
bool parseSessionBackend(const std::string &name, SessionBackend &backend);

struct SessionOptions {
  /// The checkpoint; empty: the path recorded in the manifest.
  std::string checkpoint;
  /// CPU variant; empty: $COMFYQUANT_CPU_VARIANT, else the best supported.
  std::string variant;
  /// Threads per call; 0: $COMFYQUANT_THREADS, else availableCores().
  int threads = 0;
  /// Runs task(i) for i in [0, count) and returns when all have returned;
  /// empty: the session's own worker pool.
  std::function<void(int count, const std::function<void(int)> &task)>
      parallelFor;
  /// "cpu" (also when empty) or "cuda".
  std::string backend;
  /// cuda: the device ordinal, and a CUstream of the host to run on (null:
  /// the session's own).
  int device = 0;
  void *cudaStream = nullptr;
};

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_SESSIONOPTIONS_H
