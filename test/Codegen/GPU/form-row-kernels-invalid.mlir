// RUN: comfyquant-opt %s --verify-diagnostics --pass-pipeline='builtin.module(func.func(comfyquant-gpu-form-row-kernels{block-size=48}))'

// Shuffles and the warps' scratch need whole warps.
// expected-error @+1 {{block-size must be a multiple of 32 in [32, 1024], not 48}}
func.func @bad_block(%x: memref<?x16xf32>) {
  return
}
