// CUTLASS's own tensor-op GEMMs (sm_80 int8 -> int32 and bf16 -> f32, sm_89
// FP8 e4m3 -> f32; cp.async multistage + ldmatrix + mma.sync, CUTLASS 2.x
// device::Gemm) run
// on the PTX emulator and are checked against a host matmul: kernels NVIDIA
// wrote and runs on GPUs, so they validate the emulator independently of
// this project's compiler. Built at test time by nvcc from the pinned
// nvidia-cutlass headers (never committed):
//   nvcc -DCQ_GEMM_S8 -ptx ...        -> the kernel's PTX
//   nvcc -DCQ_GEMM_S8 ... -lcomfyquant_ptxemu -> this harness
//   cutlass_gemm KERNEL.ptx M N K     -> "PASS ..." or "FAIL ..." (exit 1)
// The harness builds the kernel's Params with CUTLASS's host code, launches
// the PTX through the emulator with those bytes, and compares D.
#include <cutlass/epilogue/thread/linear_combination.h>
#define private public // the harness reads device::Gemm's params_
#include <cutlass/gemm/device/gemm.h>
#undef private

#include "ptxemu/Emulator.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <type_traits>
#include <vector>

#if defined(CQ_GEMM_S8)
using ElementAB = int8_t;
using ElementCD = int32_t;
using Gemm = cutlass::gemm::device::Gemm<
    int8_t, cutlass::layout::RowMajor, int8_t, cutlass::layout::ColumnMajor,
    int32_t, cutlass::layout::RowMajor, int32_t,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<64, 64, 64>, cutlass::gemm::GemmShape<32, 32, 64>,
    cutlass::gemm::GemmShape<16, 8, 32>,
    cutlass::epilogue::thread::LinearCombination<int32_t, 4, int32_t, int32_t>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;
const char *kName = "sm80 int8 (64x64x64, 3 stages, mma.sync m16n8k32)";
#elif defined(CQ_GEMM_FP8)
using ElementAB = cutlass::float_e4m3_t;
using ElementCD = float;
using Gemm = cutlass::gemm::device::Gemm<
    cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t,
    cutlass::layout::ColumnMajor, float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm89,
    cutlass::gemm::GemmShape<64, 64, 64>, cutlass::gemm::GemmShape<32, 32, 64>,
    cutlass::gemm::GemmShape<16, 8, 32>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;
const char *kName = "sm89 fp8 e4m3 (64x64x64, 3 stages, mma.sync m16n8k32)";
#else
using ElementAB = cutlass::bfloat16_t;
using ElementCD = float;
using Gemm = cutlass::gemm::device::Gemm<
    cutlass::bfloat16_t, cutlass::layout::RowMajor, cutlass::bfloat16_t,
    cutlass::layout::ColumnMajor, float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<64, 64, 32>, cutlass::gemm::GemmShape<32, 32, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;
const char *kName = "sm80 bf16 (64x64x32, 3 stages, mma.sync m16n8k16)";
#endif

template __global__ void cutlass::Kernel<Gemm::GemmKernel>(Gemm::GemmKernel::Params);

#ifndef __CUDA_ARCH__
using namespace comfyquant::ptxemu;

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: cutlass_gemm KERNEL.ptx M N K\n");
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
                         {ElementCD(1), ElementCD(1)});
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
        double want = double(c[m * N + n]), scale = std::fabs(want);
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
    std::printf("%s %s M=%d N=%d K=%d: %s (worst %.3g of bound), grid %ux%u, "
                "%llu tensor instructions, %llu thread instructions, %llu bytes "
                "of unwritten shared memory read\n",
                bad ? "FAIL" : "PASS", kName, M, N, K,
                bad ? "D differs from the host matmul" : "D equals the host matmul",
                worst, g.x, g.y, (unsigned long long)st.tensorInstructions,
                (unsigned long long)st.threadInstructions,
                (unsigned long long)st.uninitSharedReads);
    return bad ? 1 : 0;
  } catch (const std::exception &e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
#endif
