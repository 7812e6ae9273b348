// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_89}))' | FileCheck %s --check-prefix=NATIVE
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_120a}))' | FileCheck %s --check-prefix=NATIVE
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_80}))' | FileCheck %s --check-prefix=F16
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_86}))' | FileCheck %s --check-prefix=F16
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_90a}))' | FileCheck %s --check-prefix=WGMMA
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma))' | FileCheck %s --check-prefix=PINNED
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_80}))' | FileCheck %s --check-prefixes=SYNC,RESCALE
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_86}))' | FileCheck %s --check-prefix=DECODE
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_120a}))' | FileCheck %s --check-prefixes=SYNC,BLOCKSCALE
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_100a}))' | FileCheck %s --check-prefix=TCGEN05
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_89}))' | FileCheck %s --check-prefix=STAGED
// RUN: not comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-mma{chip=sm_75}))' 2>&1 | FileCheck %s --check-prefix=BADARCH
// BADARCH: error: comfyquant-gpu-lower-mma: unknown arch 'sm_75'

// sm_89+: one FP8 mma.sync; each 8-bit register row packed into an i32.
// NATIVE-LABEL: gpu.func @e4m3
// NATIVE-COUNT-6: vector.bitcast %{{.*}} : vector<4xi8> to vector<1xi32>
// NATIVE:         nvvm.inline_ptx "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};"
// NATIVE-SAME:      -> f32, f32, f32, f32
// NATIVE:         vector.from_elements {{.*}} : vector<2x2xf32>
// NATIVE-NOT:     comfyquant.mma_fp8

// sm_80/sm_86: each 8-bit register row is one word decoded to four f16
// (decodeFP8Word, whose values FP8DecodeTest checks code by code): e4m3's
// high and low f16 bytes cut for the four codes at once, one permute per
// pair, one f16x2 multiply by 2^8; then two m16n8k16 with the low and the
// high half of K, the second accumulating onto the first.
// F16-LABEL: gpu.func @e4m3
// F16:         %[[ROW0:.*]] = vector.extract %arg0[0] : vector<4xi8> from vector<4x4xi8>
// F16:         %[[W:.*]] = vector.bitcast %[[ROW0]] : vector<4xi8> to vector<1xi32>
// F16:         %[[WORD:.*]] = vector.extract %[[W]][0] : i32 from vector<1xi32>
// F16:         %[[MAG:.*]] = arith.andi %[[WORD]], %c2139062143_i32{{.*}} : i32
// F16:         %[[BUMP:.*]] = arith.addi %[[MAG]], %c16843009_i32{{.*}} : i32
// F16:         %[[NAN:.*]] = arith.andi %[[BUMP]], %c-2139062144_i32{{.*}} : i32
// F16:         %[[FLAGGED:.*]] = arith.ori %[[MAG]], %[[NAN]]
// F16:         %[[SIGNS:.*]] = arith.andi %[[WORD]], %c-2139062144_i32{{.*}} : i32
// F16:         %[[HALF:.*]] = arith.shrui %[[FLAGGED]], %c1_i32{{.*}} : i32
// F16:         %[[HALFB:.*]] = arith.andi %[[HALF]], %c2139062143_i32{{.*}} : i32
// F16:         %[[HIGH:.*]] = arith.ori %[[SIGNS]], %[[HALFB]]
// F16:         %[[SHL:.*]] = arith.shli %[[MAG]], %c7_i32{{.*}} : i32
// F16:         %[[LOW:.*]] = arith.andi %[[SHL]], %c-2139062144_i32{{.*}} : i32
// F16:         %[[P0:.*]] = nvvm.prmt <default> %c20800_i32{{.*}}, %[[LOW]], %[[HIGH]] : i32
// F16:         %[[P1:.*]] = nvvm.prmt <default> %c29538_i32{{.*}}, %[[LOW]], %[[HIGH]] : i32
// F16:         %[[PAIRS:.*]] = vector.from_elements %[[P0]], %[[P1]] : vector<2xi32>
// F16:         %[[SCALED:.*]] = vector.bitcast %[[PAIRS]] : vector<2xi32> to vector<4xf16>
// F16:         %[[H0:.*]] = arith.mulf %[[SCALED]], %{{.*}} : vector<4xf16>
// F16-NOT:     arith.select
// F16:         %[[A00:.*]] = vector.extract %[[H0]][0]
// F16:         %[[A01:.*]] = vector.extract %[[H0]][1]
// F16:         %[[A02:.*]] = vector.extract %[[H0]][2]
// F16:         %[[A03:.*]] = vector.extract %[[H0]][3]
// F16:         vector.extract %arg0[1]
// F16:         %[[H1:.*]] = arith.mulf
// F16:         %[[A10:.*]] = vector.extract %[[H1]][0]
// F16:         %[[A11:.*]] = vector.extract %[[H1]][1]
// F16:         %[[A12:.*]] = vector.extract %[[H1]][2]
// F16:         %[[A13:.*]] = vector.extract %[[H1]][3]
// F16:         vector.extract %arg0[2]
// F16:         vector.extract %arg0[3]
// F16:         vector.extract %arg1[0]
// F16:         %[[HB0:.*]] = arith.mulf
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

// e5m2 is the high byte of an f16: two permutes with zero per register,
// no multiply.
// NATIVE-LABEL: gpu.func @e5m2
// NATIVE:         nvvm.inline_ptx "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32
// F16-LABEL: gpu.func @e5m2
// F16-COUNT-12: nvvm.prmt <default> %c{{20544|28768}}_i32{{.*}}, %c0_i32{{.*}}, %{{.*}} : i32
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

// -----

