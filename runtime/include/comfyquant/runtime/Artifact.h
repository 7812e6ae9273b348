//===- Artifact.h - compiled CPU kernel artifacts ---------------*- C++ -*-===//
//
// An artifact directory written by comfyquant-compile (docs/CpuCodegen.md
// §3): manifest.json plus kernels.so. The manifest names the checkpoint it
// was compiled for (path, size, header hash), the CPU variants and
// activation dtypes it has kernels for, and per module its shape, its entry
// symbols (per dtype and variant) and the checkpoint tensors its kernels
// bind, in argument order. Entry points are `void entry(void **args)`:
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

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace comfyquant::rt {

struct ArtifactWeight {
  std::string tensor; ///< checkpoint tensor name
  std::string dtype;  ///< safetensors dtype name ("I8", "F8_E4M3", ...)
  std::string shard;  ///< shard file of a sharded checkpoint, or ""
  uint64_t offset = 0; ///< absolute file offset
  std::vector<int64_t> shape;
};

struct ArtifactModule {
  std::string name, kind, format; ///< kind: linear, moe, embedding
  int64_t outFeatures = 0, inFeatures = 0, experts = 0, rotationGroup = 0;
  /// Rows of x may be computed independently (split across threads).
  bool rowIndependent = true;
  /// dtype ("f32", "bf16", "f16") -> variant -> entry symbol.
  std::map<std::string, std::map<std::string, std::string>> entries;
  /// Entry symbols that compute only the columns [begin, end) they are
  /// passed, so N may be split across threads.
  std::set<std::string> columnSplit;
  std::vector<ArtifactWeight> weights;
  double compileSeconds = 0;
};

struct Manifest {
  int version = 0;
  std::string target;
  /// The checkpoint's absolute path when compiled, and the same path
  /// relative to the artifact directory ("" in older manifests).
  std::string checkpointPath, checkpointRelativePath, checkpointHash;
  uint64_t checkpointSize = 0;
  std::vector<std::string> variants, dtypes;
  std::vector<ArtifactModule> modules;
};

/// Parses and validates manifest.json text. Throws Error naming `file`.
Manifest parseManifest(const std::string &json, const std::string &file);

using KernelEntry = void (*)(void **args);

/// A loaded artifact: the manifest and the dlopen'ed kernels.so.
class Artifact {
public:
  /// Reads DIR/manifest.json and loads DIR/kernels.so. Throws Error.
  static std::unique_ptr<Artifact> open(const std::string &dir);
  ~Artifact();
  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;

  const std::string &dir() const { return dir_; }
  const Manifest &manifest() const { return manifest_; }
  /// The module named `name`, or nullptr.
  const ArtifactModule *find(const std::string &name) const;
  /// The entry point `symbol` of kernels.so. Throws Error when missing.
  KernelEntry entry(const std::string &symbol) const;

private:
  Artifact() = default;
  std::string dir_;
  Manifest manifest_;
  void *handle_ = nullptr;
};

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_ARTIFACT_H
