//===- KernelResourceReport.h - what a device kernel uses -------*- C++ -*-===//
//
// The assembler's account of each CUDA kernel (ptxas -v), kept with the
// block size the kernel was formed with, so the compile summary can say
// what every kernel of every arch uses: registers, spills, shared memory.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_COMPILER_KERNELRESOURCEREPORT_H
#define COMFYQUANT_COMPILER_KERNELRESOURCEREPORT_H

#include <cstdint>
#include <string>

namespace mlir::comfyquant {

/// What ptxas reported of one kernel of one arch's image.
struct KernelResourceReport {
  std::string arch, kernel;
  int64_t registers = 0, spillStoreBytes = 0, spillLoadBytes = 0;
  int64_t sharedBytes = 0; ///< static shared memory
  int64_t blockThreads = 0; ///< the recorded block size (0: none)
};

} // namespace mlir::comfyquant

#endif // COMFYQUANT_COMPILER_KERNELRESOURCEREPORT_H