// warpgroup_mma on sm_90a: the tiles get 128-byte alignment; a proxy fence
// (the tiles were written by ordinary stores) and a barrier, one
// descriptor per tile (shared address bits 17..4, leading byte offset
// 128 >> 4 at bit 16, stride byte offset 256 >> 4 at bit 32: 68720001024),
// then wgmma m64n128k32 accumulating onto the 64 values, committed and
// waited for.
// WGMMA-LABEL: gpu.func @tile_s8
// WGMMA-SAME:    workgroup(%[[A:.*]] : memref<512xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}, %[[B:.*]] : memref<1024xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64})
// WGMMA-NEXT:    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// WGMMA-NEXT:    gpu.barrier
// WGMMA-COUNT-64: llvm.insertvalue
// WGMMA:         %[[PA:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
// WGMMA-NEXT:    %[[IA:.*]] = arith.index_castui %[[PA]] : index to i64
// WGMMA-NEXT:    %[[MASK:.*]] = arith.constant 262143 : i64
// WGMMA-NEXT:    %[[FA:.*]] = arith.andi %[[IA]], %[[MASK]]
// WGMMA-NEXT:    %[[FOUR:.*]] = arith.constant 4 : i64
// WGMMA-NEXT:    %[[SA:.*]] = arith.shrui %[[FA]], %[[FOUR]]
// WGMMA-NEXT:    %[[OFFS:.*]] = arith.constant 68720001024 : i64
// WGMMA-NEXT:    %[[DA:.*]] = arith.ori %[[SA]], %[[OFFS]]
// WGMMA-NEXT:    memref.extract_aligned_pointer_as_index %[[B]]
// WGMMA:         %[[DB:.*]] = arith.ori
// WGMMA-NEXT:    nvvm.wgmma.fence.aligned
// WGMMA-NEXT:    %[[D:.*]] = nvvm.wgmma.mma_async %[[DA]], %[[DB]], %{{.*}}, <m = 64, n = 128, k = 32>, D[<s32>, <one>, <satfinite>], A[<s8>, <one>, <row>], B[<s8>, <one>, <col>]
// WGMMA-NEXT:    nvvm.wgmma.commit.group.sync.aligned
// WGMMA-NEXT:    nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA-COUNT-64: llvm.extractvalue %[[D]]
// WGMMA:         vector.from_elements {{.*}} : vector<16x2x2xi32>
// WGMMA-NOT:     comfyquant.warpgroup_mma

// Elsewhere: a barrier, then each warp loads its A fragment with one
// ldmatrix.x4 (lane i addresses row i % 8 of core matrix i / 8) and the 16
// column fragments' B registers with eight (fragments j, j + 1 each), and
// issues one m16n8k32 onto accumulator fragment j.
// SYNC-LABEL: gpu.func @tile_s8
// SYNC:         gpu.barrier
// SYNC-NEXT:    %[[TID:.*]] = gpu.thread_id x
// SYNC:         memref.extract_aligned_pointer_as_index %{{.*}} : memref<512xi32, #gpu.address_space<workgroup>>
// SYNC:         nvvm.inline_ptx "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];"
// SYNC-COUNT-8: nvvm.inline_ptx "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];"
// SYNC-NOT:     memref.load %{{.*}} : memref<{{512|1024}}xi32, #gpu.address_space<workgroup>>
// SYNC:         %[[C0:.*]] = vector.extract %arg0[0] : vector<2x2xi32> from vector<16x2x2xi32>
// SYNC-NEXT:    %[[D0:.*]] = nvgpu.mma.sync(%{{.*}}, %{{.*}}, %[[C0]]) {mmaShape = [16, 8, 32]} : (vector<4x4xi8>, vector<2x4xi8>, vector<2x2xi32>) -> vector<2x2xi32>
// SYNC-NEXT:    vector.insert %[[D0]], %arg0 [0]
// SYNC-COUNT-15: nvgpu.mma.sync
// SYNC-NOT:     ldmatrix
// SYNC-NOT:     nvgpu.mma.sync
// SYNC-NOT:     comfyquant.warpgroup_mma
// sm_100a: warp 0 allocates 128 tensor-memory columns into a workgroup
// word, thread 0 initialises the mbarrier, the phase starts at 0. Each warp
// stores its 64 accumulators at its lane quarter (lane 32w: w * 2^21);
// thread 0 issues tcgen05.mma kind::i8 (instruction descriptor 0x042004A8:
// s32 D, s8 A and B, saturate, N >> 3 = 16, M >> 4 = 4), descriptors with
// version bit 46 (0x401000080000), and commits to the mbarrier; every
// thread waits for the phase, flips it, and loads the result back; warp 0
// frees the columns before the return.
// TCGEN05-LABEL: gpu.func @tile_s8
// TCGEN05-SAME:    %[[SLOT:[a-z0-9]*]] : memref<1xi32, #gpu.address_space<workgroup>> {llvm.align = 4 : i64}, %[[BAR:[a-z0-9]*]] : memref<1xi64, #gpu.address_space<workgroup>> {llvm.align = 8 : i64}) private(%[[PHASE:.*]] : memref<1xi32, #gpu.address_space<private>>) kernel
// TCGEN05:         %[[COLS:.*]] = arith.constant 128 : i32
// TCGEN05:         scf.if
// TCGEN05-NEXT:      nvvm.tcgen05.alloc %{{.*}}, %[[COLS]] : !llvm.ptr<3>, i32
// TCGEN05-NEXT:      nvvm.tcgen05.relinquish_alloc_permit
// TCGEN05:         nvvm.mbarrier.init %[[MBAR:.*]], %{{.*}} : !llvm.ptr<3>, i32
// TCGEN05:         memref.store %{{.*}}, %[[PHASE]]
// TCGEN05:         nvvm.tcgen05.fence <before>
// TCGEN05-NEXT:    gpu.barrier
// TCGEN05-NEXT:    nvvm.tcgen05.fence <after>
// TCGEN05-NEXT:    %[[BASE:.*]] = memref.load %[[SLOT]]
// TCGEN05:         arith.constant 2097152 : i32
// TCGEN05:         nvvm.tcgen05.st %{{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_16x256b>} : vector<64xi32>
// TCGEN05-NEXT:    nvvm.tcgen05.wait <store>
// TCGEN05-NEXT:    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// TCGEN05-NEXT:    nvvm.tcgen05.fence <before>
// TCGEN05-NEXT:    gpu.barrier
// TCGEN05-NEXT:    nvvm.tcgen05.fence <after>
// TCGEN05:         scf.if
// TCGEN05:           arith.constant 70437464178688 : i64
// TCGEN05:           %[[IDESC:.*]] = arith.constant 69207208 : i32
// TCGEN05-NEXT:      nvvm.tcgen05.mma %{{.*}}, %{{.*}}, %{{.*}}, %[[IDESC]], %true {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<i8>}
// TCGEN05-NEXT:      nvvm.tcgen05.commit %[[MBAR]] : !llvm.ptr<3>
// TCGEN05:         %[[P:.*]] = memref.load %[[PHASE]]
// TCGEN05:         scf.while
// TCGEN05:           %[[DONE:.*]] = nvvm.mbarrier.try_wait %[[MBAR]], %[[P]], %{{.*}} : !llvm.ptr<3>, i32, i32 -> i1
// TCGEN05:           %[[AGAIN:.*]] = arith.xori %[[DONE]], %true
// TCGEN05-NEXT:      scf.condition(%[[AGAIN]])
// TCGEN05:         arith.xori %[[P]]
// TCGEN05:         nvvm.tcgen05.fence <after>
// TCGEN05:         nvvm.tcgen05.ld %{{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_16x256b>} : vector<64xi32>
// TCGEN05-NEXT:    nvvm.tcgen05.wait <load>
// TCGEN05:         vector.from_elements {{.*}} : vector<16x2x2xi32>
// TCGEN05:         nvvm.tcgen05.fence <before>
// TCGEN05-NEXT:    gpu.barrier
// TCGEN05-NEXT:    nvvm.tcgen05.fence <after>
// TCGEN05:         scf.if
// TCGEN05-NEXT:      llvm.inttoptr %[[BASE]] : i32 to !llvm.ptr<6>
// TCGEN05-NEXT:      nvvm.tcgen05.dealloc %{{.*}}, %[[COLS]] : !llvm.ptr<6>, i32
// TCGEN05:         gpu.return
gpu.module @kernels {
  gpu.func @tile_s8(%acc: vector<16x2x2xi32>, %out: memref<16x2x2xi32>) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>) kernel {
    %d = comfyquant.warpgroup_mma %a, %b, %acc : i8 x i8 : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xi32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<16x2x2xi32>, vector<16x2x2xi32>
    gpu.return
  }
}

