//===- Targets.h - the CPU variants and CUDA archs of kernels --*- C++ -*-===//
//
// One table of what comfyquant compiles for, read by the compiler (LLVM CPU
// and features, vector width; PTX version and tensor-core instructions per
// arch), by the runtime (which CPU features a variant needs, the order in
// which variants are preferred) and by the test configuration (through
// `comfyquant-run --cpu-variants`). A name here is the name in a manifest.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_TARGETS_H
#define COMFYQUANT_RUNTIME_TARGETS_H

#include <string>
#include <vector>

namespace comfyquant::rt {

/// An x86-64 kernel variant. Each variant needs everything the one before
/// it in cpuVariants() needs, and more.
struct CpuVariantInfo {
  /// manifest name: "x86-64-v3", "avx512-vnni", "avx512-bf16", "amx"
  const char *name;
  const char *shortName; ///< entry-symbol suffix: "v3", "vnni", "bf16", "amx"
  const char *cpu;       ///< LLVM -mcpu
  const char *features;  ///< extra LLVM target features
  int vectorBits;        ///< widest vector the micro-kernels use
  /// Uses AMX tiles: Linux grants the tile data per process on request.
  bool amxTiles;
  /// Has a bf16 dot product into f32 (AVX512-BF16 vdpbf16ps).
  bool bf16Dot;
  /// Permutes the 64 bytes of a register by byte indices (AVX512-VBMI
  /// vpermb): a 64-entry byte table is one instruction.
  bool bytePermute;
};

/// Every CPU variant, from the most portable to the most specific.
const std::vector<CpuVariantInfo> &cpuVariants();
/// nullptr for an unknown name.
const CpuVariantInfo *findCpuVariant(const std::string &name);
/// Its position in cpuVariants() (-1 for an unknown name).
int cpuVariantLevel(const std::string &name);

/// An NVIDIA architecture kernels are compiled for.
struct CudaArchInfo {
  const char *name;      ///< "sm_90a": manifest name and ptxas -arch
  int computeCapability; ///< 90 (major * 10 + minor)
  int ptxVersion;        ///< 84 for PTX ISA 8.4
  bool archSpecific;     ///< "a" arch: its code runs on this capability only
  bool fp8Mma;           ///< mma.sync with e4m3/e5m2 operands (sm_89+)
  bool wgmma;            ///< warpgroup wgmma.mma_async (sm_90a only)
  /// Warp-level block-scaled MMA (mma.sync kind::mxf8f6f4 .block_scale):
  /// sm_120a only (sm_100a has block scaling in tcgen05 alone).
  bool blockScaledMma;
  /// Fifth-generation tensor cores (tcgen05.mma, accumulators in tensor
  /// memory, block scaling included): sm_100a and the sm_100f family.
  bool tcgen05;
  /// tcgen05.mma kind::i8: sm_100a only (the sm_100f family, B300's
  /// sm_103 among it, has none; its integer GEMMs take mma.sync).
  bool tcgen05Int8;
  /// Launch limits of one block (the same on every arch listed here; the
  /// ptxas check of each kernel reads them with its recorded block size).
  int maxThreadsPerBlock;
  int registersPerBlock;
  /// The arch LLVM generates this one's PTX for, when it is another (a
  /// family target lowered as its first member, the PTX retargeted); null
  /// for itself.
  const char *lowerAs = nullptr;
};

/// A CUDA arch name taken apart: "sm_" + 2 or 3 digits of compute
/// capability + an optional "a" (arch-specific) or "f" (family) suffix.
struct CudaArchName {
  int computeCapability; ///< 90 for sm_90a
  char suffix;           ///< 0, 'a' or 'f'
};
/// The one parser of arch names (compiler, manifest reader, runtime):
/// false for anything else.
bool parseCudaArchName(const std::string &name, CudaArchName &parsed);

/// A PTX ISA version as .version writes it: 84 -> "8.4".
std::string ptxVersionName(int ptxVersion);

/// Every CUDA arch, oldest first.
const std::vector<CudaArchInfo> &cudaArchs();
/// nullptr for an unknown name.
const CudaArchInfo *findCudaArch(const std::string &name);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_TARGETS_H
