//===- CompileOptions.h - what one compilation is asked to do ---*- C++ -*-===//
//
// Everything comfyquant-compile's flags mean, as one value the library
// checks (parseCompileTargets, checkCompileOptions) and the driver reads.
// Library code never reads the command line; tools fill this struct.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_COMPILER_COMPILEOPTIONS_H
#define COMFYQUANT_COMPILER_COMPILEOPTIONS_H

#include "comfyquant/Compiler/KernelText.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/Dialect/ComfyQuant/IR/EnumChoice.h"
#include "comfyquant/runtime/Targets.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::comfyquant {

/// What the compilation produces.
enum class EmitKind {
  Artifact, ///< the artifact directory (--emit=so)
  MLIR,     ///< vectorized CPU IR and formed CUDA kernels, to `out`
  LLVM,     ///< optimized LLVM IR of the CPU kernels
  Assembly, ///< x86 assembly of the CPU kernels
  PTX,      ///< the PTX of each CUDA arch
};

/// --emit's spelling of `kind` (so, mlir, llvm, asm, ptx).
llvm::StringRef emitKindName(EmitKind kind);
/// nullopt for an unknown spelling.
std::optional<EmitKind> parseEmitKind(llvm::StringRef name);

/// The CPU GEMM register tile, M block and K block forced for tuning (0: the
/// strategy's value; kc -1: the strategy's, 0: all of K).
struct GemmTileOverride {
  int64_t mr = 0, nr = 0, mc = 0, kc = -1;
};

/// The back ends and their targets: --target cpu | cuda[:ARCH,...] | both.
struct CompileTargets {
  bool cpu = false;
  /// The CUDA archs, in the order asked (empty: no CUDA back end).
  std::vector<const ::comfyquant::rt::CudaArchInfo *> cudaArchs;
};

struct CompileOptions {
  std::string checkpoint; ///< .safetensors or a shard index
  std::string outputDir;  ///< the artifact directory (EmitKind::Artifact)
  EmitKind emit = EmitKind::Artifact;
  bool overwrite = false; ///< replace an existing artifact directory

  CompileTargets targets;
  /// CPU variants (table names); empty: every variant.
  std::vector<std::string> cpuVariants;
  /// Activation dtypes (f32, bf16, f16); empty: all three.
  std::vector<std::string> dtypes;
  /// Module selection (globs; empty: all) and resolution overrides
  /// (NAME=KIND, NAME=NxK).
  std::vector<std::string> moduleGlobs, kindOverrides, shapeOverrides;

  /// CPU strategy overrides (tuning and tests): "" keeps the strategy's.
  EnumChoice<CpuMicroKernel> ukernel;
  std::string cpuTune = "generic";
  EnumChoice<CpuDecode> gemmDecode;
  EnumChoice<CpuGemmForm> gemmForm;
  EnumChoice<CpuRowKernel> gemmRow;
  GemmTileOverride gemmTiles;
  /// min_rows of the AMX GEMM configs: calls with fewer rows run another
  /// variant's entry.
  int64_t amxMinRows = 16;

  /// Parallel codegen jobs (0: all hardware threads).
  unsigned jobs = 0;
  /// Serialize codegen and keep one context thread (--mlir-print-ir-*).
  bool serialize = false;
  /// The caller's pass-manager configuration and timing.
  PassManagerSetup passManagers;
  /// Progress lines (null: none) and printed IR (--emit other than so).
  llvm::raw_ostream *progress = nullptr;
  llvm::raw_ostream *out = nullptr;
};

/// Parses --target into `targets`. Returns false with `error` set.
bool parseCompileTargets(llvm::StringRef spec, CompileTargets &targets,
                         std::string &error);

/// Parses --gemm-tiles (MRxNR[xMC[xKC]]). Returns false with `error` set.
bool parseGemmTiles(llvm::StringRef spec, GemmTileOverride &tiles,
                    std::string &error);

/// Checks the options against each other (emit vs targets, -o, dtypes,
/// variants, tuning names) before anything is read. Returns false with
/// `error` set.
bool checkCompileOptions(const CompileOptions &options, std::string &error);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_COMPILER_COMPILEOPTIONS_H