// -----

// No accumulator (a block-scaled K step): wgmma with scale-d 0 on an
// unset struct; mixed FP8 operand types are kept. Off sm_90a, FP8 tiles go
// through comfyquant.mma_fp8, lowered in the same pass.
// WGMMA-LABEL: gpu.func @tile_e5m2_e4m3
// WGMMA:         %[[U:.*]] = llvm.mlir.poison : !llvm.struct<(f32,
// WGMMA-NOT:     llvm.insertvalue
// WGMMA:         nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %[[U]], <m = 64, n = 128, k = 32>, D[<f32>, <zero>], A[<e5m2>, <one>, <row>], B[<e4m3>, <one>, <col>]
// SYNC-LABEL: gpu.func @tile_e5m2_e4m3
// e5m2 is the high byte of its f16: permuted, not multiplied.
// DECODE-LABEL: gpu.func @tile_e5m2_e4m3
// DECODE:         memref.load %arg1
// DECODE:         nvvm.prmt <default>
// DECODE-NOT:     arith.mulf
// DECODE:         memref.load %arg2
// DECODE:         arith.mulf %{{.*}}, %{{.*}} : vector<4xf16>
// DECODE-NOT:     comfyquant.mma_fp8
// SYNC-NOT:     comfyquant.mma_fp8
// SYNC-NOT:     comfyquant.warpgroup_mma
gpu.module @kernels {
  gpu.func @tile_e5m2_e4m3(%out: memref<16x2x2xf32>) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>) kernel {
    %d = comfyquant.warpgroup_mma %a, %b : f8E5M2 x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    gpu.return
  }
}

// -----

// f16 tiles: wgmma m64n128k16; elsewhere m16n8k16 on the same words read
// as f16 pairs.
// WGMMA-LABEL: gpu.func @tile_f16
// WGMMA:         nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// SYNC-LABEL: gpu.func @tile_f16
// SYNC:         vector.bitcast %{{.*}} : vector<1xi32> to vector<2xf16>
// SYNC-COUNT-16: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
gpu.module @kernels {
  gpu.func @tile_f16(%acc: vector<16x2x2xf32>, %out: memref<16x2x2xf32>) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>) kernel {
    %d = comfyquant.warpgroup_mma %a, %b, %acc : f16 x f16 : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    gpu.return
  }
}

// -----

// A zero constant accumulator (the K loop of one step folded away) is no
// accumulator: wgmma with scale-d 0; the FP8 mma.sync gets its own zero
// register rather than constant operands.
// WGMMA-LABEL: gpu.func @tile_zero_acc
// WGMMA:         nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// NATIVE-LABEL: gpu.func @tile_zero_acc
// NATIVE-COUNT-16: nvvm.inline_ptx "{\0A.reg .f32 zero;\0Amov.f32 zero, 0f00000000;\0Amma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32
// NATIVE-NOT:   nvvm.inline_ptx
gpu.module @kernels {
  gpu.func @tile_zero_acc(%out: memref<16x2x2xf32>) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>) kernel {
    %zero = arith.constant dense<0.0> : vector<16x2x2xf32>
    %d = comfyquant.warpgroup_mma %a, %b, %zero : f8E4M3FN x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    gpu.return
  }
}

// -----

