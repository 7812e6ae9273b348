//===- CpuFeatures.cpp - x86 feature detection ----------------------------===//
#include "comfyquant/runtime/CpuFeatures.h"
#include "comfyquant/runtime/Targets.h"

#include <algorithm>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CQ_X86 1
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace comfyquant::rt {

namespace {

#ifdef CQ_X86
bool cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  if (leaf > __get_cpuid_max(leaf & 0x80000000u, nullptr))
    return false;
  __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
  return true;
}

unsigned long long xgetbv0() {
  unsigned eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
#ifdef CQ_X86
  f.x86 = true;
  unsigned r[4] = {0, 0, 0, 0}; // eax ebx ecx edx
  auto bit = [](unsigned v, int b) { return ((v >> b) & 1u) != 0; };
  if (cpuid(1, 0, r)) {
    f.sse41 = bit(r[2], 19);
    f.fma = bit(r[2], 12);
    f.movbe = bit(r[2], 22);
    f.osxsave = bit(r[2], 27);
    f.avx = bit(r[2], 28);
    f.f16c = bit(r[2], 29);
  }
  if (cpuid(0x80000001u, 0, r))
    f.lzcnt = bit(r[2], 5);
  if (cpuid(7, 0, r)) {
    f.bmi1 = bit(r[1], 3);
    f.avx2 = bit(r[1], 5);
    f.bmi2 = bit(r[1], 8);
    f.avx512f = bit(r[1], 16);
    f.avx512dq = bit(r[1], 17);
    f.avx512cd = bit(r[1], 28);
    f.avx512bw = bit(r[1], 30);
    f.avx512vl = bit(r[1], 31);
    f.avx512vbmi = bit(r[2], 1);
    f.avx512vbmi2 = bit(r[2], 6);
    f.avx512vnni = bit(r[2], 11);
    f.amxBf16 = bit(r[3], 22);
    f.avx512fp16 = bit(r[3], 23);
    f.amxTile = bit(r[3], 24);
    f.amxInt8 = bit(r[3], 25);
    unsigned maxSub = r[0];
    if (maxSub >= 1 && cpuid(7, 1, r)) {
      f.avxvnni = bit(r[0], 4);
      f.avx512bf16 = bit(r[0], 5);
    }
  }
  if (f.osxsave) {
    unsigned long long xcr0 = xgetbv0();
    f.osAvx = (xcr0 & 0x6) == 0x6;            // SSE, AVX
    f.osAvx512 = f.osAvx && (xcr0 & 0xE0) == 0xE0; // opmask, ZMM_Hi256, Hi16
    f.osAmx = (xcr0 & 0x60000) == 0x60000;    // XTILECFG, XTILEDATA
  }
#endif
  return f;
}

} // namespace

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&](bool on, const char *name) {
    if (!on)
      return;
    if (!s.empty())
      s += ' ';
    s += name;
  };
  add(sse41, "sse4_1");
  add(avx, "avx");
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(bmi1, "bmi1");
  add(bmi2, "bmi2");
  add(lzcnt, "abm");
  add(movbe, "movbe");
  add(avx512f, "avx512f");
  add(avx512dq, "avx512dq");
  add(avx512cd, "avx512cd");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512vnni, "avx512_vnni");
  add(avx512vbmi, "avx512vbmi");
  add(avx512vbmi2, "avx512_vbmi2");
  add(avx512bf16, "avx512_bf16");
  add(avx512fp16, "avx512_fp16");
  add(avxvnni, "avx_vnni");
  add(amxTile, "amx_tile");
  add(amxInt8, "amx_int8");
  add(amxBf16, "amx_bf16");
  add(osAvx, "os:avx");
  add(osAvx512, "os:avx512");
  add(osAmx, "os:amx");
  return s;
}

const CpuFeatures &cpuFeatures() {
  static const CpuFeatures f = detect();
  return f;
}

bool cpuSupportsVariant(const std::string &variant, std::string *why) {
  return cpuSupportsVariant(variant, cpuFeatures(), why);
}

