//===- Artifact.h - compiled kernel artifacts -------------------*- C++ -*-===//
//
// An artifact directory written by comfyquant-compile (docs/CpuCodegen.md
// §3): manifest.json (Manifest.h) plus the libraries of its backends
// (kernels.so for the CPU). The manifest names the checkpoint it was
// compiled for (path, size, header hash), the activation dtypes, per
// backend its variants or archs, and per module its shape, its entries
// (per backend, dtype and variant/arch) and the checkpoint tensors its
// kernels bind, in argument order. CPU entry points are
// `void entry(void **args)`:
//
//   linear     args = {&x, &y, &w0, &w1, ...}
//   moe        args = {&x, &y, &expert (int64), &w0, ...}
//   embedding  args = {&indices (i64 [M]), &y, &w0, ...}
//
// where &x, &y, &w are pointers to ranked memref descriptors
// {T *allocated, T *aligned, int64 offset, int64 sizes[R], int64 strides[R]}
// (x [M, K] and y [M, N] row-major in the activation dtype; weights point
// into the mapped checkpoint, never copied).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_ARTIFACT_H
#define COMFYQUANT_RUNTIME_ARTIFACT_H

#include "comfyquant/runtime/Manifest.h"

#include <memory>
#include <string>

namespace comfyquant::rt {

using KernelEntry = void (*)(void **args);

/// A loaded artifact: the manifest and the dlopen'ed kernels.so.
class Artifact {
public:
  /// Reads DIR/manifest.json and loads the CPU library (DIR/kernels.so)
  /// when the artifact has a cpu backend. Throws Error.
  static std::unique_ptr<Artifact> open(const std::string &dir);
  ~Artifact();
  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;

  const std::string &dir() const { return dir_; }
  const Manifest &manifest() const { return manifest_; }
  /// The module named `name`, or nullptr.
  const ManifestModule *find(const std::string &name) const;
  /// The entry point `symbol` of the CPU library. Throws Error when it or
  /// the library is missing.
  KernelEntry entry(const std::string &symbol) const;

private:
  Artifact() = default;
  std::string dir_;
  Manifest manifest_;
  void *handle_ = nullptr;
};

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_ARTIFACT_H
