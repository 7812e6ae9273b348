//===- Cta.h - one CTA of a launch, interpreted -------------------*- C++ -*-===//
//
// The interpreter's state: warps of 32 lanes with a program counter each
// (a warp runs the lanes at its smallest pc together, which reconverges
// structured control flow where the paths meet), the CTA's shared memory
// with a shadow per byte (initialised, last writer and barrier epoch,
// readers, the write's sequence number for proxy fences), tensor memory,
// mbarriers and the wgmma/tcgen05 operations still in flight.
// Interpreter.cpp runs the scalar ISA; TensorCore.cpp the MMA families.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_PTXEMU_CTA_H
#define COMFYQUANT_PTXEMU_CTA_H

#include "ptxemu/Emulator.h"

#include <array>
#include <map>
#include <vector>

namespace comfyquant::ptxemu {

struct Warp {
  uint32_t index = 0;  // warp index in the CTA
  uint32_t valid = 0;  // lanes that are threads of the CTA
  uint32_t exited = 0; // lanes that ran ret/exit
  uint32_t atBarrier = 0;
  /// Lanes waiting at a shfl.sync, vote.sync or bar.warp.sync for the
  /// other lanes its membermask names (sm_70+ semantics: the instruction
  /// waits for them rather than requiring a converged warp).
  uint32_t parked = 0;
  std::array<uint32_t, 32> pc{};
  std::array<uint32_t, 32> barrierPc{};
  enum State : uint8_t { Run, Barrier, Collective, Yield, Done };
  State state = Run;
  uint32_t collectivePc = 0;
  uint32_t fenceSeq = 0; // sequence number of its last fence.proxy.async
  uint32_t wgmmaCommits = 0;
  bool wgmmaFenced = false;
  uint64_t *regs = nullptr; // slot * 32 + lane
  uint32_t live() const { return valid & ~exited; }
};

/// A wgmma issued and not yet waited for: computed when waited for, so that
/// reading its operands late (as the hardware may) shows a missing wait.
struct PendingWgmma {
  const Instr *instr = nullptr;
  uint64_t descA = 0, descB = 0;
  bool scaleD = true;
  int scaleA = 1, scaleB = 1, transA = 0, transB = 0;
  uint32_t group = 0; // commit count of the issuing warps
  uint32_t warpgroup = 0;
  bool done = false;
};

/// A tcgen05.mma not yet committed.
struct PendingUmma {
  const Instr *instr = nullptr;
  uint32_t dtmem = 0, idesc = 0, sfa = 0, sfb = 0;
  uint64_t descA = 0, descB = 0;
  bool enableInputD = true;
  uint32_t thread = 0;
};

struct Mbarrier {
  uint32_t expected = 0, pending = 0, phase = 0;
  int64_t tx = 0;
};

class Cta {
public:
  Cta(Emulator &emu, const Module &module, const Kernel &kernel,
      const uint32_t grid[3], const uint32_t block[3], uint32_t dynamicShared,
      const std::vector<uint8_t> &params, KernelStats &stats);

  /// Runs CTA (x, y, z) to completion; throws Hazard.
  void run(uint32_t x, uint32_t y, uint32_t z);

  // ---- used by the tensor-core families (TensorCore.cpp) -------------------
  [[noreturn]] void hazard(const Warp &w, int lane, const Instr &in,
                           const std::string &what);
  /// Bytes of shared memory read by the async proxy (wgmma, tcgen05): must
  /// be in bounds, initialised and fenced (fence.proxy.async) if written by
  /// the generic proxy.
  void readSharedAsync(const Warp &w, int lane, const Instr &in, uint64_t addr,
                       void *dst, uint32_t bytes);
  uint64_t &reg(Warp &w, uint32_t slot, int lane) {
    return w.regs[size_t(slot) * 32 + lane];
  }
  uint64_t value(Warp &w, const Operand &o, int lane);
  void execMmaSync(Warp &w, const Instr &in, uint32_t mask);
  void issueWgmma(uint32_t warpgroup, const Instr &in);
  void waitWgmma(Warp &w, const Instr &in, uint32_t keep);
  void execTcgen05(Warp &w, const Instr &in, uint32_t mask);