// UE8M0 block scales (MXFP8). sm_120a: per 8 columns one block-scaled
// m16n8k32 (kind::mxf8f6f4, scale_vec x1, ue8m0) onto the accumulator;
// lane 4g + t passes the scale byte of A row 16w + g + 8 (t & 1) and of B
// column 8j + g, selectors (0, 0).
// NATIVE-LABEL: gpu.func @tile_ue8m0
// BLOCKSCALE-LABEL: gpu.func @tile_ue8m0
// BLOCKSCALE:         %[[TID:.*]] = gpu.thread_id x
// BLOCKSCALE:         %[[TLOW:.*]] = arith.andi %{{.*}}, %c1
// BLOCKSCALE:         %[[EIGHT:.*]] = arith.muli %[[TLOW]], %c8
// BLOCKSCALE:         %[[AROW:.*]] = arith.addi %{{.*}}, %[[EIGHT]]
// BLOCKSCALE:         %[[SAB:.*]] = memref.load %arg4[%[[AROW]]] : memref<64xi8, #gpu.address_space<workgroup>>
// BLOCKSCALE-NEXT:    %[[SA:.*]] = arith.extui %[[SAB]] : i8 to i32
// BLOCKSCALE-NEXT:    %[[SBB:.*]] = memref.load %arg5[%{{.*}}] : memref<128xi8, #gpu.address_space<workgroup>>
// BLOCKSCALE-NEXT:    %[[SB:.*]] = arith.extui %[[SBB]] : i8 to i32
// BLOCKSCALE:         nvvm.mma.block_scale A[{{.*}}] B[{{.*}}] C[{{.*}}] scaleA[%[[SA]], %{{.*}}, %{{.*}}] scaleB[%[[SB]], %{{.*}}, %{{.*}}] {blockScaleFormat = #nvvm.block_scale_format<ue8m0>, kind = #nvvm.block_scale_kind<mxf8f6f4>, multiplicandAPtxType = #nvvm.mma_type<e4m3>, multiplicandBPtxType = #nvvm.mma_type<e4m3>, scaleVecSize = #nvvm.scale_vec_size<x1>, shape = #nvvm.shape<m = 16, n = 8, k = 32>}
// BLOCKSCALE-COUNT-15: nvvm.mma.block_scale
// BLOCKSCALE-NOT:     comfyquant.mma_fp8
//
// Without a block-scaled MMA (sm_80 here; sm_89, sm_90a, sm_100a alike):
// the fragment's product from zero (on sm_80, two f16 steps over the
// tiles decoded once per block), then per element acc + p * (UE8M0(row)
// * UE8M0(col)), the decode being 2^(s - 127) with 0 -> 2^-127 and
// 0xFF -> NaN. The block decodes each scale byte once per step into
// workgroup buffers of f32 bits (with the decoded tiles, before the f16
// steps' barriers), and each thread loads its two row factors once and
// each fragment's two column factors.
// RESCALE-LABEL: gpu.func @tile_ue8m0
// RESCALE-SAME:    %[[ROWF:arg[0-9]+]] : memref<64xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}, %[[COLF:arg[0-9]+]] : memref<128xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64})
// RESCALE:         nvvm.prmt <default>
// RESCALE:         %[[RC:.*]] = memref.load %arg4[%{{.*}}] : memref<64xi8, #gpu.address_space<workgroup>>
// RESCALE-NEXT:    %[[RE:.*]] = arith.extui %[[RC]] : i8 to i32
// RESCALE-NEXT:    %[[C23:.*]] = arith.constant 23 : i32
// RESCALE-NEXT:    %[[RBITS:.*]] = arith.shli %[[RE]], %[[C23]]
// RESCALE:         arith.constant 4194304 : i32
// RESCALE:         arith.constant 2143289344 : i32
// RESCALE:         memref.store %{{.*}}, %[[ROWF]][%{{.*}}]
// RESCALE:         memref.load %arg5[%{{.*}}] : memref<128xi8, #gpu.address_space<workgroup>>
// RESCALE:         memref.store %{{.*}}, %[[COLF]][%{{.*}}]
// RESCALE:         gpu.barrier
// RESCALE-COUNT-16: nvgpu.mma.sync
// RESCALE:         gpu.barrier
// RESCALE-COUNT-16: nvgpu.mma.sync
// RESCALE:         %[[R0:.*]] = memref.load %[[ROWF]][%{{.*}}]
// RESCALE-NEXT:    %[[RF:.*]] = arith.bitcast %[[R0]] : i32 to f32
// RESCALE:         memref.load %[[ROWF]]
// RESCALE:         %[[C0:.*]] = memref.load %[[COLF]][%{{.*}}]
// RESCALE-NEXT:    %[[CF:.*]] = arith.bitcast %[[C0]] : i32 to f32
// RESCALE:         memref.load %[[COLF]]
// RESCALE-NEXT:    arith.bitcast
// RESCALE-NEXT:    %[[F:.*]] = arith.mulf %[[RF]], %[[CF]] : f32
// RESCALE-NEXT:    %[[PV:.*]] = vector.extract %{{.*}}[0, 0]
// RESCALE-NEXT:    %[[T:.*]] = arith.mulf %[[PV]], %[[F]] : f32
// RESCALE-NEXT:    %[[OLD:.*]] = vector.extract %{{.*}}[0, 0]
// RESCALE-NEXT:    arith.addf %[[OLD]], %[[T]] : f32
// RESCALE-COUNT-30: memref.load %[[COLF]]
// RESCALE-NOT:     memref.load %arg4
// RESCALE-NOT:     memref.load %arg5
// RESCALE-NOT:     nvvm.mma.block_scale
//
// sm_89: FP8 mma.sync per fragment from zero, rescaled by factors the
// block stages once per step after the step's barrier (the step here is in
// the kernel's body itself), one more barrier before they are read; the
// scale bytes are not read again.
// STAGED-LABEL: gpu.func @tile_ue8m0
// STAGED-SAME:    %[[ROWF:arg[0-9]+]] : memref<64xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}, %[[COLF:arg[0-9]+]] : memref<128xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64})
// STAGED:         gpu.barrier
// STAGED:         memref.load %arg4[%{{.*}}] : memref<64xi8, #gpu.address_space<workgroup>>
// STAGED:         memref.store %{{.*}}, %[[ROWF]][%{{.*}}]
// STAGED:         memref.load %arg5[%{{.*}}] : memref<128xi8, #gpu.address_space<workgroup>>
// STAGED:         memref.store %{{.*}}, %[[COLF]][%{{.*}}]
// STAGED-NEXT:    gpu.barrier
// STAGED-COUNT-2: memref.load %[[ROWF]]
// STAGED-COUNT-32: memref.load %[[COLF]]
// STAGED-NOT:     memref.load %arg4
// STAGED-NOT:     memref.load %arg5
// STAGED:         gpu.return
//
// sm_90a: one wgmma from zero, then the same rescale per fragment.
// WGMMA-LABEL: gpu.func @tile_ue8m0
// WGMMA:         nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// WGMMA:         nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA-COUNT-64: arith.mulf %{{.*}}, %{{.*}} : f32
// WGMMA-NOT:     nvvm.mma.block_scale
// sm_100a: block-scaled MMAs exist with M = 128 only. 256 columns (128
// for D, 4 + 4 for the scales); A is copied into a zeroed 4 KB buffer
// with its 8-row group d at group 4 (d / 2) + d % 2 (word 256 (d / 2) +
// 64 (d % 2)); each warp stores the scale words of MMA rows 32j + lane
// (data row 16j + lane, 0x7F7F7F7F past lane 16) at column 128 and of B
// columns 32j + lane at column 132; tcgen05.mma.block_scale kind::mxf8f6f4
// (descriptor 0x08A00000: e4m3 x e4m3, UE8M0, N >> 3 = 16, M >> 7 = 1).
// TCGEN05-LABEL: gpu.func @tile_ue8m0
// TCGEN05-SAME:    %[[WIDE:[a-z0-9]*]] : memref<1024xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}) private(
// TCGEN05:         arith.constant 256 : i32
// TCGEN05:         vector.store %{{.*}}, %[[WIDE]][%{{.*}}] : memref<1024xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// TCGEN05:         gpu.barrier
// TCGEN05:         %[[V:.*]] = vector.load %arg2[%{{.*}}] : memref<512xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// TCGEN05:         arith.constant 256 : index
// TCGEN05:         vector.store %[[V]], %[[WIDE]][%{{.*}}]
// TCGEN05:         nvvm.tcgen05.st %{{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_16x256b>} : vector<64xi32>
// TCGEN05:         arith.cmpi ult, %{{.*}}, %c16
// TCGEN05:         arith.constant 2139062143 : i32
// TCGEN05:         memref.load %arg4[%{{.*}}] : memref<64xi8, #gpu.address_space<workgroup>>
// TCGEN05-COUNT-4: arith.select
// TCGEN05:         memref.load %arg5[%{{.*}}] : memref<128xi8, #gpu.address_space<workgroup>>
// TCGEN05:         arith.constant 128 : i32
// TCGEN05:         nvvm.tcgen05.st %{{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
// TCGEN05:         arith.constant 132 : i32
// TCGEN05:         nvvm.tcgen05.st %{{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
// TCGEN05-NEXT:    nvvm.tcgen05.wait <store>
// TCGEN05:         memref.extract_aligned_pointer_as_index %[[WIDE]]
// TCGEN05:         %[[IDESC:.*]] = arith.constant 144703488 : i32
// TCGEN05:         nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %[[IDESC]], %true, %{{.*}}, %{{.*}} {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.block_scale_kind<mxf8f6f4>}
// TCGEN05-NOT:     nvvm.mma.block_scale
gpu.module @kernels {
  gpu.func @tile_ue8m0(%acc: vector<16x2x2xf32>, %out: memref<16x2x2xf32>) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>, %sa : memref<64xi8, #gpu.address_space<workgroup>>, %sb : memref<128xi8, #gpu.address_space<workgroup>>) kernel {
    %d = comfyquant.warpgroup_mma %a, %b, %acc scales(%sa, %sb : memref<64xi8, #gpu.address_space<workgroup>>, memref<128xi8, #gpu.address_space<workgroup>>) : f8E4M3FN x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    gpu.return
  }
}

