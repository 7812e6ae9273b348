// CUTLASS's own tensor-op GEMMs (sm_80 int8 -> int32 and bf16 -> f32, sm_89
// FP8 e4m3 -> f32; cp.async multistage + ldmatrix + mma.sync, CUTLASS 2.x
// device::Gemm) run
// on the PTX emulator and are checked against a host matmul: kernels NVIDIA
// wrote and runs on GPUs, so they validate the emulator independently of
// this project's compiler. Built at test time by nvcc from the pinned
// nvidia-cutlass headers (never committed):
//   nvcc -DCQ_GEMM_S8 -ptx ...        -> the kernel's PTX
//   nvcc -DCQ_GEMM_S8 ... -lcomfyquant_ptxemu -> this harness
//   cutlass_gemm KERNEL.ptx M N K [STATS.json]
//                                     -> "PASS ..." or "FAIL ..." (exit 1)
// The harness builds the kernel's Params with CUTLASS's host code, launches
// the PTX through the emulator with those bytes, and compares D; STATS.json
// receives the emulator's account of the kernel (--emu-stats's JSON).
// CQ_TILE_{M,N,K}, CQ_WARP_{M,N,K} and CQ_STAGES pick another threadblock
// config than the small one the tests use (scripts/bench --gpu-model runs
// CUTLASS's default large tiles); CQ_NO_SOURCE computes D = A B (beta 0:
// the epilogue never reads C), as a Linear without bias does.
#include <cutlass/epilogue/thread/linear_combination.h>
#define private public // the harness reads device::Gemm's params_
#include <cutlass/gemm/device/gemm.h>
#undef private

#include "ptxemu/Emulator.h"

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <type_traits>
#include <vector>

#if defined(CQ_GEMM_S8) || defined(CQ_GEMM_FP8)
#define CQ_DEFAULT_K 64
#else
#define CQ_DEFAULT_K 32
#endif
#ifndef CQ_TILE_M
#define CQ_TILE_M 64
#define CQ_TILE_N 64
#define CQ_TILE_K CQ_DEFAULT_K
#define CQ_WARP_M 32
#define CQ_WARP_N 32
#define CQ_WARP_K CQ_DEFAULT_K
#endif
#ifndef CQ_STAGES
#define CQ_STAGES 3
#endif
#define CQ_STR2(x) #x
#define CQ_STR(x) CQ_STR2(x)
#define CQ_CONFIG                                                              \
  "tile " CQ_STR(CQ_TILE_M) "x" CQ_STR(CQ_TILE_N) "x" CQ_STR(CQ_TILE_K)       \
  ", warp " CQ_STR(CQ_WARP_M) "x" CQ_STR(CQ_WARP_N) "x" CQ_STR(CQ_WARP_K)     \
  ", " CQ_STR(CQ_STAGES) " stages"
using TileShape = cutlass::gemm::GemmShape<CQ_TILE_M, CQ_TILE_N, CQ_TILE_K>;
using WarpShape = cutlass::gemm::GemmShape<CQ_WARP_M, CQ_WARP_N, CQ_WARP_K>;
constexpr int kStages = CQ_STAGES;
#ifdef CQ_NO_SOURCE
constexpr int kBeta = 0;
#else
constexpr int kBeta = 1;
#endif

#if defined(CQ_GEMM_S8)
using ElementAB = int8_t;
using ElementCD = int32_t;
using Gemm = cutlass::gemm::device::Gemm<
    int8_t, cutlass::layout::RowMajor, int8_t, cutlass::layout::ColumnMajor,
    int32_t, cutlass::layout::RowMajor, int32_t,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    TileShape, WarpShape,
    cutlass::gemm::GemmShape<16, 8, 32>,
    cutlass::epilogue::thread::LinearCombination<int32_t, 4, int32_t, int32_t>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, kStages>;
const char *kName = "sm80 int8 (" CQ_CONFIG ", mma.sync m16n8k32)";
#elif defined(CQ_GEMM_FP8)
using ElementAB = cutlass::float_e4m3_t;
using ElementCD = float;
using Gemm = cutlass::gemm::device::Gemm<
    cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t,
    cutlass::layout::ColumnMajor, float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm89,
    TileShape, WarpShape,
    cutlass::gemm::GemmShape<16, 8, 32>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, kStages>;
const char *kName = "sm89 fp8 e4m3 (" CQ_CONFIG ", mma.sync m16n8k32)";
#else
using ElementAB = cutlass::bfloat16_t;
using ElementCD = float;
using Gemm = cutlass::gemm::device::Gemm<
    cutlass::bfloat16_t, cutlass::layout::RowMajor, cutlass::bfloat16_t,
    cutlass::layout::ColumnMajor, float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    TileShape, WarpShape,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, kStages>;
const char *kName = "sm80 bf16 (" CQ_CONFIG ", mma.sync m16n8k16)";
#endif

template __global__ void cutlass::Kernel<Gemm::GemmKernel>(Gemm::GemmKernel::Params);

#ifndef __CUDA_ARCH__
using namespace comfyquant::ptxemu;

