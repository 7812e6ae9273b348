//===- Interpreter.cpp - SIMT execution of the scalar PTX ISA -------------===//
#include "ptxemu/Cta.h"
#include "ptxemu/FloatFormats.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace comfyquant::ptxemu {

namespace {

uint64_t maskTo(uint64_t v, int bytes) {
  return bytes >= 8 ? v : v & ((uint64_t(1) << (bytes * 8)) - 1);
}

int64_t signExtend(uint64_t v, int bytes) {
  if (bytes >= 8)
    return static_cast<int64_t>(v);
  int shift = 64 - bytes * 8;
  return static_cast<int64_t>(v << shift) >> shift;
}

/// Whether an opcode is executed by the whole warp at once (.sync.aligned
/// and the warp collectives): every live lane must be there.
bool warpCollective(Op op) {
  switch (op) {
  case Op::MmaSync: case Op::WgmmaFence: case Op::WgmmaCommit:
  case Op::WgmmaWait: case Op::TcAlloc: case Op::TcDealloc:
  case Op::TcRelinquish: case Op::TcLd: case Op::TcSt: case Op::TcWaitLd:
  case Op::TcWaitSt:
    return true;
  default:
    return false;
  }
}

/// The membermask operand of an instruction that waits for the lanes it
/// names (shfl.sync, vote.sync, bar.warp.sync), else null.
const Operand *memberMaskOperand(const Instr &in) {
  switch (in.op) {
  case Op::Shfl: return &in.ops.back();
  case Op::Vote: return &in.ops[2];
  case Op::BarWarpSync: return &in.ops[0];
  default: return nullptr;
  }
}

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

} // namespace

Cta::Cta(Emulator &emu, const Module &module, const Kernel &kernel,
         const uint32_t grid[3], const uint32_t block[3],
         uint32_t dynamicShared, const std::vector<uint8_t> &params,
         KernelStats &stats)
    : emu_(emu), module_(module), kernel_(kernel), stats_(stats),
      params_(params), dynamicShared_(dynamicShared) {
  for (int i = 0; i < 3; ++i) {
    grid_[i] = grid[i];
    block_[i] = block[i];
  }
  threads_ = block[0] * block[1] * block[2];
  uint32_t nwarps = (threads_ + 31) / 32;
  warps_.resize(nwarps);
  regs_.assign(size_t(kernel.slots) * 32 * nwarps, 0);
  local_.assign(size_t(kernel.localBytes) * threads_, 0);
  uint64_t dynBase = kernel.staticShared;
  for (const Symbol &s : kernel.symbols)
    if (s.space == Space::Shared && s.bytes == 0)
      dynBase = std::max<uint64_t>(dynBase, s.offset);
  sharedBytes_ = std::max<uint64_t>(kernel.staticShared, dynBase + dynamicShared);
  shared_.assign(sharedBytes_, 0);
  sInit_.assign(sharedBytes_, 0);
  sWriter_.assign(sharedBytes_, 0);
  sWriteEpoch_.assign(sharedBytes_, 0);
  sReader_.assign(sharedBytes_, 0);
  sReadEpoch_.assign(sharedBytes_, 0);
  sWriteSeq_.assign(sharedBytes_, 0);
  sAsync_.assign(sharedBytes_, 0);
  copies_.resize(threads_);
  commits_.resize(threads_);
}

void Cta::reset(uint32_t x, uint32_t y, uint32_t z) {
  ctaid_[0] = x;
  ctaid_[1] = y;
  ctaid_[2] = z;
  std::fill(regs_.begin(), regs_.end(), 0);
  std::fill(local_.begin(), local_.end(), 0);
  std::fill(sInit_.begin(), sInit_.end(), 0);
  std::fill(sWriter_.begin(), sWriter_.end(), 0);
  std::fill(sWriteEpoch_.begin(), sWriteEpoch_.end(), 0);
  std::fill(sReader_.begin(), sReader_.end(), 0);
  std::fill(sReadEpoch_.begin(), sReadEpoch_.end(), 0);
  std::fill(sWriteSeq_.begin(), sWriteSeq_.end(), 0);
  std::fill(sAsync_.begin(), sAsync_.end(), 0);
  for (auto &c : copies_)
    c.clear();
  std::fill(commits_.begin(), commits_.end(), 0);
  // Shared memory keeps no value across CTAs on a GPU either: poison it so
  // that a read the shadow misses still shows up as a wrong result.
  std::fill(shared_.begin(), shared_.end(), 0xA5);
  epoch_ = 1;
  seq_ = 1;
  tmem_.clear();
  tmemInit_.clear();
  tmemAllocs_.clear();
  tmemRelinquished_ = false;
  mbarriers_.clear();
  wgmmas_.clear();
  ummas_.clear();
  for (size_t i = 0; i < warps_.size(); ++i) {
    Warp &w = warps_[i];
    w = Warp();
    w.index = static_cast<uint32_t>(i);
    uint32_t first = static_cast<uint32_t>(i * 32);
    uint32_t n = std::min<uint32_t>(32, threads_ - first);
    w.valid = n == 32 ? ~0u : (1u << n) - 1;
    w.regs = regs_.data() + size_t(kernel_.slots) * 32 * i;
  }
}

void Cta::hazard(const Warp &w, int lane, const Instr &in,
                 const std::string &what) {
  uint32_t t = w.index * 32 + (lane < 0 ? 0 : lane);
  uint32_t tx = t % block_[0], ty = (t / block_[0]) % block_[1],
           tz = t / (block_[0] * block_[1]);
  std::ostringstream s;
  s << module_.source << ":" << in.line << ": kernel " << kernel_.name
    << ", CTA (" << ctaid_[0] << "," << ctaid_[1] << "," << ctaid_[2] << ")";
  if (lane >= 0)
    s << ", thread (" << tx << "," << ty << "," << tz << ")";
  else
    s << ", warp " << w.index;
  s << ", '" << module_.opcodes[in.opcodeId] << "': " << what;
  throw Hazard(s.str());
}

uint64_t Cta::special(const Warp &w, Sreg s, int lane) const {
  uint32_t t = w.index * 32 + lane;
  switch (s) {
  case Sreg::TidX: return t % block_[0];
  case Sreg::TidY: return (t / block_[0]) % block_[1];
  case Sreg::TidZ: return t / (block_[0] * block_[1]);
  case Sreg::NtidX: return block_[0];
  case Sreg::NtidY: return block_[1];
  case Sreg::NtidZ: return block_[2];
  case Sreg::CtaidX: return ctaid_[0];
  case Sreg::CtaidY: return ctaid_[1];
  case Sreg::CtaidZ: return ctaid_[2];
  case Sreg::NctaidX: return grid_[0];
  case Sreg::NctaidY: return grid_[1];
  case Sreg::NctaidZ: return grid_[2];
  case Sreg::LaneId: return lane;
  case Sreg::WarpId: return w.index;
  case Sreg::NWarpId: return warps_.size();
  case Sreg::SmId: return 0;
  case Sreg::NSmId: return emu_.config().smCount;
  case Sreg::LaneMaskLt: return (1u << lane) - 1;
  case Sreg::LaneMaskLe: return lane == 31 ? ~0u : (2u << lane) - 1;
  case Sreg::LaneMaskEq: return 1u << lane;
  case Sreg::LaneMaskGe: return ~((1u << lane) - 1) & 0xFFFFFFFFu;
  case Sreg::LaneMaskGt: return lane == 31 ? 0 : ~((2u << lane) - 1) & 0xFFFFFFFFu;
  case Sreg::Clock: case Sreg::Clock64: return stats_.threadInstructions;
  case Sreg::DynSmemSize: return dynamicShared_;
  }
  return 0;
}