// -----

// E2M1 codes with four UE4M3 scales per row (NVFP4). sm_120a: per 8
// columns one block-scaled m16n8k64 (kind::mxf4nvf4, scale_vec x4, ue4m3)
// reading the FP4 tiles as 8-bit fragments; each scale operand is the 4
// bytes of one row (A row 16w + g + 8 (t & 1), B column 8j + g).
// NATIVE-LABEL: gpu.func @tile_fp4
// BLOCKSCALE-LABEL: gpu.func @tile_fp4
// BLOCKSCALE:         %[[SAV:.*]] = vector.load %arg4[%{{.*}}] : memref<256xi8, #gpu.address_space<workgroup>>, vector<4xi8>
// BLOCKSCALE-NEXT:    %[[SAW:.*]] = vector.bitcast %[[SAV]] : vector<4xi8> to vector<1xi32>
// BLOCKSCALE-NEXT:    %[[SA:.*]] = vector.extract %[[SAW]][0]
// BLOCKSCALE:         %[[SBV:.*]] = vector.load %arg5[%{{.*}}] : memref<512xi8, #gpu.address_space<workgroup>>, vector<4xi8>
// BLOCKSCALE-NEXT:    %[[SBW:.*]] = vector.bitcast %[[SBV]] : vector<4xi8> to vector<1xi32>
// BLOCKSCALE-NEXT:    %[[SB:.*]] = vector.extract %[[SBW]][0]
// BLOCKSCALE:         nvvm.mma.block_scale A[{{.*}}] B[{{.*}}] C[{{.*}}] scaleA[%[[SA]], %{{.*}}, %{{.*}}] scaleB[%[[SB]], %{{.*}}, %{{.*}}] {blockScaleFormat = #nvvm.block_scale_format<ue4m3>, kind = #nvvm.block_scale_kind<mxf4nvf4>, multiplicandAPtxType = #nvvm.mma_type<e2m1>, multiplicandBPtxType = #nvvm.mma_type<e2m1>, scaleVecSize = #nvvm.scale_vec_size<x4>, shape = #nvvm.shape<m = 16, n = 8, k = 64>}
// BLOCKSCALE-COUNT-15: nvvm.mma.block_scale
// BLOCKSCALE-NOT:     nvgpu.mma.sync
// BLOCKSCALE:         gpu.return
//
// Without an FP4 block-scaled MMA (sm_80 here): two workgroup buffers more
// (the four f16 tiles of A, then of B, one per 16 codes); after a barrier
// each thread decodes FP4 words (the f16 high bytes of four codes at a
// time looked up by a byte permute, their signs by another, spread into f16
// pairs by two more; times the f16 of the UE4M3 scale) and stores 4 f16
// pairs;
// then a loop of four f16 steps of 16 m16n8k16 each, tile q at word
// q * 512 of A's buffer and q * 1024 of B's.
// RESCALE-LABEL: gpu.func @tile_fp4
// RESCALE-SAME:    %arg5 : memref<512xi8, #gpu.address_space<workgroup>>, %[[A16:arg[0-9]+]] : memref<2048xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}, %[[B16:arg[0-9]+]] : memref<4096xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64})
// RESCALE:         gpu.barrier
// RESCALE:         %[[WORD:.*]] = memref.load %arg2[%{{.*}}] : memref<512xi32, #gpu.address_space<workgroup>>
// RESCALE:         %[[SCALE:.*]] = memref.load %arg4[%{{.*}}] : memref<256xi8, #gpu.address_space<workgroup>>
// RESCALE:         %[[TLO:.*]] = arith.constant 1044133888 : i32
// RESCALE:         %[[THI:.*]] = arith.constant 1178878528 : i32
// RESCALE:         nvvm.prmt <default> %{{.*}}, %[[TLO]], %[[THI]] : i32
// RESCALE-COUNT-3: nvvm.prmt <default>
// RESCALE:         nvvm.prmt <default> %{{.*}}, %[[TLO]], %[[THI]] : i32
// RESCALE-COUNT-3: nvvm.prmt <default>
// RESCALE:         %[[VALUES:.*]] = vector.bitcast %{{.*}} : vector<4xi32> to vector<8xf16>
// RESCALE:         arith.mulf %[[VALUES]], %{{.*}} : vector<8xf16>
// RESCALE:         vector.bitcast %{{.*}} : vector<8xf16> to vector<4xi32>
// RESCALE-COUNT-4: memref.store %{{.*}}, %[[A16]][%{{.*}}] : memref<2048xi32, #gpu.address_space<workgroup>>
// RESCALE:         memref.load %arg3[%{{.*}}] : memref<1024xi32, #gpu.address_space<workgroup>>
// RESCALE:         memref.store %{{.*}}, %[[B16]][%{{.*}}] : memref<4096xi32, #gpu.address_space<workgroup>>
// RESCALE:         scf.for %[[Q:.*]] = %{{.*}} to %c4{{[_0-9]*}} step %{{.*}} iter_args(%[[ACC:.*]] = %arg0)
// RESCALE:           %[[AOFF:.*]] = arith.muli %[[Q]], %c512
// RESCALE:           %[[BOFF:.*]] = arith.muli %[[Q]], %c1024
// RESCALE:           gpu.barrier
// RESCALE:           arith.addi %{{.*}}, %[[AOFF]] : index
// RESCALE:           arith.addi %{{.*}}, %[[BOFF]] : index
// RESCALE:           memref.extract_aligned_pointer_as_index %[[A16]]
// RESCALE:           ldmatrix.sync.aligned.m8n8.x4
// RESCALE-COUNT-16:  nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// RESCALE-NOT:       nvgpu.mma.sync
// RESCALE:           scf.yield
// RESCALE-NOT:     nvgpu.mma.sync
// RESCALE-NOT:     nvvm.mma.block_scale
// RESCALE:         gpu.return
//
// sm_90a: the same decode, then a loop of one wgmma m64n128k16 f16 step per
// tile, its descriptors 4 bytes per word of offset into the buffers.
// WGMMA-LABEL: gpu.func @tile_fp4
// WGMMA:         vector.bitcast %{{.*}} : vector<8xf16> to vector<4xi32>
// WGMMA:         scf.for
// WGMMA:           memref.extract_aligned_pointer_as_index
// WGMMA:           arith.muli %{{.*}}, %c4
// WGMMA:           nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// WGMMA-NOT:       nvvm.wgmma.mma_async
// WGMMA:           scf.yield
// WGMMA:         gpu.return
//
// sm_100a: the codes as stored, no f16 decode: each scale word is the
// row's four UE4M3 bytes (past lane 16 of A 0x38383838, 1.0), and
// tcgen05.mma.block_scale kind::mxf4nvf4 .block16 (descriptor 0x08200480:
// E2M1 x E2M1, UE4M3, N >> 3 = 16, M >> 7 = 1).
// TCGEN05-LABEL: gpu.func @tile_fp4
// TCGEN05-NOT:     arith.constant 15360 : i16
// TCGEN05:         arith.constant 943208504 : i32
// TCGEN05:         vector.load %arg4[%{{.*}}] : memref<256xi8, #gpu.address_space<workgroup>>, vector<4xi8>
// TCGEN05:         vector.load %arg5[%{{.*}}] : memref<512xi8, #gpu.address_space<workgroup>>, vector<4xi8>
// TCGEN05:         %[[IDESC:.*]] = arith.constant 136316032 : i32
// TCGEN05:         nvvm.tcgen05.mma.block_scale %{{.*}}, %[[IDESC]], %true, %{{.*}}, %{{.*}} {blockScale = #nvvm.tcgen05_mma_block_scale<block16>, ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.block_scale_kind<mxf4nvf4>}
// TCGEN05-NOT:     nvgpu.mma.sync
gpu.module @kernels {
  gpu.func @tile_fp4(%acc: vector<16x2x2xf32>, %out: memref<16x2x2xf32>) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>, %sa : memref<256xi8, #gpu.address_space<workgroup>>, %sb : memref<512xi8, #gpu.address_space<workgroup>>) kernel {
    %d = comfyquant.warpgroup_mma %a, %b, %acc scales(%sa, %sb : memref<256xi8, #gpu.address_space<workgroup>>, memref<512xi8, #gpu.address_space<workgroup>>) : f4E2M1FN x f4E2M1FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    gpu.return
  }
}

