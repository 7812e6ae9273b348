//===- TensorCore.cpp - mma.sync, wgmma and tcgen05 ------------------------===//
//
// Fragment layouts, descriptors and TMEM data paths as the PTX ISA states
// them (register index and lane -> row, column), and float sums by the
// SumModel. Integer MMAs are exact (s32, wrapping or .satfinite).
//===----------------------------------------------------------------------===//
#include "ptxemu/Cta.h"
#include "ptxemu/FloatFormats.h"
#include "ptxemu/Fragments.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace comfyquant::ptxemu {

namespace {

/// Decodes element `i` of an MMA operand type held in `bits`.
double elem(Ty t, uint32_t bits) {
  switch (t) {
  case Ty::F16: return decode(kF16, bits & 0xFFFF);
  case Ty::BF16: return decode(kBF16, bits & 0xFFFF);
  case Ty::E4M3: return decode(kE4M3, bits & 0xFF);
  case Ty::E5M2: return decode(kE5M2, bits & 0xFF);
  case Ty::E2M1: return decode(kE2M1, bits & 0xF);
  case Ty::S8: return static_cast<int8_t>(bits & 0xFF);
  case Ty::U8: return bits & 0xFF;
  default: return NAN;
  }
}

int elemBits(Ty t) {
  return t == Ty::E2M1 ? 4 : (t == Ty::F16 || t == Ty::BF16) ? 16 : 8;
}

bool isInt(Ty t) { return t == Ty::S8 || t == Ty::U8; }

/// Bits below the largest term that a tensor-core float sum keeps.
int alignBits(SumModel model, Ty a, bool wgmma) {
  if (model == SumModel::Exact)
    return 0;
  // FP8 wgmma accumulates "at higher than half precision but lower than
  // single precision" (PTX ISA 9.2): 13 fraction bits, as measured on H800.
  if (wgmma && (a == Ty::E4M3 || a == Ty::E5M2))
    return 14;
  // Everything else: the f32 significand and 3 alignment bits, truncated.
  return 27;
}

/// c + sum(p[0..n)), as the model rounds it.
float tensorSum(float c, const double *p, int n, int bits) {
  double maxAbs = std::fabs(static_cast<double>(c));
  bool special = !std::isfinite(c);
  for (int i = 0; i < n; ++i) {
    special |= !std::isfinite(p[i]);
    maxAbs = std::max(maxAbs, std::fabs(p[i]));
  }
  if (special || bits == 0 || maxAbs == 0) {
    double s = c;
    for (int i = 0; i < n; ++i)
      s += p[i];
    return static_cast<float>(s);
  }
  int e;
  std::frexp(maxAbs, &e); // maxAbs < 2^e
  const double q = std::ldexp(1.0, e - bits);
  double s = std::trunc(static_cast<double>(c) / q) * q;
  for (int i = 0; i < n; ++i)
    s += std::trunc(p[i] / q) * q;
  float f = static_cast<float>(s);
  if (std::fabs(static_cast<double>(f)) > std::fabs(s)) // toward zero
    f = std::nextafter(f, 0.0f);
  if (std::isinf(f) && std::isfinite(s))
    f = std::copysign(std::numeric_limits<float>::max(), f);
  return f;
}

int32_t intSum(int32_t c, const int64_t *p, int n, bool satfinite) {
  int64_t s = c;
  for (int i = 0; i < n; ++i)
    s += p[i];
  if (satfinite)
    return static_cast<int32_t>(
        std::min<int64_t>(INT32_MAX, std::max<int64_t>(INT32_MIN, s)));
  return static_cast<int32_t>(static_cast<uint32_t>(s));
}

} // namespace

// ---- mma.sync ---------------------------------------------------------------

