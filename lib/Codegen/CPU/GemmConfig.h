//===- GemmConfig.h - the CPU's per-GEMM decision ---------------*- C++ -*-===//
#ifndef COMFYQUANT_LIB_CODEGEN_CPU_GEMMCONFIG_H
#define COMFYQUANT_LIB_CODEGEN_CPU_GEMMCONFIG_H

#include "comfyquant/Codegen/Common/Gemm.h"

#include <optional>
#include <string>

namespace mlir::comfyquant::detail {

/// The `comfyquant.gemm` decision.
struct GemmConfig {
  std::string ukernel;
  int64_t mr = 1, nr = 1, kv = 1, mc = 64;
};

std::optional<GemmConfig> readGemmConfig(Operation *op);

DictionaryAttr gemmConfigAttr(MLIRContext *ctx, const GemmConfig &c);

} // namespace mlir::comfyquant::detail

#endif // COMFYQUANT_LIB_CODEGEN_CPU_GEMMCONFIG_H