uint64_t Cta::value(Warp &w, const Operand &o, int lane) {
  switch (o.kind) {
  case Operand::Reg: {
    uint64_t v = w.regs[size_t(o.reg) * 32 + lane];
    return o.negate ? !v : v;
  }
  case Operand::Imm: return static_cast<uint64_t>(o.imm);
  case Operand::Special: return special(w, o.sreg, lane);
  case Operand::Symbol: return kernel_.symbols[o.symbol].offset;
  default: return 0;
  }
}

void Cta::setReg(Warp &w, const Operand &o, int lane, uint64_t v) {
  w.regs[size_t(o.reg) * 32 + lane] = v;
}

uint64_t Cta::address(Warp &w, const Operand &o, int lane) {
  uint64_t a = static_cast<uint64_t>(o.imm);
  if (o.hasBase)
    a += w.regs[size_t(o.reg) * 32 + lane];
  if (o.symbol >= 0)
    a += kernel_.symbols[o.symbol].offset;
  return a;
}

// ---- memory -----------------------------------------------------------------

uint8_t *Cta::sharedPtr(Warp &w, int lane, const Instr &in, uint64_t addr,
                        uint32_t bytes, bool write) {
  if (addr + bytes > sharedBytes_ || addr + bytes < addr)
    hazard(w, lane, in,
           "shared-memory access out of bounds: address " + hex(addr) + ", " +
               std::to_string(bytes) + " bytes, the CTA has " +
               std::to_string(sharedBytes_));
  if (addr % bytes)
    hazard(w, lane, in, "misaligned shared-memory access at " + hex(addr));
  const uint16_t me = static_cast<uint16_t>(w.index + 1);
  for (uint64_t a = addr; a < addr + bytes; ++a) {
    if (write) {
      if (sWriteEpoch_[a] == epoch_ && sWriter_[a] != me) {
        // Two warps storing the same value between barriers is benign on
        // every GPU: counted (the duplicated stores cost bandwidth), not
        // failed. A different value is a race whose winner is undefined.
        const uint8_t *src = pendingStore_ + (a - addr);
        if (!pendingStore_ || *src != shared_[a])
          hazard(w, lane, in,
                 "shared-memory race: " + hex(a) + " written by warps " +
                     std::to_string(sWriter_[a] - 1) + " and " +
                     std::to_string(w.index) +
                     " with different values between the same barriers");
        stats_.benignRaces++;
      }
      if (sReadEpoch_[a] == epoch_ && sReader_[a] != me)
        hazard(w, lane, in,
               "shared-memory race: " + hex(a) + " read by another warp and "
               "written by warp " + std::to_string(w.index) +
                   " between the same barriers");
      sWriter_[a] = me;
      sWriteEpoch_[a] = epoch_;
      sWriteSeq_[a] = seq_;
      sInit_[a] = 1;
    } else {
      if (!sInit_[a]) {
        if (emu_.config().uninitSharedIsHazard)
          hazard(w, lane, in,
                 "read of uninitialised shared memory at " + hex(a));
        stats_.uninitSharedReads++;
      }
      if (sAsync_[a])
        hazard(w, lane, in,
               "read of " + hex(a) + ", the destination of a cp.async of "
               "thread " + std::to_string(sAsync_[a] - 1) +
               " not yet waited for (cp.async.wait_group)");
      if (sWriteEpoch_[a] == epoch_ && sWriter_[a] != me)
        hazard(w, lane, in,
               "shared-memory race: " + hex(a) + " written by warp " +
                   std::to_string(sWriter_[a] - 1) + " and read by warp " +
                   std::to_string(w.index) + " between the same barriers");
      if (sReadEpoch_[a] != epoch_)
        sReader_[a] = me, sReadEpoch_[a] = epoch_;
      else if (sReader_[a] != me)
        sReader_[a] = 0xFFFF;
    }
  }
  return shared_.data() + addr;
}

void Cta::readSharedAsync(const Warp &w, int lane, const Instr &in,
                          uint64_t addr, void *dst, uint32_t bytes) {
  if (addr + bytes > sharedBytes_)
    hazard(w, lane, in,
           "tensor-core operand out of shared memory: " + hex(addr) + " + " +
               std::to_string(bytes) + " > " + std::to_string(sharedBytes_));
  for (uint64_t a = addr; a < addr + bytes; ++a) {
    if (!sInit_[a])
      hazard(w, lane, in,
             "tensor-core read of uninitialised shared memory at " + hex(a));
    if (sAsync_[a])
      hazard(w, lane, in,
             "tensor-core read of " + hex(a) + ", a cp.async destination "
             "not yet waited for");
    uint16_t writer = sWriter_[a];
    if (writer && warps_[writer - 1].fenceSeq < sWriteSeq_[a])
      hazard(w, lane, in,
             "tensor-core (async proxy) read of " + hex(a) +
                 ", written by warp " + std::to_string(writer - 1) +
                 " without a fence.proxy.async since");
  }
  std::memcpy(dst, shared_.data() + addr, bytes);
}

uint8_t *Cta::globalPtr(Warp &w, int lane, const Instr &in, uint64_t addr,
                        uint32_t bytes) {
  // Allocations do not change during a launch: the last one hit is cached.
  if (addr >= cacheLo_ && addr + bytes <= cacheHi_ && addr + bytes >= addr) {
    if (addr % bytes)
      hazard(w, lane, in, "misaligned global access at " + hex(addr));
    return reinterpret_cast<uint8_t *>(addr);
  }
  uint64_t lo = 0, hi = 0;
  if (emu_.allocationOf(addr, lo, hi)) {
    cacheLo_ = lo;
    cacheHi_ = hi;
  }
  if (!emu_.contains(addr, bytes))
    hazard(w, lane, in,
           "global access outside every allocation: address " + hex(addr) +
               ", " + std::to_string(bytes) + " bytes");
  if (addr % bytes)
    hazard(w, lane, in, "misaligned global access at " + hex(addr));
  return reinterpret_cast<uint8_t *>(addr);
}

uint8_t *Cta::localPtr(Warp &w, int lane, const Instr &in, uint64_t addr,
                       uint32_t bytes, int align) {
  if (addr + bytes > kernel_.localBytes || addr + bytes < addr)
    hazard(w, lane, in, "local-memory access out of bounds at " + hex(addr));
  if (addr % align)
    hazard(w, lane, in, "misaligned local-memory access at " + hex(addr));
  return local_.data() + size_t(w.index * 32 + lane) * kernel_.localBytes + addr;
}

