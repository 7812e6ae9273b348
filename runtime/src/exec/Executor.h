//===- Executor.h - how a Session runs modules on one backend ---*- C++ -*-===//
//
// A Session (Session.h) opens the artifact and the checkpoint, checks the
// pair and the arguments every backend shares (module index, linear vs
// embedding), and hands each call to the one Executor it holds:
//   CpuExecutor        exec/CpuExecutor.cpp: kernels.so entries of one CPU
//                      variant, weights as memref descriptors into the
//                      mapping, column/row splits on a worker pool;
//   CudaModuleExecutor cuda/CudaModuleExecutor.cpp: the artifact's CUDA
//                      entries on one device through CudaExecutor.
// A new backend is one more implementation and one more case in
// openExecutor; Session does not change.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_EXEC_EXECUTOR_H
#define COMFYQUANT_RUNTIME_EXEC_EXECUTOR_H

#include "comfyquant/runtime/Artifact.h"
#include "comfyquant/runtime/DType.h"
#include "comfyquant/runtime/Safetensors.h"
#include "comfyquant/runtime/Manifest.h"
#include "comfyquant/runtime/SessionOptions.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace comfyquant::rt {

/// What every executor is opened with.
struct ExecutorInputs {
  const Artifact &artifact;
  const Checkpoint &checkpoint;
  /// The checkpoint file the session opened (messages).
  const std::string &checkpointPath;
  const SessionOptions &options;
};

class Executor {
public:
  virtual ~Executor();

  virtual SessionBackend backend() const = 0;
  /// The CPU variant, or the arch of the CUDA image loaded.
  virtual const std::string &target() const = 0;
  /// The variant (arch) whose kernel a call of `m` rows of `module` runs:
  /// target() unless calls choose among variants by rows (the CPU's
  /// min_rows floors). `module` is in range.
  virtual const std::string &targetFor(size_t module, DType dtype,
                                       int64_t m) const {
    (void)module, (void)dtype, (void)m;
    return target();
  }
  /// "" on the CPU; the device and how its image was loaded on CUDA.
  virtual std::string deviceDescription() const { return ""; }
  /// Set-up warnings.
  virtual const std::vector<std::string> &warnings() const = 0;
  virtual int threads() const { return 1; }
  virtual void setThreads(int) {}

  /// Session::run / lookup with host pointers; `module` is in range and
  /// of the right kind. Throws Error.
  virtual void run(size_t module, DType dtype, const void *x, int64_t m,
                   void *y, int64_t expert) const = 0;
  virtual void lookup(size_t module, DType dtype, const int64_t *indices,
                      int64_t m, void *y) const = 0;
  /// Device pointers (Session::runDevice / lookupDevice); the CPU refuses.
  virtual void runDevice(size_t module, DType dtype, uint64_t x, int64_t m,
                         uint64_t y, int64_t expert) const;
  virtual void lookupDevice(size_t module, DType dtype, uint64_t indices,
                            int64_t m, uint64_t y) const;
  virtual void synchronize() const {}

protected:
  explicit Executor(const std::string &artifactDir) : dir_(artifactDir) {}
  /// "f32", "bf16" or "f16" for an activation dtype, else throws Error
  /// naming `module`.
  const char *activationKey(const std::string &module, DType dtype) const;
  const std::string dir_;
};

std::unique_ptr<Executor> openCpuExecutor(const ExecutorInputs &inputs);
std::unique_ptr<Executor> openCudaExecutor(const ExecutorInputs &inputs);

/// The executor of `inputs.options.backend`.
std::unique_ptr<Executor> openExecutor(SessionBackend backend,
                                       const ExecutorInputs &inputs);

/// The checkpoint tensor `w` binds, checked against the manifest's record
/// of it (name, dtype, shape, offset, shard). Throws Error naming `path`
/// and `subject`.
const TensorInfo &boundTensor(const Checkpoint &checkpoint,
                              const std::string &path,
                              const std::string &subject,
                              const ManifestWeight &w);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_EXEC_EXECUTOR_H
