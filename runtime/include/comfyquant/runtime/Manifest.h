//===- Manifest.h - the artifact's manifest.json ----------------*- C++ -*-===//
//
// The one reader and writer of manifest.json, used by comfyquant-compile
// (writeManifest) and the runtime (parseManifest). Version 4:
//
//   { "schema": "comfyquant-manifest", "version": 3,
//     "producer": "comfyquant 0.5.0", "llvm_version": "22.1.0",
//     "checkpoint": {"path", "size", "hash", "relative_path"},
//     "dtypes": ["f32", "bf16", "f16"],
//     "backends": {                       // each backend optional, >= 1
//       "cpu":  {"library": "kernels.so", "variants": ["x86-64-v3", ...]},
//       "cuda": {"host_library": "cuda/host.so",
//                "images": [{"arch": "sm_90a", "cubin": "cuda/sm_90a.cubin",
//                            "ptx": "cuda/sm_90a.ptx", "ptx_version": "8.7"}]}},
//     "modules": [{"name", "kind", "format", "out_features", "in_features",
//                  "experts" (null unless moe), "rotation_group",
//                  "row_independent", "weights": [{"tensor", "offset",
//                  "dtype", "shape", ["shard"]}],
//                  "entries": [
//       {"backend": "cpu", "dtype", "variant", "symbol", "column_split",
//        "min_rows"},
//       {"backend": "cuda", "dtype", "arch", "host", "kernels": [names],
//        "workspace_per_row", "workspace_fixed"}]}] }
//
// Paths are relative to the artifact directory; a cubin may be "" (no
// ptxas). Entries are keyed by (backend, dtype, variant) or (backend, dtype,
// arch), unique per module; each binds the module's `weights` as its weight
// arguments, in that order. A CPU entry is `void symbol(void **args)` in the
// CPU library; `column_split` says it computes only the columns [begin, end)
// it is passed; `min_rows` (default 1) is the fewest rows of x the entry's
// kernel is meant for: a call with fewer rows runs the entry of the best
// other variant with no such floor, where the CPU has one. A CUDA entry is `void host(void **args)` in the host library
// that launches `kernels` (indexed by the launcher's kernel argument) from
// the image of its arch and needs a device workspace of
// workspace_per_row * M + workspace_fixed bytes.
//
// Block entries (room for a later step): an entry may carry
// `"modules": [names]`, the modules it computes in one call, its weight
// arguments being theirs in that order. It defaults to the module that
// lists the entry, which must be among the names; every name must be a
// module of the manifest. The structs keep `modules` empty for the default,
// and the runtime binds only such entries today.
//
// Version-2 manifests ("target": "cpu", top-level "variants", per module
// "entry": {dtype: {variant: symbol}} and "column_split": [symbols]) are
// read into the same structs (library "kernels.so", no producer);
// Version 3 is version 4 without `min_rows`. writeManifest always writes
// version 4. Versions 3 and 4 reject unknown fields.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_MANIFEST_H
#define COMFYQUANT_RUNTIME_MANIFEST_H

#include "comfyquant/runtime/FormatRegistry.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace comfyquant::rt {

/// A checkpoint tensor an entry binds, in argument order.
struct ManifestWeight {
  std::string tensor; ///< checkpoint tensor name
  std::string dtype;  ///< safetensors dtype name ("I8", "F8_E4M3", ...)
  std::string shard;  ///< shard file of a sharded checkpoint, or ""
  uint64_t offset = 0; ///< absolute file offset
  std::vector<int64_t> shape;

  bool operator==(const ManifestWeight &o) const {
    return tensor == o.tensor && dtype == o.dtype && shard == o.shard &&
           offset == o.offset && shape == o.shape;
  }
  bool operator!=(const ManifestWeight &o) const { return !(*this == o); }
};

/// An entry point of the CPU library.
struct CpuEntry {
  std::string dtype;   ///< activation dtype: f32, bf16, f16
  std::string variant; ///< a CPU variant of the cpu backend
  std::string symbol;  ///< `void symbol(void **args)`
  /// Computes only the columns [begin, end) it is passed, so N may be split
  /// across threads.
  bool columnSplit = false;
  /// The modules computed in one call; empty: the module listing it.
  std::vector<std::string> modules;
  /// The fewest rows of x the kernel is meant for (AMX tiles: 16); fewer
  /// run another variant's entry where one applies.
  int64_t minRows = 1;
};

/// A host entry of the CUDA host library and the kernels it launches.
struct CudaEntry {
  std::string dtype; ///< activation dtype: f32, bf16, f16
  std::string arch;  ///< an image of the cuda backend ("sm_90a")
  std::string host;  ///< `void host(void **args)` in the host library
  /// `.entry` names in the arch's image; the launcher's kernel index.
  std::vector<std::string> kernels;
  /// Device workspace: workspacePerRow * M + workspaceFixed bytes.
  int64_t workspacePerRow = 0, workspaceFixed = 0;
  /// The modules computed in one call; empty: the module listing it.
  std::vector<std::string> modules;
};

struct ManifestModule {
  std::string name, format;
  ModuleKind kind = ModuleKind::Linear;
  int64_t outFeatures = 0, inFeatures = 0, experts = 0, rotationGroup = 0;
  /// Rows of x may be computed independently (split across threads).
  bool rowIndependent = true;
  std::vector<ManifestWeight> weights;
  std::vector<CpuEntry> cpuEntries;
  std::vector<CudaEntry> cudaEntries;

  /// This module's own (non-block) entry, or nullptr.
  const CpuEntry *findCpuEntry(const std::string &dtype,
                               const std::string &variant) const;
  const CudaEntry *findCudaEntry(const std::string &dtype,
                                 const std::string &arch) const;
  /// The dtypes of this module's own entries per backend, in entry order.
  std::vector<std::string> cpuDTypes() const;
  std::vector<std::string> cudaDTypes() const;
};

struct CpuBackend {
  std::string library = "kernels.so";
  std::vector<std::string> variants;
};

struct CudaImage {
  std::string arch;       ///< "sm_80", ..., "sm_120a"
  std::string cubin;      ///< "" when ptxas was not available
  std::string ptx;
  std::string ptxVersion; ///< PTX ISA version of `ptx` ("8.7")
};

struct CudaBackend {
  std::string hostLibrary = "cuda/host.so";
  std::vector<CudaImage> images;

  const CudaImage *findImage(const std::string &arch) const;
};

struct Manifest {
  static constexpr int kVersion = 4;
  int version = kVersion; ///< as read; writeManifest writes kVersion
  /// "comfyquant X.Y.Z" and the LLVM version of the compiler that wrote it
  /// ("" when read from version 2).
  std::string producer, llvmVersion;
  /// The checkpoint's absolute path when compiled, and the same path
  /// relative to the artifact directory ("" in older manifests).
  std::string checkpointPath, checkpointRelativePath, checkpointHash;
  uint64_t checkpointSize = 0;
  std::vector<std::string> dtypes;
  std::optional<CpuBackend> cpu;
  std::optional<CudaBackend> cuda;
  std::vector<ManifestModule> modules;

  /// The module named `name`, or nullptr.
  const ManifestModule *find(const std::string &name) const;
};

/// Parses and validates manifest.json text (version 2 or 3). Throws Error
/// naming `file`, the module and the field.
Manifest parseManifest(const std::string &json, const std::string &file);

/// The version-3 text of `m`: pretty-printed (2 spaces), fields in a fixed
/// order, a final newline; the same `m` gives the same bytes.
std::string writeManifest(const Manifest &m);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_MANIFEST_H