void Cta::execMmaSync(Warp &w, const Instr &in, uint32_t) {
  const MmaInfo &mi = in.mma;
  const int K = mi.k;
  const Operand &D = in.ops[0], &A = in.ops[1], &B = in.ops[2],
                &C = in.ops[3];
  const int eb = elemBits(mi.a);
  const int perReg = 32 / eb;
  double a[16][64], b[64][8];
  int64_t ai[16][32], bi[32][8];
  const bool integer = isInt(mi.a);
  for (int l = 0; l < 32; ++l) {
    for (size_t r = 0; r < A.elems.size(); ++r) {
      uint32_t v = static_cast<uint32_t>(value(w, A.elems[r], l));
      for (int j = 0; j < perReg; ++j) {
        int i = static_cast<int>(r) * perReg + j;
        uint32_t bits = (v >> (eb * j)) & ((1u << eb) - 1);
        const RowCol rc = mmaA(K, l, i);
        const int row = rc.row, col = rc.col;
        if (integer)
          ai[row][col] = mi.a == Ty::S8 ? int8_t(bits) : int64_t(bits);
        else
          a[row][col] = elem(mi.a, bits);
      }
    }
    for (size_t r = 0; r < B.elems.size(); ++r) {
      uint32_t v = static_cast<uint32_t>(value(w, B.elems[r], l));
      for (int j = 0; j < perReg; ++j) {
        int i = static_cast<int>(r) * perReg + j;
        uint32_t bits = (v >> (eb * j)) & ((1u << eb) - 1);
        const int k = mmaB(K, l, i).row;
        if (integer)
          bi[k][mmaB(K, l, i).col] = mi.b == Ty::S8 ? int8_t(bits) : int64_t(bits);
        else
          b[k][mmaB(K, l, i).col] = elem(mi.b, bits);
      }
    }
  }
  // Block scales: row r of A from lane 4(r%8) + 2*thread-id-a + (r >= 8),
  // column n of B from lane 4n + thread-id-b; byte j is K block j (4X), or
  // the byte selected by byte-id (1X).
  double sa[16][4], sb[8][4];
  const int blocks = mi.kind == MmaInfo::Plain ? 1 : mi.scaleVec;
  if (mi.kind != MmaInfo::Plain) {
    const Operand &SA = in.ops[4], &SAsel = in.ops[5], &SB = in.ops[6],
                  &SBsel = in.ops[7];
    int lane0 = __builtin_ctz(w.live());
    uint32_t byteA = static_cast<uint32_t>(value(w, SAsel.elems[0], lane0)),
             tidA = static_cast<uint32_t>(value(w, SAsel.elems[1], lane0)),
             byteB = static_cast<uint32_t>(value(w, SBsel.elems[0], lane0)),
             tidB = static_cast<uint32_t>(value(w, SBsel.elems[1], lane0));
    if (tidA > 1 || tidB > 3 || byteA > 3 || byteB > 3 ||
        (blocks == 4 && (byteA || byteB)))
      hazard(w, -1, in, "block-scale selector out of range");
    for (int r = 0; r < 16; ++r) {
      int lane = scaleALane(r, static_cast<int>(tidA));
      uint32_t v = static_cast<uint32_t>(value(w, SA, lane));
      for (int j = 0; j < blocks; ++j) {
        uint8_t s = v >> (8 * (blocks == 1 ? byteA : byteA + j)) & 0xFF;
        sa[r][j] = mi.scale == Ty::UE8M0 ? decodeUE8M0(s) : decodeUE4M3(s);
      }
    }
    for (int n = 0; n < 8; ++n) {
      uint32_t v = static_cast<uint32_t>(
          value(w, SB, scaleBLane(n, static_cast<int>(tidB))));
      for (int j = 0; j < blocks; ++j) {
        uint8_t s = v >> (8 * (blocks == 1 ? byteB : byteB + j)) & 0xFF;
        sb[n][j] = mi.scale == Ty::UE8M0 ? decodeUE8M0(s) : decodeUE4M3(s);
      }
    }
  }
  const int bits = alignBits(emu_.config().sumModel, mi.a, false);
  for (int l = 0; l < 32; ++l) {
    if (!(w.live() >> l & 1))
      continue;
    for (int i = 0; i < 4; ++i) {
      const int row = mmaC(l, i).row, col = mmaC(l, i).col;
      uint64_t cv = value(w, C.elems[i], l);
      uint64_t r;
      if (integer) {
        int64_t p[64];
        for (int k = 0; k < K; ++k)
          p[k] = ai[row][k] * bi[k][col];
        r = static_cast<uint32_t>(
            intSum(static_cast<int32_t>(cv), p, K, mi.satfinite));
      } else {
        double p[64];
        const int blockK = K / blocks;
        for (int k = 0; k < K; ++k) {
          p[k] = a[row][k] * b[k][col];
          if (mi.kind != MmaInfo::Plain)
            p[k] *= sa[row][k / blockK] * sb[col][k / blockK];
        }
        r = f32ToBits(
            tensorSum(bitsToF32(static_cast<uint32_t>(cv)), p, K, bits));
      }
      w.regs[size_t(D.elems[i].reg) * 32 + l] = r;
    }
  }
  stats_.tensorInstructions++;
  stats_.tensorMacs += uint64_t(16) * 8 * K;
}

