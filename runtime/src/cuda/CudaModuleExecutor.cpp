//===- CudaModuleExecutor.cpp - a CUDA artifact's modules on one device ---===//
//
// The Executor of the cuda backend: opens a CudaExecutor on the artifact's
// images and host library, uploads every bound tensor once, and binds each
// module's entry of the loaded image's arch per activation dtype.
//===----------------------------------------------------------------------===//
#include "exec/Executor.h"

#include "comfyquant/runtime/Error.h"
#include "cuda/CudaExecutor.h"

#include <algorithm>

namespace comfyquant::rt {

namespace {

class CudaModuleExecutor final : public Executor {
public:
  explicit CudaModuleExecutor(const ExecutorInputs &in);

  SessionBackend backend() const override { return SessionBackend::Cuda; }
  const std::string &target() const override { return cuda_->imageArch(); }
  std::string deviceDescription() const override {
    return cuda_->device().describe() + ", " + cuda_->imageArch() +
           (cuda_->jitCompiled() ? " PTX (JIT)" : " cubin");
  }
  const std::vector<std::string> &warnings() const override {
    return cuda_->warnings();
  }

  void run(size_t module, DType dtype, const void *x, int64_t m, void *y,
           int64_t expert) const override {
    cuda_->runHost(entryFor(module, dtype), x, y, m, expert);
  }
  void lookup(size_t module, DType dtype, const int64_t *indices, int64_t m,
              void *y) const override {
    cuda_->runHost(entryFor(module, dtype), indices, y, m);
  }
  void runDevice(size_t module, DType dtype, uint64_t x, int64_t m,
                 uint64_t y, int64_t expert) const override {
    cuda_->run(entryFor(module, dtype), x, y, m, expert);
  }
  void lookupDevice(size_t module, DType dtype, uint64_t indices, int64_t m,
                    uint64_t y) const override {
    cuda_->run(entryFor(module, dtype), indices, y, m);
  }
  void synchronize() const override { cuda_->synchronize(); }

private:
  /// The CudaExecutor entry of `module` for `dtype`; throws Error.
  size_t entryFor(size_t module, DType dtype) const;

  const Manifest &manifest_;
  std::unique_ptr<CudaExecutor> cuda_;
  /// Per module: (dtype, CudaExecutor entry index) per activation dtype.
  std::vector<std::vector<std::pair<std::string, size_t>>> entries_;
};

} // namespace

CudaModuleExecutor::CudaModuleExecutor(const ExecutorInputs &in)
    : Executor(in.artifact.dir()), manifest_(in.artifact.manifest()) {
  const Manifest &mf = manifest_;
  if (!mf.cuda)
    throw Error(dir_, "",
                "the artifact has no CUDA kernels (compile it with --target "
                "cuda:ARCH)",
                ErrorKind::Unsupported);
  auto inDir = [&](const std::string &p) {
    return p.empty() || p[0] == '/' ? p : dir_ + "/" + p;
  };
  std::vector<CudaExecutor::Image> images;
  for (const CudaImage &i : mf.cuda->images)
    images.push_back({i.arch, inDir(i.cubin), inDir(i.ptx)});
  CudaExecutorOptions eo;
  eo.device = in.options.device;
  eo.stream = in.options.cudaStream;
  cuda_ = CudaExecutor::open(CudaDriver::load(), dir_, images,
                             inDir(mf.cuda->hostLibrary), eo);
  const std::string arch = cuda_->imageArch();

  // Every bound tensor goes to the device once, before any call.
  std::vector<std::vector<size_t>> weights(mf.modules.size());
  for (size_t i = 0; i < mf.modules.size(); ++i)
    for (const ManifestWeight &w : mf.modules[i].weights) {
      const TensorInfo &t =
          boundTensor(in.checkpoint, in.checkpointPath,
                      moduleSubject(mf.modules[i].name), w);
      weights[i].push_back(
          cuda_->addWeight({w.tensor, t.data, t.nbytes(), w.shape}));
    }
  cuda_->upload();

  for (size_t i = 0; i < mf.modules.size(); ++i) {
    const ManifestModule &m = mf.modules[i];
    std::vector<std::pair<std::string, size_t>> bound;
    for (const std::string &dt : mf.dtypes) {
      auto ofDType = [&](const CudaEntry &e) {
        return e.modules.empty() && e.dtype == dt;
      };
      if (std::none_of(m.cudaEntries.begin(), m.cudaEntries.end(), ofDType))
        continue;
      const CudaEntry *e = m.findCudaEntry(dt, arch);
      if (!e)
        throw Error(dir_, moduleSubject(m.name),
                    "no " + dt + " CUDA kernels for " + arch,
                    ErrorKind::Unsupported);
      CudaExecutor::Entry spec;
      spec.module = m.name;
      spec.kind = m.kind;
      spec.inFeatures = m.inFeatures;
      spec.outFeatures = m.outFeatures;
      spec.experts = m.experts;
      spec.elementSize = dt == "f32" ? 4 : 2;
      spec.symbol = e->host;
      spec.kernels = e->kernels;
      spec.workspacePerRow = e->workspacePerRow;
      spec.workspaceFixed = e->workspaceFixed;
      spec.weights = weights[i];
      bound.emplace_back(dt, cuda_->addEntry(spec));
    }
    entries_.push_back(std::move(bound));
  }
}

size_t CudaModuleExecutor::entryFor(size_t module, DType dtype) const {
  const std::string &name = manifest_.modules[module].name;
  const char *key = activationKey(name, dtype);
  for (const auto &[dt, index] : entries_[module])
    if (dt == key)
      return index;
  throw Error(dir_, moduleSubject(name),
              std::string("the artifact has no ") + key +
                  " CUDA kernels (compile with --dtypes including " + key +
                  ")",
              ErrorKind::Unsupported);
}

std::unique_ptr<Executor> openCudaExecutor(const ExecutorInputs &inputs) {
  return std::make_unique<CudaModuleExecutor>(inputs);
}

} // namespace comfyquant::rt
