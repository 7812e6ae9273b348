// RUN: comfyquant-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma))'

// A constant accumulator other than zero has no inline-PTX form (constant
// asm operands become immediates, which f32 values cannot be).
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @one_acc(%a: vector<4x4xi8>, %b: vector<2x4xi8>) -> vector<2x2xf32> {
      %one = arith.constant dense<1.0> : vector<2x2xf32>
      // expected-error @below {{a constant accumulator other than zero cannot be an inline-PTX operand}}
      %d = comfyquant.mma_fp8 %a, %b, %one : f8E4M3FN x f8E4M3FN : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
      gpu.return %d : vector<2x2xf32>
    }
  }
}

// -----

// A gpu.module pinned to a CPU variant.
// expected-error @+1 {{comfyquant-gpu-lower-mma: the gpu.module's target #comfyquant.target<cpu, "amx"> is not a CUDA arch}}
gpu.module @kernels attributes {comfyquant.target = #comfyquant.target<cpu, "amx">} {
}