// ---- shared-memory matrix descriptors ------------------------------------------

namespace {

struct SmemMatrix {
  uint64_t start = 0, lbo = 0, sbo = 0;
  int swizzleBytes = 0; // 0 none, else 32/64/128
};

} // namespace

/// The byte address of element (row, k) of a K-major operand.
static uint64_t kMajorAddress(const SmemMatrix &m, int row, int k, int ebits,
                              int &nibble) {
  const int perRow = 128 / ebits; // elements per 16-byte core-matrix row
  nibble = ebits == 4 ? (k & 1) : 0;
  if (!m.swizzleBytes)
    return m.start + (row % 8) * 16 + (row / 8) * m.sbo + (k / perRow) * m.lbo +
           (k % perRow) * ebits / 8;
  const uint64_t s = m.swizzleBytes;
  uint64_t lin = m.start + (row % 8) * s + (row / 8) * m.sbo +
                 uint64_t(k) * ebits / 8;
  return lin ^ (((lin >> 7) & (s / 16 - 1)) << 4);
}

/// A K-major operand of `rows` x K elements of type `t` from shared memory
/// through the async proxy, decoded: integers into `fi`, floats into `f`.
static void fetchKMajor(Cta &cta, const Warp &w, int lane, const Instr &in,
                        const SmemMatrix &m, int rows, int K, Ty t,
                        std::vector<double> &f, std::vector<int64_t> &fi) {
  const int ebits = elemBits(t);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < K; ++k) {
      int nib;
      uint64_t addr = kMajorAddress(m, r, k, ebits, nib);
      uint32_t bits = 0;
      cta.readSharedAsync(w, lane, in, addr, &bits, std::max(1, ebits / 8));
      if (ebits == 4)
        bits = (bits >> (4 * nib)) & 0xF;
      if (isInt(t))
        fi[size_t(r) * K + k] =
            t == Ty::S8 ? int8_t(bits & 0xFF) : int64_t(bits & 0xFF);
      else
        f[size_t(r) * K + k] = elem(t, bits);
    }
}

// ---- wgmma ------------------------------------------------------------------------

void Cta::issueWgmma(uint32_t warpgroup, const Instr &in) {
  PendingWgmma p;
  p.instr = &in;
  p.warpgroup = warpgroup;
  Warp &w0 = warps_[warpgroup * 4];
  int lane0 = __builtin_ctz(w0.live());
  p.descA = value(w0, in.ops[1], lane0);
  p.descB = value(w0, in.ops[2], lane0);
  p.scaleD = value(w0, in.ops[3], lane0) & 1;
  if (in.ops.size() >= 6) {
    p.scaleA = static_cast<int>(in.ops[4].imm);
    p.scaleB = static_cast<int>(in.ops[5].imm);
  }
  if (in.ops.size() >= 8) {
    p.transA = static_cast<int>(in.ops[6].imm);
    p.transB = static_cast<int>(in.ops[7].imm);
  }
  for (uint32_t i = warpgroup * 4; i < warpgroup * 4 + 4; ++i) {
    Warp &w = warps_[i];
    if (w.wgmmaCommits != w0.wgmmaCommits)
      hazard(w, -1, in, "the warps of a warpgroup committed different numbers "
                        "of wgmma groups");
    for (int l = 0; l < 32; ++l)
      if (w.live() >> l & 1) {
        if (value(w, in.ops[1], l) != p.descA ||
            value(w, in.ops[2], l) != p.descB)
          hazard(w, l, in, "wgmma descriptors differ across the warpgroup");
      }
  }
  p.group = w0.wgmmaCommits;
  wgmmas_.push_back(p);
}

