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

// -----

// Tiles that are kernel arguments rather than workgroup attributions: their
// alignment cannot be set, so no descriptor may point at them.
gpu.module @kernels {
  gpu.func @tiles_as_arguments(%a: memref<512xi32, #gpu.address_space<workgroup>>, %b: memref<1024xi32, #gpu.address_space<workgroup>>, %out: memref<16x2x2xi32>) kernel {
    // expected-error @+1 {{'comfyquant.warpgroup_mma' op tiles must be workgroup attributions of the kernel (their alignment is set here)}}
    %d = comfyquant.warpgroup_mma %a, %b : i8 x i8 : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xi32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<16x2x2xi32>, vector<16x2x2xi32>
    gpu.return
  }
}

// -----

// tcgen05 (sm_100a): 96 columns would need 12 repetitions of the 16x256b
// accumulator access, which tcgen05.ld/st do not have.
gpu.module @kernels attributes {comfyquant.target = #comfyquant.target<cuda, "sm_100a">} {
  gpu.func @n96(%out: memref<12x2x2xi32>) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<768xi32, #gpu.address_space<workgroup>>) kernel {
    // expected-error @+1 {{'comfyquant.warpgroup_mma' op tcgen05 lowering covers N = 32, 64, 128 or 256, not 96}}
    %d = comfyquant.warpgroup_mma %a, %b : i8 x i8 : memref<512xi32, #gpu.address_space<workgroup>>, memref<768xi32, #gpu.address_space<workgroup>> -> vector<12x2x2xi32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<12x2x2xi32>, vector<12x2x2xi32>
    gpu.return
  }
}
