// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_89}))' | FileCheck %s --check-prefix=NATIVE
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_120a}))' | FileCheck %s --check-prefix=NATIVE
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_80}))' | FileCheck %s --check-prefix=F16
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_86}))' | FileCheck %s --check-prefix=F16
// RUN: not comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_75}))' 2>&1 | FileCheck %s --check-prefix=BADARCH
// BADARCH: error: comfyquant-gpu-lower-mma: unknown arch 'sm_75'

// sm_89+: one FP8 mma.sync; each 8-bit register row packed into an i32.
// NATIVE-LABEL: gpu.func @e4m3
// NATIVE-COUNT-6: vector.bitcast %{{.*}} : vector<4xi8> to vector<1xi32>
// NATIVE:         nvvm.inline_ptx "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};"
// NATIVE-SAME:      -> f32, f32, f32, f32
// NATIVE:         vector.from_elements {{.*}} : vector<2x2xf32>
// NATIVE-NOT:     comfyquant.mma_fp8

// sm_80/sm_86: e4m3 -> f16 (sign to bit 15, exponent and mantissa shifted
// by 7, times 2^8, 0x7f NaN), then two m16n8k16 with the low and the high
// half of K, the second accumulating onto the first.
// F16-LABEL: gpu.func @e4m3
// F16:         %[[ROW0:.*]] = vector.extract %arg0[0] : vector<4xi8> from vector<4x4xi8>
// F16:         %[[W:.*]] = arith.extui %[[ROW0]] : vector<4xi8> to vector<4xi16>
// F16:         arith.constant dense<128> : vector<4xi16>
// F16:         %[[SIGN:.*]] = arith.andi %[[W]]
// F16:         arith.constant dense<8> : vector<4xi16>
// F16:         %[[SIGNHI:.*]] = arith.shli %[[SIGN]]
// F16:         arith.constant dense<127> : vector<4xi16>
// F16:         %[[MAG:.*]] = arith.andi %[[W]]
// F16:         arith.constant dense<7> : vector<4xi16>
// F16:         %[[PLACED:.*]] = arith.shli %[[MAG]]
// F16:         %[[BITS:.*]] = arith.ori %[[SIGNHI]], %[[PLACED]]
// F16:         %[[SCALED:.*]] = arith.bitcast %[[BITS]] : vector<4xi16> to vector<4xf16>
// F16:         %[[REBIAS:.*]] = arith.constant dense<2.560000e+02> : vector<4xf16>
// F16:         %[[VALUE:.*]] = arith.mulf %[[SCALED]], %[[REBIAS]]
// F16:         %[[NANCODE:.*]] = arith.constant dense<127> : vector<4xi16>
// F16:         %[[ISNAN:.*]] = arith.cmpi eq, %[[MAG]], %[[NANCODE]]
// F16:         %[[NAN:.*]] = arith.constant dense<0x7E00> : vector<4xf16>
// F16:         %[[H0:.*]] = arith.select %[[ISNAN]], %[[NAN]], %[[VALUE]]
// F16:         %[[A00:.*]] = vector.extract %[[H0]][0]
// F16:         %[[A01:.*]] = vector.extract %[[H0]][1]
// F16:         %[[A02:.*]] = vector.extract %[[H0]][2]
// F16:         %[[A03:.*]] = vector.extract %[[H0]][3]
// F16:         vector.extract %arg0[1]
// F16:         %[[H1:.*]] = arith.select
// F16:         %[[A10:.*]] = vector.extract %[[H1]][0]
// F16:         %[[A11:.*]] = vector.extract %[[H1]][1]
// F16:         %[[A12:.*]] = vector.extract %[[H1]][2]
// F16:         %[[A13:.*]] = vector.extract %[[H1]][3]
// F16:         vector.extract %arg0[2]
// F16:         vector.extract %arg0[3]
// F16:         vector.extract %arg1[0]
// F16:         %[[HB0:.*]] = arith.select
// F16:         %[[B00:.*]] = vector.extract %[[HB0]][0]
// F16:         %[[B01:.*]] = vector.extract %[[HB0]][1]
// F16:         %[[B02:.*]] = vector.extract %[[HB0]][2]
// F16:         %[[B03:.*]] = vector.extract %[[HB0]][3]
// F16:         vector.extract %arg1[1]
// F16:         %[[FA:.*]] = vector.from_elements %[[A00]], %[[A01]], %[[A10]], %[[A11]], %[[A02]], %[[A03]], %[[A12]], %[[A13]] : vector<4x2xf16>
// F16:         %[[FB:.*]] = vector.from_elements %[[B00]], %[[B01]], %[[B02]], %[[B03]] : vector<2x2xf16>
// F16:         %[[ACC1:.*]] = nvgpu.mma.sync(%[[FA]], %[[FB]], %arg2) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// F16:         %[[ACC2:.*]] = nvgpu.mma.sync(%{{.*}}, %{{.*}}, %[[ACC1]]) {mmaShape = [16, 8, 16]}
// F16:         gpu.return %[[ACC2]]
// F16-NOT:     comfyquant.mma_fp8
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @e4m3(%a: vector<4x4xi8>, %b: vector<2x4xi8>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
      %d = comfyquant.mma_fp8 %a, %b, %c : f8E4M3FN x f8E4M3FN : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
      gpu.return %d : vector<2x2xf32>
    }
  }
}