void Cta::waitWgmma(Warp &w, const Instr &in, uint32_t keep) {
  const uint32_t g = w.index / 4;
  w.wgmmaFenced = false;
  for (PendingWgmma &p : wgmmas_) {
    if (p.done || p.warpgroup != g)
      continue;
    if (p.group >= w.wgmmaCommits) {
      // Not committed yet: a wait cannot complete it.
      continue;
    }
    if (w.wgmmaCommits - p.group <= keep)
      continue;
    // Compute it now, reading shared memory and the accumulators as they
    // are at the wait: an operand changed before the wait shows up.
    const Instr &mi = *p.instr;
    const MmaInfo &info = mi.mma;
    const int N = info.n, K = info.k, M = 64;
    auto decodeDesc = [&](uint64_t d, SmemMatrix &m) {
      m.start = (d & 0x3FFF) << 4;
      m.lbo = ((d >> 16) & 0x3FFF) << 4;
      m.sbo = ((d >> 32) & 0x3FFF) << 4;
      int base = (d >> 49) & 7;
      int sw = (d >> 62) & 3;
      m.swizzleBytes = sw == 0 ? 0 : sw == 1 ? 128 : sw == 2 ? 64 : 32;
      if (base)
        hazard(warps_[g * 4], -1, mi,
               "wgmma descriptor with a non-zero base offset (not emulated)");
    };
    SmemMatrix ma, mb;
    decodeDesc(p.descA, ma);
    decodeDesc(p.descB, mb);
    if (p.transA || p.transB)
      hazard(warps_[g * 4], -1, mi,
             "wgmma with a transposed (MN-major) operand (not emulated)");
    std::vector<double> a(size_t(M) * K), b(size_t(N) * K);
    std::vector<int64_t> ai, bi;
    const bool integer = isInt(info.a);
    if (integer) {
      ai.resize(size_t(M) * K);
      bi.resize(size_t(N) * K);
    }
    fetchKMajor(*this, warps_[g * 4], -1, mi, ma, M, K, info.a, a, ai);
    fetchKMajor(*this, warps_[g * 4], -1, mi, mb, N, K, info.b, b, bi);
    const int bits = alignBits(emu_.config().sumModel, info.a, true);
    for (uint32_t wi = 0; wi < 4; ++wi) {
      Warp &ww = warps_[g * 4 + wi];
      const Operand &D = mi.ops[0];
      for (int l = 0; l < 32; ++l) {
        if (!(ww.live() >> l & 1))
          continue;
        for (size_t i = 0; i < D.elems.size(); ++i) {
          const RowCol rc = wgmmaD(static_cast<int>(wi) * 32 + l, static_cast<int>(i));
          const int row = rc.row, col = rc.col;
          uint64_t &reg = ww.regs[size_t(D.elems[i].reg) * 32 + l];
          if (integer) {
            int64_t prod[64];
            for (int k = 0; k < K; ++k)
              prod[k] = ai[size_t(row) * K + k] * bi[size_t(col) * K + k];
            int32_t c = p.scaleD ? static_cast<int32_t>(reg) : 0;
            reg = static_cast<uint32_t>(intSum(c, prod, K, info.satfinite));
          } else {
            double prod[64];
            for (int k = 0; k < K; ++k)
              prod[k] = p.scaleA * a[size_t(row) * K + k] * p.scaleB *
                        b[size_t(col) * K + k];
            float c = p.scaleD ? bitsToF32(static_cast<uint32_t>(reg)) : 0.0f;
            reg = f32ToBits(tensorSum(c, prod, K, bits));
          }
        }
      }
    }
    p.done = true;
    stats_.tensorInstructions++;
    stats_.tensorMacs += uint64_t(M) * N * K;
  }
  (void)in;
  wgmmas_.erase(std::remove_if(wgmmas_.begin(), wgmmas_.end(),
                               [](const PendingWgmma &p) { return p.done; }),
                wgmmas_.end());
}