void Cta::load(Warp &w, const Instr &in, uint32_t mask) {
  const int eb = tyBytes(in.type);
  // A used_bytes_mask narrows the access to the bytes it names: the rest
  // may lie outside the object (LLVM widens loads this way) and is neither
  // checked nor read (its elements read as 0).
  uint32_t bytes = eb * in.vec;
  const uint32_t full = bytes;
  if (in.usedBytes != ~0u && bytes <= 32) {
    const uint32_t used = in.usedBytes & (bytes == 32 ? ~0u : (1u << bytes) - 1);
    if (used && (used & 1) && !(used & (used + 1))) // a prefix of the bytes
      bytes = 32 - __builtin_clz(used);
  }
  const Operand &dst = in.ops[0];
  const Operand &src = in.ops[1];
  const bool sgn = tyIsSigned(in.type);
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1))
      continue;
    uint64_t a = address(w, src, l);
    const uint8_t *p;
    switch (in.space) {
    case Space::Global:
    case Space::Generic: // only global memory is reached generically here
      p = globalPtr(w, l, in, a, bytes == full ? bytes : eb);
      if (bytes != full && !emu_.contains(a, bytes))
        hazard(w, l, in, "global access outside every allocation: address " +
                             hex(a) + ", " + std::to_string(bytes) + " bytes");
      stats_.globalLoadBytes += full;
      stats_.globalLoadsByWidth[full]++;
      break;
    case Space::Shared:
      if (bytes != full && a % full)
        hazard(w, l, in, "misaligned shared-memory access at " + hex(a));
      p = bytes == full ? sharedPtr(w, l, in, a, bytes, false) : nullptr;
      if (!p) {
        // Check the used bytes element by element (each aligned).
        for (uint32_t off = 0; off < bytes; off += eb) {
          uint32_t n = std::min<uint32_t>(eb, bytes - off);
          n = n >= 8 ? 8 : n >= 4 ? 4 : n >= 2 ? 2 : 1; // aligned pieces
          for (uint32_t o = off; o < std::min<uint32_t>(off + eb, bytes); o += n)
            sharedPtr(w, l, in, a + o, n, false);
        }
        p = shared_.data() + a;
      }
      stats_.sharedLoadBytes += full;
      break;
    case Space::Param:
      if (a + bytes > params_.size() || a + bytes < a)
        hazard(w, l, in, "parameter read out of bounds at offset " + hex(a));
      p = params_.data() + a;
      break;
    case Space::Local:
      p = localPtr(w, l, in, a, bytes, eb);
      break;
    default:
      hazard(w, l, in, "unsupported state space");
    }
    for (int e = 0; e < in.vec; ++e) {
      uint64_t v = 0;
      if (uint32_t(e * eb) < bytes)
        std::memcpy(&v, p + e * eb, eb);
      if (sgn)
        v = static_cast<uint64_t>(signExtend(v, eb));
      const Operand &d = dst.kind == Operand::Vec ? dst.elems[e] : dst;
      if (d.kind == Operand::Reg)
        setReg(w, d, l, v);
    }
  }
}

void Cta::store(Warp &w, const Instr &in, uint32_t mask) {
  const int eb = tyBytes(in.type);
  const uint32_t bytes = eb * in.vec;
  const Operand &dst = in.ops[0];
  const Operand &src = in.ops[1];
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1))
      continue;
    uint64_t a = address(w, dst, l);
    uint8_t *p;
    switch (in.space) {
    case Space::Global:
    case Space::Generic:
      p = globalPtr(w, l, in, a, bytes);
      stats_.globalStoreBytes += bytes;
      break;
    case Space::Shared: {
      ++seq_;
      uint8_t staged[32] = {0};
      for (int e = 0; e < in.vec; ++e) {
        const Operand &s = src.kind == Operand::Vec ? src.elems[e] : src;
        uint64_t v = value(w, s, l);
        std::memcpy(staged + e * eb, &v, eb);
      }
      pendingStore_ = staged;
      p = sharedPtr(w, l, in, a, bytes, true);
      pendingStore_ = nullptr;
      stats_.sharedStoreBytes += bytes;
      break;
    }
    case Space::Local:
      p = localPtr(w, l, in, a, bytes, eb);
      break;
    default:
      hazard(w, l, in, "unsupported state space");
    }
    for (int e = 0; e < in.vec; ++e) {
      const Operand &s = src.kind == Operand::Vec ? src.elems[e] : src;
      uint64_t v = value(w, s, l);
      std::memcpy(p + e * eb, &v, eb);
    }
  }
}

// ---- arithmetic ---------------------------------------------------------------

namespace {

float f32(uint64_t v) { return bitsToF32(static_cast<uint32_t>(v)); }
uint64_t fromF32(float f) { return f32ToBits(f); }

double halfLane(Ty t, uint64_t v) {
  return t == Ty::BF16 || t == Ty::BF16x2 ? decode(kBF16, v & 0xFFFF)
                                          : decode(kF16, v & 0xFFFF);
}
uint64_t toHalf(Ty t, double x, bool sat = false) {
  return t == Ty::BF16 || t == Ty::BF16x2 ? encode(kBF16, x, sat)
                                          : encode(kF16, x, sat);
}

} // namespace

