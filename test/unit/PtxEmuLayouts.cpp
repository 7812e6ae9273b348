// ptxemu-layouts: the PTX emulator's fragment tables (runtime/ptxemu/
// Fragments.h), one line per (atom, operand, thread, value) -> coordinate,
// in the format test/tools/cute/cute_layouts.cu prints CuTe's tables, so
// that cute-layouts.test can compare them line for line.
#include "ptxemu/Fragments.h"

#include <cstdio>

using namespace comfyquant::ptxemu;

int main() {
  struct Mma {
    const char *name;
    int k, aValues, bValues;
  };
  const Mma mmas[] = {{"mma_m16n8k16_f16", 16, 8, 4},
                      {"mma_m16n8k32_8bit", 32, 16, 8},
                      {"mma_m16n8k64_4bit", 64, 32, 16}};
  for (const Mma &m : mmas) {
    for (int t = 0; t < 32; ++t) {
      for (int v = 0; v < m.aValues; ++v) {
        RowCol rc = mmaA(m.k, t, v);
        std::printf("%s A %d %d %d %d\n", m.name, t, v, rc.row, rc.col);
      }
      for (int v = 0; v < m.bValues; ++v) {
        RowCol rc = mmaB(m.k, t, v); // {k, n}
        std::printf("%s B %d %d %d %d\n", m.name, t, v, rc.col, rc.row);
      }
      for (int v = 0; v < 4; ++v) {
        RowCol rc = mmaC(t, v);
        std::printf("%s C %d %d %d %d\n", m.name, t, v, rc.row, rc.col);
      }
    }
  }
  // Block-scale lanes: (thread, row of A) and (thread, column of B).
  for (int r = 0; r < 16; ++r)
    for (int tid = 0; tid < 2; ++tid)
      std::printf("block_scale SFA %d %d\n", scaleALane(r, tid), r);
  for (int n = 0; n < 8; ++n)
    for (int tid = 0; tid < 4; ++tid)
      std::printf("block_scale SFB %d %d\n", scaleBLane(n, tid), n);
  // wgmma m64n128 accumulator: 128 threads x 64 values.
  for (int t = 0; t < 128; ++t)
    for (int v = 0; v < 64; ++v) {
      RowCol rc = wgmmaD(t, v);
      std::printf("wgmma_m64n128 C %d %d %d %d\n", t, v, rc.row, rc.col);
    }
  return 0;
}
