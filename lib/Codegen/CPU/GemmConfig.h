//===- GemmConfig.h - the CPU's per-GEMM decision ---------------*- C++ -*-===//
#ifndef COMFYQUANT_LIB_CODEGEN_CPU_GEMMCONFIG_H
#define COMFYQUANT_LIB_CODEGEN_CPU_GEMMCONFIG_H

#include "comfyquant/Codegen/Common/Gemm.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>

namespace mlir::comfyquant::detail {

/// The `comfyquant.gemm` decision (a #comfyquant.cpu_gemm) as plain values.
struct GemmConfig {
  CpuMicroKernel ukernel = CpuMicroKernel::f32_fma;
  int64_t mr = 1, nr = 1, kv = 1, mc = 64;
  /// K block of the outer form (0: all of K).
  int64_t kc = 0;
  CpuDecode decode = CpuDecode::none;
  CpuGemmForm form = CpuGemmForm::inner;
  /// The micro-kernel of one-row calls.
  CpuRowKernel row = CpuRowKernel::ukernel;
  /// The fewest rows of A a call should have to run this config (fewer:
  /// the runtime takes another variant's entry).
  int64_t minRows = 1;

  bool isOuter() const { return form == CpuGemmForm::outer; }
  bool isAmx() const {
    return ukernel == CpuMicroKernel::i8_amx ||
           ukernel == CpuMicroKernel::i8_amx_emulated || isAmxBF16();
  }
  /// AMX-BF16 tiles (tdpbf16ps) on bf16 operands.
  bool isAmxBF16() const {
    return ukernel == CpuMicroKernel::bf16_amx ||
           ukernel == CpuMicroKernel::bf16_amx_emulated;
  }
  bool isEmulatedAmx() const {
    return ukernel == CpuMicroKernel::i8_amx_emulated ||
           ukernel == CpuMicroKernel::bf16_amx_emulated;
  }
};

/// The op's `comfyquant.gemm` config, if it has a CPU one.
std::optional<GemmConfig> readGemmConfig(Operation *op);

CpuGemmAttr gemmConfigAttr(MLIRContext *ctx, const GemmConfig &c);

/// The lane count a vectorizing pass uses: `requested` when positive (its
/// `lanes` option), else the f32 lanes of the function's target's vector
/// registers (recorded by comfyquant-cpu-select-strategy, or the target
/// its module pins); 0 without either.
int64_t targetLanes(func::FuncOp func, int64_t requested = 0);

/// What the strategy and the vectorizers know of a CPU beyond its ISA
/// variant: the `tune` option of comfyquant-cpu-select-strategy and
/// comfyquant-cpu-vectorize-elementwise (as LLVM's -mtune).
struct CpuTuning {
  /// vdpbf16ps issues at half the f32 FMA rate: bf16 operands take f32
  /// FMAs.
  bool halfRateBF16Dot = false;
  /// A two-table word permute (vpermi2w) takes ~2.6 cycles: byte-code
  /// tables of bf16 are computed where they are affine but for a few codes.
  bool slowTwoTableWordPermute = false;
};

/// Whether the bf16 kernels read `producer`, B's decoder, as a table of
/// bf16s in registers (its bf16 a function of one byte, possibly times a
/// scale uniform over each of the kernel's `kv`-vectors, or a read of a
/// table of rows), as comfyquant-cpu-vectorize-gemm builds it.
bool decodesThroughTable(linalg::GenericOp producer, int64_t kv);

/// The tuning of `tune`, a name isCpuTuneName accepts: generic, host (this
/// machine, as LLVM names it) or an LLVM x86-64 CPU name.
CpuTuning cpuTuning(llvm::StringRef tune);

/// cpuTuning, or failure with an error on `op` for a name isCpuTuneName
/// rejects.
FailureOr<CpuTuning> lookupCpuTuning(Operation *op, llvm::StringRef tune);

/// The CPU variant of the function's target (or its module's); nullptr
/// without one.
const ::comfyquant::rt::CpuVariantInfo *targetVariant(func::FuncOp func);

/// The tuning of the function's target (or its module's): its `tune`;
/// generic without a CPU target.
CpuTuning targetTuning(func::FuncOp func);

} // namespace mlir::comfyquant::detail

#endif // COMFYQUANT_LIB_CODEGEN_CPU_GEMMCONFIG_H