void Cta::alu(Warp &w, const Instr &in, uint32_t mask) {
  const Ty t = in.type;
  const int nb = tyBytes(t);
  const bool sgn = tyIsSigned(t);
  const Operand *o = in.ops.data();
  const size_t nops = in.ops.size();
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1))
      continue;
    uint64_t a = nops > 1 ? value(w, o[1], l) : 0;
    uint64_t b = nops > 2 ? value(w, o[2], l) : 0;
    uint64_t c = nops > 3 ? value(w, o[3], l) : 0;
    uint64_t r = 0;
    if (t == Ty::Pred) {
      switch (in.op) {
      case Op::And: r = (a & 1) & (b & 1); break;
      case Op::Or: r = (a & 1) | (b & 1); break;
      case Op::Xor: r = (a & 1) ^ (b & 1); break;
      case Op::Not: r = !(a & 1); break;
      default: hazard(w, l, in, "unsupported predicate operation");
      }
      setReg(w, o[0], l, r);
      continue;
    }
    if (t == Ty::F32) {
      float x = f32(a), y = f32(b), z = f32(c);
      float f;
      switch (in.op) {
      case Op::Add:
        f = in.type2 != Ty::None ? static_cast<float>(halfLane(in.type2, a)) + y
                                 : x + y;
        break;
      case Op::Sub: f = x - y; break;
      case Op::Mul: f = x * y; break;
      case Op::Fma: case Op::Mad: f = std::fma(x, y, z); break;
      case Op::Div: f = x / y; break;
      case Op::Rcp: f = 1.0f / x; break;
      case Op::Sqrt: f = std::sqrt(x); break;
      case Op::Neg: f = -x; break;
      case Op::Abs: f = std::fabs(x); break;
      case Op::Min:
        f = std::isnan(x) ? y : std::isnan(y) ? x
            : (x == y ? (std::signbit(x) ? x : y) : std::min(x, y));
        break;
      case Op::Max:
        f = std::isnan(x) ? y : std::isnan(y) ? x
            : (x == y ? (std::signbit(x) ? y : x) : std::max(x, y));
        break;
      default: hazard(w, l, in, "unsupported f32 operation");
      }
      if (in.rnd != Rnd::None && in.rnd != Rnd::Rn)
        hazard(w, l, in, "unsupported rounding mode");
      if (in.sat)
        f = std::isnan(f) ? 0.0f : std::min(1.0f, std::max(0.0f, f));
      r = fromF32(f);
      setReg(w, o[0], l, r);
      continue;
    }
    if (t == Ty::F16 || t == Ty::BF16 || t == Ty::F16x2 || t == Ty::BF16x2) {
      int lanes = (t == Ty::F16x2 || t == Ty::BF16x2) ? 2 : 1;
      for (int h = 0; h < lanes; ++h) {
        double x = halfLane(t, a >> (16 * h)), y = halfLane(t, b >> (16 * h)),
               z = halfLane(t, c >> (16 * h));
        double f;
        switch (in.op) {
        case Op::Add: f = x + y; break;
        case Op::Sub: f = x - y; break;
        case Op::Mul: f = x * y; break;
        case Op::Fma: f = std::fma(x, y, z); break;
        case Op::Neg: f = -x; break;
        case Op::Abs: f = std::fabs(x); break;
        case Op::Min: f = std::isnan(x) ? y : std::isnan(y) ? x : std::min(x, y); break;
        case Op::Max: f = std::isnan(x) ? y : std::isnan(y) ? x : std::max(x, y); break;
        default: hazard(w, l, in, "unsupported half-precision operation");
        }
        uint64_t bits;
        if (in.op == Op::Neg || in.op == Op::Abs)
          bits = in.op == Op::Neg ? ((a >> (16 * h)) ^ 0x8000) & 0xFFFF
                                  : ((a >> (16 * h)) & 0x7FFF);
        else
          bits = toHalf(t, f);
        r |= bits << (16 * h);
      }
      setReg(w, o[0], l, r);
      continue;
    }
    if (t == Ty::S16x2 || t == Ty::U16x2) {
      for (int h = 0; h < 2; ++h) {
        uint64_t x = (a >> (16 * h)) & 0xFFFF, y = (b >> (16 * h)) & 0xFFFF;
        uint64_t f;
        switch (in.op) {
        case Op::Add: f = x + y; break;
        case Op::Sub: f = x - y; break;
        default: hazard(w, l, in, "unsupported 16x2 operation");
        }
        r |= (f & 0xFFFF) << (16 * h);
      }
      setReg(w, o[0], l, r);
      continue;
    }
    // Integers and bit types.
    const int bits = nb * 8;
    const uint64_t ua = maskTo(a, nb), ub = maskTo(b, nb);
    const int64_t sa = signExtend(a, nb), sb = signExtend(b, nb);
    switch (in.op) {
    case Op::Add: r = ua + ub; break;
    case Op::Sub: r = ua - ub; break;
    case Op::Mul:
      if (in.wide) {
        r = sgn ? static_cast<uint64_t>(sa * sb) : ua * ub;
        setReg(w, o[0], l, maskTo(r, nb * 2));
        continue;
      }
      if (in.hi) {
        if (nb == 8) {
          r = sgn ? static_cast<uint64_t>(
                        (static_cast<__int128>(sa) * sb) >> 64)
                  : static_cast<uint64_t>(
                        (static_cast<unsigned __int128>(ua) * ub) >> 64);
        } else {
          r = sgn ? static_cast<uint64_t>((sa * sb) >> bits)
                  : (ua * ub) >> bits;
        }
      } else {
        r = ua * ub;
      }
      break;
    case Op::Mad:
      if (in.wide) {
        uint64_t p = sgn ? static_cast<uint64_t>(sa * sb) : ua * ub;
        setReg(w, o[0], l, maskTo(p + c, nb * 2));
        continue;
      }
      if (in.hi)
        hazard(w, l, in, "unsupported mad.hi");
      r = ua * ub + c;
      break;
    case Op::Div:
    case Op::Rem:
      if (ub == 0) {
        r = in.op == Op::Div ? maskTo(~0ull, nb) : ua; // as the hardware
      } else if (sgn) {
        if (sb == -1 && sa == signExtend(uint64_t(1) << (bits - 1), nb))
          r = in.op == Op::Div ? static_cast<uint64_t>(sa) : 0;
        else
          r = static_cast<uint64_t>(in.op == Op::Div ? sa / sb : sa % sb);
      } else {
        r = in.op == Op::Div ? ua / ub : ua % ub;
      }
      break;
    case Op::Min:
      r = sgn ? static_cast<uint64_t>(std::min(sa, sb)) : std::min(ua, ub);
      break;
    case Op::Max:
      r = sgn ? static_cast<uint64_t>(std::max(sa, sb)) : std::max(ua, ub);
      break;
    case Op::Neg: r = static_cast<uint64_t>(-sa); break;
    case Op::Abs: r = static_cast<uint64_t>(sa < 0 ? -sa : sa); break;
    case Op::And: r = ua & ub; break;
    case Op::Or: r = ua | ub; break;
    case Op::Xor: r = ua ^ ub; break;
    case Op::Not: r = ~ua; break;
    case Op::Cnot: r = ua == 0; break;
    case Op::Shl: {
      uint64_t s = maskTo(b, 4);
      r = s >= uint64_t(bits) ? 0 : ua << s;
      break;
    }
    case Op::Shr: {
      uint64_t s = maskTo(b, 4);
      if (sgn)
        r = static_cast<uint64_t>(sa >> (s >= uint64_t(bits) ? bits - 1 : s));
      else
        r = s >= uint64_t(bits) ? 0 : ua >> s;
      break;
    }
    case Op::Popc: r = __builtin_popcountll(ua); break;
    case Op::Clz: r = ua ? __builtin_clzll(ua) - (64 - bits) : bits; break;
    case Op::Brev: {
      r = 0;
      for (int i = 0; i < bits; ++i)
        r |= ((ua >> i) & 1) << (bits - 1 - i);
      break;
    }
    case Op::Bfe: {
      uint64_t pos = b & 0xFF, len = c & 0xFF;
      uint64_t msb = bits - 1;
      bool sbit = false;
      if (sgn)
        sbit = len == 0 ? false
                        : ((ua >> std::min<uint64_t>(pos + len - 1, msb)) & 1);
      r = 0;
      for (uint64_t i = 0; i < uint64_t(bits); ++i) {
        uint64_t bit = i < len && pos + i <= msb ? (ua >> (pos + i)) & 1
                                                 : (sgn ? sbit : 0);
        r |= bit << i;
      }
      break;
    }
    case Op::Bfi: {
      uint64_t d = value(w, o[4], l);
      uint64_t pos = c & 0xFF, len = d & 0xFF;
      r = ub;
      for (uint64_t i = 0; i < len && pos + i < uint64_t(bits); ++i)
        r = (r & ~(1ull << (pos + i))) | (((ua >> i) & 1) << (pos + i));
      break;
    }
    case Op::Prmt: {
      uint64_t bytes = (ua & 0xFFFFFFFF) | ((ub & 0xFFFFFFFF) << 32);
      r = 0;
      for (int i = 0; i < 4; ++i) {
        uint64_t sel = (c >> (4 * i)) & 0xF;
        uint64_t byte = (bytes >> (8 * (sel & 7))) & 0xFF;
        if (sel & 8)
          byte = (byte & 0x80) ? 0xFF : 0;
        r |= byte << (8 * i);
      }
      break;
    }
    default:
      hazard(w, l, in, "unsupported integer operation");
    }
    if (in.sat && t == Ty::S32 && (in.op == Op::Add || in.op == Op::Sub)) {
      int64_t full = in.op == Op::Add ? sa + sb : sa - sb;
      full = std::min<int64_t>(INT32_MAX, std::max<int64_t>(INT32_MIN, full));
      r = static_cast<uint64_t>(full);
    }
    r = maskTo(r, nb);
    if (sgn)
      r = static_cast<uint64_t>(signExtend(r, nb));
    setReg(w, o[0], l, r);
  }
}

void Cta::setp(Warp &w, const Instr &in, uint32_t mask) {
  const Ty t = in.type;
  const int nb = tyBytes(t);
  const bool hasQ = in.ops.size() == 4 + (in.boolOp ? 1 : 0);
  const size_t ia = hasQ ? 2 : 1;
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1))
      continue;
    uint64_t a = value(w, in.ops[ia], l), b = value(w, in.ops[ia + 1], l);
    bool r;
    if (tyIsFloat(t)) {
      double x, y;
      if (t == Ty::F32) {
        x = f32(a);
        y = f32(b);
      } else if (t == Ty::F64) {
        x = bitsToF64(a);
        y = bitsToF64(b);
      } else {
        x = halfLane(t, a);
        y = halfLane(t, b);
      }
      bool un = std::isnan(x) || std::isnan(y);
      switch (in.cmp) {
      case Cmp::Eq: r = !un && x == y; break;
      case Cmp::Ne: r = !un && x != y; break;
      case Cmp::Lt: r = !un && x < y; break;
      case Cmp::Le: r = !un && x <= y; break;
      case Cmp::Gt: r = !un && x > y; break;
      case Cmp::Ge: r = !un && x >= y; break;
      case Cmp::Equ: r = un || x == y; break;
      case Cmp::Neu: r = un || x != y; break;
      case Cmp::Ltu: r = un || x < y; break;
      case Cmp::Leu: r = un || x <= y; break;
      case Cmp::Gtu: r = un || x > y; break;
      case Cmp::Geu: r = un || x >= y; break;
      case Cmp::Num: r = !un; break;
      case Cmp::Nan: r = un; break;
      default: hazard(w, l, in, "unsupported float comparison");
      }
    } else {
      const bool sgn = tyIsSigned(t);
      uint64_t ua = maskTo(a, nb), ub = maskTo(b, nb);
      int64_t sa = signExtend(a, nb), sb = signExtend(b, nb);
      switch (in.cmp) {
      case Cmp::Eq: r = ua == ub; break;
      case Cmp::Ne: r = ua != ub; break;
      case Cmp::Lt: r = sgn ? sa < sb : ua < ub; break;
      case Cmp::Le: r = sgn ? sa <= sb : ua <= ub; break;
      case Cmp::Gt: r = sgn ? sa > sb : ua > ub; break;
      case Cmp::Ge: r = sgn ? sa >= sb : ua >= ub; break;
      case Cmp::Lo: r = ua < ub; break;
      case Cmp::Ls: r = ua <= ub; break;
      case Cmp::Hi: r = ua > ub; break;
      case Cmp::Hs: r = ua >= ub; break;
      default: hazard(w, l, in, "unsupported integer comparison");
      }
    }
    bool q = !r;
    if (in.boolOp) {
      bool c = value(w, in.ops.back(), l) & 1;
      if (in.boolOp == 1) r = r && c, q = q && c;
      else if (in.boolOp == 2) r = r || c, q = q || c;
      else r = r != c, q = q != c;
    }
    setReg(w, in.ops[0], l, r);
    if (hasQ)
      setReg(w, in.ops[1], l, q);
  }
}

