//===- CpuDispatchTest.cpp - per-call choice among CPU variants -----------===//
//
// The runtime's choice of which variant's entry a call runs, for CPUs this
// machine may not be: an AMX machine runs one-row calls on the VNNI
// entries and calls of 16 rows or more on the AMX ones.
//===----------------------------------------------------------------------===//
#include "../../runtime/src/exec/CpuDispatch.h"

#include "comfyquant/runtime/CpuFeatures.h"

#include <gtest/gtest.h>

using namespace comfyquant::rt;

namespace {

/// A Sapphire Rapids-class CPU: everything the amx variant needs.
CpuFeatures amxMachine() {
  CpuFeatures f;
  f.x86 = f.sse41 = f.avx = f.fma = f.f16c = f.movbe = f.osxsave = f.lzcnt =
      true;
  f.avx2 = f.bmi1 = f.bmi2 = f.avx512f = f.avx512dq = f.avx512cd =
      f.avx512bw = f.avx512vl = f.avx512vnni = f.avx512vbmi = f.avx512vbmi2 =
          f.avx512bf16 = f.avx512fp16 = f.avxvnni = true;
  f.amxTile = f.amxInt8 = f.amxBf16 = true;
  f.osAvx = f.osAvx512 = f.osAmx = true;
  return f;
}

/// An AVX-512 VNNI machine without AMX (Cascade Lake).
CpuFeatures vnniMachine() {
  CpuFeatures f = amxMachine();
  f.avx512bf16 = f.avx512fp16 = f.avxvnni = f.avx512vbmi = f.avx512vbmi2 =
      false;
  f.amxTile = f.amxInt8 = f.amxBf16 = f.osAmx = false;
  return f;
}

const std::vector<std::string> kVariants = {"x86-64-v3", "avx512-vnni",
                                            "amx"};

/// A module compiled for kVariants: the amx entry has the AMX floor (its
/// GEMM is on tiles), the others none.
ManifestModule module(int64_t amxFloor = 16) {
  ManifestModule m;
  m.name = "blocks.0.attn.to_q";
  m.cpuEntries = {{"bf16", "x86-64-v3", "cq_0_bf16_v3", true, {}, 1},
                  {"bf16", "avx512-vnni", "cq_0_bf16_vnni", true, {}, 1},
                  {"bf16", "amx", "cq_0_bf16_amx", true, {}, amxFloor}};
  return m;
}

/// The symbol a call of `rows` rows runs.
std::string chosen(const ManifestModule &m,
                   const std::vector<std::string> &variants, int64_t rows) {
  std::vector<const CpuEntry *> es = dispatchEntries(m, "bf16", variants);
  if (es.empty())
    return "";
  return es[entryForRows(es, rows)]->symbol;
}

TEST(CpuDispatch, SupportedVariantsBestFirst) {
  EXPECT_EQ(supportedCpuVariants(kVariants, amxMachine(), [] { return true; }),
            (std::vector<std::string>{"amx", "avx512-vnni", "x86-64-v3"}));
  // AMX tile data refused by the OS: the variant is not used.
  EXPECT_EQ(supportedCpuVariants(kVariants, amxMachine(), [] { return false; }),
            (std::vector<std::string>{"avx512-vnni", "x86-64-v3"}));
  bool asked = false;
  EXPECT_EQ(supportedCpuVariants(kVariants, vnniMachine(),
                                 [&] { return asked = true; }),
            (std::vector<std::string>{"avx512-vnni", "x86-64-v3"}));
  EXPECT_FALSE(asked) << "AMX permission requested on a CPU without AMX";
}

TEST(CpuDispatch, AmxMachineRunsOneRowCallsOnVnni) {
  const std::vector<std::string> variants =
      supportedCpuVariants(kVariants, amxMachine(), [] { return true; });
  const ManifestModule m = module();
  EXPECT_EQ(chosen(m, variants, 1), "cq_0_bf16_vnni");
  EXPECT_EQ(chosen(m, variants, 15), "cq_0_bf16_vnni");
  EXPECT_EQ(chosen(m, variants, 16), "cq_0_bf16_amx");
  EXPECT_EQ(chosen(m, variants, 4096), "cq_0_bf16_amx");
  // The candidates end at the first entry without a floor.
  EXPECT_EQ(dispatchEntries(m, "bf16", variants).size(), 2u);
}

TEST(CpuDispatch, EntriesWithoutFloorRunEveryCall) {
  const std::vector<std::string> variants =
      supportedCpuVariants(kVariants, amxMachine(), [] { return true; });
  // A module whose amx entry is not on tiles (a float format).
  const ManifestModule m = module(/*amxFloor=*/1);
  EXPECT_EQ(chosen(m, variants, 1), "cq_0_bf16_amx");
  EXPECT_EQ(dispatchEntries(m, "bf16", variants).size(), 1u);
  // Without AMX the VNNI entry runs everything.
  const std::vector<std::string> noAmx =
      supportedCpuVariants(kVariants, vnniMachine(), [] { return true; });
  EXPECT_EQ(chosen(module(), noAmx, 1), "cq_0_bf16_vnni");
  EXPECT_EQ(chosen(module(), noAmx, 4096), "cq_0_bf16_vnni");
}

TEST(CpuDispatch, FloorAboveEveryCandidate) {
  // Only the amx variant (pinned, or the only one compiled): it runs every
  // call, its floor notwithstanding.
  const ManifestModule m = module();
  EXPECT_EQ(chosen(m, {"amx"}, 1), "cq_0_bf16_amx");
  // A module missing the lower variant's entry falls to the next one.
  ManifestModule gap = m;
  gap.cpuEntries.erase(gap.cpuEntries.begin() + 1); // no avx512-vnni
  EXPECT_EQ(chosen(gap, {"amx", "avx512-vnni", "x86-64-v3"}, 1),
            "cq_0_bf16_v3");
  // The session's own variant must have an entry.
  EXPECT_TRUE(dispatchEntries(gap, "bf16", {"avx512-vnni"}).empty());
}

} // namespace
