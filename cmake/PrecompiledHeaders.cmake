# One precompiled header of the MLIR headers that the compiler's sources
# share. Most passes are a few hundred lines behind several hundred thousand
# lines of dialect headers, so parsing those headers once per build instead
# of once per source file roughly halves a cold build (the CI builds the
# compiler three times: clang, GCC and the sanitizer build).
#
# The header is built for ComfyQuantMLIRHeaders (an object library of one
# empty source) and reused by every library passed to comfyquant_use_mlir_pch;
# they all compile with the same global flags, which reuse requires. The
# tools are left out: they compile as PIE, not PIC, which the header
# records, and a second header would cost what their three sources save.

set(COMFYQUANT_PCH_HEADERS
  <mlir/IR/Builders.h>
  <mlir/IR/BuiltinOps.h>
  <mlir/IR/BuiltinTypes.h>
  <mlir/IR/IRMapping.h>
  <mlir/IR/Matchers.h>
  <mlir/IR/PatternMatch.h>
  <mlir/IR/SymbolTable.h>
  <mlir/Pass/Pass.h>
  <mlir/Pass/PassManager.h>
  <mlir/Transforms/DialectConversion.h>
  <mlir/Transforms/GreedyPatternRewriteDriver.h>
  <mlir/Dialect/Arith/IR/Arith.h>
  <mlir/Dialect/Bufferization/IR/Bufferization.h>
  <mlir/Dialect/Func/IR/FuncOps.h>
  <mlir/Dialect/GPU/IR/GPUDialect.h>
  <mlir/Dialect/LLVMIR/LLVMDialect.h>
  <mlir/Dialect/LLVMIR/NVVMDialect.h>
  <mlir/Dialect/Linalg/IR/Linalg.h>
  <mlir/Dialect/Math/IR/Math.h>
  <mlir/Dialect/MemRef/IR/MemRef.h>
  <mlir/Dialect/NVGPU/IR/NVGPUDialect.h>
  <mlir/Dialect/SCF/IR/SCF.h>
  <mlir/Dialect/Tensor/IR/Tensor.h>
  <mlir/Dialect/Vector/IR/VectorOps.h>
)

if(COMFYQUANT_PCH)
  add_library(ComfyQuantMLIRHeaders OBJECT ${PROJECT_SOURCE_DIR}/lib/PCH/Empty.cpp)
  target_precompile_headers(ComfyQuantMLIRHeaders PRIVATE ${COMFYQUANT_PCH_HEADERS})
endif()

function(comfyquant_use_mlir_pch)
  if(COMFYQUANT_PCH)
    foreach(target ${ARGN})
      target_precompile_headers(${target} REUSE_FROM ComfyQuantMLIRHeaders)
    endforeach()
  endif()
endfunction()