void Cta::cvt(Warp &w, const Instr &in, uint32_t mask) {
  const Ty dt = in.type, st = in.type2;
  const int db = tyBytes(dt), sb = tyBytes(st);
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1))
      continue;
    uint64_t a = value(w, in.ops[1], l);
    uint64_t r = 0;
    if ((dt == Ty::F16x2 || dt == Ty::BF16x2) && st == Ty::F32) {
      uint64_t b = value(w, in.ops[2], l);
      if (in.rnd != Rnd::Rn && in.rnd != Rnd::Rz)
        hazard(w, l, in, "unsupported rounding");
      bool tr = in.rnd == Rnd::Rz;
      double x = f32(a), y = f32(b);
      if (in.relu) {
        x = std::isnan(x) ? x : std::max(0.0, x);
        y = std::isnan(y) ? y : std::max(0.0, y);
      }
      const FloatFormat &f = dt == Ty::F16x2 ? kF16 : kBF16;
      r = (uint64_t(encode(f, x, in.sat, tr)) << 16) | encode(f, y, in.sat, tr);
      setReg(w, in.ops[0], l, r);
      continue;
    }
    const bool sf = tyIsFloat(st), df = tyIsFloat(dt);
    if (!sf && !df) {
      // Integer to integer: truncate or extend by the source's sign.
      uint64_t v = tyIsSigned(st) ? static_cast<uint64_t>(signExtend(a, sb))
                                  : maskTo(a, sb);
      if (in.sat) {
        int64_t lo, hi;
        if (tyIsSigned(dt)) {
          lo = -(int64_t(1) << (db * 8 - 1));
          hi = (int64_t(1) << (db * 8 - 1)) - 1;
        } else {
          lo = 0;
          hi = db >= 8 ? INT64_MAX : (int64_t(1) << (db * 8)) - 1;
        }
        if (tyIsSigned(st)) {
          int64_t s = static_cast<int64_t>(v);
          v = static_cast<uint64_t>(std::min(hi, std::max(lo, s)));
        } else if (v > static_cast<uint64_t>(hi)) {
          v = static_cast<uint64_t>(hi);
        }
      }
      r = maskTo(v, db);
      if (tyIsSigned(dt))
        r = static_cast<uint64_t>(signExtend(r, db));
      setReg(w, in.ops[0], l, r);
      continue;
    }
    double x;
    if (sf) {
      x = st == Ty::F32 ? f32(a) : st == Ty::F64 ? bitsToF64(a) : halfLane(st, a);
    } else {
      x = tyIsSigned(st) ? static_cast<double>(signExtend(a, sb))
                         : static_cast<double>(maskTo(a, sb));
    }
    if (!df) {
      // Float to integer: round as asked, saturate, NaN gives 0.
      double q;
      switch (in.rnd) {
      case Rnd::Rni: q = std::nearbyint(x); break;
      case Rnd::Rzi: q = std::trunc(x); break;
      case Rnd::Rmi: q = std::floor(x); break;
      case Rnd::Rpi: q = std::ceil(x); break;
      default: hazard(w, l, in, "float-to-integer cvt needs .rni/.rzi/.rmi/.rpi");
      }
      double lo, hi;
      if (tyIsSigned(dt)) {
        lo = -std::ldexp(1.0, db * 8 - 1);
        hi = std::ldexp(1.0, db * 8 - 1) - 1;
      } else {
        lo = 0;
        hi = std::ldexp(1.0, db * 8) - 1;
      }
      if (std::isnan(q))
        q = 0;
      q = std::min(hi, std::max(lo, q));
      if (tyIsSigned(dt))
        r = static_cast<uint64_t>(static_cast<int64_t>(q));
      else
        r = q >= 18446744073709551615.0 ? ~0ull : static_cast<uint64_t>(q);
      r = maskTo(r, db);
      if (tyIsSigned(dt))
        r = static_cast<uint64_t>(signExtend(r, db));
      setReg(w, in.ops[0], l, r);
      continue;
    }
    // To a float type.
    if (in.rnd == Rnd::Rni || in.rnd == Rnd::Rzi || in.rnd == Rnd::Rmi ||
        in.rnd == Rnd::Rpi) {
      // Round to an integral value in the same float type.
      if (st != dt)
        hazard(w, l, in, "integer rounding between different float types");
      double q = in.rnd == Rnd::Rni ? std::nearbyint(x)
                 : in.rnd == Rnd::Rzi ? std::trunc(x)
                 : in.rnd == Rnd::Rmi ? std::floor(x)
                                      : std::ceil(x);
      x = q;
      if (dt == Ty::F32)
        r = fromF32(static_cast<float>(x));
      else if (dt == Ty::F64)
        r = f64ToBits(x);
      else
        r = toHalf(dt, x);
      setReg(w, in.ops[0], l, r);
      continue;
    }
    bool widening = sf && tyBytes(st) < db;
    if (!widening && in.rnd != Rnd::Rn && !(sf && st == dt))
      hazard(w, l, in, "unsupported rounding mode for a narrowing cvt");
    if (dt == Ty::F32) {
      if (sf && st == Ty::F64)
        r = fromF32(static_cast<float>(x));
      else if (!sf && (sb == 8 || (sb == 4 && std::fabs(x) > 16777216.0)))
        r = fromF32(static_cast<float>(x)); // host conversion rounds RN
      else
        r = fromF32(static_cast<float>(x));
    } else if (dt == Ty::F64) {
      r = f64ToBits(x);
    } else {
      r = toHalf(dt, x, in.sat);
    }
    if (in.ftz && dt == Ty::F32 && std::fpclassify(f32(r)) == FP_SUBNORMAL)
      r = fromF32(std::signbit(f32(r)) ? -0.0f : 0.0f);
    setReg(w, in.ops[0], l, r);
  }
}

