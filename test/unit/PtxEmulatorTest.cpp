// The PTX emulator on small hand-written kernels: SIMT control flow,
// collectives, conversions and mma.sync against host arithmetic, and every
// hazard class it reports (each test makes the hazard happen once).
#include "ptxemu/Emulator.h"
#include "ptxemu/FloatFormats.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include <cstring>
#include <string>
#include <vector>

using namespace comfyquant::ptxemu;

namespace {

const char *kHeader = ".version 8.4\n.target sm_80\n.address_size 64\n";

struct EmuRun {
  Emulator emu{DeviceConfig{80, false, 1, SumModel::Hardware, 1}};
  Module module;
  std::vector<void *> buffers;

  explicit EmuRun(const std::string &body) {
    module = parsePtx(std::string(kHeader) + body, "test.ptx");
  }
  ~EmuRun() {
    for (void *p : buffers)
      emu.release(p);
  }
  template <typename T> T *alloc(size_t n) {
    void *p = emu.allocate(n * sizeof(T));
    std::memset(p, 0, n * sizeof(T));
    buffers.push_back(p);
    return static_cast<T *>(p);
  }
  void launch(const char *kernel, std::vector<uint64_t> params, uint32_t block,
              uint32_t grid = 1) {
    const Kernel *k = module.find(kernel);
    ASSERT_NE(k, nullptr);
    std::vector<uint8_t> buf(k->paramBytes);
    for (size_t i = 0; i < params.size(); ++i)
      std::memcpy(buf.data() + k->params[i].offset, &params[i],
                  k->params[i].bytes);
    uint32_t g[3] = {grid, 1, 1}, b[3] = {block, 1, 1};
    emu.launch(module, *k, g, b, 0, buf);
  }
};

uint64_t ptr(const void *p) { return reinterpret_cast<uint64_t>(p); }

std::string hazardOf(EmuRun &r, const char *kernel, std::vector<uint64_t> params,
                     uint32_t block) {
  try {
    r.launch(kernel, params, block);
  } catch (const Hazard &h) {
    return h.what();
  }
  return "";
}

// out[tid] = tid * 3 + (tid odd ? 100 : 0): divergence and reconvergence.
const char *kDiverge = R"(
.visible .entry k(.param .u64 out) {
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  ld.param.b64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.lo.s32 %r2, %r1, 3;
  and.b32 %r3, %r1, 1;
  setp.eq.b32 %p1, %r3, 0;
  @%p1 bra $L_even;
  add.s32 %r2, %r2, 100;
$L_even:
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.b32 [%rd3], %r2;
  ret;
}
)";

TEST(PtxEmulator, DivergentBranchesReconverge) {
  EmuRun r(kDiverge);
  int32_t *out = r.alloc<int32_t>(48);
  r.launch("k", {ptr(out)}, 48);
  for (int t = 0; t < 48; ++t)
    EXPECT_EQ(out[t], t * 3 + (t % 2 ? 100 : 0)) << t;
  EXPECT_EQ(r.emu.stats().at(0).globalStoreBytes, 48u * 4);
}

TEST(PtxEmulator, OutOfBoundsGlobalStoreIsAHazard) {
  EmuRun r(kDiverge);
  int32_t *out = r.alloc<int32_t>(40);
  std::string h = hazardOf(r, "k", {ptr(out)}, 48);
  EXPECT_NE(h.find("global access outside every allocation"), std::string::npos)
      << h;
  EXPECT_NE(h.find("test.ptx:19"), std::string::npos) << h;
  EXPECT_NE(h.find("thread (40,0,0)"), std::string::npos) << h;
}

// Warp 0 writes shared memory, warp 1 reads it: with the barrier this is
// well defined; without it, a race.
std::string sharedExchange(bool barrier) {
  return std::string(R"(
.visible .entry k(.param .u64 out) {
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<6>;
  .shared .align 4 .b8 buf[256];
  ld.param.b64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.b64 %rd2, buf;
  and.b32 %r2, %r1, 31;
  mul.wide.u32 %rd3, %r2, 4;
  add.s64 %rd4, %rd2, %rd3;
  setp.lt.u32 %p1, %r1, 32;
  @!%p1 bra $L_skip;
  st.shared.b32 [%rd4], %r1;
$L_skip:
)") + (barrier ? "  bar.sync 0;\n" : "") + R"(
  @%p1 bra $L_end;
  ld.shared.b32 %r3, [%rd4];
  mul.wide.u32 %rd5, %r2, 4;
  add.s64 %rd5, %rd1, %rd5;
  st.global.b32 [%rd5], %r3;
$L_end:
  ret;
}
)";
}

