//===- Emulator.h - runs PTX kernels on the CPU ------------------*- C++ -*-===//
//
// The device the driver shim (EmuDriver.cpp) stands behind: global memory
// (host allocations it tracks, so every access is bounds-checked), parsed
// modules, and launches that run each CTA's warps with SIMT semantics.
// Whatever a GPU would hide — an out-of-bounds or misaligned access, a read
// of uninitialised shared memory or TMEM, a shared-memory race between two
// barriers, a divergent barrier or collective, a tensor-core read of
// generic-proxy writes without fence.proxy.async — stops the launch with a
// Hazard naming kernel, PTX line, CTA, thread and address.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_PTXEMU_EMULATOR_H
#define COMFYQUANT_PTXEMU_EMULATOR_H

#include "ptxemu/PtxModule.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace comfyquant::ptxemu {

/// A launch stopped by something a GPU would do silently or undefinedly.
class Hazard : public std::runtime_error {
public:
  explicit Hazard(const std::string &what) : std::runtime_error(what) {}
};

/// How tensor-core float sums are rounded.
///  Hardware: each MMA's products (exact) and the incoming accumulator are
///  aligned to the largest exponent among them and truncated to
///  `alignBits` bits below it, summed exactly, and the sum is truncated to
///  f32 (see docs/Testing.md for the model and its sources).
///  Exact: the same sum without the alignment truncation, rounded to nearest.
enum class SumModel { Hardware, Exact };

/// What one kernel's launches did, summed over its launches.
struct KernelStats {
  std::string name;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t launches = 0;
  /// Warp instructions by Module::opcodes index (spelled out by statsJson).
  std::vector<uint64_t> opcodeCounts;
  const std::vector<std::string> *opcodeNames = nullptr;
  uint64_t threadInstructions = 0;
  uint64_t tensorInstructions = 0, tensorMacs = 0;
  uint64_t globalLoadBytes = 0, globalStoreBytes = 0;
  std::map<int, uint64_t> globalLoadsByWidth; // bytes per thread access
  uint64_t sharedLoadBytes = 0, sharedStoreBytes = 0;
  uint64_t barriers = 0;
  /// Shared bytes stored by two warps with the same value between barriers.
  uint64_t benignRaces = 0;
  /// Bytes read from shared memory never written (when not a hazard).
  uint64_t uninitSharedReads = 0;
};

struct DeviceConfig {
  int sm = 90;              // compute capability x10
  bool archSpecific = true; // sm_90a: runs sm_90a PTX
  int smCount = 132;
  SumModel sumModel = SumModel::Hardware;
  int threads = 1; // host threads running CTAs
  /// A read of shared memory never written stops the launch (the default);
  /// false counts it instead (KernelStats::uninitSharedReads), for kernels
  /// that load fragments speculatively and never use them (CUTLASS's
  /// multistage mainloop reads the next stage after the last k-tile).
  bool uninitSharedIsHazard = true;
};

class Emulator {
public:
  explicit Emulator(const DeviceConfig &config) : config_(config) {}

  const DeviceConfig &config() const { return config_; }

  // Global memory: host allocations, registered so accesses can be checked.
  void *allocate(size_t bytes);
  bool release(void *p);
  /// The allocation containing [addr, addr+bytes), or false.
  bool contains(uint64_t addr, uint64_t bytes) const;
  /// The allocation holding `addr`: [lo, hi).
  bool allocationOf(uint64_t addr, uint64_t &lo, uint64_t &hi) const;

  /// Runs `kernel` of `module` over the grid. `params` holds the kernel's
  /// parameter bytes laid out as its .param list. Throws Hazard.
  void launch(const Module &module, const Kernel &kernel,
              const uint32_t grid[3], const uint32_t block[3],
              uint32_t dynamicShared, const std::vector<uint8_t> &params);

  /// Counts per kernel, in first-launch order.
  const std::vector<KernelStats> &stats() const { return stats_; }
  /// {"arch": ..., "kernels": [...]} (docs/Tools.md).
  std::string statsJson(const std::string &arch) const;

private:
  DeviceConfig config_;
  mutable std::mutex memMutex_;
  std::map<uint64_t, uint64_t> allocations_; // base -> bytes
  std::vector<KernelStats> stats_;
};

} // namespace comfyquant::ptxemu

#endif // COMFYQUANT_PTXEMU_EMULATOR_H