void Cta::shfl(Warp &w, const Instr &in, uint32_t mask) {
  const uint32_t member =
      static_cast<uint32_t>(value(w, in.ops.back(), 0));
  const bool hasP = in.ops.size() == 6;
  const Operand &d = in.ops[0];
  const size_t ia = hasP ? 2 : 1;
  if ((member & mask) != member || (member & w.live()) != member)
    hazard(w, -1, in,
           "shfl.sync membermask " + hex(member) +
               " names lanes that are not executing it (active " +
               hex(mask) + ")");
  uint64_t src[32];
  for (int l = 0; l < 32; ++l)
    src[l] = mask >> l & 1 ? value(w, in.ops[ia], l) : 0;
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1))
      continue;
    uint32_t b = static_cast<uint32_t>(value(w, in.ops[ia + 1], l)) & 31;
    uint32_t c = static_cast<uint32_t>(value(w, in.ops[ia + 2], l));
    uint32_t cval = c & 31, segmask = (c >> 8) & 31;
    uint32_t maxLane = (l & segmask) | (cval & ~segmask);
    uint32_t minLane = l & segmask;
    uint32_t j = l;
    bool p;
    switch (in.shflMode) {
    case 0: j = l - b; p = int(j) >= int(maxLane); break;
    case 1: j = l + b; p = j <= maxLane; break;
    case 2: j = l ^ b; p = j <= maxLane; break;
    default: j = minLane | (b & ~segmask); p = j <= maxLane; break;
    }
    if (!p)
      j = l;
    if (!(mask >> j & 1))
      hazard(w, l, in, "shfl.sync reads lane " + std::to_string(j) +
                           ", which is not executing it");
    setReg(w, d, l, src[j] & 0xFFFFFFFF);
    if (hasP)
      setReg(w, in.ops[1], l, p);
  }
}

// ---- mbarrier -----------------------------------------------------------------

void Cta::mbarrier(Warp &w, const Instr &in, uint32_t mask) {
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1))
      continue;
    const Operand &addrOp = in.op == Op::MbarTryWait ? in.ops[1] : in.ops[0];
    uint64_t a = address(w, addrOp, l);
    if (a + 8 > sharedBytes_ || a % 8)
      hazard(w, l, in, "mbarrier address " + hex(a) +
                           " is not an aligned 8-byte object in shared memory");
    if (in.op == Op::MbarInit) {
      uint32_t n = static_cast<uint32_t>(value(w, in.ops[1], l));
      if (n == 0 || n > (1u << 20))
        hazard(w, l, in, "mbarrier.init count " + std::to_string(n));
      Mbarrier &m = mbarriers_[a];
      ++events_;
      m.expected = m.pending = n;
      m.phase = 0;
      m.tx = 0;
      std::fill(sInit_.begin() + a, sInit_.begin() + a + 8, 1);
      continue;
    }
    auto it = mbarriers_.find(a);
    if (it == mbarriers_.end())
      hazard(w, l, in, "mbarrier at " + hex(a) + " used before mbarrier.init");
    Mbarrier &m = it->second;
    if (in.op == Op::MbarTryWait) {
      uint32_t parity = static_cast<uint32_t>(value(w, in.ops[2], l)) & 1;
      bool done = parity != (m.phase & 1);
      setReg(w, in.ops[0], l, done);
      if (!done)
        w.state = Warp::Yield;
    } else {
      hazard(w, l, in, "unsupported mbarrier operation");
    }
  }
}

// ---- ldmatrix and cp.async ----------------------------------------------------

void Cta::ldmatrix(Warp &w, const Instr &in, uint32_t mask) {
  // Matrix j's eight rows (16 bytes each) come from the addresses of lanes
  // 8j..8j+7; thread t receives row t/4, columns 2(t%4) and 2(t%4)+1 of
  // each matrix (.trans: rows 2(t%4), 2(t%4)+1 of column t/4).
  const int count = in.vec;
  uint16_t rows[4][8][8];
  for (int j = 0; j < count; ++j)
    for (int r = 0; r < 8; ++r) {
      const int lane = 8 * j + r;
      if (!(mask >> lane & 1))
        hazard(w, lane, in, "ldmatrix row address from a lane not executing it");
      uint64_t a = address(w, in.ops[1], lane);
      if (a % 16)
        hazard(w, lane, in, "ldmatrix row address " + hex(a) +
                                " is not 16-byte aligned");
      const uint8_t *p = sharedPtr(w, lane, in, a, 16, false);
      std::memcpy(rows[j][r], p, 16);
      stats_.sharedLoadBytes += 16;
    }
  const Operand &d = in.ops[0];
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1))
      continue;
    for (int j = 0; j < count; ++j) {
      uint16_t lo, hi;
      if (!in.trans) {
        lo = rows[j][l / 4][2 * (l % 4)];
        hi = rows[j][l / 4][2 * (l % 4) + 1];
      } else {
        lo = rows[j][2 * (l % 4)][l / 4];
        hi = rows[j][2 * (l % 4) + 1][l / 4];
      }
      const Operand &r = d.kind == Operand::Vec ? d.elems[j] : d;
      setReg(w, r, l, uint64_t(lo) | (uint64_t(hi) << 16));
    }
  }
}

void Cta::cpAsync(Warp &w, const Instr &in, uint32_t mask) {
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1))
      continue;
    const uint32_t t = w.index * 32 + l;
    if (in.op == Op::CpAsyncCommit) {
      ++commits_[t];
      continue;
    }
    if (in.op == Op::CpAsyncWait) {
      const bool all = in.ops.empty();
      const uint32_t keep = all ? 0 : static_cast<uint32_t>(in.ops[0].imm);
      auto &list = copies_[t];
      for (auto it = list.begin(); it != list.end();) {
        bool done = all || (it->group < commits_[t] &&
                            commits_[t] - it->group > keep);
        if (!done) {
          ++it;
          continue;
        }
        for (uint64_t a = it->addr; a < it->addr + it->bytes; ++a)
          if (sAsync_[a] == t + 1)
            sAsync_[a] = 0;
        it = list.erase(it);
      }
      continue;
    }
    const uint32_t size = static_cast<uint32_t>(value(w, in.ops[2], l));
    if (size != 4 && size != 8 && size != 16)
      hazard(w, l, in, "cp.async size " + std::to_string(size));
    uint32_t src = size;
    if (in.ops.size() == 4)
      src = static_cast<uint32_t>(value(w, in.ops[3], l));
    if (src > size)
      hazard(w, l, in, "cp.async src-size " + std::to_string(src) +
                           " larger than its cp-size");
    uint64_t dst = address(w, in.ops[0], l), from = address(w, in.ops[1], l);
    uint8_t buf[16] = {0};
    if (src) {
      const uint8_t *g = globalPtr(w, l, in, from, src < size ? 1 : size);
      if (src < size && !emu_.contains(from, src))
        hazard(w, l, in, "cp.async source outside every allocation: " +
                             hex(from) + ", " + std::to_string(src) + " bytes");
      std::memcpy(buf, g, src);
      stats_.globalLoadBytes += src;
      stats_.globalLoadsByWidth[size]++;
    }
    ++seq_;
    pendingStore_ = buf;
    uint8_t *p = sharedPtr(w, l, in, dst, size, true);
    pendingStore_ = nullptr;
    std::memcpy(p, buf, size);
    stats_.sharedStoreBytes += size;
    for (uint64_t a = dst; a < dst + size; ++a)
      sAsync_[a] = static_cast<uint16_t>(t + 1);
    copies_[t].push_back({dst, size, commits_[t]});
  }
}

// ---- the warp loop ----------------------------------------------------------

