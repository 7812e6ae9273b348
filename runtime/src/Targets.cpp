//===- Targets.cpp - the CPU variants and CUDA archs kernels exist for ---===//
#include "comfyquant/runtime/Targets.h"

namespace comfyquant::rt {

const std::vector<CpuVariantInfo> &cpuVariants() {
  // x86-64-v3: Haswell, Zen 1 and later. avx512-vnni: Cascade Lake, Ice
  // Lake, Cooper Lake. avx512-bf16 (BF16 and VBMI): Zen 4 and later,
  // Sapphire Rapids and later without AMX tiles. amx: Sapphire Rapids and
  // later. Cooper Lake, the one CPU with BF16 but not VBMI, runs
  // avx512-vnni: W6A8's 64-entry grid tables need vpermb.
  static const std::vector<CpuVariantInfo> variants = {
      {"x86-64-v3", "v3", "x86-64-v3", "", 256, false, false, false},
      {"avx512-vnni", "vnni", "cascadelake", "", 512, false, false, false},
      {"avx512-bf16", "bf16", "cascadelake", "+avx512bf16,+avx512vbmi", 512,
       false, true, true},
      {"amx", "amx", "sapphirerapids", "", 512, true, true, true},
  };
  return variants;
}

const CpuVariantInfo *findCpuVariant(const std::string &name) {
  int level = cpuVariantLevel(name);
  return level < 0 ? nullptr : &cpuVariants()[level];
}

int cpuVariantLevel(const std::string &name) {
  const std::vector<CpuVariantInfo> &all = cpuVariants();
  for (size_t i = 0; i < all.size(); ++i)
    if (name == all[i].name)
      return static_cast<int>(i);
  return -1;
}

const std::vector<CudaArchInfo> &cudaArchs() {
  // PTX 8.4 is the first with FP8 mma.sync; Blackwell's block-scaled MMA
  // and the family ("f") targets need 8.8. wgmma exists on sm_90a alone
  // (Blackwell has tcgen05). A family target's code runs on every member
  // of its family from its own capability on: sm_100f on sm_100 and
  // sm_103 (B200, B300), sm_120f on sm_120 and sm_121 (RTX 50, GB10).
  static const std::vector<CudaArchInfo> archs = {
      {"sm_80", 80, 84, false, false, false, false, false, false, 1024, 65536},
      {"sm_86", 86, 84, false, false, false, false, false, false, 1024, 65536},
      {"sm_89", 89, 84, false, true, false, false, false, false, 1024, 65536},
      {"sm_90a", 90, 84, true, true, true, false, false, false, 1024, 65536},
      {"sm_100a", 100, 88, true, true, false, false, true, true, 1024, 65536},
      {"sm_120a", 120, 88, true, true, false, true, false, false, 1024, 65536},
      {"sm_100f", 100, 88, true, true, false, false, true, false, 1024, 65536,
       "sm_100a"},
      {"sm_120f", 120, 88, true, true, false, true, false, false, 1024, 65536,
       "sm_120a"},
  };
  return archs;
}

const CudaArchInfo *findCudaArch(const std::string &name) {
  for (const CudaArchInfo &a : cudaArchs())
    if (name == a.name)
      return &a;
  return nullptr;
}

bool parseCudaArchName(const std::string &name, CudaArchName &parsed) {
  if (name.compare(0, 3, "sm_") != 0)
    return false;
  size_t end = 3;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9')
    ++end;
  const size_t digits = end - 3;
  if (digits < 2 || digits > 3)
    return false;
  const std::string suffix = name.substr(end);
  if (!suffix.empty() && suffix != "a" && suffix != "f")
    return false;
  parsed.computeCapability = std::stoi(name.substr(3, digits));
  parsed.suffix = suffix.empty() ? 0 : suffix[0];
  return true;
}

std::string ptxVersionName(int ptxVersion) {
  return std::to_string(ptxVersion / 10) + "." +
         std::to_string(ptxVersion % 10);
}

} // namespace comfyquant::rt
