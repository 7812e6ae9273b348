//===- CpuFeatures.h - x86 feature detection for kernel variants -*- C++
//-*-===//
//
// cpuid + XCR0 (OS-enabled register state) detection of what the compiled
// kernel variants need, and Linux's AMX permission request. The variants
// (comfyquant-compile, lib/Codegen) are:
//
//   x86-64-v3    AVX, AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE; XCR0 SSE+AVX
//   avx512-vnni  x86-64-v3 + AVX-512 F/CD/BW/DQ/VL + VNNI (-mcpu=cascadelake);
//                XCR0 opmask/ZMM state
//   avx512-bf16  avx512-vnni + AVX512-BF16 (-mcpu=cascadelake +avx512bf16)
//   amx          avx512-bf16 + AVX-512 FP16/VBMI/VBMI2, AVX-VNNI, AMX
//                TILE/INT8/BF16 (-mcpu=sapphirerapids); XCR0 tile state and
//                arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_CPUFEATURES_H
#define COMFYQUANT_RUNTIME_CPUFEATURES_H

#include <functional>
#include <string>
#include <vector>

namespace comfyquant::rt {

struct CpuFeatures {
  bool x86 = false;
  // cpuid leaf 1 / 0x80000001
  bool sse41 = false, avx = false, fma = false, f16c = false, movbe = false,
       osxsave = false, lzcnt = false;
  // cpuid leaf 7
  bool avx2 = false, bmi1 = false, bmi2 = false, avx512f = false,
       avx512dq = false, avx512cd = false, avx512bw = false, avx512vl = false,
       avx512vnni = false, avx512vbmi = false, avx512vbmi2 = false,
       avx512bf16 = false, avx512fp16 = false, avxvnni = false,
       amxTile = false, amxInt8 = false, amxBf16 = false;
  // XCR0: state the OS saves
  bool osAvx = false, osAvx512 = false, osAmx = false;

  /// Space-separated feature names (the /proc/cpuinfo spellings).
  std::string describe() const;
};

/// The features of this CPU (detected once).
const CpuFeatures &cpuFeatures();

/// Whether this CPU and OS can run kernels of `variant`; `why` names what
/// is missing. AMX permission is not requested here (see enableAmx).
bool cpuSupportsVariant(const std::string &variant, std::string *why = nullptr);
/// cpuSupportsVariant for a CPU with features `f` (tests describe CPUs
/// this machine is not).
bool cpuSupportsVariant(const std::string &variant, const CpuFeatures &f,
                        std::string *why = nullptr);

/// Requests permission to use AMX tile data (Linux arch_prctl), once per
/// process; true when granted (or already granted).
bool enableAmx(std::string *why = nullptr);

/// The `variants` a CPU with features `f` supports, most specific first;
/// one with AMX tiles only where `amxGranted()` (asked only then).
std::vector<std::string>
supportedCpuVariants(const std::vector<std::string> &variants,
                     const CpuFeatures &f,
                     const std::function<bool()> &amxGranted);

/// The most specific of `variants` this CPU supports (AMX permission is
/// requested for "amx"), or "" when none is.
std::string bestCpuVariant(const std::vector<std::string> &variants);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_CPUFEATURES_H