void Cta::step(Warp &w, uint32_t pc, uint32_t mask) {
  const Instr &in = kernel_.code[pc];
  uint32_t exec = mask;
  if (in.guard.kind == Operand::Reg) {
    exec = 0;
    for (int l = 0; l < 32; ++l)
      if (mask >> l & 1) {
        bool g = w.regs[size_t(in.guard.reg) * 32 + l] & 1;
        if (g != in.guard.negate)
          exec |= 1u << l;
      }
  }
  stats_.opcodeCounts[in.opcodeId]++;
  stats_.threadInstructions += __builtin_popcount(exec);
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1)
      w.pc[l] = pc + 1;
  if (!exec)
    return;
  if (warpCollective(in.op) && exec != w.live())
    hazard(w, -1, in,
           "warp-collective instruction executed by lanes " + hex(exec) +
               " of live lanes " + hex(w.live()) + " (divergent)");
  switch (in.op) {
  case Op::Mov: {
    const Operand &d = in.ops[0], &s = in.ops[1];
    const int nb = tyBytes(in.type);
    for (int l = 0; l < 32; ++l) {
      if (!(exec >> l & 1))
        continue;
      if (d.kind == Operand::Vec) { // unpack
        uint64_t v = value(w, s, l);
        int part = nb / static_cast<int>(d.elems.size());
        for (size_t e = 0; e < d.elems.size(); ++e)
          if (d.elems[e].kind == Operand::Reg)
            setReg(w, d.elems[e], l, maskTo(v >> (8 * part * e), part));
      } else if (s.kind == Operand::Vec) { // pack
        int part = nb / static_cast<int>(s.elems.size());
        uint64_t v = 0;
        for (size_t e = 0; e < s.elems.size(); ++e)
          v |= maskTo(value(w, s.elems[e], l), part) << (8 * part * e);
        setReg(w, d, l, v);
      } else {
        setReg(w, d, l, maskTo(value(w, s, l), nb == 0 ? 8 : nb));
      }
    }
    break;
  }
  case Op::Selp:
    for (int l = 0; l < 32; ++l)
      if (exec >> l & 1)
        setReg(w, in.ops[0], l,
               value(w, in.ops[3], l) & 1 ? value(w, in.ops[1], l)
                                          : value(w, in.ops[2], l));
    break;
  case Op::Cvta:
    for (int l = 0; l < 32; ++l)
      if (exec >> l & 1)
        setReg(w, in.ops[0], l, value(w, in.ops[1], l));
    break;
  case Op::Cvt: cvt(w, in, exec); break;
  case Op::Setp: setp(w, in, exec); break;
  case Op::Ld: load(w, in, exec); break;
  case Op::St: store(w, in, exec); break;
  case Op::Bra:
    for (int l = 0; l < 32; ++l)
      if (exec >> l & 1)
        w.pc[l] = in.ops[0].label;
    if (in.uni && exec != mask)
      hazard(w, -1, in, "bra.uni taken by some lanes only");
    break;
  case Op::Ret:
  case Op::Exit:
    w.exited |= exec;
    break;
  case Op::BarSync: {
    if (in.ops.size() > 1 || value(w, in.ops[0], __builtin_ctz(exec)) != 0)
      hazard(w, -1, in, "only bar.sync 0 without a thread count is emulated");
    w.atBarrier |= exec;
    for (int l = 0; l < 32; ++l)
      if (exec >> l & 1)
        w.barrierPc[l] = pc;
    break;
  }
  case Op::BarWarpSync: {
    uint32_t m = static_cast<uint32_t>(value(w, in.ops[0], __builtin_ctz(exec)));
    if ((m & exec) != m)
      hazard(w, -1, in, "bar.warp.sync with lanes not executing it");
    break;
  }
  case Op::Shfl: shfl(w, in, exec); break;
  case Op::Vote: {
    uint32_t ballot = 0;
    for (int l = 0; l < 32; ++l)
      if ((exec >> l & 1) && (value(w, in.ops[1], l) & 1))
        ballot |= 1u << l;
    uint32_t member = static_cast<uint32_t>(value(w, in.ops[2], 0));
    if ((member & exec) != member)
      hazard(w, -1, in, "vote.sync membermask names lanes not executing it");
    for (int l = 0; l < 32; ++l) {
      if (!(exec >> l & 1))
        continue;
      uint64_t r;
      switch (in.voteMode) {
      case 0: r = (ballot & member) == member; break;
      case 1: r = (ballot & member) != 0; break;
      case 2: r = (ballot & member) == member || (ballot & member) == 0; break;
      default: r = ballot; break;
      }
      setReg(w, in.ops[0], l, r);
    }
    break;
  }
  case Op::Membar:
    break;
  case Op::FenceProxyAsync:
    w.fenceSeq = ++seq_;
    break;
  case Op::MbarInit:
  case Op::MbarTryWait:
  case Op::MbarArrive:
    mbarrier(w, in, exec);
    break;
  case Op::MmaSync:
    execMmaSync(w, in, exec);
    break;
  case Op::Ldmatrix:
    ldmatrix(w, in, exec);
    break;
  case Op::CpAsync:
  case Op::CpAsyncCommit:
  case Op::CpAsyncWait:
    cpAsync(w, in, exec);
    break;
  case Op::WgmmaFence:
  case Op::WgmmaCommit:
  case Op::WgmmaWait:
    wgmmaStep(w, in, exec);
    break;
  case Op::WgmmaMma:
    hazard(w, -1, in, "internal: wgmma reached the scalar path");
  case Op::TcAlloc: case Op::TcDealloc: case Op::TcRelinquish: case Op::TcLd:
  case Op::TcSt: case Op::TcWaitLd: case Op::TcWaitSt: case Op::TcMma:
  case Op::TcCommit: case Op::TcFence:
    execTcgen05(w, in, exec);
    break;
  default:
    alu(w, in, exec);
  }
}

void Cta::wgmmaStep(Warp &w, const Instr &in, uint32_t) {
  if (in.op == Op::WgmmaFence) {
    w.wgmmaFenced = true;
  } else if (in.op == Op::WgmmaCommit) {
    ++w.wgmmaCommits;
  } else {
    uint32_t keep = static_cast<uint32_t>(in.ops[0].imm);
    waitWgmma(w, in, keep);
  }
}

/// Runs the warp until every live lane is blocked (barrier, collective,
/// failed mbarrier wait) or has exited. Returns whether it executed anything.
bool Cta::runWarp(Warp &w) {
  bool progress = false;
  const std::vector<Instr> &code = kernel_.code;
  while (true) {
    uint32_t runnable = w.live() & ~w.atBarrier;
    if (!runnable) {
      w.state = w.live() ? Warp::Barrier : Warp::Done;
      return progress;
    }
    // The lanes at the smallest pc run together; lanes waiting at a .sync
    // op join the lanes that reach it. When every runnable lane waits, the
    // ones at the smallest pc run anyway (the op reports who is missing).
    uint32_t free = runnable & ~w.parked;
    if (!free)
      free = runnable;
    uint32_t pc = ~0u, mask = 0;
    for (uint32_t m = free; m; m &= m - 1) {
      const int l = __builtin_ctz(m);
      const uint32_t p = w.pc[l];
      if (p < pc) {
        pc = p;
        mask = 1u << l;
      } else if (p == pc) {
        mask |= 1u << l;
      }
    }
    for (uint32_t m = runnable & w.parked; m; m &= m - 1)
      if (w.pc[__builtin_ctz(m)] == pc)
        mask |= 1u << __builtin_ctz(m);
    if (pc >= code.size())
      hazard(w, __builtin_ctz(mask), code.back(), "ran past the kernel's end");
    const Instr &in = code[pc];
    if (const Operand *members = memberMaskOperand(in)) {
      uint32_t named = static_cast<uint32_t>(
                           value(w, *members, __builtin_ctz(mask))) &
                       w.live();
      // Named lanes that can still arrive: wait for them.
      if (named & ~mask & runnable & ~w.parked) {
        w.parked |= mask;
        continue;
      }
    }
    w.parked &= ~mask;
    if (in.op == Op::WgmmaMma) {
      if (mask != w.live())
        hazard(w, -1, in, "wgmma.mma_async executed by a divergent warp");
      if (!w.wgmmaFenced)
        hazard(w, -1, in, "wgmma.mma_async without a wgmma.fence before it");
      w.state = Warp::Collective;
      w.collectivePc = pc;
      return progress;
    }
    progress = true;
    step(w, pc, mask);
    if (w.state == Warp::Yield)
      return progress;
  }
}

