//===- Ours.h - the compiled-kernel column of bench_linear -----*- C++ -*-===//
//
// The one hook for "ours": makeOurs() returns a runner for a module of the
// benchmark checkpoint, or nullptr (the table then says "n/a" and why).
// Today it always returns nullptr: the artifact Session API
// (runtime/include/comfyquant/runtime/Session.h, docs/CpuCodegen.md §3) does
// not exist yet. When it does, only Ours.cpp changes (open the artifact
// once, look the module up, wrap its entry point in an OursKernel); the
// harness already times it, checks it against the reference path where that
// runs, and fills every ratio column.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_BENCH_OURS_H
#define COMFYQUANT_BENCH_OURS_H

#include "comfyquant/runtime/DType.h"
#include "comfyquant/runtime/ModuleResolver.h"

#include <cstdint>
#include <memory>
#include <string>

namespace cqbench {

/// A compiled Linear ready to run: y[M, N] = module(x[M, K]).
class OursKernel {
public:
  virtual ~OursKernel() = default;
  /// x: [M, K] row-major in the activation dtype; y: [M, N], same dtype.
  /// Includes everything the forward does (rotation, activation
  /// quantization, GEMM, epilogue), as docs/CpuCodegen.md §1 states.
  virtual void run(const void *x, void *y, int64_t M) = 0;
  /// For the table's notes, e.g. "avx512-vnni entry cq_3_vnni, 2 threads".
  /// The kernel a call of M rows runs ("amx, 2 threads").
  virtual std::string describe(int64_t M) const = 0;
};

struct OursContext {
  std::string checkpoint;  ///< the checkpoint path bench_linear opened
  std::string artifactDir; ///< --artifact DIR (comfyquant-compile -o DIR), or ""
  comfyquant::rt::DType activation = comfyquant::rt::DType::BF16;
  int threads = 0; ///< threads to use (0: the runtime's default)
};

/// The kernel for `m`, or nullptr with `whyNot` set.
std::unique_ptr<OursKernel> makeOurs(const OursContext &ctx,
                                     const comfyquant::rt::ResolvedModule &m,
                                     std::string &whyNot);

} // namespace cqbench

#endif // COMFYQUANT_BENCH_OURS_H