// -----

// Two FP4 steps in one kernel decode into the same f16 buffers (A's shared;
// B's by row count), and a B of 32 rows (64 FP4 words per sub-block, fewer
// than the 128 threads) decodes under a guard.
// RESCALE-LABEL: gpu.func @two_fp4
// RESCALE-SAME:    %arg9 : memref<2048xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}, %arg10 : memref<4096xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}, %arg11 : memref<1024xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}) kernel
// RESCALE:         memref.store %{{.*}}, %arg9[
// RESCALE:         memref.store %{{.*}}, %arg10[
// RESCALE:         scf.for
// RESCALE:         memref.store %{{.*}}, %arg9[
// RESCALE:         %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %c64{{[_0-9]*}} : index
// RESCALE-NEXT:    scf.if %[[IN]] {
// RESCALE:           memref.store %{{.*}}, %arg11[
// RESCALE:         scf.for
// RESCALE:         gpu.return
// sm_100a: one allocation and one mbarrier for both steps; B of 32 rows
// has one scale column (a 32x32b.x1 store of one word), and no
// accumulator: the second MMA starts from zero (enable-input-D false).
// TCGEN05-LABEL: gpu.func @two_fp4
// TCGEN05-COUNT-1: nvvm.tcgen05.alloc
// TCGEN05-COUNT-1: nvvm.mbarrier.init
// TCGEN05:         nvvm.tcgen05.mma.block_scale
// TCGEN05:         nvvm.tcgen05.st %{{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : i32
// TCGEN05:         %[[ZERO:.*]] = arith.constant false
// TCGEN05:         nvvm.tcgen05.mma.block_scale %{{.*}}, %[[ZERO]],
// TCGEN05-NOT:     nvvm.tcgen05.alloc
// TCGEN05:         nvvm.tcgen05.dealloc
gpu.module @kernels {
  gpu.func @two_fp4(%acc: vector<16x2x2xf32>, %out: memref<16x2x2xf32>, %out32: memref<4x2x2xf32>) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>, %sa : memref<256xi8, #gpu.address_space<workgroup>>, %sb : memref<512xi8, #gpu.address_space<workgroup>>, %b32 : memref<256xi32, #gpu.address_space<workgroup>>, %sb32 : memref<128xi8, #gpu.address_space<workgroup>>) kernel {
    %d = comfyquant.warpgroup_mma %a, %b, %acc scales(%sa, %sb : memref<256xi8, #gpu.address_space<workgroup>>, memref<512xi8, #gpu.address_space<workgroup>>) : f4E2M1FN x f4E2M1FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
    %e = comfyquant.warpgroup_mma %a, %b32 scales(%sa, %sb32 : memref<256xi8, #gpu.address_space<workgroup>>, memref<128xi8, #gpu.address_space<workgroup>>) : f4E2M1FN x f4E2M1FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<256xi32, #gpu.address_space<workgroup>> -> vector<4x2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    vector.store %e, %out32[%c0, %c0, %c0] : memref<4x2x2xf32>, vector<4x2x2xf32>
    gpu.return
  }
}

// -----

// Without a chip option the gpu.module's own target is the arch (test IR
// pins it); the pass records the arch it lowered for.
// PINNED-LABEL: gpu.module @pinned
// PINNED-SAME:    comfyquant.target = #comfyquant.target<cuda, "sm_120a">
// PINNED:         nvvm.mma.block_scale
// WGMMA-LABEL: gpu.module @pinned
// WGMMA-SAME:    comfyquant.target = #comfyquant.target<cuda, "sm_90a">
// WGMMA:         nvvm.wgmma.mma_async
gpu.module @pinned attributes {comfyquant.target = #comfyquant.target<cuda, "sm_120a">} {
  gpu.func @tile_ue8m0(%acc: vector<16x2x2xf32>, %out: memref<16x2x2xf32>) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>, %sa : memref<64xi8, #gpu.address_space<workgroup>>, %sb : memref<128xi8, #gpu.address_space<workgroup>>) kernel {
    %d = comfyquant.warpgroup_mma %a, %b, %acc scales(%sa, %sb : memref<64xi8, #gpu.address_space<workgroup>>, memref<128xi8, #gpu.address_space<workgroup>>) : f8E4M3FN x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    gpu.return
  }
}

// -----

// A K loop whose accumulator only the MMA uses keeps it in tensor memory:
// stored once before the loop, the loop carries its initial value through
// (no tcgen05.st or tcgen05.ld inside), loaded once after it.
// TCGEN05-LABEL: gpu.func @k_loop
// TCGEN05:         nvvm.tcgen05.st
// TCGEN05-NEXT:    nvvm.tcgen05.wait <store>
// TCGEN05-NEXT:    %[[R:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %arg0)
// TCGEN05-NOT:       nvvm.tcgen05.st
// TCGEN05-NOT:       nvvm.tcgen05.ld
// TCGEN05:           nvvm.tcgen05.mma {{.*}}, %true {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<f8f6f4>}
// TCGEN05:           nvvm.mbarrier.try_wait
// TCGEN05-NOT:       nvvm.tcgen05.ld
// TCGEN05:           scf.yield %[[ACC]]
// TCGEN05:         %[[D:.*]] = nvvm.tcgen05.ld
// TCGEN05:         %[[V:.*]] = vector.from_elements {{.*}} : vector<16x2x2xf32>
// TCGEN05:         vector.store %[[V]], %arg1
// TCGEN05-NOT:     %[[R]]
// WGMMA-LABEL: gpu.func @k_loop
// WGMMA:         scf.for
// WGMMA:           nvvm.wgmma.mma_async
gpu.module @kernels {
  gpu.func @k_loop(%init: vector<16x2x2xf32>, %out: memref<16x2x2xf32>, %steps: index) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %r = scf.for %k = %c0 to %steps step %c1 iter_args(%acc = %init) -> (vector<16x2x2xf32>) {
      %d = comfyquant.warpgroup_mma %a, %b, %acc : f8E4M3FN x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
      scf.yield %d : vector<16x2x2xf32>
    }
    vector.store %r, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    gpu.return
  }
}