// -----

// e5m2 is the high byte of an f16: a shift, no multiply.
// NATIVE-LABEL: gpu.func @e5m2
// NATIVE:         nvvm.inline_ptx "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32
// F16-LABEL: gpu.func @e5m2
// F16-COUNT-4: arith.shli %{{.*}}, %{{.*}} : vector<4xi16>
// F16-NOT:     arith.mulf
// F16-COUNT-2: nvgpu.mma.sync
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @e5m2(%a: vector<4x4xi8>, %b: vector<2x4xi8>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
      %d = comfyquant.mma_fp8 %a, %b, %c : f8E5M2 x f8E5M2 : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
      gpu.return %d : vector<2x2xf32>
    }
  }
}

// -----

// Without an accumulator (a block-scaled K step starts from zero), the PTX
// declares a zero register itself: constant asm operands would become
// immediates, which f32 values cannot be.
// NATIVE-LABEL: gpu.func @zero_acc
// NATIVE:         nvvm.inline_ptx "{\0A.reg .f32 zero;\0Amov.f32 zero, 0f00000000;\0Amma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {zero, zero, zero, zero};\0A}"
// NATIVE-SAME:      ro({{[^:]*}} : i32, i32, i32, i32, i32, i32) -> f32, f32, f32, f32
// F16-LABEL: gpu.func @zero_acc
// F16:         %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<2x2xf32>
// F16:         nvgpu.mma.sync(%{{.*}}, %{{.*}}, %[[ZERO]]) {mmaShape = [16, 8, 16]}
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @zero_acc(%a: vector<4x4xi8>, %b: vector<2x4xi8>) -> vector<2x2xf32> {
      %d = comfyquant.mma_fp8 %a, %b : f8E4M3FN x f8E4M3FN : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
      gpu.return %d : vector<2x2xf32>
    }
  }
}

// -----

// A zero constant accumulator (the first K step of a kernel whose
// accumulators start at zero, once a one-step K loop is folded) takes the
// same zero register.
// NATIVE-LABEL: gpu.func @zero_constant_acc
// NATIVE:         nvvm.inline_ptx "{\0A.reg .f32 zero;{{.*}}{zero, zero, zero, zero};\0A}"
// NATIVE-SAME:      ro({{[^:]*}} : i32, i32, i32, i32, i32, i32) -> f32, f32, f32, f32
// F16-LABEL: gpu.func @zero_constant_acc
// F16:         nvgpu.mma.sync
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @zero_constant_acc(%a: vector<4x4xi8>, %b: vector<2x4xi8>) -> vector<2x2xf32> {
      %zero = arith.constant dense<0.0> : vector<2x2xf32>
      %d = comfyquant.mma_fp8 %a, %b, %zero : f8E4M3FN x f8E4M3FN : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
      gpu.return %d : vector<2x2xf32>
    }
  }
}