TEST(PtxEmulator, BarrierOrdersSharedMemory) {
  EmuRun r(sharedExchange(true));
  int32_t *out = r.alloc<int32_t>(32);
  r.launch("k", {ptr(out)}, 64);
  for (int t = 0; t < 32; ++t)
    EXPECT_EQ(out[t], t);
  EXPECT_EQ(r.emu.stats().at(0).barriers, 1u);
}

TEST(PtxEmulator, MissingBarrierIsARace) {
  EmuRun r(sharedExchange(false));
  int32_t *out = r.alloc<int32_t>(32);
  std::string h = hazardOf(r, "k", {ptr(out)}, 64);
  EXPECT_NE(h.find("shared-memory race"), std::string::npos) << h;
}

TEST(PtxEmulator, UninitialisedSharedReadIsAHazard) {
  EmuRun r(R"(
.visible .entry k(.param .u64 out) {
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  .shared .align 4 .b8 buf[16];
  ld.param.b64 %rd1, [out];
  ld.shared.b32 %r1, [buf+4];
  st.global.b32 [%rd1], %r1;
  ret;
}
)");
  int32_t *out = r.alloc<int32_t>(1);
  std::string h = hazardOf(r, "k", {ptr(out)}, 1);
  EXPECT_NE(h.find("uninitialised shared memory at 0x4"), std::string::npos)
      << h;
}

TEST(PtxEmulator, DivergentBarrierIsAHazard) {
  EmuRun r(R"(
.visible .entry k() {
  .reg .pred %p<2>;
  .reg .b32 %r<2>;
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra $L_a;
  bar.sync 0;
  bra.uni $L_end;
$L_a:
  bar.sync 0;
$L_end:
  ret;
}
)");
  std::string h = hazardOf(r, "k", {}, 32);
  EXPECT_NE(h.find("divergent bar.sync"), std::string::npos) << h;
}

// sm_70+: shfl.sync waits for the lanes its membermask names. Here the
// odd lanes reach the shuffle first (the even lanes' load block is laid out
// after it, at higher pcs, and jumps back), and the even lanes join them.
TEST(PtxEmulator, ShuffleWaitsForDivergedLanes) {
  EmuRun r(R"(
.visible .entry k(.param .u64 out) {
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  ld.param.b64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, 0;
  and.b32 %r3, %r1, 1;
  setp.eq.u32 %p1, %r3, 0;
  @%p1 bra $L_even;
$L_join:
  and.b32 %r4, %r1, -2;
  shfl.sync.idx.b32 %r5, %r2, %r4, 31, -1;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.b32 [%rd3], %r5;
  ret;
$L_even:
  add.s32 %r2, %r1, 100;
  bra.uni $L_join;
}
)");
  int32_t *out = r.alloc<int32_t>(32);
  r.launch("k", {ptr(out)}, 32);
  for (int t = 0; t < 32; ++t)
    EXPECT_EQ(out[t], (t & ~1) + 100) << "lane " << t;
}

// A shuffle whose named lanes wait elsewhere (another shuffle) never sees
// them: a hazard.
TEST(PtxEmulator, ShuffleWithLanesWaitingElsewhereIsAHazard) {
  EmuRun r(R"(
.visible .entry k() {
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra $L_a;
  shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;
  bra.uni $L_end;
$L_a:
  shfl.sync.bfly.b32 %r3, %r1, 1, 31, -1;
$L_end:
  ret;
}
)");
  std::string h = hazardOf(r, "k", {}, 32);
  EXPECT_NE(h.find("names lanes that are not executing it"), std::string::npos)
      << h;
}

TEST(PtxEmulator, ShuffleButterflySums) {
  EmuRun r(R"(
.visible .entry k(.param .u64 out) {
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.b64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  shfl.sync.bfly.b32 %r2, %r1, 16, 31, -1;
  add.s32 %r3, %r1, %r2;
  shfl.sync.bfly.b32 %r4, %r3, 8, 31, -1;
  add.s32 %r3, %r3, %r4;
  shfl.sync.bfly.b32 %r4, %r3, 4, 31, -1;
  add.s32 %r3, %r3, %r4;
  shfl.sync.bfly.b32 %r4, %r3, 2, 31, -1;
  add.s32 %r3, %r3, %r4;
  shfl.sync.bfly.b32 %r4, %r3, 1, 31, -1;
  add.s32 %r3, %r3, %r4;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.b32 [%rd3], %r3;
  ret;
}
)");
  int32_t *out = r.alloc<int32_t>(32);
  r.launch("k", {ptr(out)}, 32);
  for (int t = 0; t < 32; ++t)
    EXPECT_EQ(out[t], 31 * 32 / 2);
}

