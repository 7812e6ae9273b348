// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy,comfyquant-gpu-tensor-core-gemm))' | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy,comfyquant-gpu-tensor-core-gemm),gpu-kernel-outlining,comfyquant-gpu-lower-device{arch=sm_80})' | FileCheck %s --check-prefix=PTX80
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy,comfyquant-gpu-tensor-core-gemm),gpu-kernel-outlining,comfyquant-gpu-lower-device{arch=sm_90a})' | FileCheck %s --check-prefix=PTX90
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy,comfyquant-gpu-tensor-core-gemm),gpu-kernel-outlining,comfyquant-gpu-lower-device{arch=sm_120a})' | FileCheck %s --check-prefix=PTX120

// C[m, n] += A[m, k] * B[n, k] in i8 -> i32: one warpgroup per 64 x 128
// tile of C. The block copies A's 64 rows and B's 128 rows of each K step
// of 32 (thread tid: word tid % 8 of rows tid / 8 + 16i, i one of 4 or
// 8 unrolled passes, zeros outside M, N, K) in two halves: the words of step 0 are
// fetched into registers before the K loop; each step stores the words
// fetched before it into the two workgroup tiles, fetches the next
// step's, then one warpgroup_mma and a barrier. sm_90a: one wgmma m64n128k32 per step behind a proxy fence;
// elsewhere 16 mma.sync m16n8k32 per warp reading fragments from the tiles.
// CHECK-LABEL: func.func @int8_gemm
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>]
// CHECK-DAG:     %[[M:.*]] = memref.dim %arg0, %c0
// CHECK-DAG:     %[[GX:.*]] = arith.ceildivui %c40, %c128
// CHECK-DAG:     %[[GY:.*]] = arith.ceildivui %[[M]], %c64
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %[[GX]], {{.*}} = %[[GY]], {{.*}}) threads({{.*}}) in ({{.*}} = %c128{{[_0-9]*}}, {{.*}}) workgroup(%[[TA:.*]] : memref<512xi32, #gpu.address_space<workgroup>>, %[[TB:.*]] : memref<1024xi32, #gpu.address_space<workgroup>>)
// CHECK:           %[[FA:.*]] = vector.from_elements %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK:           %[[FB:.*]] = vector.from_elements {{.*}} : vector<8xi32>
// CHECK:           scf.for %[[K:.*]] = %c0{{[_0-9]*}} to %c70 step %c32{{[_0-9]*}} iter_args(%[[ACC:[a-z0-9_]+]] = %{{[a-z0-9_]+}}, %[[RA:[a-z0-9_]+]] = %[[FA]], %[[RB:[a-z0-9_]+]] = %[[FB]]) -> (vector<16x2x2xi32>, vector<4xi32>, vector<8xi32>)
// CHECK:             %[[W0:.*]] = vector.extract %[[RA]][0] : i32 from vector<4xi32>
// CHECK:             memref.store %[[W0]], %[[TA]][%{{.*}}] : memref<512xi32, #gpu.address_space<workgroup>>
// CHECK:             %[[W3:.*]] = vector.extract %[[RA]][3] : i32 from vector<4xi32>
// CHECK:             %[[AT3:.*]] = arith.addi %{{.*}}, %c384
// CHECK-NEXT:        memref.store %[[W3]], %[[TA]][%[[AT3]]]
// CHECK:             vector.extract %[[RB]][7] : i32 from vector<8xi32>
// CHECK:             %[[BT7:.*]] = arith.addi %{{.*}}, %c896
// CHECK-NEXT:        memref.store %{{.*}}, %[[TB]][%[[BT7]]] : memref<1024xi32, #gpu.address_space<workgroup>>
// CHECK:             %[[KN:.*]] = arith.addi %[[K]], %c32
// CHECK:             arith.addi %[[KN]], %{{.*}}
// CHECK:             memref.load %arg0
// CHECK:             %[[ROWA3:.*]] = arith.addi %{{.*}}, %c48
// CHECK:             arith.cmpi ult, %[[ROWA3]]
// CHECK:             memref.load %arg0
// CHECK-NOT:         scf.for
// CHECK:             %[[NA:.*]] = vector.from_elements {{.*}} : vector<4xi32>
// CHECK:             memref.load %arg1
// CHECK:             %[[NB:.*]] = vector.from_elements {{.*}} : vector<8xi32>
// CHECK:             %[[D:.*]] = comfyquant.warpgroup_mma %[[TA]], %[[TB]], %[[ACC]] : i8 x i8 : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xi32>
// CHECK-NEXT:        gpu.barrier
// CHECK-NEXT:        scf.yield %[[D]], %[[NA]], %[[NB]]
// CHECK:           scf.if
// CHECK:             memref.store %{{.*}}, %arg2
// CHECK-NOT:     linalg.generic
// K = 70: rows are not 4-byte multiples apart, so no whole-word load.
// CHECK-NOT:     vector.load
// (The PTX is one escaped line of the gpu.binary.)
// PTX80:   .target sm_80
// PTX80-SAME: .shared .align 128 .b8 __wg_int8_gemm_kernel_0[2048];{{.*}}.shared .align 128 .b8 __wg_int8_gemm_kernel_1[4096];
// (LLVM lays the K loop out from its barrier: MMAs, barrier, tile stores.)
// PTX80-SAME: bar.sync
// PTX80-SAME: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX80-COUNT-16: mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32
// PTX80-SAME: bar.sync
// PTX80-SAME: st.shared.b32
// PTX80-NOT: mma.sync
// PTX90:   .target sm_90a
// PTX90-SAME: .shared .align 128 .b8 __wg_int8_gemm_kernel_0[2048];{{.*}}.shared .align 128 .b8 __wg_int8_gemm_kernel_1[4096];
// PTX90-SAME: fence.proxy.async.shared::cta;\0A\09bar.sync \090;\0A\09wgmma.fence.sync.aligned;
// PTX90-SAME: wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8.satfinite
// PTX90-SAME: wgmma.commit_group.sync.aligned;\0A\09wgmma.wait_group.sync.aligned \090;\0A\09bar.sync
// PTX90-SAME: st.shared.b32
// PTX90-NOT: mma.sync
// PTX120:  .target sm_120a
// PTX120-COUNT-16: mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32
// PTX120-NOT: wgmma
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @int8_gemm(%a: memref<?x70xi8>, %b: memref<40x70xi8>, %c: memref<?x40xi32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x70xi8>, memref<40x70xi8>) outs(%c : memref<?x40xi32>) {
  ^bb0(%x: i8, %w: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %w : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  return
}

// -----

// FP8 codes stored as i8 and widened in the body (the contraction
// convert-comfyquant-to-linalg{gemm-operands=native} builds): the same
// 8-bit tiles, warpgroup_mma on FP8 types with f32 accumulators; per arch:
// wgmma e4m3 x e5m2 on sm_90a, FP8 mma.sync on the other sm_89+, two f16
// m16n8k16 per fragment on sm_80/sm_86.
// CHECK-LABEL: func.func @fp8_gemm
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<fp8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>]
// CHECK:         gpu.launch
// CHECK:           scf.for %{{.*}} = %c0{{[_0-9]*}} to %c64 step %c32{{[_0-9]*}} iter_args(
// CHECK:             comfyquant.warpgroup_mma %{{.*}}, %{{.*}}, %{{.*}} : f8E4M3FN x f8E5M2 : {{.*}} -> vector<16x2x2xf32>
// CHECK-NOT:     linalg.generic
// PTX80:   .target sm_80
// PTX80-COUNT-32: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX80-NOT:     e4m3
// PTX90:   .target sm_90a
// PTX90:   wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2
// PTX120:  .target sm_120a
// PTX120-COUNT-16: mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @fp8_gemm(%a: memref<?x64xi8>, %b: memref<24x64xi8>, %c: memref<?x24xf32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x64xi8>, memref<24x64xi8>) outs(%c : memref<?x24xf32>) {
  ^bb0(%x: i8, %w: i8, %acc: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.extf %0 : f8E4M3FN to f32
    %2 = arith.bitcast %w : i8 to f8E5M2
    %3 = arith.extf %2 : f8E5M2 to f32
    %4 = arith.mulf %1, %3 : f32
    %5 = arith.addf %acc, %4 : f32
    linalg.yield %5 : f32
  }
  return
}

// -----

// Block-scaled FP8 (MXFP8, scale blocks of 32 = one K step): each step's
// product starts from zero (no accumulator operand; wgmma with scale-d 0),
// and every partial sum is multiplied by the body's scale factor for its
// row's and column's scales of that block (loaded at k / 32, indices
// clamped) before it is added to the accumulator.
// CHECK-LABEL: func.func @mxfp8_gemm
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<fp8_block_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>]
// CHECK:         scf.for %[[K:.*]] = %c0{{[_0-9]*}} to %c64 step %c32{{[_0-9]*}} iter_args(%[[ACC:[a-z0-9_]+]] = %{{[a-z0-9_]+}},
// CHECK:           %[[PART:.*]] = comfyquant.warpgroup_mma %{{[^,]*}}, %{{[^,]*}} : f8E4M3FN x f8E4M3FN
// CHECK:           %[[KB:.*]] = arith.divui %[[K]], %c32
// CHECK:           %[[SA:.*]] = memref.load %arg2[%{{.*}}, %{{.*}}] : memref<?x2xi8>
// CHECK:           %[[SB:.*]] = memref.load %arg3[%{{.*}}, %{{.*}}] : memref<24x2xi8>
// CHECK:           %[[FA:.*]] = arith.uitofp %[[SA]]
// CHECK:           %[[FB:.*]] = arith.uitofp %[[SB]]
// CHECK:           %[[S:.*]] = arith.mulf %[[FA]], %[[FB]] : f32
// CHECK:           %[[P:.*]] = vector.extract %[[PART]][0, 0, 0]
// CHECK:           %[[O:.*]] = vector.extract %[[ACC]][0, 0, 0]
// CHECK:           %[[T:.*]] = arith.mulf %[[P]], %[[S]] : f32
// CHECK:           arith.addf %[[O]], %[[T]] : f32
// CHECK-NOT:     linalg.generic
// PTX80:   .target sm_80
// PTX80-COUNT-32: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX90:   .target sm_90a
// PTX90-SAME: setp.ne.b32 p, 0, 0;\0Awgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// PTX120:  .target sm_120a
// PTX120-COUNT-16: mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_sa = affine_map<(m, n, k) -> (m, k floordiv 32)>
#map_sb = affine_map<(m, n, k) -> (n, k floordiv 32)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @mxfp8_gemm(%a: memref<?x64xi8>, %b: memref<24x64xi8>, %sa: memref<?x2xi8>, %sb: memref<24x2xi8>, %c: memref<?x24xf32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_sa, #map_sb, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b, %sa, %sb : memref<?x64xi8>, memref<24x64xi8>, memref<?x2xi8>, memref<24x2xi8>) outs(%c : memref<?x24xf32>) {
  ^bb0(%x: i8, %w: i8, %xs: i8, %ws: i8, %acc: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.extf %0 : f8E4M3FN to f32
    %2 = arith.bitcast %w : i8 to f8E4M3FN
    %3 = arith.extf %2 : f8E4M3FN to f32
    %4 = arith.mulf %1, %3 : f32
    %5 = arith.uitofp %xs : i8 to f32
    %6 = arith.uitofp %ws : i8 to f32
    %7 = arith.mulf %5, %6 : f32
    %8 = arith.mulf %4, %7 : f32
    %9 = arith.addf %acc, %8 : f32
    linalg.yield %9 : f32
  }
  return
}

