//===- CudaExecutor.h - run an artifact's CUDA entries ----------*- C++ -*-===//
//
// One artifact on one device: the device's primary context, a stream (its
// own or the host's), the artifact's kernel image for the device, the host
// entries of cuda/host.so, the bound weights uploaded once, and a grow-only
// device workspace. A call packs
//
//   args = {&launcher, &x, &y, [&expert (int64, moe only)], &w0, ..., &ws}
//
// (memref descriptors with device pointers) and calls the host entry, which
// launches its kernels through `launcher` onto the stream.
//
// Image choice: the cubin of the device's exact compute capability, else the
// PTX of the best compatible arch JIT-compiled by the driver (an "a" arch
// only on its own capability, a plain one on it and every newer device),
// else an error listing both sides.
//
// The executor is coded against plain inputs (paths, symbols, kernel names,
// workspace rule, weight bytes), not against the manifest.
//
// Thread safety: every const member may be called from several threads;
// calls are serialized (the workspace is shared) and enqueued in order on
// the one stream.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_CUDA_CUDAEXECUTOR_H
#define COMFYQUANT_RUNTIME_CUDA_CUDAEXECUTOR_H

#include "comfyquant/runtime/FormatRegistry.h"
#include "cuda/CudaDriver.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
/// What a host entry launches its kernels through (args[0] points to a
/// `const cq_gpu_launcher *`). `kernel` indexes the entry's kernel list;
/// `params` are cuLaunchKernel's kernelParams. A launch never fails in the
/// caller: the first failure is kept in `self` and later launches are
/// skipped; the executor reports it when the entry returns.
typedef struct cq_gpu_launcher {
  void *self;
  void (*launch)(void *self, int32_t kernel, int64_t grid_x, int64_t grid_y,
                 int64_t grid_z, int64_t block_x, int64_t block_y,
                 int64_t block_z, int64_t dynamic_smem_bytes, void **params,
                 int32_t num_params);
} cq_gpu_launcher;
}

namespace comfyquant::rt {

struct CudaExecutorOptions {
  /// The CUDA device ordinal.
  int device = 0;
  /// A CUstream of the host to enqueue on; null: the executor's own.
  void *stream = nullptr;
  /// Pinned staging chunk for weight uploads (two are used in turn).
  size_t stagingBytes = size_t(16) << 20;
};

class CudaExecutor {
public:
  using HostEntry = void (*)(void **args);

  /// The images of one arch; paths are absolute or "" when absent.
  struct Image {
    std::string arch, cubin, ptx;
  };
  using Kind = ModuleKind;
  /// A weight argument: host bytes (the mapped checkpoint) and its shape.
  struct Weight {
    std::string name;
    const void *host = nullptr;
    uint64_t bytes = 0;
    std::vector<int64_t> shape;
  };
  struct Entry {
    std::string module; ///< for messages
    Kind kind = Kind::Linear;
    int64_t inFeatures = 0, outFeatures = 0, experts = 0;
    size_t elementSize = 4; ///< bytes of an activation element
    /// `void symbol(void **)` in the host library, or `fn` itself.
    std::string symbol;
    HostEntry fn = nullptr;
    std::vector<std::string> kernels;
    int64_t workspacePerRow = 0, workspaceFixed = 0;
    /// addWeight() indices, in argument order.
    std::vector<size_t> weights;
  };

  /// Opens device `options.device`, loads the best image of `images` and
  /// (unless `hostLibrary` is "") the host library. `artifactDir` names the
  /// artifact in messages. Throws Error.
  static std::unique_ptr<CudaExecutor>
  open(std::shared_ptr<const CudaDriver> driver, const std::string &artifactDir,
       const std::vector<Image> &images, const std::string &hostLibrary,
       const CudaExecutorOptions &options = {});
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor &) = delete;
  CudaExecutor &operator=(const CudaExecutor &) = delete;