void Cta::runCollectives() {
  // wgmma.mma_async: the four warps of a warpgroup at the same instruction.
  for (size_t g = 0; g * 4 < warps_.size(); ++g) {
    bool all = true;
    uint32_t pc = 0;
    for (size_t i = g * 4; i < g * 4 + 4; ++i) {
      if (i >= warps_.size() || warps_[i].state != Warp::Collective) {
        all = false;
        break;
      }
      if (i == g * 4)
        pc = warps_[i].collectivePc;
      else if (warps_[i].collectivePc != pc)
        hazard(warps_[i], -1, kernel_.code[warps_[i].collectivePc],
               "the warps of a warpgroup are at different wgmma instructions");
    }
    if (!all)
      continue;
    const Instr &in = kernel_.code[pc];
    issueWgmma(static_cast<uint32_t>(g), in);
    ++events_;
    for (size_t i = g * 4; i < g * 4 + 4; ++i) {
      Warp &w = warps_[i];
      stats_.opcodeCounts[in.opcodeId]++;
      stats_.threadInstructions += __builtin_popcount(w.live());
      for (int l = 0; l < 32; ++l)
        if (w.live() >> l & 1)
          w.pc[l] = pc + 1;
      w.state = Warp::Run;
    }
  }
}

void Cta::releaseBarrier() {
  for (Warp &w : warps_) {
    if (w.state == Warp::Done)
      continue;
    uint32_t pc0 = ~0u;
    for (int l = 0; l < 32; ++l)
      if (w.atBarrier >> l & 1) {
        if (pc0 == ~0u)
          pc0 = w.barrierPc[l];
        else if (w.barrierPc[l] != pc0)
          hazard(w, l, kernel_.code[w.barrierPc[l]],
                 "divergent bar.sync: lanes of one warp wait at lines " +
                     std::to_string(kernel_.code[pc0].line) + " and " +
                     std::to_string(kernel_.code[w.barrierPc[l]].line));
      }
    w.atBarrier = 0;
    w.state = Warp::Run;
  }
  ++events_;
  ++epoch_;
  stats_.barriers++;
}

void Cta::run(uint32_t x, uint32_t y, uint32_t z) {
  reset(x, y, z);
  int idleRounds = 0, spinRounds = 0;
  uint64_t lastEvents = events_;
  while (true) {
    bool progress = false;
    for (Warp &w : warps_) {
      if (w.state == Warp::Run || w.state == Warp::Yield) {
        w.state = Warp::Run;
        progress |= runWarp(w);
      }
    }
    bool anyBarrier = false, allBlocked = true, allDone = true;
    for (const Warp &w : warps_) {
      allDone &= w.state == Warp::Done;
      anyBarrier |= w.state == Warp::Barrier;
      allBlocked &= w.state == Warp::Barrier || w.state == Warp::Done;
    }
    if (allDone)
      break;
    size_t before = 0;
    for (const Warp &w : warps_)
      before += w.state == Warp::Collective;
    runCollectives();
    size_t after = 0;
    for (const Warp &w : warps_)
      after += w.state == Warp::Collective;
    progress |= after != before;
    if (anyBarrier && allBlocked) {
      releaseBarrier();
      continue;
    }
    // Warps that only spin on mbarrier waits make no progress unless some
    // arrive or phase change happens.
    bool spinning = true;
    for (const Warp &w : warps_)
      spinning &= w.state != Warp::Run;
    bool anyYield = false;
    for (const Warp &w : warps_)
      anyYield |= w.state == Warp::Yield;
    if (spinning && anyYield && events_ == lastEvents) {
      if (++spinRounds > 4096)
        progress = false;
    } else {
      spinRounds = 0;
    }
    lastEvents = events_;
    if (progress) {
      idleRounds = 0;
      continue;
    }
    // Nothing ran: only warps waiting for each other or spinning on an
    // mbarrier that nothing will complete.
    if (++idleRounds > 2) {
      for (Warp &w : warps_)
        if (w.state != Warp::Done) {
          uint32_t pc = w.state == Warp::Collective ? w.collectivePc : 0;
          for (int l = 0; l < 32 && !pc; ++l)
            if (w.live() >> l & 1)
              pc = w.pc[l] ? w.pc[l] - 1 : 0;
          hazard(w, -1, kernel_.code[pc],
                 "deadlock: the CTA's warps wait for each other (a barrier, "
                 "warpgroup collective or mbarrier phase that never "
                 "completes)");
        }
    }
  }
  if (!wgmmas_.empty()) {
    for (const PendingWgmma &p : wgmmas_)
      if (!p.done)
        hazard(warps_[p.warpgroup * 4], -1, *p.instr,
               "wgmma.mma_async never waited for (wgmma.wait_group) before "
               "the kernel ended");
  }
  for (uint32_t t = 0; t < copies_.size(); ++t)
    if (!copies_[t].empty())
      hazard(warps_[t / 32], static_cast<int>(t % 32), kernel_.code.back(),
             "cp.async never waited for before the kernel ended");
  if (!ummas_.empty())
    hazard(warps_[0], -1, *ummas_.front().instr,
           "tcgen05.mma never committed before the kernel ended");
  if (!tmemAllocs_.empty())
    hazard(warps_[0], -1, kernel_.code.back(),
           "tensor memory still allocated when the kernel ended "
           "(tcgen05.dealloc missing)");
}

// ---- the emulator ---------------------------------------------------------------

void *Emulator::allocate(size_t bytes) {
  // Rounded up to 256 bytes, as cuMemAlloc aligns; the slack is not
  // addressable (accesses are checked against `bytes`).
  size_t rounded = (bytes + 255) / 256 * 256;
  void *p = std::aligned_alloc(256, rounded ? rounded : 256);
  if (!p)
    return nullptr;
  std::memset(p, 0xCD, rounded ? rounded : 256);
  std::lock_guard<std::mutex> lock(memMutex_);
  allocations_[reinterpret_cast<uint64_t>(p)] = bytes;
  return p;
}

bool Emulator::release(void *p) {
  std::lock_guard<std::mutex> lock(memMutex_);
  auto it = allocations_.find(reinterpret_cast<uint64_t>(p));
  if (it == allocations_.end())
    return false;
  allocations_.erase(it);
  std::free(p);
  return true;
}

bool Emulator::allocationOf(uint64_t addr, uint64_t &lo, uint64_t &hi) const {
  std::lock_guard<std::mutex> lock(memMutex_);
  auto it = allocations_.upper_bound(addr);
  if (it == allocations_.begin())
    return false;
  --it;
  if (addr < it->first || addr >= it->first + it->second)
    return false;
  lo = it->first;
  hi = it->first + it->second;
  return true;
}

bool Emulator::contains(uint64_t addr, uint64_t bytes) const {
  std::lock_guard<std::mutex> lock(memMutex_);
  auto it = allocations_.upper_bound(addr);
  if (it == allocations_.begin())
    return false;
  --it;
  return addr >= it->first && addr + bytes <= it->first + it->second &&
         addr + bytes >= addr;
}

void Emulator::launch(const Module &module, const Kernel &kernel,
                      const uint32_t grid[3], const uint32_t block[3],
                      uint32_t dynamicShared,
                      const std::vector<uint8_t> &params) {
  KernelStats *st = nullptr;
  for (KernelStats &s : stats_)
    if (s.name == kernel.name)
      st = &s;
  if (!st) {
    stats_.emplace_back();
    st = &stats_.back();
    st->name = kernel.name;
  }
  for (int i = 0; i < 3; ++i) {
    st->grid[i] = grid[i];
    st->block[i] = block[i];
  }
  st->launches++;
  st->opcodeNames = &module.opcodes;
  if (st->opcodeCounts.size() < module.opcodes.size())
    st->opcodeCounts.resize(module.opcodes.size(), 0);
  Cta cta(*this, module, kernel, grid, block, dynamicShared, params, *st);
  for (uint32_t z = 0; z < grid[2]; ++z)
    for (uint32_t y = 0; y < grid[1]; ++y)
      for (uint32_t x = 0; x < grid[0]; ++x)
        cta.run(x, y, z);
}

} // namespace comfyquant::ptxemu