// -----

// MXFP8 as the conversion builds it: the scale factor is the product of
// two UE8M0 decodes (2^(s - 127), 2^-127 for 0, NaN for 0xFF), checked by
// evaluating each decode for all 256 codes. The raw scale bytes of the K
// step go to two more workgroup tiles (127, a factor of 1, outside the
// operands) and reach warpgroup_mma, which takes the block-scaled MMA on
// sm_120a and rescales the step's partial sums elsewhere.
// CHECK-LABEL: func.func @mxfp8_ue8m0
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<fp8_ue8m0_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>]
// CHECK:         gpu.launch {{.*}} workgroup(%[[TA:.*]] : memref<512xi32, #gpu.address_space<workgroup>>, %[[TB:.*]] : memref<1024xi32, #gpu.address_space<workgroup>>, %[[SA:.*]] : memref<64xi8, #gpu.address_space<workgroup>>, %[[SB:.*]] : memref<128xi8, #gpu.address_space<workgroup>>, %[[TA1:.*]] : memref<512xi32, #gpu.address_space<workgroup>>, %[[TB1:.*]] : memref<1024xi32, #gpu.address_space<workgroup>>)
// K = 64 (rows 64 bytes apart) and operands read as stored: both are
// copied in 16-byte chunks (chunk tid % 2 of rows tid / 2 + 64i). When both
// first elements are 16-byte aligned (checked once) the K loop is the
// two-stage cp.async pipeline: the first step's chunks go to stage 0 before
// the loop; each iteration runs two steps, each issuing the next step's
// cp.async (zero-filled outside the operands) into the other stage,
// waiting for its own group, staging its scales and multiplying; an odd
// last step runs after the loop. Otherwise the register-staged loop: one
// aligned 16-byte load per chunk inside the operand, element loads for a
// misaligned one, zeros outside.
// CHECK:           %[[PA:.*]] = memref.extract_aligned_pointer_as_index %arg0 : memref<?x64xi8> -> index
// CHECK:           %[[LOWA:.*]] = arith.remui %[[PA]], %c16
// CHECK:           %[[ALA:.*]] = arith.cmpi eq, %[[LOWA]], %c0
// CHECK:           %[[PB:.*]] = memref.extract_aligned_pointer_as_index %arg1 : memref<24x64xi8> -> index
// CHECK:           %[[LOWB:.*]] = arith.remui %[[PB]], %c16
// CHECK:           %[[ALB:.*]] = arith.cmpi eq, %[[LOWB]], %c0
// CHECK:           %[[BOTH:.*]] = arith.andi %[[ALA]], %[[ALB]] : i1
// CHECK-NEXT:      scf.if %[[BOTH]] -> (vector<16x2x2xf32>) {
// CHECK-COUNT-3:     nvvm.inline_ptx "cp.async.cg.shared.global [$0], [$1], 16, $2;"
// CHECK:             nvvm.cp.async.commit.group
// CHECK:             scf.for %[[K:.*]] = %c0{{[_0-9]*}} to %{{.*}} step %c64{{[_0-9]*}} iter_args(%[[ACC:[a-z0-9_]+]] = %{{[a-z0-9_]+}})
// CHECK:               memref.extract_aligned_pointer_as_index %[[TA1]]
// CHECK:               nvvm.inline_ptx "cp.async.cg.shared.global
// CHECK:               nvvm.cp.async.commit.group
// CHECK-NEXT:          nvvm.cp.async.wait.group 1
// CHECK:               %[[C127:.*]] = arith.constant 127 : i8
// CHECK:               memref.load %arg2[%{{.*}}, %{{.*}}] : memref<?x2xi8>
// CHECK:               } else {
// CHECK-NEXT:            scf.yield %[[C127]] : i8
// CHECK:               memref.store %{{.*}}, %[[SA]][%{{.*}}] : memref<64xi8, #gpu.address_space<workgroup>>
// CHECK:               memref.load %arg3[%{{.*}}, %{{.*}}] : memref<24x2xi8>
// CHECK:               memref.store %{{.*}}, %[[SB]][%{{.*}}] : memref<128xi8, #gpu.address_space<workgroup>>
// CHECK:               %[[D:.*]] = comfyquant.warpgroup_mma %[[TA]], %[[TB]], %[[ACC]] scales(%[[SA]], %[[SB]] : memref<64xi8, #gpu.address_space<workgroup>>, memref<128xi8, #gpu.address_space<workgroup>>) : f8E4M3FN x f8E5M2
// CHECK-NEXT:          gpu.barrier
// CHECK:               memref.extract_aligned_pointer_as_index %[[TA]]
// CHECK:               nvvm.cp.async.wait.group 1
// CHECK:               %[[D1:.*]] = comfyquant.warpgroup_mma %[[TA1]], %[[TB1]], %[[D]]
// CHECK-NEXT:          gpu.barrier
// CHECK-NEXT:          scf.yield %[[D1]]
// CHECK:             scf.if
// CHECK:               comfyquant.warpgroup_mma %[[TA]], %[[TB]]
// CHECK:             nvvm.cp.async.wait.group 0
// CHECK:           } else {
// CHECK:             scf.if %{{.*}} -> (vector<4xi32>) {
// CHECK-NEXT:          scf.if %[[ALA]] -> (vector<4xi32>) {
// CHECK-NEXT:            vector.load %arg0[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x64xi8>, vector<16xi8>
// CHECK:               } else {
// CHECK-COUNT-16:        memref.load %arg0
// CHECK:             scf.for %{{.*}} iter_args(%{{.*}}, %[[CA:[a-z0-9_]+]] = %{{[a-z0-9_]+}}, %[[CB0:[a-z0-9_]+]] = %{{[a-z0-9_]+}}, %[[CB1:[a-z0-9_]+]] = %{{[a-z0-9_]+}})
// CHECK-NEXT:          vector.store %[[CA]], %[[TA]][%{{.*}}] {alignment = 16 : i64} : memref<512xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK-NEXT:          vector.store %[[CB0]], %[[TB]][%{{.*}}] {alignment = 16 : i64}
// CHECK:               vector.store %[[CB1]], %[[TB]][%{{.*}}] {alignment = 16 : i64}
// CHECK:               comfyquant.warpgroup_mma %[[TA]], %[[TB]]
// PTX80:   .target sm_80
// PTX80-COUNT-32: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX90:   .target sm_90a
// PTX90-SAME: setp.ne.b32 p, 0, 0;\0Awgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2
// PTX90-SAME: wgmma.wait_group.sync.aligned
// PTX120:  .target sm_120a
// PTX120-COUNT-16: mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e5m2.f32.ue8m0
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_sa = affine_map<(m, n, k) -> (m, k floordiv 32)>
#map_sb = affine_map<(m, n, k) -> (n, k floordiv 32)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @mxfp8_ue8m0(%a: memref<?x64xi8>, %b: memref<24x64xi8>, %sa: memref<?x2xi8>, %sb: memref<24x2xi8>, %c: memref<?x24xf32>) {
  %c0 = arith.constant 0 : i32
  %c23 = arith.constant 23 : i32
  %c255 = arith.constant 255 : i32
  %sub = arith.constant 4194304 : i32
  %nan = arith.constant 2143289344 : i32
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_sa, #map_sb, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b, %sa, %sb : memref<?x64xi8>, memref<24x64xi8>, memref<?x2xi8>, memref<24x2xi8>) outs(%c : memref<?x24xf32>) {
  ^bb0(%x: i8, %w: i8, %xs: i8, %ws: i8, %acc: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.extf %0 : f8E4M3FN to f32
    %2 = arith.bitcast %w : i8 to f8E5M2
    %3 = arith.extf %2 : f8E5M2 to f32
    %4 = arith.mulf %1, %3 : f32
    %5 = arith.extui %xs : i8 to i32
    %6 = arith.shli %5, %c23 : i32
    %7 = arith.cmpi eq, %5, %c0 : i32
    %8 = arith.select %7, %sub, %6 : i32
    %9 = arith.cmpi eq, %5, %c255 : i32
    %10 = arith.select %9, %nan, %8 : i32
    %11 = arith.bitcast %10 : i32 to f32
    %12 = arith.extui %ws : i8 to i32
    %13 = arith.shli %12, %c23 : i32
    %14 = arith.cmpi eq, %12, %c0 : i32
    %15 = arith.select %14, %sub, %13 : i32
    %16 = arith.cmpi eq, %12, %c255 : i32
    %17 = arith.select %16, %nan, %15 : i32
    %18 = arith.bitcast %17 : i32 to f32
    %19 = arith.mulf %11, %18 : f32
    %20 = arith.mulf %4, %19 : f32
    %21 = arith.addf %acc, %20 : f32
    linalg.yield %21 : f32
  }
  return
}

// -----

// Almost UE8M0: code 0xFF decodes to +inf, not NaN. The scale stays the
// body's own, applied in f32 at formation (no scale tiles, no
// block-scaled MMA).
// CHECK-LABEL: func.func @mxfp8_not_ue8m0
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<fp8_block_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>]
// CHECK-NOT:     memref<64xi8, #gpu.address_space<workgroup>>
// CHECK:         comfyquant.warpgroup_mma %{{[^,]*}}, %{{[^,]*}} : f8E4M3FN x f8E4M3FN
// PTX80:   .target sm_80
// PTX80-COUNT-32: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX90:   .target sm_90a
// PTX90-SAME: wgmma.wait_group.sync.aligned
// PTX120:  .target sm_120a
// PTX120-NOT: block_scale
// PTX120-COUNT-16: mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_sa = affine_map<(m, n, k) -> (m, k floordiv 32)>
#map_sb = affine_map<(m, n, k) -> (n, k floordiv 32)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @mxfp8_not_ue8m0(%a: memref<?x64xi8>, %b: memref<24x64xi8>, %sa: memref<?x2xi8>, %sb: memref<24x2xi8>, %c: memref<?x24xf32>) {
  %c0 = arith.constant 0 : i32
  %c23 = arith.constant 23 : i32
  %sub = arith.constant 4194304 : i32
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_sa, #map_sb, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b, %sa, %sb : memref<?x64xi8>, memref<24x64xi8>, memref<?x2xi8>, memref<24x2xi8>) outs(%c : memref<?x24xf32>) {
  ^bb0(%x: i8, %w: i8, %xs: i8, %ws: i8, %acc: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.extf %0 : f8E4M3FN to f32
    %2 = arith.bitcast %w : i8 to f8E4M3FN
    %3 = arith.extf %2 : f8E4M3FN to f32
    %4 = arith.mulf %1, %3 : f32
    %5 = arith.extui %xs : i8 to i32
    %6 = arith.shli %5, %c23 : i32
    %7 = arith.cmpi eq, %5, %c0 : i32
    %8 = arith.select %7, %sub, %6 : i32
    %11 = arith.bitcast %8 : i32 to f32
    %12 = arith.extui %ws : i8 to i32
    %13 = arith.shli %12, %c23 : i32
    %14 = arith.cmpi eq, %12, %c0 : i32
    %15 = arith.select %14, %sub, %13 : i32
    %18 = arith.bitcast %15 : i32 to f32
    %19 = arith.mulf %11, %18 : f32
    %20 = arith.mulf %4, %19 : f32
    %21 = arith.addf %acc, %20 : f32
    linalg.yield %21 : f32
  }
  return
}