  const CudaDeviceInfo &device() const { return device_; }
  /// The arch of the loaded image and whether it was PTX JIT-compiled.
  const std::string &imageArch() const { return imageArch_; }
  bool jitCompiled() const { return jit_; }
  /// What went wrong on the way to a working set-up (a cubin that did not
  /// load before its PTX did).
  const std::vector<std::string> &warnings() const { return warnings_; }
  /// The CUstream calls are enqueued on.
  void *stream() const;

  /// Registers a weight (the same host bytes once) and returns its index;
  /// upload() copies the new ones to the device.
  size_t addWeight(const Weight &weight);
  /// Copies every weight not on the device yet, through pinned staging
  /// buffers, and waits. Throws Error.
  void upload();
  /// Resolves the entry's host symbol and kernels; returns its index.
  /// Throws Error naming the module, entry and missing kernel.
  size_t addEntry(const Entry &entry);

  /// Enqueues entry(x, y) on the stream, x and y DEVICE pointers (x [m, K]
  /// activations, or int64 indices [m] for an embedding; y [m, N], or
  /// [m, K] for an embedding); returns without waiting. Throws Error.
  void run(size_t entry, uint64_t x, uint64_t y, int64_t m,
           int64_t expert = 0) const;
  /// The same with HOST x and y: uploads x, runs, downloads y and waits.
  void runHost(size_t entry, const void *x, void *y, int64_t m,
               int64_t expert = 0) const;
  /// Waits for everything enqueued. Throws Error on a device failure.
  void synchronize() const;

  /// The workspace's capacity in bytes (grow-only).
  uint64_t workspaceBytes() const;
  /// Device bytes holding the weights.
  uint64_t weightBytes() const { return weightBytes_; }

private:
  CudaExecutor() = default;
  struct BoundEntry;
  struct LaunchState;
  struct ContextScope;
  static void launchThunk(void *self, int32_t kernel, int64_t gx, int64_t gy,
                          int64_t gz, int64_t bx, int64_t by, int64_t bz,
                          int64_t smem, void **params,
                          int32_t numParams) noexcept;
  void launch(LaunchState &state, int32_t kernel, const int64_t grid[3],
              const int64_t block[3], int64_t smem, void **params,
              int32_t numParams) const;
  void runLocked(const BoundEntry &e, uint64_t x, uint64_t y, int64_t m,
                 int64_t expert) const;
  void loadImage(const std::vector<Image> &images);
  /// Grows `buffer` to at least `bytes` (waiting for the stream first).
  void reserve(uint64_t &buffer, uint64_t &capacity, uint64_t bytes) const;
  std::string subject(const BoundEntry &e) const;

  std::shared_ptr<const CudaDriver> driver_;
  std::string dir_;
  CudaDeviceInfo device_;
  cuda::CUdevice cuDevice_ = 0;
  cuda::CUcontext context_ = nullptr;
  cuda::CUstream stream_ = nullptr;
  bool ownStream_ = false;
  cuda::CUmodule module_ = nullptr;
  std::string imageArch_, imagePath_;
  bool jit_ = false;
  std::vector<std::string> warnings_;
  void *hostLibrary_ = nullptr;
  std::string hostLibraryPath_;
  size_t stagingBytes_ = 0;

  std::vector<Weight> weights_;
  std::vector<uint64_t>
      weightDevice_; ///< device address per weight, 0: not yet
  std::vector<uint64_t> weightArenas_;
  uint64_t weightBytes_ = 0;
  std::vector<std::unique_ptr<BoundEntry>> entries_;
  /// Each kernel name's function and parameter count (-1: unknown), looked
  /// up once in the loaded image.
  std::map<std::string, std::pair<cuda::CUfunction, int>> functions_;

  mutable std::mutex mutex_;
  /// Dynamic shared memory each kernel of the loaded image has been opted
  /// in to, by name: entries may share a kernel (compiled once), and the
  /// limit belongs to the function, not to an entry.
  mutable std::map<std::string, int64_t> smemOptIn_;
  mutable uint64_t workspace_ = 0, workspaceCapacity_ = 0;
  mutable uint64_t hostX_ = 0, hostXCapacity_ = 0;
  mutable uint64_t hostY_ = 0, hostYCapacity_ = 0;
};

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_CUDA_CUDAEXECUTOR_H