// -----

// Two MMAs in one K loop share the tensor-memory columns: neither keeps
// its accumulator there across the loop (each stores and loads per step).
// TCGEN05-LABEL: gpu.func @k_loop_two
// TCGEN05:         scf.for
// TCGEN05:           nvvm.tcgen05.st
// TCGEN05:           nvvm.tcgen05.mma
// TCGEN05:           nvvm.tcgen05.ld
// TCGEN05:           nvvm.tcgen05.st
// TCGEN05:           nvvm.tcgen05.mma
// TCGEN05:           nvvm.tcgen05.ld
// TCGEN05:           scf.yield
gpu.module @kernels {
  gpu.func @k_loop_two(%init: vector<16x2x2xf32>, %out: memref<16x2x2xf32>, %steps: index) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %r:2 = scf.for %k = %c0 to %steps step %c1 iter_args(%x = %init, %y = %init) -> (vector<16x2x2xf32>, vector<16x2x2xf32>) {
      %d = comfyquant.warpgroup_mma %a, %b, %x : f8E4M3FN x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
      %e = comfyquant.warpgroup_mma %a, %b, %y : f8E4M3FN x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
      scf.yield %d, %e : vector<16x2x2xf32>, vector<16x2x2xf32>
    }
    vector.store %r#0, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    vector.store %r#1, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    gpu.return
  }
}

// -----