int main(int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: cutlass_gemm KERNEL.ptx M N K [STATS.json]\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::stringstream text;
  text << in.rdbuf();
  const int M = std::atoi(argv[2]), N = std::atoi(argv[3]), K = std::atoi(argv[4]);
  try {
    Module module = parsePtx(text.str(), argv[1]);
    if (module.kernels.size() != 1) {
      std::printf("FAIL: %zu kernels in the PTX, expected 1\n", module.kernels.size());
      return 1;
    }
    // CUTLASS's mainloop loads the next k-block's fragments even after the
    // last one (never used): unwritten shared memory is counted, not fatal.
#if defined(CQ_GEMM_FP8)
    DeviceConfig config{89, false, 128, SumModel::Hardware, 1};
#else
    DeviceConfig config{80, false, 108, SumModel::Hardware, 1};
#endif
    config.uninitSharedIsHazard = false;
    Emulator emu(config);
    auto *a = static_cast<ElementAB *>(emu.allocate(sizeof(ElementAB) * M * K));
    auto *b = static_cast<ElementAB *>(emu.allocate(sizeof(ElementAB) * N * K));
    auto *c = static_cast<ElementCD *>(emu.allocate(sizeof(ElementCD) * M * N));
    auto *d = static_cast<ElementCD *>(emu.allocate(sizeof(ElementCD) * M * N));
    std::mt19937 rng(34);
    std::uniform_int_distribution<int> dist(-127, 127);
    for (int i = 0; i < M * K; ++i)
      a[i] = ElementAB(dist(rng) / (std::is_same<ElementAB, int8_t>::value ? 1.0f : 64.0f));
    for (int i = 0; i < N * K; ++i)
      b[i] = ElementAB(dist(rng) / (std::is_same<ElementAB, int8_t>::value ? 1.0f : 64.0f));
    for (int i = 0; i < M * N; ++i)
      c[i] = ElementCD(dist(rng));
    std::memset(d, 0, sizeof(ElementCD) * M * N);
    // D = 1 * A B + 1 * C; A row-major (lda K), B column-major (ldb K).
    Gemm::Arguments args({M, N, K}, {a, K}, {b, K}, {c, N}, {d, N},
                         {ElementCD(1), ElementCD(kBeta)});
    Gemm gemm;
    if (gemm.initialize(args) != cutlass::Status::kSuccess) {
      std::printf("FAIL: CUTLASS refused the problem\n");
      return 1;
    }
    const Gemm::GemmKernel::Params &params = gemm.params_;
    const Kernel &kernel = module.kernels[0];
    if (kernel.paramBytes != sizeof(params)) {
      std::printf("FAIL: the kernel takes %u parameter bytes, Params has %zu\n",
                  kernel.paramBytes, sizeof(params));
      return 1;
    }
    std::vector<uint8_t> bytes(sizeof(params));
    std::memcpy(bytes.data(), &params, sizeof(params));
    Gemm::ThreadblockSwizzle swizzle;
    dim3 g = swizzle.get_grid_shape(params.grid_tiled_shape);
    const uint32_t grid[3] = {g.x, g.y, g.z};
    const uint32_t block[3] = {Gemm::GemmKernel::kThreadCount, 1, 1};
    const uint32_t smem = sizeof(typename Gemm::GemmKernel::SharedStorage);
    emu.launch(module, kernel, grid, block, smem, bytes);
    double worst = 0;
    int bad = 0;
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double want = kBeta * double(c[m * N + n]), scale = std::fabs(want);
        for (int k = 0; k < K; ++k) {
          double p = double(float(a[m * K + k])) * double(float(b[n * K + k]));
          want += p;
          scale += std::fabs(p);
        }
        double got = double(d[m * N + n]);
        // int8: exact; bf16/FP8 -> f32: the tensor-core sum model and f32
        // rounding, well inside 2^-20 of the sum of magnitudes.
        const bool exact = std::is_same<ElementAB, int8_t>::value;
        double tol = exact ? 0 : scale * std::ldexp(1.0, -20);
        double err = std::fabs(got - want);
        worst = std::max(worst, tol ? err / tol : err);
        if (err > tol && bad++ < 5)
          std::printf("FAIL: D[%d][%d] = %.9g, host %.9g\n", m, n, got, want);
      }
    const KernelStats &st = emu.stats().at(0);
    if (argc == 6) {
      std::ofstream out(argv[5]);
      out << emu.statsJson(config.sm == 89 ? "sm_89" : "sm_80");
      if (!out) {
        std::printf("FAIL: cannot write %s\n", argv[5]);
        return 1;
      }
    }
    std::printf("%s %s M=%d N=%d K=%d: %s (worst %.3g of bound), grid %ux%u, "
                "%llu tensor instructions, %llu thread instructions, %llu bytes "
                "of unwritten shared memory read, dynamic shared memory %u bytes\n",
                bad ? "FAIL" : "PASS", kName, M, N, K,
                bad ? "D differs from the host matmul" : "D equals the host matmul",
                worst, g.x, g.y, (unsigned long long)st.tensorInstructions,
                (unsigned long long)st.threadInstructions,
                (unsigned long long)st.uninitSharedReads, smem);
    return bad ? 1 : 0;
  } catch (const std::exception &e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
#endif