// ---- tcgen05 -----------------------------------------------------------------------

namespace {
constexpr int kTmemLanes = 128, kTmemCols = 512;
}

void Cta::execTcgen05(Warp &w, const Instr &in, uint32_t mask) {
  if (tmem_.empty()) {
    tmem_.assign(size_t(kTmemLanes) * kTmemCols, 0);
    tmemInit_.assign(size_t(kTmemLanes) * kTmemCols, 0);
  }
  const int lane0 = __builtin_ctz(mask);
  auto allocated = [&](uint32_t col, uint32_t n) {
    for (auto &[c, cnt] : tmemAllocs_)
      if (col >= c && col + n <= c + cnt)
        return true;
    return false;
  };
  switch (in.op) {
  case Op::TcFence:
  case Op::TcWaitLd:
  case Op::TcWaitSt:
    return;
  case Op::TcRelinquish:
    tmemRelinquished_ = true;
    return;
  case Op::TcAlloc: {
    if (tmemRelinquished_)
      hazard(w, -1, in, "tcgen05.alloc after relinquish_alloc_permit");
    uint32_t n = static_cast<uint32_t>(value(w, in.ops[1], lane0));
    if (n < 32 || n > 512 || (n & (n - 1)))
      hazard(w, -1, in, "tcgen05.alloc of " + std::to_string(n) +
                            " columns (a power of 2 in [32, 512])");
    uint32_t col = 0;
    for (; col + n <= kTmemCols; col += n) {
      bool free = true;
      for (auto &[c, cnt] : tmemAllocs_)
        free &= col + n <= c || col >= c + cnt;
      if (free)
        break;
    }
    if (col + n > kTmemCols)
      hazard(w, -1, in, "tcgen05.alloc: tensor memory exhausted (would block "
                        "forever)");
    tmemAllocs_.push_back({col, n});
    uint64_t dst = address(w, in.ops[0], lane0);
    ++seq_;
    uint8_t *p = sharedPtr(w, lane0, in, dst, 4, true);
    uint32_t addr = col; // lane 0, first column
    std::memcpy(p, &addr, 4);
    // Written by the tensor-core unit: visible to the async proxy.
    w.fenceSeq = ++seq_;
    return;
  }
  case Op::TcDealloc: {
    uint32_t taddr = static_cast<uint32_t>(value(w, in.ops[0], lane0));
    uint32_t n = static_cast<uint32_t>(value(w, in.ops[1], lane0));
    uint32_t col = taddr & 0xFFFF;
    auto it = std::find(tmemAllocs_.begin(), tmemAllocs_.end(),
                        std::make_pair(col, n));
    if (it == tmemAllocs_.end() || (taddr >> 16))
      hazard(w, -1, in, "tcgen05.dealloc of columns never allocated");
    tmemAllocs_.erase(it);
    return;
  }
  case Op::TcLd:
  case Op::TcSt: {
    const MmaInfo &mi = in.mma;
    const Operand &addrOp = in.op == Op::TcLd ? in.ops[1] : in.ops[0];
    const uint32_t taddr = static_cast<uint32_t>(address(w, addrOp, lane0));
    for (int l = 0; l < 32; ++l)
      if ((mask >> l & 1) && address(w, addrOp, l) != taddr)
        hazard(w, l, in, "tcgen05.ld/st address differs across the warp");
    const uint32_t L0 = (taddr >> 16) & 0xFFFF, C0 = taddr & 0xFFFF;
    const uint32_t quarter = w.index % 4;
    const uint32_t span = mi.lanes;
    if (L0 < 32 * quarter || L0 + span > 32 * quarter + 32)
      hazard(w, -1, in,
             "warp " + std::to_string(w.index) + " accesses TMEM lanes " +
                 std::to_string(L0) + ".." + std::to_string(L0 + span - 1) +
                 " outside its quarter " + std::to_string(32 * quarter) + ".." +
                 std::to_string(32 * quarter + 31));
    const Operand &regs = in.op == Op::TcLd ? in.ops[0] : in.ops[1];
    const int nregs = mi.lanes == 32 ? mi.num : mi.bits == 256 ? 4 * mi.num
                      : mi.bits == 128 ? 2 * mi.num : mi.num;
    if (static_cast<int>(regs.elems.size()) != nregs)
      hazard(w, -1, in, "tcgen05.ld/st register count " +
                            std::to_string(regs.elems.size()) + " for its shape");
    if (mi.lanes == 16 && mi.bits != 256)
      hazard(w, -1, in, "tcgen05.ld/st shape (only 16x256b and 32x32b)");
    for (int l = 0; l < 32; ++l) {
      if (!(mask >> l & 1))
        continue;
      for (int i = 0; i < nregs; ++i) {
        const RowCol rc = mi.lanes == 32 ? tmem32x32b(l, i) : tmem16x256b(l, i);
        const uint32_t lane = L0 + rc.row, col = C0 + rc.col;
        if (lane >= kTmemLanes || !allocated(col, 1))
          hazard(w, l, in, "TMEM access outside the allocation: lane " +
                               std::to_string(lane) + ", column " +
                               std::to_string(col));
        size_t cell = size_t(lane) * kTmemCols + col;
        if (in.op == Op::TcLd) {
          if (!tmemInit_[cell])
            hazard(w, l, in, "read of uninitialised (or accumulated from "
                             "uninitialised) TMEM: lane " +
                                 std::to_string(lane) + ", column " +
                                 std::to_string(col));
          w.regs[size_t(regs.elems[i].reg) * 32 + l] = tmem_[cell];
        } else {
          tmem_[cell] = static_cast<uint32_t>(value(w, regs.elems[i], l));
          tmemInit_[cell] = 1;
        }
      }
    }
    return;
  }
  case Op::TcMma: {
    for (int l = 0; l < 32; ++l) {
      if (!(mask >> l & 1))
        continue;
      PendingUmma u;
      u.instr = &in;
      u.thread = w.index * 32 + l;
      u.dtmem = static_cast<uint32_t>(address(w, in.ops[0], l));
      u.descA = value(w, in.ops[1], l);
      u.descB = value(w, in.ops[2], l);
      u.idesc = static_cast<uint32_t>(value(w, in.ops[3], l));
      if (in.ops.size() == 7) {
        u.sfa = static_cast<uint32_t>(address(w, in.ops[4], l));
        u.sfb = static_cast<uint32_t>(address(w, in.ops[5], l));
      }
      u.enableInputD = value(w, in.ops.back(), l) & 1;
      ummas_.push_back(u);
    }
    return;
  }
  case Op::TcCommit:
    break;
  default:
    hazard(w, -1, in, "internal: unexpected tcgen05 operation");
  }

  // tcgen05.commit: the committing thread's MMAs complete, then one arrive.
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1))
      continue;
    const uint32_t thread = w.index * 32 + l;
    for (auto it = ummas_.begin(); it != ummas_.end();) {
      if (it->thread != thread) {
        ++it;
        continue;
      }
      const PendingUmma &u = *it;
      const Instr &mi = *u.instr;
      const MmaInfo::Kind kind = mi.mma.kind;
      const uint32_t id = u.idesc;
      const bool scaled =
          kind == MmaInfo::MxF8F6F4 || kind == MmaInfo::MxF4NvF4;
      int M, N = ((id >> 17) & 0x3F) * 8, K;
      M = scaled ? ((id >> 27) & 3) * 128 : ((id >> 24) & 0x1F) * 16;
      Ty ta, tb;
      auto f8 = [&](uint32_t code, Ty &t) {
        if (code == 0) t = Ty::E4M3;
        else if (code == 1) t = Ty::E5M2;
        else hazard(w, l, mi, "tcgen05.mma: FP6/FP4 in f8f6f4 (not emulated)");
      };
      switch (kind) {
      case MmaInfo::F16:
        K = 16;
        ta = ((id >> 7) & 7) == 1 ? Ty::BF16 : Ty::F16;
        tb = ((id >> 10) & 7) == 1 ? Ty::BF16 : Ty::F16;
        break;
      case MmaInfo::I8:
        K = 32;
        ta = ((id >> 7) & 7) == 1 ? Ty::S8 : Ty::U8;
        tb = ((id >> 10) & 7) == 1 ? Ty::S8 : Ty::U8;
        break;
      case MmaInfo::F8F6F4:
      case MmaInfo::MxF8F6F4:
        K = 32;
        f8((id >> 7) & 7, ta);
        f8((id >> 10) & 7, tb);
        break;
      case MmaInfo::MxF4NvF4:
        K = 64;
        ta = tb = Ty::E2M1;
        if (((id >> 7) & 7) != 1 || ((id >> 10) & 3) != 1)
          hazard(w, l, mi, "tcgen05.mma mxf4nvf4 with a non-E2M1 type");
        break;
      default:
        hazard(w, l, mi, "tcgen05.mma kind not emulated");
      }
      const bool dtypeOk = kind == MmaInfo::I8 ? ((id >> 4) & 3) == 2
                           : scaled ? true
                                    : ((id >> 4) & 3) == 1;
      if (!dtypeOk || (id & 4) || ((id >> 15) & 3) || (!scaled && ((id >> 13) & 3)))
        hazard(w, l, mi, "tcgen05.mma instruction descriptor " +
                             std::to_string(id) +
                             ": sparse, transposed, negated or non-f32/s32 D "
                             "(not emulated)");
      if ((M != 64 && M != 128) || N < 8 || N > 256 || (scaled && M != 128))
        hazard(w, l, mi, "tcgen05.mma shape M=" + std::to_string(M) +
                             " N=" + std::to_string(N) + " is not valid");
      auto decodeDesc = [&](uint64_t d, SmemMatrix &m) {
        m.start = (d & 0x3FFF) << 4;
        m.lbo = ((d >> 16) & 0x3FFF) << 4;
        m.sbo = ((d >> 32) & 0x3FFF) << 4;
        if (((d >> 46) & 7) != 1)
          hazard(w, l, mi, "tcgen05 shared-memory descriptor without the "
                           "fixed 0b001 at bits 46-48");
        if ((d >> 49) & 7 || (d >> 52) & 1)
          hazard(w, l, mi, "tcgen05 descriptor base offset / absolute LBO "
                           "mode (not emulated)");
        int sw = (d >> 61) & 7;
        if (sw == 1)
          hazard(w, l, mi, "tcgen05 128B-base32B swizzle (not emulated)");
        m.swizzleBytes = sw == 0 ? 0 : sw == 2 ? 128 : sw == 4 ? 64
                         : sw == 6 ? 32 : -1;
        if (m.swizzleBytes < 0)
          hazard(w, l, mi, "tcgen05 descriptor swizzle mode " +
                               std::to_string(sw) + " is not valid");
      };
      SmemMatrix ma, mb;
      decodeDesc(u.descA, ma);
      decodeDesc(u.descB, mb);
      const bool integer = isInt(ta);
      std::vector<double> a(size_t(M) * K), b(size_t(N) * K);
      std::vector<int64_t> ai(integer ? size_t(M) * K : 0),
          bi(integer ? size_t(N) * K : 0);
      fetchKMajor(*this, w, l, mi, ma, M, K, ta, a, ai);
      fetchKMajor(*this, w, l, mi, mb, N, K, tb, b, bi);
      // Scale factors: SF(m, j) at lane m, column C + m/32, byte id + j.
      int blocks = 1;
      std::vector<double> sfa, sfb;
      if (scaled) {
        blocks = kind == MmaInfo::MxF8F6F4 ? 1 : (mi.mma.scaleVec == 16 ? 4 : 2);
        const bool ue8m0 = kind == MmaInfo::MxF8F6F4 || ((id >> 23) & 1);
        const uint32_t idA = (id >> 29) & 3, idB = (id >> 4) & 3;
        if (blocks == 4 && (idA || idB))
          hazard(w, l, mi, "block16 scale factor IDs must be 0");
        auto sf = [&](uint32_t taddr, uint32_t sfId, int rows,
                      std::vector<double> &out) {
          out.resize(size_t(rows) * blocks);
          const uint32_t L = (taddr >> 16) & 0x7F, C = taddr & 0x1FF;
          for (int r = 0; r < rows; ++r) {
            uint32_t lane = (L + r % 32 + 32 * (r / 32)) % kTmemLanes;
            uint32_t col = C + r / 32;
            size_t cell = size_t(lane) * kTmemCols + col;
            if (!allocated(col, 1))
              hazard(w, l, mi, "scale factors outside the TMEM allocation");
            if (!tmemInit_[cell])
              hazard(w, l, mi, "tcgen05.mma reads uninitialised scale "
                               "factors in TMEM: lane " + std::to_string(lane) +
                               ", column " + std::to_string(col));
            for (int j = 0; j < blocks; ++j) {
              uint8_t s = (tmem_[cell] >> (8 * (sfId + j))) & 0xFF;
              out[size_t(r) * blocks + j] = ue8m0 ? decodeUE8M0(s)
                                                  : decodeUE4M3(s);
            }
          }
        };
        sf(u.sfa, idA, M, sfa);
        sf(u.sfb, idB, N, sfb);
      }
      const uint32_t L0 = (u.dtmem >> 16) & 0xFFFF, C0 = u.dtmem & 0xFFFF;
      if (!allocated(C0, N))
        hazard(w, l, mi, "tcgen05.mma accumulator columns " +
                             std::to_string(C0) + ".." +
                             std::to_string(C0 + N - 1) +
                             " outside the TMEM allocation");
      const int bits = alignBits(emu_.config().sumModel, ta, false);
      const int blockK = K / blocks;
      for (int m = 0; m < M; ++m) {
        uint32_t lane = L0 + ummaDLane(M, m);
        if (lane >= kTmemLanes)
          hazard(w, l, mi, "tcgen05.mma accumulator lane out of TMEM");
        for (int n = 0; n < N; ++n) {
          size_t cell = size_t(lane) * kTmemCols + C0 + n;
          // Accumulating into uninitialised TMEM leaves the cell
          // undefined (poisoned): reading it later is the hazard, as
          // rows a kernel never reads may hold anything.
          const bool defined = !u.enableInputD || tmemInit_[cell];
          if (integer) {
            int64_t prod[64];
            for (int k = 0; k < K; ++k)
              prod[k] = ai[size_t(m) * K + k] * bi[size_t(n) * K + k];
            int32_t c = u.enableInputD ? static_cast<int32_t>(tmem_[cell]) : 0;
            tmem_[cell] = static_cast<uint32_t>(intSum(c, prod, K, id & 8));
          } else {
            double prod[64];
            for (int k = 0; k < K; ++k) {
              prod[k] = a[size_t(m) * K + k] * b[size_t(n) * K + k];
              if (scaled)
                prod[k] *= sfa[size_t(m) * blocks + k / blockK] *
                           sfb[size_t(n) * blocks + k / blockK];
            }
            float c = u.enableInputD ? bitsToF32(tmem_[cell]) : 0.0f;
            tmem_[cell] = f32ToBits(tensorSum(c, prod, K, bits));
          }
          tmemInit_[cell] = defined;
        }
      }
      stats_.tensorInstructions++;
      stats_.tensorMacs += uint64_t(M) * N * K;
      it = ummas_.erase(it);
    }
    // The arrive.
    uint64_t mb = address(w, in.ops[0], l);
    auto bar = mbarriers_.find(mb);
    if (bar == mbarriers_.end())
      hazard(w, l, in, "tcgen05.commit to an mbarrier never initialised");
    if (bar->second.pending == 0)
      hazard(w, l, in, "mbarrier arrive beyond its expected count");
    ++events_;
    if (--bar->second.pending == 0) {
      bar->second.phase++;
      bar->second.pending = bar->second.expected;
    }
  }
}

} // namespace comfyquant::ptxemu