bool cpuSupportsVariant(const std::string &variant, const CpuFeatures &f,
                        std::string *why) {
  std::string missing;
  auto need = [&](bool ok, const char *name) {
    if (ok)
      return;
    if (!missing.empty())
      missing += ", ";
    missing += name;
  };
  // What each level of cpuVariants() (x86-64-v3, avx512-vnni, avx512-bf16,
  // amx) adds
  // to the one before it.
  const int level = cpuVariantLevel(variant);
  if (level < 0) {
    if (why)
      *why = "unknown CPU variant '" + variant + "'";
    return false;
  }
  need(f.x86, "an x86-64 CPU");
  need(f.avx && f.avx2 && f.fma && f.f16c && f.bmi1 && f.bmi2 && f.lzcnt &&
           f.movbe && f.sse41,
       "x86-64-v3 (AVX2, FMA, F16C, BMI, LZCNT, MOVBE)");
  need(f.osAvx, "OS support for AVX state");
  if (level >= cpuVariantLevel("avx512-vnni")) {
    need(f.avx512f && f.avx512cd && f.avx512bw && f.avx512dq && f.avx512vl,
         "AVX-512 F/CD/BW/DQ/VL");
    need(f.avx512vnni, "AVX512-VNNI");
    need(f.osAvx512, "OS support for AVX-512 state");
  }
  if (level >= cpuVariantLevel("avx512-bf16"))
    need(f.avx512bf16 && f.avx512vbmi, "AVX512-BF16 and AVX512-VBMI");
  if (level >= cpuVariantLevel("amx")) {
    need(f.avx512fp16 && f.avx512vbmi && f.avx512vbmi2 && f.avxvnni,
         "AVX512-FP16/VBMI/VBMI2 and AVX-VNNI");
    need(f.amxTile && f.amxInt8 && f.amxBf16, "AMX TILE/INT8/BF16");
    need(f.osAmx, "OS support for AMX tile state");
  }
  if (!missing.empty() && why)
    *why = "CPU variant '" + variant + "' needs " + missing;
  return missing.empty();
}

bool enableAmx(std::string *why) {
#if defined(CQ_X86) && defined(__linux__) && defined(SYS_arch_prctl)
  static std::once_flag once;
  static bool granted = false;
  static std::string reason;
  std::call_once(once, [] {
    constexpr int kReqXcompPerm = 0x1023, kGetXcompPerm = 0x1022;
    constexpr unsigned long kXtiledata = 18;
    if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) != 0) {
      reason = "arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) was refused";
      return;
    }
    unsigned long long bits = 0;
    if (syscall(SYS_arch_prctl, kGetXcompPerm, &bits) != 0 ||
        !(bits & (1ull << kXtiledata))) {
      reason = "AMX tile data permission not granted";
      return;
    }
    granted = true;
  });
  if (!granted && why)
    *why = reason;
  return granted;
#else
  if (why)
    *why = "AMX needs Linux on x86-64";
  return false;
#endif
}

std::vector<std::string>
supportedCpuVariants(const std::vector<std::string> &variants,
                     const CpuFeatures &f,
                     const std::function<bool()> &amxGranted) {
  std::vector<std::string> out;
  const std::vector<CpuVariantInfo> &all = cpuVariants();
  for (auto v = all.rbegin(); v != all.rend(); ++v) {
    if (std::find(variants.begin(), variants.end(), v->name) ==
            variants.end() ||
        !cpuSupportsVariant(v->name, f))
      continue;
    if (v->amxTiles && !amxGranted())
      continue;
    out.push_back(v->name);
  }
  return out;
}

std::string bestCpuVariant(const std::vector<std::string> &variants) {
  std::vector<std::string> supported = supportedCpuVariants(
      variants, cpuFeatures(), [] { return enableAmx(); });
  return supported.empty() ? "" : supported.front();
}

} // namespace comfyquant::rt