// -----

// UE8M0-like decodes of i32 scale storage: the scales are not bytes, so
// they are never staged as bytes nor given to a block-scaled MMA; the
// body's factor is applied at formation.
// CHECK-LABEL: func.func @mxfp8_i32_scales
// CHECK-SAME:    #comfyquant.gpu_gemm<fp8_block_scaled
// PTX80:   .target sm_80
// PTX80-COUNT-32: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX90:   .target sm_90a
// PTX90-SAME: wgmma.wait_group.sync.aligned
// PTX120:  .target sm_120a
// PTX120-COUNT-16: mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_sa = affine_map<(m, n, k) -> (m, k floordiv 32)>
#map_sb = affine_map<(m, n, k) -> (n, k floordiv 32)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @mxfp8_i32_scales(%a: memref<?x64xi8>, %b: memref<24x64xi8>, %sa: memref<?x2xi32>, %sb: memref<24x2xi32>, %c: memref<?x24xf32>) {
  %c23 = arith.constant 23 : i32
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_sa, #map_sb, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b, %sa, %sb : memref<?x64xi8>, memref<24x64xi8>, memref<?x2xi32>, memref<24x2xi32>) outs(%c : memref<?x24xf32>) {
  ^bb0(%x: i8, %w: i8, %xs: i32, %ws: i32, %acc: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.extf %0 : f8E4M3FN to f32
    %2 = arith.bitcast %w : i8 to f8E4M3FN
    %3 = arith.extf %2 : f8E4M3FN to f32
    %4 = arith.mulf %1, %3 : f32
    %6 = arith.shli %xs, %c23 : i32
    %11 = arith.bitcast %6 : i32 to f32
    %13 = arith.shli %ws, %c23 : i32
    %18 = arith.bitcast %13 : i32 to f32
    %19 = arith.mulf %11, %18 : f32
    %20 = arith.mulf %4, %19 : f32
    %21 = arith.addf %acc, %20 : f32
    linalg.yield %21 : f32
  }
  return
}

// -----

// A scale that reads the accumulator is not a block scale.
// CHECK-LABEL: func.func @not_block_scale
// CHECK-NOT:     comfyquant.gemms
// CHECK:         linalg.generic
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_sa = affine_map<(m, n, k) -> (m, k floordiv 32)>
#map_sb = affine_map<(m, n, k) -> (n, k floordiv 32)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @not_block_scale(%a: memref<?x64xi8>, %b: memref<24x64xi8>, %sa: memref<?x2xi8>, %sb: memref<24x2xi8>, %c: memref<?x24xf32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_sa, #map_sb, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b, %sa, %sb : memref<?x64xi8>, memref<24x64xi8>, memref<?x2xi8>, memref<24x2xi8>) outs(%c : memref<?x24xf32>) {
  ^bb0(%x: i8, %w: i8, %xs: i8, %ws: i8, %acc: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.extf %0 : f8E4M3FN to f32
    %2 = arith.bitcast %w : i8 to f8E4M3FN
    %3 = arith.extf %2 : f8E4M3FN to f32
    %4 = arith.mulf %1, %3 : f32
    %5 = arith.uitofp %xs : i8 to f32
    %7 = arith.mulf %5, %acc : f32
    %8 = arith.mulf %4, %7 : f32
    %9 = arith.addf %acc, %8 : f32
    linalg.yield %9 : f32
  }
  return
}

// -----

// f16 operands (NVFP4 decoded exactly): K steps of 16 elements (the same
// 32 bytes per row), m16n8k16 or wgmma m64n128k16.
// CHECK-LABEL: func.func @f16_gemm
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<f16, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>]
// CHECK:           scf.for %{{.*}} = %c0{{[_0-9]*}} to %c48 step %c16{{[_0-9]*}} iter_args(
// CHECK:             vector.store %{{.*}} : memref<512xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK:             comfyquant.warpgroup_mma %{{.*}} : f16 x f16 : {{.*}} -> vector<16x2x2xf32>
// PTX80:   .target sm_80
// PTX80-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX90:   .target sm_90a
// PTX90:   wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// PTX90-SAME: wgmma.wait_group.sync.aligned
// PTX120:  .target sm_120a
// PTX120-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @f16_gemm(%a: memref<?x48xf16>, %b: memref<8x48xf16>, %c: memref<?x8xf32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x48xf16>, memref<8x48xf16>) outs(%c : memref<?x8xf32>) {
  ^bb0(%x: f16, %w: f16, %acc: f32):
    %0 = arith.extf %x : f16 to f32
    %1 = arith.extf %w : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %acc, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// -----