// cvt rounding: f32 -> f16/bf16 round to nearest even, f32 -> s16 .rzi
// saturates, NaN -> 0.
TEST(PtxEmulator, ConversionsRoundAsThePtxIsaSays) {
  EmuRun r(R"(
.visible .entry k(.param .u64 in, .param .u64 out) {
  .reg .b16 %rs<4>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  ld.param.b64 %rd1, [in];
  ld.param.b64 %rd2, [out];
  ld.global.b32 %r1, [%rd1];
  cvt.rn.f16.f32 %rs1, %r1;
  cvt.rn.bf16.f32 %rs2, %r1;
  cvt.rzi.s16.f32 %rs3, %r1;
  st.global.b16 [%rd2], %rs1;
  st.global.b16 [%rd2+2], %rs2;
  st.global.b16 [%rd2+4], %rs3;
  ret;
}
)");
  float *in = r.alloc<float>(1);
  uint16_t *out = r.alloc<uint16_t>(3);
  struct Case { float x; uint16_t f16, bf16; int16_t s16; };
  const Case cases[] = {
      {1.0f + 1.0f / 2048, 0x3C00, 0x3F80, 1},      // tie: even (down)
      {1.0f + 3.0f / 2048, 0x3C02, 0x3F80, 1},      // tie: even (up)
      {70000.0f, 0x7C00, 0x4789, 32767},            // f16 overflow, s16 sat
      {-40000.5f, 0xF8E2, 0xC71C, -32768},
      {NAN, 0x7FFF, 0x7FFF, 0},
  };
  for (const Case &c : cases) {
    *in = c.x;
    r.launch("k", {ptr(in), ptr(out)}, 1);
    EXPECT_EQ(out[0], c.f16) << c.x;
    EXPECT_EQ(out[1], c.bf16) << c.x;
    EXPECT_EQ(static_cast<int16_t>(out[2]), c.s16) << c.x;
  }
}

// mma.sync m16n8k32 s8: the fragment layouts of the PTX ISA, against a host
// matmul (A row-major 16x32, B stored as 8 columns of 32).
TEST(PtxEmulator, MmaSyncInt8MatchesHostMatmul) {
  EmuRun r(R"(
.visible .entry k(.param .u64 a, .param .u64 b, .param .u64 d) {
  .reg .b32 %r<24>;
  .reg .b64 %rd<12>;
  ld.param.b64 %rd1, [a];
  ld.param.b64 %rd2, [b];
  ld.param.b64 %rd3, [d];
  mov.u32 %r1, %laneid;
  shr.u32 %r2, %r1, 2;
  and.b32 %r3, %r1, 3;
  // A: row g (+8), bytes 4t..4t+3 (+16): four 32-bit loads.
  mul.lo.s32 %r4, %r2, 32;
  shl.b32 %r5, %r3, 2;
  add.s32 %r4, %r4, %r5;
  cvt.u64.u32 %rd4, %r4;
  add.s64 %rd5, %rd1, %rd4;
  ld.global.b32 %r6, [%rd5];
  ld.global.b32 %r7, [%rd5+256];
  ld.global.b32 %r8, [%rd5+16];
  ld.global.b32 %r9, [%rd5+272];
  // B: column g, k = 4t..4t+3 (+16).
  mul.lo.s32 %r10, %r2, 32;
  add.s32 %r10, %r10, %r5;
  cvt.u64.u32 %rd6, %r10;
  add.s64 %rd7, %rd2, %rd6;
  ld.global.b32 %r11, [%rd7];
  ld.global.b32 %r12, [%rd7+16];
  mov.b32 %r13, 7;
  mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32
    {%r14, %r15, %r16, %r17}, {%r6, %r7, %r8, %r9}, {%r11, %r12},
    {%r13, %r13, %r13, %r13};
  // D: row g (+8), columns 2t, 2t+1.
  mul.lo.s32 %r18, %r2, 8;
  shl.b32 %r19, %r3, 1;
  add.s32 %r18, %r18, %r19;
  mul.wide.u32 %rd8, %r18, 4;
  add.s64 %rd9, %rd3, %rd8;
  st.global.b32 [%rd9], %r14;
  st.global.b32 [%rd9+4], %r15;
  st.global.b32 [%rd9+256], %r16;
  st.global.b32 [%rd9+260], %r17;
  ret;
}
)");
  int8_t *a = r.alloc<int8_t>(16 * 32), *b = r.alloc<int8_t>(8 * 32);
  int32_t *d = r.alloc<int32_t>(16 * 8);
  for (int i = 0; i < 16 * 32; ++i)
    a[i] = static_cast<int8_t>((i * 37 + 11) % 255 - 127);
  for (int i = 0; i < 8 * 32; ++i)
    b[i] = static_cast<int8_t>((i * 53 + 5) % 255 - 127);
  r.launch("k", {ptr(a), ptr(b), ptr(d)}, 32);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      int32_t want = 7;
      for (int k = 0; k < 32; ++k)
        want += a[m * 32 + k] * b[n * 32 + k];
      EXPECT_EQ(d[m * 8 + n], want) << m << "," << n;
    }
  EXPECT_EQ(r.emu.stats().at(0).tensorMacs, 16u * 8 * 32);
}

