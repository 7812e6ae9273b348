// CuTe's own thread/value -> (row, col) tables of the MMA atoms the PTX
// emulator implements, printed in ptxemu-layouts' format. Host code only:
// compiled at test time by nvcc against the CUTLASS/CuTe headers of the
// pinned PyPI package (never committed); no GPU is needed.
#include <cute/atom/mma_traits_sm80.hpp>
#include <cute/atom/mma_traits_sm89.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/atom/mma_traits_sm120.hpp>

#include <cstdio>

using namespace cute;

// A (M x K), B (N x K), C (M x N) layouts map (thread, value) to a
// column-major index of their shape.
template <class Traits>
void printMma(const char *name) {
  constexpr int M = size<0>(typename Traits::Shape_MNK{});
  constexpr int N = size<1>(typename Traits::Shape_MNK{});
  auto a = typename Traits::ALayout{};
  auto b = typename Traits::BLayout{};
  auto c = typename Traits::CLayout{};
  for (int t = 0; t < size<0>(a); ++t) {
    for (int v = 0; v < size<1>(a); ++v) {
      int idx = a(t, v);
      std::printf("%s A %d %d %d %d\n", name, t, v, idx % M, idx / M);
    }
    for (int v = 0; v < size<1>(b); ++v) {
      int idx = b(t, v);
      std::printf("%s B %d %d %d %d\n", name, t, v, idx % N, idx / N);
    }
    for (int v = 0; v < size<1>(c); ++v) {
      int idx = c(t, v);
      std::printf("%s C %d %d %d %d\n", name, t, v, idx % M, idx / M);
    }
  }
}

int main() {
  printMma<MMA_Traits<SM80_16x8x16_F32F16F16F32_TN>>("mma_m16n8k16_f16");
  printMma<MMA_Traits<SM80_16x8x32_S32S8S8S32_TN>>("mma_m16n8k32_8bit");
  printMma<MMA_Traits<SM89_16x8x32_F32E4M3E4M3F32_TN>>("mma_m16n8k32_8bit");
  using Fp4 = MMA_Traits<SM120::BLOCKSCALED::SM120_16x8x64_TN_VS<
      float_e2m1_t, float_e2m1_t, float, float_ue4m3_t, 16>>;
  printMma<Fp4>("mma_m16n8k64_4bit");
  // Scale factors: which threads hold row m of A / column n of B (the
  // value mode runs along K; every value of a thread names the same row).
  auto sfa = typename Fp4::SFALayout{};
  auto sfb = typename Fp4::SFBLayout{};
  for (int t = 0; t < 32; ++t) {
    std::printf("block_scale SFA %d %d\n", t, int(sfa(t, 0)) % 16);
    std::printf("block_scale SFB %d %d\n", t, int(sfb(t, 0)) % 8);
  }
  auto gmma = SM90::GMMA::CLayout_64xN<128>{};
  for (int t = 0; t < 128; ++t)
    for (int v = 0; v < 64; ++v) {
      int idx = gmma(t, v);
      std::printf("wgmma_m64n128 C %d %d %d %d\n", t, v, idx % 64, idx / 64);
    }
  return 0;
}