// Two warpgroups (A of 128 rows, N = 256). mma.sync: warp w's A fragment
// is rows 16w.. (word 128w), so warps 4..7 read the second warpgroup's
// rows with no other change; 16 ldmatrix for B, 32 MMAs. wgmma: each
// warpgroup's A descriptor starts (tid / 128) * 512 words in, m64n256.
// tcgen05: 512 columns; thread 0 issues one M = 64 MMA per warpgroup, the
// second with A 512 words (2048 bytes: 128 in the descriptor's 16-byte
// units) further and D 256 columns further, then one commit; warp w
// reaches lane quarter w % 4 at column (w / 4) * 256.
// SYNC-LABEL: gpu.func @tile_s8_two_warpgroups
// SYNC:         arith.constant 128 : index
// SYNC-COUNT-17: ldmatrix.sync.aligned.m8n8.x4
// SYNC-NOT:     ldmatrix
// WGMMA-LABEL: gpu.func @tile_s8_two_warpgroups
// WGMMA:         %[[TID:.*]] = gpu.thread_id x
// WGMMA-NEXT:    %[[WGSIZE:.*]] = arith.constant 128 : index
// WGMMA-NEXT:    %[[Q:.*]] = arith.divui %[[TID]], %[[WGSIZE]]
// WGMMA-NEXT:    %[[ROWS:.*]] = arith.constant 512 : index
// WGMMA-NEXT:    %[[AT:.*]] = arith.muli %[[Q]], %[[ROWS]]
// WGMMA:         nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 32>
// WGMMA-COUNT-128: llvm.extractvalue
// TCGEN05-LABEL: gpu.func @tile_s8_two_warpgroups
// TCGEN05:         %[[COLS:.*]] = arith.constant 512 : i32
// TCGEN05:         nvvm.tcgen05.alloc %{{.*}}, %[[COLS]]
// TCGEN05:         arith.remui %{{.*}}, %c4
// TCGEN05:         arith.divui %{{.*}}, %c4
// TCGEN05:         arith.constant 256 : i32
// TCGEN05:         nvvm.tcgen05.st %{{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_16x256b>} : vector<128xi32>
// TCGEN05:         scf.if
// TCGEN05:           nvvm.tcgen05.mma
// TCGEN05:           arith.constant 256 : i32
// TCGEN05:           arith.constant 512 : index
// TCGEN05:           nvvm.tcgen05.mma
// TCGEN05-NEXT:      nvvm.tcgen05.commit
// TCGEN05-NOT:       nvvm.tcgen05.mma
// TCGEN05:         nvvm.tcgen05.ld %{{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_16x256b>} : vector<128xi32>
gpu.module @kernels {
  gpu.func @tile_s8_two_warpgroups(%acc: vector<32x2x2xi32>, %out: memref<32x2x2xi32>) workgroup(%a : memref<1024xi32, #gpu.address_space<workgroup>>, %b : memref<2048xi32, #gpu.address_space<workgroup>>) kernel {
    %d = comfyquant.warpgroup_mma %a, %b, %acc : i8 x i8 : memref<1024xi32, #gpu.address_space<workgroup>>, memref<2048xi32, #gpu.address_space<workgroup>> -> vector<32x2x2xi32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<32x2x2xi32>, vector<32x2x2xi32>
    gpu.return
  }
}

// -----

// bf16 x bf16 -> f32: mma.sync m16n8k16 as inline PTX (nvgpu.mma.sync
// cannot type bf16), 16 per warp; wgmma m64n128k16 with bf16 operands;
// tcgen05 kind::f16 with A and B format 1 (bf16) in the instruction
// descriptor (0x04200490: f32 D, N >> 3 = 16, M >> 4 = 4).
// SYNC-LABEL: gpu.func @tile_bf16
// SYNC-COUNT-16: nvvm.inline_ptx "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};"
// SYNC-NOT:     nvgpu.mma.sync
// WGMMA-LABEL: gpu.func @tile_bf16
// WGMMA:         nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// TCGEN05-LABEL: gpu.func @tile_bf16
// TCGEN05:         arith.constant 69207184 : i32
// TCGEN05:         nvvm.tcgen05.mma {{.*}} kind = #nvvm.tcgen05_mma_kind<f16>
gpu.module @kernels {
  gpu.func @tile_bf16(%acc: vector<16x2x2xf32>, %out: memref<16x2x2xf32>) workgroup(%a : memref<512xi32, #gpu.address_space<workgroup>>, %b : memref<1024xi32, #gpu.address_space<workgroup>>) kernel {
    %d = comfyquant.warpgroup_mma %a, %b, %acc : bf16 x bf16 : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<16x2x2xf32>, vector<16x2x2xf32>
    gpu.return
  }
}

// -----

// FP8 with two warpgroups (N = 256) on sm_90a: the products are promoted
// to the f32 accumulator every step, so the step runs as two m64n128
// wgmmas, B's second half 1024 words (128 rows) further, each waited for
// and added before the next is issued: 64 product registers beside the
// 128 of the accumulator, not 128.
// SYNC-LABEL: gpu.func @tile_e4m3_two_warpgroups
// sm_80/86 (no FP8 MMA): after a barrier, the block decodes A's 128 rows
// and B's 256 into two f16 tiles each (two new 128-byte aligned workgroup
// buffers: 2 x 128 x 8 and 2 x 256 x 8 words), each FP8 word by two byte
// permutes into two f16x2 words (e4m3: times 2^8), then two f16 steps of
// 32 m16n8k16 MMAs per warp.
// DECODE-LABEL: gpu.func @tile_e4m3_two_warpgroups
// DECODE-SAME:    %[[DA:[a-z0-9]+]] : memref<2048xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}, %[[DB:[a-z0-9]+]] : memref<4096xi32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64})
// DECODE:         gpu.barrier
// DECODE:         memref.load %arg2
// DECODE:         nvvm.prmt <default>
// DECODE:         arith.mulf %{{.*}}, %{{.*}} : vector<4xf16>
// DECODE:         memref.store %{{.*}}, %[[DA]]
// DECODE:         memref.load %arg3
// DECODE:         memref.store %{{.*}}, %[[DB]]
// DECODE:         gpu.barrier
// DECODE-COUNT-32: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// DECODE:         gpu.barrier
// DECODE-COUNT-32: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]}
// DECODE-NOT:     nvgpu.mma.sync
// DECODE-NOT:     comfyquant.mma_fp8
// WGMMA-LABEL: gpu.func @tile_e4m3_two_warpgroups
// WGMMA:         nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// WGMMA:         nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA-COUNT-16: arith.addf
// WGMMA:         arith.constant 1024 : index
// WGMMA:         nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>
// WGMMA:         nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA-COUNT-16: arith.addf
// WGMMA-NOT:     nvvm.wgmma.mma_async
gpu.module @kernels {
  gpu.func @tile_e4m3_two_warpgroups(%acc: vector<32x2x2xf32>, %out: memref<32x2x2xf32>) workgroup(%a : memref<1024xi32, #gpu.address_space<workgroup>>, %b : memref<2048xi32, #gpu.address_space<workgroup>>) kernel {
    %d = comfyquant.warpgroup_mma %a, %b, %acc : f8E4M3FN x f8E4M3FN : memref<1024xi32, #gpu.address_space<workgroup>>, memref<2048xi32, #gpu.address_space<workgroup>> -> vector<32x2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0, %c0] : memref<32x2x2xf32>, vector<32x2x2xf32>
    gpu.return
  }
}