// f32 operands (not rounded) and bf16 ones (MLIR 22 cannot lower a bf16
// mma.sync) are not this kernel family's.
// CHECK-LABEL: func.func @float_gemm
// CHECK-NOT:     comfyquant.gemms
// CHECK:         linalg.generic
// PTX80:         func.func @float_gemm
// PTX80-NOT:     mma.sync
// PTX90:         func.func @float_gemm
// PTX90-NOT:     wgmma
// PTX120:        func.func @float_gemm
// PTX120-NOT:    mma.sync
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @float_gemm(%a: memref<?x8xf32>, %b: memref<4x8xf32>, %c: memref<?x4xf32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x8xf32>, memref<4x8xf32>) outs(%c : memref<?x4xf32>) {
  ^bb0(%x: f32, %w: f32, %acc: f32):
    %0 = arith.mulf %x, %w : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// bf16 x bf16 -> f32 (the full-precision GEMMs of bf16 activations) on
// tensor cores: the bf16 mma.sync as inline PTX (MLIR 22's nvgpu-to-nvvm
// cannot type it), wgmma with bf16 operands on sm_90a. K = 8 is 16 bytes:
// both operands chunkable, two stages.
// CHECK-LABEL: func.func @bf16_gemm
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<bf16, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>]
// CHECK:         comfyquant.warpgroup_mma {{.*}} : bf16 x bf16
// CHECK-NOT:     linalg.generic
// PTX80:         func.func @bf16_gemm
// PTX80:         mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX80:         func.func @int8_gemm_fused
// PTX90:         func.func @bf16_gemm
// PTX90:         wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PTX90:         func.func @int8_gemm_fused
// PTX120:        func.func @bf16_gemm
// PTX120:        mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX120:        func.func @int8_gemm_fused
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @bf16_gemm(%a: memref<?x8xbf16>, %b: memref<4x8xbf16>, %c: memref<?x4xf32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x8xbf16>, memref<4x8xbf16>) outs(%c : memref<?x4xf32>) {
  ^bb0(%x: bf16, %w: bf16, %acc: f32):
    %0 = arith.extf %x : bf16 to f32
    %1 = arith.extf %w : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %acc, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// -----

// A temporary accumulator with a zero fill before the GEMM and an
// elementwise consumer after it (the INT8 epilogue: row scale x column
// scale, cast to bf16): one kernel. The accumulators start at zero, the
// epilogue is evaluated per accumulator element in registers and stored to
// its output; the fill, the consumer and the temporary are gone. The row
// scale is read once per thread row (clamped into M), the column scale
// once per block into the free B tile (a barrier before and after), then
// from there per element.
// CHECK-LABEL: func.func @int8_gemm_fused
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>]
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     linalg.fill
// CHECK:         gpu.launch
// CHECK-SAME:      workgroup(%{{[a-z0-9_]+}} : memref<512xi32, #gpu.address_space<workgroup>>, %[[TB:[a-z0-9_]+]] : memref<1024xi32, #gpu.address_space<workgroup>>
// CHECK:           %[[ZERO:.*]] = arith.constant dense<0> : vector<16x2x2xi32>
// CHECK:           scf.for {{.*}} iter_args(%{{[a-z0-9_]+}} = %[[ZERO]],
// CHECK:             comfyquant.warpgroup_mma
// CHECK:           %[[RS0:.*]] = memref.load %arg2[
// CHECK:           %[[RS1:.*]] = memref.load %arg2[
// CHECK:           gpu.barrier
// CHECK:           %[[CSV:.*]] = memref.load %arg3[
// CHECK:           %[[CSW:.*]] = arith.bitcast %[[CSV]] : f32 to i32
// CHECK:           memref.store %[[CSW]], %[[TB]][
// CHECK-NEXT:      gpu.barrier
// CHECK:           scf.if
// CHECK-NEXT:        %[[ACC:.*]] = vector.extract
// CHECK-NEXT:        %[[CSR:.*]] = memref.load %[[TB]][
// CHECK-NEXT:        %[[CS:.*]] = arith.bitcast %[[CSR]] : i32 to f32
// CHECK-NEXT:        %[[F:.*]] = arith.sitofp %[[ACC]] : i32 to f32
// CHECK-NEXT:        %[[X:.*]] = arith.mulf %[[F]], %[[RS0]] : f32
// CHECK-NEXT:        %[[Y:.*]] = arith.mulf %[[X]], %[[CS]] : f32
// CHECK-NEXT:        %[[O:.*]] = arith.truncf %[[Y]] : f32 to bf16
// CHECK-NEXT:        memref.store %[[O]], %arg4[
// CHECK-NOT:     gpu.launch
// CHECK-NOT:     linalg.generic
// CHECK:         return
// PTX80:   .target sm_80
// PTX80-COUNT-16: mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32
// PTX80:   cvt.rn.bf16.f32
// PTX90:   .target sm_90a
// PTX90:   wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8.satfinite
// PTX90:   cvt.rn.bf16.f32
// PTX120:  .target sm_120a
// PTX120-COUNT-16: mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m, 0)>
#col = affine_map<(m, n) -> (n, 0)>
func.func @int8_gemm_fused(%a: memref<?x64xi8>, %b: memref<40x64xi8>, %rs: memref<?x1xf32>, %cs: memref<40x1xf32>, %y: memref<?x40xbf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %m = memref.dim %a, %c0 : memref<?x64xi8>
  %acc = memref.alloc(%m) : memref<?x40xi32>
  linalg.fill ins(%zero : i32) outs(%acc : memref<?x40xi32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x64xi8>, memref<40x64xi8>) outs(%acc : memref<?x40xi32>) {
  ^bb0(%x: i8, %w: i8, %o: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %w : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %o, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%acc, %rs, %cs : memref<?x40xi32>, memref<?x1xf32>, memref<40x1xf32>) outs(%y : memref<?x40xbf16>) {
  ^bb0(%s: i32, %r: f32, %c: f32, %o: bf16):
    %0 = arith.sitofp %s : i32 to f32
    %1 = arith.mulf %0, %r : f32
    %2 = arith.mulf %1, %c : f32
    %3 = arith.truncf %2 : f32 to bf16
    linalg.yield %3 : bf16
  }
  return
}

// -----

// A fill that is not zero stays, and the kernel reads it as the
// accumulators' start; the consumer is still absorbed (C is only read by
// the GEMM, so its stores can go).
// CHECK-LABEL: func.func @nonzero_fill
// CHECK:         %[[ACC:.*]] = memref.alloc
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%[[ACC]]
// CHECK:         gpu.launch
// CHECK:           memref.load %[[ACC]][
// CHECK:           scf.for
// CHECK:             comfyquant.warpgroup_mma
// CHECK:           arith.truncf {{.*}} : f32 to f16
// CHECK-NOT:       memref.store %{{.*}}, %[[ACC]]
// CHECK-NOT:     linalg.generic
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @nonzero_fill(%a: memref<?x32xi8>, %b: memref<8x32xi8>, %y: memref<?x8xf16>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %m = memref.dim %a, %c0 : memref<?x32xi8>
  %acc = memref.alloc(%m) : memref<?x8xf32>
  linalg.fill ins(%one : f32) outs(%acc : memref<?x8xf32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x32xi8>, memref<8x32xi8>) outs(%acc : memref<?x8xf32>) {
  ^bb0(%x: i8, %w: i8, %o: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.bitcast %w : i8 to f8E4M3FN
    %2 = arith.extf %0 : f8E4M3FN to f32
    %3 = arith.extf %1 : f8E4M3FN to f32
    %4 = arith.mulf %2, %3 : f32
    %5 = arith.addf %o, %4 : f32
    linalg.yield %5 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%acc : memref<?x8xf32>) outs(%y : memref<?x8xf16>) {
  ^bb0(%s: f32, %o: f16):
    %0 = arith.truncf %s : f32 to f16
    linalg.yield %0 : f16
  }
  return
}

// -----

// The FP8 form with a per-tensor weight scale: its load sits between the
// GEMM and the consumer; a read of another buffer moves above the kernel,
// and the consumer (scale, bias, cast) is absorbed.
// CHECK-LABEL: func.func @fp8_scale_between
// CHECK:         %[[S:.*]] = memref.load %arg2[] : memref<f32>
// CHECK-NOT:     memref.alloc
// CHECK:         gpu.launch
// CHECK:           comfyquant.warpgroup_mma
// CHECK:           scf.if %{{[0-9a-z_]+}} {
// CHECK-NEXT:        %[[V:.*]] = vector.extract
// CHECK:             %[[BW:.*]] = memref.load %{{.*}} : memref<1024xi32, #gpu.address_space<workgroup>>
// CHECK-NEXT:        %[[B:.*]] = arith.bitcast %[[BW]] : i32 to f32
// CHECK-NEXT:        %[[X:.*]] = arith.mulf %[[V]], %[[S]] : f32
// CHECK-NEXT:        %[[Y:.*]] = arith.addf %[[X]], %[[B]] : f32
// CHECK-NEXT:        %[[O:.*]] = arith.truncf %[[Y]] : f32 to bf16
// CHECK-NEXT:        memref.store %[[O]], %arg4[
// CHECK-NOT:     linalg.generic
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#bias = affine_map<(m, n) -> (n)>
func.func @fp8_scale_between(%a: memref<?x32xi8>, %b: memref<8x32xi8>, %scale: memref<f32>, %bias: memref<8xf32>, %y: memref<?x8xbf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = memref.dim %a, %c0 : memref<?x32xi8>
  %acc = memref.alloc(%m) : memref<?x8xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<?x8xf32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x32xi8>, memref<8x32xi8>) outs(%acc : memref<?x8xf32>) {
  ^bb0(%x: i8, %w: i8, %o: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.bitcast %w : i8 to f8E4M3FN
    %2 = arith.extf %0 : f8E4M3FN to f32
    %3 = arith.extf %1 : f8E4M3FN to f32
    %4 = arith.mulf %2, %3 : f32
    %5 = arith.addf %o, %4 : f32
    linalg.yield %5 : f32
  }
  %s = memref.load %scale[] : memref<f32>
  linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel"]} ins(%acc, %bias : memref<?x8xf32>, memref<8xf32>) outs(%y : memref<?x8xbf16>) {
  ^bb0(%v: f32, %bv: f32, %o: bf16):
    %0 = arith.mulf %v, %s : f32
    %1 = arith.addf %0, %bv : f32
    %2 = arith.truncf %1 : f32 to bf16
    linalg.yield %2 : bf16
  }
  return
}

// -----

// Not absorbed: a memory op between the GEMM and the consumer (which could
// change what the consumer reads), and an accumulator that is an argument
// (its contents are observable after the call). The zero fill of the
// temporary still becomes zero registers.
// CHECK-LABEL: func.func @store_between
// CHECK:         %[[ACC:.*]] = memref.alloc
// CHECK-NOT:     linalg.fill
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %[[ACC]][
// CHECK:           gpu.terminator
// CHECK-NEXT:    }
// CHECK-NEXT:    memref.store %{{.*}}, %arg3[
// CHECK-NEXT:    linalg.generic
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @store_between(%a: memref<?x32xi8>, %b: memref<8x32xi8>, %y: memref<?x8xf32>, %flag: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %f = arith.constant 2.0 : f32
  %m = memref.dim %a, %c0 : memref<?x32xi8>
  %acc = memref.alloc(%m) : memref<?x8xi32>
  linalg.fill ins(%zero : i32) outs(%acc : memref<?x8xi32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x32xi8>, memref<8x32xi8>) outs(%acc : memref<?x8xi32>) {
  ^bb0(%x: i8, %w: i8, %o: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %w : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %o, %2 : i32
    linalg.yield %3 : i32
  }
  memref.store %f, %flag[%c0] : memref<1xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%acc : memref<?x8xi32>) outs(%y : memref<?x8xf32>) {
  ^bb0(%s: i32, %o: f32):
    %0 = arith.sitofp %s : i32 to f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// CHECK-LABEL: func.func @accumulator_argument
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %arg2[
// CHECK:         linalg.generic
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @accumulator_argument(%a: memref<?x32xi8>, %b: memref<8x32xi8>, %acc: memref<?x8xi32>, %y: memref<?x8xf32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x32xi8>, memref<8x32xi8>) outs(%acc : memref<?x8xi32>) {
  ^bb0(%x: i8, %w: i8, %o: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %w : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %o, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%acc : memref<?x8xi32>) outs(%y : memref<?x8xf32>) {
  ^bb0(%s: i32, %o: f32):
    %0 = arith.sitofp %s : i32 to f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// Not absorbed: the consumer's output is a view of the GEMM's A operand
// (the kernel would write it while other blocks still read A).
// CHECK-LABEL: func.func @output_aliases_operand
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %{{.*}}[
// CHECK:         linalg.generic
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @output_aliases_operand(%a: memref<4x32xi8>, %b: memref<8x32xi8>) {
  %zero = arith.constant 0 : i32
  %acc = memref.alloc() : memref<4x8xi32>
  linalg.fill ins(%zero : i32) outs(%acc : memref<4x8xi32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<4x32xi8>, memref<8x32xi8>) outs(%acc : memref<4x8xi32>) {
  ^bb0(%x: i8, %w: i8, %o: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %w : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %o, %2 : i32
    linalg.yield %3 : i32
  }
  %view = memref.subview %a[0, 0] [4, 8] [1, 1] : memref<4x32xi8> to memref<4x8xi8, strided<[32, 1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%acc : memref<4x8xi32>) outs(%view : memref<4x8xi8, strided<[32, 1]>>) {
  ^bb0(%s: i32, %o: i8):
    %0 = arith.trunci %s : i32 to i8
    linalg.yield %0 : i8
  }
  return
}

// -----

// NVFP4 as the conversion builds it: E2M1 codes one per byte, decoded in
// the body (recognized by evaluating the decode at every code), times the
// product of two E4M3 block scales per 16 codes. A K step is 64 codes:
// each copied word packs 8 codes as nibbles (the low nibble first), its
// block's scale sign moved onto the codes (xor 0x88888888). The two words
// of a block are adjacent lanes: the even one loads the scale byte and both
// take it from that lane by a shuffle; it travels with the words and is
// stored with them, without its sign, into the step's byte tiles of four
// scales per row and column (0x38, a factor of 1, outside the operands), so
// each scale byte is read once. Per arch: the block-scaled
// mma.sync m16n8k64 kind::mxf4nvf4 on sm_120a; elsewhere the tiles are
// decoded to f16 in workgroup memory and take a loop of four f16 steps
// (wgmma m64n128k16 on sm_90a, 16 mma.sync m16n8k16 per warp otherwise).
// CHECK-LABEL: func.func @nvfp4_gemm
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<fp4_ue4m3_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>]
// CHECK:         gpu.launch {{.*}} workgroup(%[[TA:.*]] : memref<512xi32, #gpu.address_space<workgroup>>, %[[TB:.*]] : memref<1024xi32, #gpu.address_space<workgroup>>, %[[SA:.*]] : memref<256xi8, #gpu.address_space<workgroup>>, %[[SB:.*]] : memref<512xi8, #gpu.address_space<workgroup>>)
// CHECK:           scf.for %[[K:.*]] = %c0{{[_0-9]*}} to %c80 step %c64{{[_0-9]*}} iter_args(%[[ACC:[a-z0-9_]+]] = %{{[a-z0-9_]+}},
// CHECK:             memref.store %{{.*}}, %[[TA]][%{{.*}}] : memref<512xi32, #gpu.address_space<workgroup>>
// CHECK:             scf.if
// CHECK:               %[[SBYTE:.*]] = arith.andi %{{.*}}, %c127_i8{{[_0-9]*}} : i8
// CHECK:               memref.store %[[SBYTE]], %[[SA]][%{{.*}}] : memref<256xi8, #gpu.address_space<workgroup>>
// CHECK:             memref.store %{{.*}}, %[[TB]][%{{.*}}] : memref<1024xi32, #gpu.address_space<workgroup>>
// CHECK:             scf.if
// CHECK:               memref.store %{{.*}}, %[[SB]][%{{.*}}] : memref<512xi8, #gpu.address_space<workgroup>>
// CHECK:             %[[KN:.*]] = arith.addi %[[K]], %c64
// CHECK:             %[[PACKED:.*]] = scf.if %{{.*}} -> (i32) {
// CHECK:               memref.load %arg0[%{{.*}}, %{{.*}}] : memref<?x80xi8>
// CHECK:               arith.andi %{{.*}}, %c15_i32 : i32
// CHECK:               arith.shli %{{.*}}, %c28_i32 : i32
// CHECK:               %[[WORD:.*]] = arith.ori
// CHECK:               scf.yield %[[WORD]] : i32
// CHECK:             %[[STEP:.*]] = arith.divui %[[KN]], %c64
// CHECK:             %[[FIRST:.*]] = arith.muli %[[STEP]], %c4
// CHECK:             %[[C38:.*]] = arith.constant 56 : i8
// CHECK:             memref.load %arg2[%{{.*}}, %{{.*}}] : memref<?x5xi8>
// CHECK:             gpu.shuffle  idx
// CHECK:             arith.andi %{{.*}}, %c128_i32{{[_0-9]*}} : i32
// CHECK:             %[[FLIP:.*]] = arith.xori %[[PACKED]], %c-2004318072_i32{{[_0-9]*}} : i32
// CHECK:             arith.select %{{.*}}, %[[FLIP]], %[[PACKED]] : i32
// CHECK:             vector.from_elements {{.*}} : vector<4xi32>
// CHECK:             vector.from_elements {{.*}} : vector<4xi8>
// CHECK:             memref.load %arg1[%{{.*}}, %{{.*}}] : memref<24x80xi8>
// CHECK:             memref.load %arg3[%{{.*}}, %{{.*}}] : memref<24x5xi8>
// CHECK:             vector.from_elements {{.*}} : vector<8xi32>
// CHECK:             vector.from_elements {{.*}} : vector<8xi8>
// CHECK-NOT:         memref.load %arg2
// CHECK:             %[[D:.*]] = comfyquant.warpgroup_mma %[[TA]], %[[TB]], %[[ACC]] scales(%[[SA]], %[[SB]] : memref<256xi8, #gpu.address_space<workgroup>>, memref<512xi8, #gpu.address_space<workgroup>>) : f4E2M1FN x f4E2M1FN
// CHECK-NEXT:        gpu.barrier
// CHECK-NEXT:        scf.yield %[[D]]
// CHECK-NOT:     linalg.generic
// PTX80:   .target sm_80
// PTX80-NOT:     e2m1
// PTX80-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX90:   gpu.binary @nvfp4_gemm_kernel
// PTX90-SAME:    .target sm_90a
// PTX90-SAME:    wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// PTX120:  .target sm_120a
// PTX120-COUNT-16: mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_sa = affine_map<(m, n, k) -> (m, k floordiv 16)>
#map_sb = affine_map<(m, n, k) -> (n, k floordiv 16)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @nvfp4_gemm(%a: memref<?x80xi8>, %b: memref<24x80xi8>, %sa: memref<?x5xi8>, %sb: memref<24x5xi8>, %c: memref<?x24xf32>) {
  %nan = arith.constant 0x7FC00000 : f32
  %c256 = arith.constant 2.560000e+02 : f32
  %c128_i16 = arith.constant 128 : i16
  %c127_i16 = arith.constant 127 : i16
  %c2e14 = arith.constant 1.638400e+04 : f32
  %c12_i16 = arith.constant 12 : i16
  %c8_i16 = arith.constant 8 : i16
  %c9_i16 = arith.constant 9 : i16
  %c7_i16 = arith.constant 7 : i16
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_sa, #map_sb, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b, %sa, %sb : memref<?x80xi8>, memref<24x80xi8>, memref<?x5xi8>, memref<24x5xi8>) outs(%c : memref<?x24xf32>) {
  ^bb0(%x: i8, %w: i8, %xs: i8, %ws: i8, %acc: f32):
    %0 = arith.extui %x : i8 to i16
    %1 = arith.andi %0, %c7_i16 : i16
    %2 = arith.shli %1, %c9_i16 : i16
    %3 = arith.andi %0, %c8_i16 : i16
    %4 = arith.shli %3, %c12_i16 : i16
    %5 = arith.ori %4, %2 : i16
    %6 = arith.bitcast %5 : i16 to f16
    %7 = arith.extf %6 : f16 to f32
    %8 = arith.mulf %7, %c2e14 : f32
    %10 = arith.extui %w : i8 to i16
    %11 = arith.andi %10, %c7_i16 : i16
    %12 = arith.shli %11, %c9_i16 : i16
    %13 = arith.andi %10, %c8_i16 : i16
    %14 = arith.shli %13, %c12_i16 : i16
    %15 = arith.ori %14, %12 : i16
    %16 = arith.bitcast %15 : i16 to f16
    %17 = arith.extf %16 : f16 to f32
    %18 = arith.mulf %17, %c2e14 : f32
    %19 = arith.mulf %8, %18 : f32
    %20 = arith.extui %xs : i8 to i16
    %21 = arith.andi %20, %c127_i16 : i16
    %22 = arith.andi %20, %c128_i16 : i16
    %23 = arith.shli %22, %c8_i16 : i16
    %24 = arith.shli %21, %c7_i16 : i16
    %25 = arith.ori %23, %24 : i16
    %26 = arith.bitcast %25 : i16 to f16
    %27 = arith.extf %26 : f16 to f32
    %28 = arith.mulf %27, %c256 : f32
    %29 = arith.cmpi eq, %21, %c127_i16 : i16
    %30 = arith.select %29, %nan, %28 : f32
    %31 = arith.extui %ws : i8 to i16
    %32 = arith.andi %31, %c127_i16 : i16
    %33 = arith.andi %31, %c128_i16 : i16
    %34 = arith.shli %33, %c8_i16 : i16
    %35 = arith.shli %32, %c7_i16 : i16
    %36 = arith.ori %34, %35 : i16
    %37 = arith.bitcast %36 : i16 to f16
    %38 = arith.extf %37 : f16 to f32
    %39 = arith.mulf %38, %c256 : f32
    %40 = arith.cmpi eq, %32, %c127_i16 : i16
    %41 = arith.select %40, %nan, %39 : f32
    %42 = arith.mulf %30, %41 : f32
    %43 = arith.mulf %19, %42 : f32
    %44 = arith.addf %acc, %43 : f32
    linalg.yield %44 : f32
  }
  return
}

// -----

// The same NVFP4 body with an E2M1 decode that is off at one code (code 5,
// 3.0, decodes as 2.5): not an E2M1 GEMM, so it stays on the generic path.
// CHECK-LABEL: func.func @nvfp4_wrong_decode
// CHECK-NOT:     comfyquant.gemms
// CHECK:         linalg.generic
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_sa = affine_map<(m, n, k) -> (m, k floordiv 16)>
#map_sb = affine_map<(m, n, k) -> (n, k floordiv 16)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @nvfp4_wrong_decode(%a: memref<?x80xi8>, %b: memref<24x80xi8>, %sa: memref<?x5xi8>, %sb: memref<24x5xi8>, %c: memref<?x24xf32>) {
  %nan = arith.constant 0x7FC00000 : f32
  %c256 = arith.constant 2.560000e+02 : f32
  %c128_i16 = arith.constant 128 : i16
  %c127_i16 = arith.constant 127 : i16
  %c2e14 = arith.constant 1.638400e+04 : f32
  %c12_i16 = arith.constant 12 : i16
  %c8_i16 = arith.constant 8 : i16
  %c9_i16 = arith.constant 9 : i16
  %c7_i16 = arith.constant 7 : i16
  %c5_i16 = arith.constant 5 : i16
  %c2_5 = arith.constant 2.500000e+00 : f32
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_sa, #map_sb, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b, %sa, %sb : memref<?x80xi8>, memref<24x80xi8>, memref<?x5xi8>, memref<24x5xi8>) outs(%c : memref<?x24xf32>) {
  ^bb0(%x: i8, %w: i8, %xs: i8, %ws: i8, %acc: f32):
    %0 = arith.extui %x : i8 to i16
    %1 = arith.andi %0, %c7_i16 : i16
    %2 = arith.shli %1, %c9_i16 : i16
    %3 = arith.andi %0, %c8_i16 : i16
    %4 = arith.shli %3, %c12_i16 : i16
    %5 = arith.ori %4, %2 : i16
    %6 = arith.bitcast %5 : i16 to f16
    %7 = arith.extf %6 : f16 to f32
    %8 = arith.mulf %7, %c2e14 : f32
    %is5 = arith.cmpi eq, %0, %c5_i16 : i16
    %9 = arith.select %is5, %c2_5, %8 : f32
    %10 = arith.extui %w : i8 to i16
    %11 = arith.andi %10, %c7_i16 : i16
    %12 = arith.shli %11, %c9_i16 : i16
    %13 = arith.andi %10, %c8_i16 : i16
    %14 = arith.shli %13, %c12_i16 : i16
    %15 = arith.ori %14, %12 : i16
    %16 = arith.bitcast %15 : i16 to f16
    %17 = arith.extf %16 : f16 to f32
    %18 = arith.mulf %17, %c2e14 : f32
    %19 = arith.mulf %9, %18 : f32
    %20 = arith.extui %xs : i8 to i16
    %21 = arith.andi %20, %c127_i16 : i16
    %22 = arith.andi %20, %c128_i16 : i16
    %23 = arith.shli %22, %c8_i16 : i16
    %24 = arith.shli %21, %c7_i16 : i16
    %25 = arith.ori %23, %24 : i16
    %26 = arith.bitcast %25 : i16 to f16
    %27 = arith.extf %26 : f16 to f32
    %28 = arith.mulf %27, %c256 : f32
    %29 = arith.cmpi eq, %21, %c127_i16 : i16
    %30 = arith.select %29, %nan, %28 : f32
    %31 = arith.extui %ws : i8 to i16
    %32 = arith.andi %31, %c127_i16 : i16
    %33 = arith.andi %31, %c128_i16 : i16
    %34 = arith.shli %33, %c8_i16 : i16
    %35 = arith.shli %32, %c7_i16 : i16
    %36 = arith.ori %34, %35 : i16
    %37 = arith.bitcast %36 : i16 to f16
    %38 = arith.extf %37 : f16 to f32
    %39 = arith.mulf %38, %c256 : f32
    %40 = arith.cmpi eq, %32, %c127_i16 : i16
    %41 = arith.select %40, %nan, %39 : f32
    %42 = arith.mulf %30, %41 : f32
    %43 = arith.mulf %19, %42 : f32
    %44 = arith.addf %acc, %43 : f32
    linalg.yield %44 : f32
  }
  return
}

// -----

// A weight temporary that an elementwise op fills (here signed nibbles
// unpacked from bytes, the low nibble first) is read through that op: the
// kernel loads the packed byte where it would load the code and decodes it
// there; the unpacking op and its temporary are gone.
// CHECK-LABEL: func.func @unpacked_weight
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     linalg.generic
// CHECK:         gpu.launch
// CHECK:           scf.for
// CHECK:             memref.load %arg1[%{{.*}}, %{{.*}}] : memref<16x32xi8>
// CHECK:             arith.shrsi %{{.*}}, %c4_i8 : i8
// CHECK:             comfyquant.warpgroup_mma
// CHECK-NOT:     linalg.generic
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @unpacked_weight(%a: memref<?x64xi8>, %packed: memref<16x32xi8>, %c: memref<?x16xi32>) {
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : i8
  %w = memref.alloc() : memref<16x64xi8>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%w : memref<16x64xi8>) {
  ^bb0(%out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c2 : index
    %v = memref.load %packed[%n, %byte] : memref<16x32xi8>
    %odd = arith.remui %k, %c2 : index
    %isEven = arith.cmpi eq, %odd, %c0 : index
    %lo = arith.shli %v, %c4 : i8
    %low = arith.shrsi %lo, %c4 : i8
    %high = arith.shrsi %v, %c4 : i8
    %code = arith.select %isEven, %low, %high : i8
    linalg.yield %code : i8
  }
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : memref<?x64xi8>, memref<16x64xi8>) outs(%c : memref<?x16xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  return
}

// -----

// A small table the unpacking looks up (a 16-entry codebook) is copied
// into workgroup memory once per block, before a barrier, and the decode
// in the K loop reads the copy, not global memory.
// CHECK-LABEL: func.func @codebook_weight
// CHECK:         gpu.launch {{.*}} workgroup({{.*}}, %[[BOOK:.*]] : memref<16xi8, #gpu.address_space<workgroup>>)
// CHECK:           scf.if
// CHECK-NEXT:        %[[V:.*]] = memref.load %arg2[%[[AT:.*]]] : memref<16xi8>
// CHECK-NEXT:        memref.store %[[V]], %[[BOOK]][%[[AT]]] : memref<16xi8, #gpu.address_space<workgroup>>
// CHECK:           gpu.barrier
// CHECK:           scf.for
// CHECK-NOT:         memref.load %arg2
// CHECK:             memref.load %[[BOOK]]
// CHECK-NOT:         memref.load %arg2
// CHECK:             comfyquant.warpgroup_mma
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @codebook_weight(%a: memref<?x64xi8>, %packed: memref<16x32xi8>, %book: memref<16xi8>,
                           %c: memref<?x16xi32>) {
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %c15 = arith.constant 15 : i8
  %c4 = arith.constant 4 : i8
  %w = memref.alloc() : memref<16x64xi8>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%w : memref<16x64xi8>) {
  ^bb0(%out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c2 : index
    %v = memref.load %packed[%n, %byte] : memref<16x32xi8>
    %odd = arith.remui %k, %c2 : index
    %isEven = arith.cmpi eq, %odd, %c0 : index
    %low = arith.andi %v, %c15 : i8
    %hi = arith.shrui %v, %c4 : i8
    %nib = arith.select %isEven, %low, %hi : i8
    %i = arith.index_cast %nib : i8 to index
    %code = memref.load %book[%i] : memref<16xi8>
    linalg.yield %code : i8
  }
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : memref<?x64xi8>, memref<16x64xi8>) outs(%c : memref<?x16xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  return
}

// -----

// A weight unpacked from signed int4 nibbles (low first) into a zero-filled
// GEMM: each word of four i8 lanes is formed from its two packed bytes by
// shifts and masks, every nibble in the high half of its byte (16 times its
// value), and the sums are shifted back right by 4 before the epilogue. The
// unpack is recognised by folding its body at every byte and parity.
// CHECK-LABEL: func.func @signed_nibble_weight
// CHECK-NOT:     linalg.generic
// CHECK:         gpu.launch
// CHECK:           memref.load %collapse_shape[%{{.*}}] : memref<512xi8>
// CHECK:           memref.load %collapse_shape[%{{.*}}] : memref<512xi8>
// CHECK:           arith.shli %{{.*}}, %c16_i32{{[_0-9]*}} : i32
// CHECK:           arith.andi %{{.*}}, %c15728880_i32{{[_0-9]*}} : i32
// CHECK:           arith.andi %{{.*}}, %c-268374016_i32{{[_0-9]*}} : i32
// CHECK-NOT:       arith.cmpi uge
// CHECK:           comfyquant.warpgroup_mma
// CHECK:           %[[SUMS:.*]] = arith.shrsi %{{.*}}, %{{.*}} : vector<16x2x2xi32>
// CHECK:           vector.extract %[[SUMS]]
// CHECK-NOT:     linalg.generic
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @signed_nibble_weight(%a: memref<?x64xi8>, %packed: memref<16x32xi8>, %out: memref<?x16xf32>) {
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c4_i32 = arith.constant 4 : i32
  %c8_i32 = arith.constant 8 : i32
  %c15_i32 = arith.constant 15 : i32
  %c16_i32 = arith.constant 16 : i32
  %c0_i32 = arith.constant 0 : i32
  %flat = memref.collapse_shape %packed [[0, 1]] : memref<16x32xi8> into memref<512xi8>
  %w = memref.alloc() : memref<16x64xi8>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%w : memref<16x64xi8>) {
  ^bb0(%o: i8):
    %0 = linalg.index 0 : index
    %1 = linalg.index 1 : index
    %2 = arith.muli %0, %c32 : index
    %3 = arith.divui %1, %c2 : index
    %4 = arith.addi %2, %3 : index
    %5 = memref.load %flat[%4] : memref<512xi8>
    %6 = arith.extui %5 : i8 to i32
    %7 = arith.remui %1, %c2 : index
    %8 = arith.cmpi eq, %7, %c0 : index
    %9 = arith.shrui %6, %c4_i32 : i32
    %10 = arith.andi %9, %c15_i32 : i32
    %11 = arith.andi %6, %c15_i32 : i32
    %12 = arith.select %8, %11, %10 : i32
    %13 = arith.cmpi uge, %12, %c8_i32 : i32
    %14 = arith.subi %12, %c16_i32 : i32
    %15 = arith.select %13, %14, %12 : i32
    %16 = arith.trunci %15 : i32 to i8
    linalg.yield %16 : i8
  }
  %m = memref.dim %a, %c0 : memref<?x64xi8>
  %c = memref.alloc(%m) : memref<?x16xi32>
  linalg.fill ins(%c0_i32 : i32) outs(%c : memref<?x16xi32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : memref<?x64xi8>, memref<16x64xi8>) outs(%c : memref<?x16xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%c : memref<?x16xi32>) outs(%out : memref<?x16xf32>) {
  ^bb0(%x: i32, %y: f32):
    %0 = arith.sitofp %x : i32 to f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// Nibbles read as unsigned (0..15) are not signed int4: the unpack is
// evaluated per element as written, and the sums are not shifted.
// CHECK-LABEL: func.func @unsigned_nibble_weight
// CHECK-NOT:     %c-268374016_i32
// CHECK-NOT:     arith.shrsi %{{.*}} : vector<16x2x2xi32>
// CHECK:         return
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @unsigned_nibble_weight(%a: memref<?x64xi8>, %packed: memref<16x32xi8>, %out: memref<?x16xf32>) {
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c4_i32 = arith.constant 4 : i32
  %c8_i32 = arith.constant 8 : i32
  %c15_i32 = arith.constant 15 : i32
  %c16_i32 = arith.constant 16 : i32
  %c0_i32 = arith.constant 0 : i32
  %flat = memref.collapse_shape %packed [[0, 1]] : memref<16x32xi8> into memref<512xi8>
  %w = memref.alloc() : memref<16x64xi8>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%w : memref<16x64xi8>) {
  ^bb0(%o: i8):
    %0 = linalg.index 0 : index
    %1 = linalg.index 1 : index
    %2 = arith.muli %0, %c32 : index
    %3 = arith.divui %1, %c2 : index
    %4 = arith.addi %2, %3 : index
    %5 = memref.load %flat[%4] : memref<512xi8>
    %6 = arith.extui %5 : i8 to i32
    %7 = arith.remui %1, %c2 : index
    %8 = arith.cmpi eq, %7, %c0 : index
    %9 = arith.shrui %6, %c4_i32 : i32
    %10 = arith.andi %9, %c15_i32 : i32
    %11 = arith.andi %6, %c15_i32 : i32
    %12 = arith.select %8, %11, %10 : i32
    %16 = arith.trunci %12 : i32 to i8
    linalg.yield %16 : i8
  }
  %m = memref.dim %a, %c0 : memref<?x64xi8>
  %c = memref.alloc(%m) : memref<?x16xi32>
  linalg.fill ins(%c0_i32 : i32) outs(%c : memref<?x16xi32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : memref<?x64xi8>, memref<16x64xi8>) outs(%c : memref<?x16xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%c : memref<?x16xi32>) outs(%out : memref<?x16xf32>) {
  ^bb0(%x: i32, %y: f32):
    %0 = arith.sitofp %x : i32 to f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// The high nibble first is another order: not the low-first unpack.
// CHECK-LABEL: func.func @high_nibble_first
// CHECK-NOT:     %c-268374016_i32
// CHECK-NOT:     arith.shrsi %{{.*}} : vector<16x2x2xi32>
// CHECK:         return
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @high_nibble_first(%a: memref<?x64xi8>, %packed: memref<16x32xi8>, %out: memref<?x16xf32>) {
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c4_i32 = arith.constant 4 : i32
  %c8_i32 = arith.constant 8 : i32
  %c15_i32 = arith.constant 15 : i32
  %c16_i32 = arith.constant 16 : i32
  %c0_i32 = arith.constant 0 : i32
  %flat = memref.collapse_shape %packed [[0, 1]] : memref<16x32xi8> into memref<512xi8>
  %w = memref.alloc() : memref<16x64xi8>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%w : memref<16x64xi8>) {
  ^bb0(%o: i8):
    %0 = linalg.index 0 : index
    %1 = linalg.index 1 : index
    %2 = arith.muli %0, %c32 : index
    %3 = arith.divui %1, %c2 : index
    %4 = arith.addi %2, %3 : index
    %5 = memref.load %flat[%4] : memref<512xi8>
    %6 = arith.extui %5 : i8 to i32
    %7 = arith.remui %1, %c2 : index
    %8 = arith.cmpi eq, %7, %c0 : index
    %9 = arith.shrui %6, %c4_i32 : i32
    %10 = arith.andi %9, %c15_i32 : i32
    %11 = arith.andi %6, %c15_i32 : i32
    %12 = arith.select %8, %10, %11 : i32
    %13 = arith.cmpi uge, %12, %c8_i32 : i32
    %14 = arith.subi %12, %c16_i32 : i32
    %15 = arith.select %13, %14, %12 : i32
    %16 = arith.trunci %15 : i32 to i8
    linalg.yield %16 : i8
  }
  %m = memref.dim %a, %c0 : memref<?x64xi8>
  %c = memref.alloc(%m) : memref<?x16xi32>
  linalg.fill ins(%c0_i32 : i32) outs(%c : memref<?x16xi32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : memref<?x64xi8>, memref<16x64xi8>) outs(%c : memref<?x16xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%c : memref<?x16xi32>) outs(%out : memref<?x16xf32>) {
  ^bb0(%x: i32, %y: f32):
    %0 = arith.sitofp %x : i32 to f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// A per-group value the unpacking reads (here a scale per 16 codes of a
// row, K index k / 16) is the same for 4 consecutive words of a row: the
// first lane of each 4 loads it (in a branch of its own), every lane takes
// it from that lane by a shuffle outside any branch, and the word's decode
// reads the shuffled value instead of loading it again.
// CHECK-LABEL: func.func @group_scale_weight
// CHECK:         gpu.launch
// CHECK:           %[[LEAD:.*]] = scf.if %{{.*}} -> (i8) {
// CHECK:             %[[S:.*]] = memref.load %arg2[%{{.*}}, %{{.*}}] : memref<16x4xi8>
// CHECK:             scf.yield %[[S]] : i8
// CHECK:           %[[WIDE:.*]] = arith.extui %[[LEAD]] : i8 to i32
// CHECK:           %[[FIRST:.*]] = arith.andi %{{.*}}, %c-4_i32{{[_0-9]*}} : i32
// CHECK:           %[[GOT:[a-zA-Z0-9_]+]], %{{.*}} = gpu.shuffle idx %[[WIDE]], %[[FIRST]], %c32_i32{{[_0-9]*}} : i32
// CHECK:           %[[BACK:.*]] = arith.trunci %[[GOT]] : i32 to i8
// CHECK:           scf.if %{{.*}} -> (i32) {
// CHECK-NOT:         memref.load %arg2
// CHECK:             arith.muli %{{.*}}, %[[BACK]] : i8
// CHECK:           comfyquant.warpgroup_mma
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @group_scale_weight(%a: memref<?x64xi8>, %packed: memref<16x32xi8>, %scales: memref<16x4xi8>, %c: memref<?x16xi32>) {
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c0 = arith.constant 0 : index
  %c15 = arith.constant 15 : i8
  %c4 = arith.constant 4 : i8
  %w = memref.alloc() : memref<16x64xi8>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%w : memref<16x64xi8>) {
  ^bb0(%out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c2 : index
    %v = memref.load %packed[%n, %byte] : memref<16x32xi8>
    %odd = arith.remui %k, %c2 : index
    %isEven = arith.cmpi eq, %odd, %c0 : index
    %low = arith.andi %v, %c15 : i8
    %hi = arith.shrui %v, %c4 : i8
    %nib = arith.select %isEven, %low, %hi : i8
    %g = arith.divui %k, %c16 : index
    %s = memref.load %scales[%n, %g] : memref<16x4xi8>
    %code = arith.muli %nib, %s : i8
    linalg.yield %code : i8
  }
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : memref<?x64xi8>, memref<16x64xi8>) outs(%c : memref<?x16xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  return
}

// -----

// The packed bytes are written between the unpacking and the GEMM: the
// temporary holds the old values, so it stays (and the unpacking with it).
// CHECK-LABEL: func.func @unpacked_weight_overwritten
// CHECK:         memref.alloc() : memref<16x64xi8>
// CHECK:         linalg.generic
// CHECK:         linalg.fill
// CHECK:         gpu.launch
// CHECK:           memref.load %alloc[%{{.*}}, %{{.*}}] : memref<16x64xi8>
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @unpacked_weight_overwritten(%a: memref<?x64xi8>, %packed: memref<16x32xi8>, %c: memref<?x16xi32>) {
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : i8
  %w = memref.alloc() : memref<16x64xi8>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%w : memref<16x64xi8>) {
  ^bb0(%out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c2 : index
    %v = memref.load %packed[%n, %byte] : memref<16x32xi8>
    %high = arith.shrsi %v, %c4 : i8
    linalg.yield %high : i8
  }
  linalg.fill ins(%c4 : i8) outs(%packed : memref<16x32xi8>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : memref<?x64xi8>, memref<16x64xi8>) outs(%c : memref<?x16xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  return
}

// -----

// Split K for decode: N = 40 is one tile of 128 columns, K = 256 is 8 steps,
// so the strategy splits K over min(132 blocks to fill, 8 / 2, 16) = 4. At
// M <= 16 (rows - 1 < 16) the launch has 4 blocks along z; block z runs
// steps [z * 2, z * 2 + 2) and stores its raw sums into a [4, 16, 40]
// temporary (C's starting value only in split 0); then a second kernel,
// one thread per element, adds the 4 partial sums in split order. At larger
// M the same kernel runs once along z and stores C itself.
// CHECK-LABEL: func.func @int8_split_k
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2, split_k = 4>]
// CHECK:         %[[P:.*]] = memref.alloc() : memref<4x16x40xi32>
// CHECK:         %[[M:.*]] = memref.dim %arg0, %c0
// CHECK:         %[[MB:.*]] = arith.subi %[[M]], %c1
// CHECK:         %[[FEW:.*]] = arith.cmpi ult, %[[MB]], %c16
// CHECK:         %[[GZ:.*]] = arith.select %[[FEW]], %c4, %c1
// CHECK:         gpu.launch blocks(%{{.*}}, %{{.*}}, %[[Z:.*]]) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %[[NZ:.*]] = %[[GZ]])
// CHECK:           %[[SPLITTING:.*]] = arith.cmpi ugt, %[[NZ]], %c1
// CHECK:           %[[STEPS:.*]] = arith.ceildivui %c256, %c32
// CHECK:           %[[PER:.*]] = arith.ceildivui %[[STEPS]], %[[NZ]]
// CHECK:           %[[SPAN:.*]] = arith.muli %[[PER]], %c32
// CHECK:           %[[KB:.*]] = arith.muli %[[Z]], %[[SPAN]]
// CHECK:           %[[KN:.*]] = arith.addi %[[KB]], %[[SPAN]]
// CHECK:           %[[KE:.*]] = arith.minui %[[KN]], %c256
// CHECK:           %[[FIRST:.*]] = arith.cmpi eq, %[[Z]], %c0
// CHECK:           arith.select %[[FIRST]], %{{.*}}, %c0_i32 : i32
// CHECK:           scf.for %{{.*}} = %[[KB]] to %[[KE]] step %c32
// CHECK:           scf.if %[[SPLITTING]] {
// CHECK:             memref.store %{{.*}}, %[[P]][%[[Z]], %{{.*}}, %{{.*}}] : memref<4x16x40xi32>
// CHECK:           } else {
// CHECK:             memref.store %{{.*}}, %arg2[%{{.*}}, %{{.*}}] : memref<?x40xi32>
// CHECK:         scf.if %{{.*}} {
// CHECK:           gpu.launch
// CHECK:             %[[R0:.*]] = memref.load %[[P]][%c0{{.*}}, %[[ROW:.*]], %[[COL:.*]]] : memref<4x16x40xi32>
// CHECK:             %[[R1:.*]] = memref.load %[[P]][%c1{{.*}}, %[[ROW]], %[[COL]]]
// CHECK:             %[[S1:.*]] = arith.addi %[[R0]], %[[R1]] : i32
// CHECK:             %[[R2:.*]] = memref.load %[[P]][%c2{{.*}}, %[[ROW]], %[[COL]]]
// CHECK:             %[[S2:.*]] = arith.addi %[[S1]], %[[R2]] : i32
// CHECK:             %[[R3:.*]] = memref.load %[[P]][%c3{{.*}}, %[[ROW]], %[[COL]]]
// CHECK:             %[[S3:.*]] = arith.addi %[[S2]], %[[R3]] : i32
// CHECK:             memref.store %[[S3]], %arg2[%[[ROW]], %[[COL]]] : memref<?x40xi32>
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @int8_split_k(%a: memref<?x256xi8>, %b: memref<40x256xi8>, %c: memref<?x40xi32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x256xi8>, memref<40x256xi8>) outs(%c : memref<?x40xi32>) {
  ^bb0(%x: i8, %w: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %w : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  return
}

// -----

// The 128 x 256 tile: two warpgroups (256 threads), A of 128 rows and B of
// 256 in each of two cp.async stages; the grid is (ceildiv(N, 256),
// ceildiv(M, 128)). A's chunks take one pass of the 256 threads, B's two.
// sm_90a: one wgmma m64n256 per warpgroup; elsewhere 32 mma.sync per warp
// and step.
// CHECK-LABEL: func.func @int8_gemm_wide
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2>]
// CHECK-DAG:     %[[GX:.*]] = arith.ceildivui %c300, %c256
// CHECK-DAG:     %[[GY:.*]] = arith.ceildivui %{{.*}}, %c128
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %[[GX]], {{.*}} = %[[GY]], {{.*}}) threads({{.*}}) in ({{.*}} = %c256{{[_0-9]*}}, {{.*}}) workgroup(%{{.*}} : memref<1024xi32, #gpu.address_space<workgroup>>, %{{.*}} : memref<2048xi32, #gpu.address_space<workgroup>>, %{{.*}} : memref<1024xi32, #gpu.address_space<workgroup>>, %{{.*}} : memref<2048xi32, #gpu.address_space<workgroup>>)
// CHECK:           comfyquant.warpgroup_mma {{.*}} -> vector<32x2x2xi32>
// PTX80:         func.func @int8_gemm_wide
// PTX80:         .maxntid 256, 1, 1
// PTX80-COUNT-3: cp.async.cg.shared.global
// PTX80-COUNT-32: mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32
// PTX90:         func.func @int8_gemm_wide
// PTX90:         wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8.satfinite
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @int8_gemm_wide(%a: memref<?x96xi8>, %b: memref<300x96xi8>, %c: memref<?x300xi32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x96xi8>, memref<300x96xi8>) outs(%c : memref<?x300xi32>) {
  ^bb0(%x: i8, %w: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %w : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  return
}

// -----

// Plain FP8 asking for decode_rows (what the selection chooses where no
// arch has an FP8 MMA): from 128 rows of A on, and both operands 16-byte
// aligned, two decode_operand kernels widen A (grid from M) and B to f16
// once (16 codes per thread: one 16-byte load, the word decoder, e4m3's
// with its NaN flag and e5m2's byte permutes, one 32-byte store) and an
// f16 copy of the GEMM reads them with the wide tile and cp.async.
// CHECK-LABEL: func.func @fp8_widened_once_per_call
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<fp8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2, decode_rows = 128>, #comfyquant.gpu_gemm<f16, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2>]
// CHECK:         %[[LARGE:.*]] = arith.cmpi uge, %[[M:[a-z0-9_]+]], %c128 : index
// CHECK:         memref.extract_aligned_pointer_as_index %arg0
// CHECK:         %[[ALIGNEDA:.*]] = arith.andi %[[LARGE]], %{{.*}} : i1
// CHECK:         memref.extract_aligned_pointer_as_index %arg1
// CHECK:         %[[ENABLED:.*]] = arith.andi %[[ALIGNEDA]], %{{.*}} : i1
// CHECK:         %[[SMALL:.*]] = arith.xori %[[ENABLED]], %true : i1
// CHECK:         gpu.launch
// CHECK:           comfyquant.warpgroup_mma {{.*}} : f8E4M3FN x f8E5M2
// CHECK:         %[[WA:.*]] = memref.alloc(%{{[a-z0-9_]+}}) {alignment = 64 : i64} : memref<?x64xf16>
// CHECK:         %[[WB:.*]] = memref.alloc() {alignment = 64 : i64} : memref<256x64xf16>
// CHECK:         %[[CHUNKSA:.*]] = arith.muli %[[M]], %c4
// CHECK:         %[[BLOCKSA:.*]] = arith.ceildivui %[[CHUNKSA]], %c256
// CHECK:         %[[GRIDA:.*]] = arith.select %[[ENABLED]], %[[BLOCKSA]], %c0
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %[[GRIDA]], {{.*}}) threads({{.*}}) in (%{{.*}} = %c256{{.*}}, {{.*}}) function(@decode_operand)
// CHECK:           %[[CODES:.*]] = vector.load %arg0[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x64xi8>, vector<16xi8>
// CHECK:           vector.bitcast %[[CODES]] : vector<16xi8> to vector<4xi32>
// CHECK-COUNT-8:   nvvm.prmt
// CHECK:           vector.store %{{.*}}, %[[WA]][%{{.*}}, %{{.*}}] {alignment = 32 : i64} : memref<?x64xf16>, vector<16xf16>
// CHECK:         %[[GRIDB:.*]] = arith.select %[[ENABLED]], %c4{{.*}}, %c0
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %[[GRIDB]], {{.*}}) threads({{.*}}) in (%{{.*}} = %c256{{.*}}, {{.*}}) function(@decode_operand)
// CHECK:           vector.load %arg1[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<256x64xi8>, vector<16xi8>
// CHECK-COUNT-8:   nvvm.prmt <default> %{{.*}}, %c0_i32
// CHECK:           vector.store %{{.*}}, %[[WB]][%{{.*}}, %{{.*}}] {alignment = 32 : i64} : memref<256x64xf16>, vector<16xf16>
// CHECK:         gpu.launch
// CHECK:           vector.load %[[WA]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x64xf16>, vector<8xf16>
// CHECK:           vector.load %[[WB]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<256x64xf16>, vector<8xf16>
// CHECK:           comfyquant.warpgroup_mma {{.*}} : f16 x f16
// PTX80:   .target sm_80
// PTX80:   .entry fp8_widened_once_per_call_kernel(
// PTX80-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX80:   .entry decode_operand(
// PTX80:   ld.global.v4.b32
// PTX80-COUNT-8: prmt.b32
// PTX80:   st.global.v4.b32
// PTX80:   st.global.v4.b32
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @fp8_widened_once_per_call(%a: memref<?x64xi8>, %b: memref<256x64xi8>, %out: memref<?x256xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = memref.dim %a, %c0 : memref<?x64xi8>
  %c = memref.alloc(%m) : memref<?x256xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x256xf32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x64xi8>, memref<256x64xi8>) outs(%c : memref<?x256xf32>) attrs = {comfyquant.gemm = #comfyquant.gpu_gemm<fp8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2, decode_rows = 128>} {
  ^bb0(%x: i8, %w: i8, %acc: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.extf %0 : f8E4M3FN to f32
    %2 = arith.bitcast %w : i8 to f8E5M2
    %3 = arith.extf %2 : f8E5M2 to f32
    %4 = arith.mulf %1, %3 : f32
    %5 = arith.addf %acc, %4 : f32
    linalg.yield %5 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%c : memref<?x256xf32>) outs(%out : memref<?x256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.mulf %x, %x : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// NVFP4 asking for decode_rows (what the selection chooses where no arch
// has an FP4 MMA): from 128 rows of A on, two decode_operand kernels
// write each operand's E2M1 codes times their E4M3 block scale as f16 (one
// block of 16 per thread: the codes packed as nibbles into two words, the
// signs flipped for a negative scale, the word decoder with the scale's
// magnitude), A's grid from M, and an f16 copy of the GEMM reads them.
// CHECK-LABEL: func.func @nvfp4_widened_once_per_call
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<fp4_ue4m3_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1, decode_rows = 128>, #comfyquant.gpu_gemm<f16, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>]
// CHECK:         %[[ENABLED:.*]] = arith.cmpi uge, %[[M:[a-z0-9_]+]], %c128 : index
// CHECK:         gpu.launch
// CHECK:           comfyquant.warpgroup_mma {{.*}} scales({{.*}}) : f4E2M1FN x f4E2M1FN
// CHECK:         %[[WA:.*]] = memref.alloc(%{{[a-z0-9_]+}}) {alignment = 64 : i64} : memref<?x64xf16>
// CHECK:         %[[WB:.*]] = memref.alloc() {alignment = 64 : i64} : memref<96x64xf16>
// CHECK:         %[[GRIDA:.*]] = arith.select %[[ENABLED]], %{{.*}}, %c0
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %[[GRIDA]], {{.*}}) function(@decode_operand)
// CHECK-COUNT-16:  memref.load %arg0
// CHECK:           %[[SCALE:.*]] = memref.load %arg2[%{{.*}}, %{{.*}}] : memref<?x4xi8>
// CHECK:           %[[FLIP:.*]] = arith.select %{{.*}}, %c-2004318072_i32, %c0_i32{{.*}} : i32
// CHECK:           arith.xori %{{.*}}, %[[FLIP]] : i32
// CHECK:           nvvm.prmt
// CHECK:           arith.xori %{{.*}}, %[[FLIP]] : i32
// CHECK:           vector.store %{{.*}}, %[[WA]][%{{.*}}, %{{.*}}] {alignment = 32 : i64} : memref<?x64xf16>, vector<16xf16>
// CHECK:         gpu.launch {{.*}} function(@decode_operand)
// CHECK:           memref.load %arg3[%{{.*}}, %{{.*}}] : memref<96x4xi8>
// CHECK:           vector.store %{{.*}}, %[[WB]][%{{.*}}, %{{.*}}] {alignment = 32 : i64} : memref<96x64xf16>, vector<16xf16>
// CHECK:         gpu.launch
// CHECK:           comfyquant.warpgroup_mma {{.*}} : f16 x f16
// PTX80:   .target sm_80
// PTX80:   .entry decode_operand(
// PTX80:   prmt.b32
// PTX80:   st.global.v4.b32
// PTX80:   st.global.v4.b32
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_sa = affine_map<(m, n, k) -> (m, k floordiv 16)>
#map_sb = affine_map<(m, n, k) -> (n, k floordiv 16)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @nvfp4_widened_once_per_call(%a: memref<?x64xi8>, %b: memref<96x64xi8>, %sa: memref<?x4xi8>, %sb: memref<96x4xi8>, %out: memref<?x96xf32>) {
  %nan = arith.constant 0x7FC00000 : f32
  %c256 = arith.constant 2.560000e+02 : f32
  %c128_i16 = arith.constant 128 : i16
  %c127_i16 = arith.constant 127 : i16
  %c2e14 = arith.constant 1.638400e+04 : f32
  %c12_i16 = arith.constant 12 : i16
  %c8_i16 = arith.constant 8 : i16
  %c9_i16 = arith.constant 9 : i16
  %c7_i16 = arith.constant 7 : i16
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = memref.dim %a, %c0 : memref<?x64xi8>
  %c = memref.alloc(%m) : memref<?x96xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x96xf32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_sa, #map_sb, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b, %sa, %sb : memref<?x64xi8>, memref<96x64xi8>, memref<?x4xi8>, memref<96x4xi8>) outs(%c : memref<?x96xf32>) attrs = {comfyquant.gemm = #comfyquant.gpu_gemm<fp4_ue4m3_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1, decode_rows = 128>} {
  ^bb0(%x: i8, %w: i8, %xs: i8, %ws: i8, %acc: f32):
    %0 = arith.extui %x : i8 to i16
    %1 = arith.andi %0, %c7_i16 : i16
    %2 = arith.shli %1, %c9_i16 : i16
    %3 = arith.andi %0, %c8_i16 : i16
    %4 = arith.shli %3, %c12_i16 : i16
    %5 = arith.ori %4, %2 : i16
    %6 = arith.bitcast %5 : i16 to f16
    %7 = arith.extf %6 : f16 to f32
    %8 = arith.mulf %7, %c2e14 : f32
    %10 = arith.extui %w : i8 to i16
    %11 = arith.andi %10, %c7_i16 : i16
    %12 = arith.shli %11, %c9_i16 : i16
    %13 = arith.andi %10, %c8_i16 : i16
    %14 = arith.shli %13, %c12_i16 : i16
    %15 = arith.ori %14, %12 : i16
    %16 = arith.bitcast %15 : i16 to f16
    %17 = arith.extf %16 : f16 to f32
    %18 = arith.mulf %17, %c2e14 : f32
    %19 = arith.mulf %8, %18 : f32
    %20 = arith.extui %xs : i8 to i16
    %21 = arith.andi %20, %c127_i16 : i16
    %22 = arith.andi %20, %c128_i16 : i16
    %23 = arith.shli %22, %c8_i16 : i16
    %24 = arith.shli %21, %c7_i16 : i16
    %25 = arith.ori %23, %24 : i16
    %26 = arith.bitcast %25 : i16 to f16
    %27 = arith.extf %26 : f16 to f32
    %28 = arith.mulf %27, %c256 : f32
    %29 = arith.cmpi eq, %21, %c127_i16 : i16
    %30 = arith.select %29, %nan, %28 : f32
    %31 = arith.extui %ws : i8 to i16
    %32 = arith.andi %31, %c127_i16 : i16
    %33 = arith.andi %31, %c128_i16 : i16
    %34 = arith.shli %33, %c8_i16 : i16
    %35 = arith.shli %32, %c7_i16 : i16
    %36 = arith.ori %34, %35 : i16
    %37 = arith.bitcast %36 : i16 to f16
    %38 = arith.extf %37 : f16 to f32
    %39 = arith.mulf %38, %c256 : f32
    %40 = arith.cmpi eq, %32, %c127_i16 : i16
    %41 = arith.select %40, %nan, %39 : f32
    %42 = arith.mulf %30, %41 : f32
    %43 = arith.mulf %19, %42 : f32
    %44 = arith.addf %acc, %43 : f32
    linalg.yield %44 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%c : memref<?x96xf32>) outs(%out : memref<?x96xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.mulf %x, %x : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// A weight decoded by its producer into a GEMM whose fill and epilogue
// fuse, B static: from decode_rows (128) rows of A on, a decode_operand
// kernel writes the decoded weight once (16 elements per thread, each
// stored byte and scale loaded at one address: the producer's divisions
// of the column folded at the chunk) and a copy of the GEMM reads it as
// stored, with the wide tile and cp.async; the fused kernel's grid is
// empty there, and theirs below.
// CHECK-LABEL: func.func @decoded_once_per_call
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1, decode_rows = 128>, #comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2>]
// CHECK:         %[[DECODED:.*]] = memref.alloc() {alignment = 64 : i64} : memref<256x64xi8>
// CHECK:         %[[LARGE:.*]] = arith.cmpi uge, %{{.*}}, %c128 : index
// CHECK:         %[[SMALL:.*]] = arith.xori %[[LARGE]], %true : i1
// CHECK:         %[[FUSEDY:.*]] = arith.select %[[SMALL]], %{{.*}}, %{{.*}} : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}}, %{{.*}} = %[[FUSEDY]], {{.*}})
// CHECK:           memref.load %arg1
// CHECK:           comfyquant.warpgroup_mma
// CHECK:         %[[DECODEX:.*]] = arith.select %[[LARGE]], %c4, %{{.*}} : index
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %[[DECODEX]], {{.*}}) threads({{.*}}) in (%{{.*}} = %c256{{.*}}, {{.*}}) function(@decode_operand)
// CHECK:           %[[ROW:.*]] = arith.divui %{{.*}}, %c4{{.*}} : index
// CHECK:           %[[CHUNK:.*]] = arith.remui %{{.*}}, %c4{{.*}} : index
// CHECK:           memref.load %arg1[%[[ROW]], %{{.*}}] : memref<256x32xi8>
// CHECK:           memref.load %arg2[%[[ROW]], %[[CHUNK]]] : memref<256x4xi8>
// CHECK-NOT:       arith.divui
// CHECK-NOT:       arith.remui
// CHECK:           vector.store %{{.*}}, %[[DECODED]][%[[ROW]], %{{.*}}] {alignment = 16 : i64} : memref<256x64xi8>, vector<16xi8>
// CHECK:         %[[COPYY:.*]] = arith.select %[[LARGE]], %{{.*}}, %{{.*}} : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}}, %{{.*}} = %[[COPYY]], {{.*}}) threads({{.*}}) in (%{{.*}} = %c256{{.*}}, {{.*}})
// CHECK-NOT:       memref.load %arg1
// CHECK:           vector.load %[[DECODED]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<256x64xi8>, vector<16xi8>
// CHECK:           comfyquant.warpgroup_mma
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @decoded_once_per_call(%a: memref<?x64xi8>, %packed: memref<256x32xi8>, %scales: memref<256x4xi8>, %out: memref<?x256xf32>) {
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c0 = arith.constant 0 : index
  %c15 = arith.constant 15 : i8
  %c4 = arith.constant 4 : i8
  %c0_i32 = arith.constant 0 : i32
  %w = memref.alloc() : memref<256x64xi8>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%w : memref<256x64xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c2 : index
    %v = memref.load %packed[%n, %byte] : memref<256x32xi8>
    %odd = arith.remui %k, %c2 : index
    %isEven = arith.cmpi eq, %odd, %c0 : index
    %low = arith.andi %v, %c15 : i8
    %hi = arith.shrui %v, %c4 : i8
    %nib = arith.select %isEven, %low, %hi : i8
    %g = arith.divui %k, %c16 : index
    %s = memref.load %scales[%n, %g] : memref<256x4xi8>
    %code = arith.muli %nib, %s : i8
    linalg.yield %code : i8
  }
  %m = memref.dim %a, %c0 : memref<?x64xi8>
  %c = memref.alloc(%m) : memref<?x256xi32>
  linalg.fill ins(%c0_i32 : i32) outs(%c : memref<?x256xi32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : memref<?x64xi8>, memref<256x64xi8>) outs(%c : memref<?x256xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%c : memref<?x256xi32>) outs(%out : memref<?x256xf32>) {
  ^bb0(%x: i32, %y: f32):
    %0 = arith.sitofp %x : i32 to f32
    linalg.yield %0 : f32
  }
  return
}
