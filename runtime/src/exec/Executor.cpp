//===- Executor.cpp - what every executor shares --------------------------===//
#include "exec/Executor.h"

#include "comfyquant/runtime/Error.h"

namespace comfyquant::rt {

namespace {

std::string baseName(const std::string &p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

} // namespace

Executor::~Executor() = default;

const char *Executor::activationKey(const std::string &module,
                                    DType dtype) const {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  default:
    throw Error(dir_, moduleSubject(module),
                std::string("activations must be F32, BF16 or F16, got ") +
                    dtypeName(dtype),
                ErrorKind::InvalidArgument);
  }
}

void Executor::runDevice(size_t, DType, uint64_t, int64_t, uint64_t,
                         int64_t) const {
  throw Error(dir_, "", "device pointers need a session on the cuda backend",
              ErrorKind::InvalidArgument);
}

void Executor::lookupDevice(size_t, DType, uint64_t, int64_t,
                            uint64_t) const {
  throw Error(dir_, "", "device pointers need a session on the cuda backend",
              ErrorKind::InvalidArgument);
}

std::unique_ptr<Executor> openExecutor(SessionBackend backend,
                                       const ExecutorInputs &inputs) {
  switch (backend) {
  case SessionBackend::Cpu:
    return openCpuExecutor(inputs);
  case SessionBackend::Cuda:
    return openCudaExecutor(inputs);
  }
  return nullptr;
}

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

} // namespace comfyquant::rt