TEST(PtxEmulator, UnsupportedInstructionIsRefusedWithItsLine) {
  try {
    parsePtx(std::string(kHeader) + ".visible .entry k() {\n  .reg .b32 %r<2>;\n"
                                    "  atom.global.add.u32 %r1, [%r0], 1;\n"
                                    "  ret;\n}\n",
             "bad.ptx");
    FAIL() << "parsed";
  } catch (const PtxError &e) {
    EXPECT_NE(std::string(e.what()).find("bad.ptx:6"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("atom.global.add.u32"),
              std::string::npos)
        << e.what();
  }
}

TEST(PtxEmulator, MalformedPtxIsANamedError) {
  for (const char *bad : {".version 8.4\n.target sm_80\n.visible .entry k(",
                          ".target sm_80\n.visible .entry k() { bra $nowhere; }",
                          ".target sm_80\n.visible .entry k() { .reg .b32 %r<2>;"
                          " add.s32 %r1, %r9, 1; }",
                          ".target sm_80\n.visible .entry k() { mov.b32 %r1 1 }",
                          ".target gfx90a\n"}) {
    EXPECT_THROW(parsePtx(bad, "bad.ptx"), PtxError) << bad;
  }
}

TEST(PtxEmulator, FloatFormatsRoundTrip) {
  // Every e4m3, e5m2 and e2m1 code decodes and re-encodes to itself
  // (NaNs to the canonical NaN).
  for (uint32_t c = 0; c < 256; ++c) {
    double v = decode(kE4M3, c);
    if (!std::isnan(v))
      EXPECT_EQ(encode(kE4M3, v, false), c) << c;
    double w = decode(kE5M2, c);
    if (!std::isnan(w) && !std::isinf(w))
      EXPECT_EQ(encode(kE5M2, w, false), c) << c;
  }
  for (uint32_t c = 0; c < 16; ++c)
    EXPECT_EQ(encode(kE2M1, decode(kE2M1, c), false), c) << c;
  EXPECT_EQ(decode(kE4M3, 0x7E), 448.0);
  EXPECT_EQ(decode(kE2M1, 0x7), 6.0);
  EXPECT_EQ(encode(kE4M3, 1000.0, true), 0x7Eu);
}

// Every code of e4m3, e5m2, e2m1 and ue8m0 decodes as ml_dtypes decodes it,
// and f32 inputs at and around every tie, at both ends and at random encode
// (round to nearest even, no saturation) to ml_dtypes' codes
// (test/fixtures/ptxemu/float_codes.json, written by make_float_codes.py).
TEST(PtxEmulator, FloatFormatsMatchMlDtypes) {
  std::ifstream in(std::string(COMFYQUANT_FIXTURES_DIR) +
                   "/ptxemu/float_codes.json");
  ASSERT_TRUE(in.good());
  nlohmann::json j = nlohmann::json::parse(in);
  struct Fmt { const char *name; const FloatFormat *f; };
  const Fmt fmts[] = {{"e4m3", &kE4M3}, {"e5m2", &kE5M2}, {"e2m1", &kE2M1},
                      {"ue8m0", nullptr}};
  int checked = 0;
  for (const Fmt &fmt : fmts) {
    const nlohmann::json &f = j.at("formats").at(fmt.name);
    const auto &dec = f.at("decode");
    for (size_t c = 0; c < dec.size(); ++c) {
      const std::string want = dec[c].get<std::string>();
      double got = fmt.f ? decode(*fmt.f, static_cast<uint32_t>(c))
                         : decodeUE8M0(static_cast<uint8_t>(c));
      if (want == "nan")
        EXPECT_TRUE(std::isnan(got)) << fmt.name << " code " << c;
      else if (want == "inf" || want == "-inf")
        EXPECT_EQ(got, want == "inf" ? INFINITY : -INFINITY)
            << fmt.name << " code " << c;
      else
        EXPECT_EQ(got, std::strtod(want.c_str(), nullptr))
            << fmt.name << " code " << c;
      ++checked;
    }
    for (const auto &pair : f.at("encode_rne")) {
      float x = bitsToF32(pair[0].get<uint32_t>());
      uint32_t want = pair[1].get<uint32_t>();
      uint32_t got = encode(*fmt.f, x, false);
      double gv = decode(*fmt.f, got), wv = decode(*fmt.f, want);
      // NaN codes: any NaN is the NaN (the sign of a NaN is not compared).
      if (!(std::isnan(gv) && std::isnan(wv)))
        EXPECT_EQ(got, want) << fmt.name << " of " << x;
      ++checked;
    }
  }
  EXPECT_GT(checked, 2000);
}

} // namespace