  Emulator &emu_;
  const Module &module_;
  const Kernel &kernel_;
  KernelStats &stats_;
  const std::vector<uint8_t> &params_;
  uint32_t grid_[3], block_[3];
  uint32_t ctaid_[3] = {0, 0, 0};
  uint32_t threads_ = 0;
  uint64_t sharedBytes_ = 0;
  uint32_t dynamicShared_ = 0;

  std::vector<Warp> warps_;
  std::vector<uint64_t> regs_;
  std::vector<uint8_t> local_; // per thread: localBytes

  // Shared memory and its shadow.
  std::vector<uint8_t> shared_;
  std::vector<uint8_t> sInit_;
  std::vector<uint16_t> sWriter_;  // warp + 1
  std::vector<uint32_t> sWriteEpoch_;
  std::vector<uint16_t> sReader_;  // warp + 1, 0xFFFF: several warps
  std::vector<uint32_t> sReadEpoch_;
  std::vector<uint32_t> sWriteSeq_;
  const uint8_t *pendingStore_ = nullptr; // the bytes a shared store writes
  uint32_t epoch_ = 1; // completed CTA barriers + 1
  uint32_t seq_ = 1;   // write/fence sequence
  uint64_t events_ = 0; // barrier releases, mbarrier arrivals, collectives
  uint64_t cacheLo_ = 0, cacheHi_ = 0; // the allocation last accessed

  // Tensor memory (sm_100a): 128 lanes x 512 columns of 32 bits.
  std::vector<uint32_t> tmem_;
  std::vector<uint8_t> tmemInit_;
  std::vector<std::pair<uint32_t, uint32_t>> tmemAllocs_; // column, count
  bool tmemRelinquished_ = false;

  // cp.async: bytes a copy wrote that its thread has not waited for yet
  // (thread + 1), and each thread's copies and commit count.
  struct PendingCopy {
    uint64_t addr;
    uint32_t bytes, group;
  };
  std::vector<uint16_t> sAsync_;
  std::vector<std::vector<PendingCopy>> copies_;
  std::vector<uint32_t> commits_;

  std::map<uint64_t, Mbarrier> mbarriers_;
  std::vector<PendingWgmma> wgmmas_;
  std::vector<PendingUmma> ummas_;

private:
  void reset(uint32_t x, uint32_t y, uint32_t z);
  bool runWarp(Warp &w);
  void step(Warp &w, uint32_t pc, uint32_t mask);
  void releaseBarrier();
  void runCollectives();
  uint64_t special(const Warp &w, Sreg s, int lane) const;
  void setReg(Warp &w, const Operand &o, int lane, uint64_t v);
  uint64_t address(Warp &w, const Operand &o, int lane);
  void load(Warp &w, const Instr &in, uint32_t mask);
  void store(Warp &w, const Instr &in, uint32_t mask);
  uint8_t *sharedPtr(Warp &w, int lane, const Instr &in, uint64_t addr,
                     uint32_t bytes, bool write);
  uint8_t *globalPtr(Warp &w, int lane, const Instr &in, uint64_t addr,
                     uint32_t bytes);
  uint8_t *localPtr(Warp &w, int lane, const Instr &in, uint64_t addr,
                    uint32_t bytes, int align);
  void alu(Warp &w, const Instr &in, uint32_t mask);
  void cvt(Warp &w, const Instr &in, uint32_t mask);
  void setp(Warp &w, const Instr &in, uint32_t mask);
  void shfl(Warp &w, const Instr &in, uint32_t mask);
  void mbarrier(Warp &w, const Instr &in, uint32_t mask);
  void ldmatrix(Warp &w, const Instr &in, uint32_t mask);
  void cpAsync(Warp &w, const Instr &in, uint32_t mask);
  void wgmmaStep(Warp &w, const Instr &in, uint32_t mask);
};

} // namespace comfyquant::ptxemu

#endif // COMFYQUANT_PTXEMU_CTA_H
