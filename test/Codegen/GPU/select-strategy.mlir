// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy))' | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy,comfyquant-gpu-tensor-core-gemm))' --verify-diagnostics | FileCheck %s --check-prefix=FORMED
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy{fill-ctas=1}))' | FileCheck %s --check-prefix=FILL1
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy{archs=sm_80,sm_86,sm_89,sm_120a},comfyquant-gpu-tensor-core-gemm))' --verify-diagnostics | FileCheck %s --check-prefix=NOWGMMA
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy{archs=sm_80,sm_90a}))' | FileCheck %s --check-prefix=WGMMA
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy{archs=sm_90a}))' | FileCheck %s --check-prefix=WGMMA
// RUN: not comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy{archs=sm_90a,sm_77}))' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-gpu-select-strategy{archs=sm_80,sm_86}))' | FileCheck %s --check-prefix=NOFP8MMA
// UNKNOWN: error: 'func.func' op archs: unknown CUDA arch 'sm_77'

#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>

// An i8 x i8 -> i32 GEMM on buffers: a tensor-core config is chosen, and
// the kernel is formed from it (the function records what it formed).
// CHECK-LABEL: func.func @int8_gemm
// CHECK:         linalg.generic
// CHECK-SAME:      comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>
// FORMED-LABEL: func.func @int8_gemm
// FORMED-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>]
// FORMED:         gpu.launch
// FORMED-NOT:     linalg.generic
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

// f32 x f32 stays SIMT: no config, nothing formed.
// CHECK-LABEL: func.func @f32_gemm
// CHECK-NOT:     comfyquant.gemm =
// FORMED-LABEL: func.func @f32_gemm
// FORMED-NOT:    gpu.launch
// FORMED:        linalg.generic
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @f32_gemm(%a: memref<?x8xf32>, %b: memref<4x8xf32>, %c: memref<?x4xf32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x8xf32>, memref<4x8xf32>) outs(%c : memref<?x4xf32>) {
  ^bb0(%x: f32, %w: f32, %acc: f32):
    %0 = arith.mulf %x, %w : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// A config already given is kept; the kernel builder refuses tiles it does
// not build, and a kind that does not match the operands.
// CHECK-LABEL: func.func @pinned_tile
// CHECK:         comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [128, 64], warp = [16, 64], k_bytes = 32, stages = 1>
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @pinned_tile(%a: memref<?x70xi8>, %b: memref<40x70xi8>, %c: memref<?x40xi32>) {
  // expected-error @below {{its config #comfyquant.gpu_gemm<s8, block = [128, 64], warp = [16, 64], k_bytes = 32, stages = 1> is not built; the tensor-core kernels are #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>, #comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2> or #comfyquant.gpu_gemm<s8, block = [128, 128], warp = [16, 128], k_bytes = 32, stages = 2> with any split_k and 1 or 2 stages (two for two warpgroups)}}
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x70xi8>, memref<40x70xi8>) outs(%c : memref<?x40xi32>) attrs = {comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [128, 64], warp = [16, 64], k_bytes = 32, stages = 1>} {
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

#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @wrong_kind(%a: memref<?x70xi8>, %b: memref<40x70xi8>, %c: memref<?x40xi32>) {
  // expected-error @below {{its config #comfyquant.gpu_gemm<fp8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1> is not a tensor-core kernel for these operands}}
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x70xi8>, memref<40x70xi8>) outs(%c : memref<?x40xi32>) attrs = {comfyquant.gemm = #comfyquant.gpu_gemm<fp8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>} {
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

// Split K for decode, from the static N and K: N = 3072 is 12 tiles of 256
// columns (both operands read as stored, K a multiple of 16 bytes: two
// cp.async stages and the 128 x 256 tile), so ceildiv(132, 12) = 11 splits
// fill an H100's 132 SMs (K = 3072 is 96 steps, plenty). N = 40 is below
// the wide tile, and with K = 96 (3 steps) cannot give two steps to each
// of 2 splits: no split. fill-ctas=1 never splits.
// CHECK-LABEL: func.func @decode_split
// CHECK:         comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2, split_k = 11>
// CHECK:         comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>
// FILL1-LABEL: func.func @decode_split
// FILL1-NOT:     split_k
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @decode_split(%a: memref<?x3072xi8>, %b: memref<3072x3072xi8>, %c: memref<?x3072xi32>,
                        %a2: memref<?x96xi8>, %b2: memref<40x96xi8>, %c2: memref<?x40xi32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x3072xi8>, memref<3072x3072xi8>) outs(%c : memref<?x3072xi32>) {
  ^bb0(%x: i8, %w: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %w : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a2, %b2 : memref<?x96xi8>, memref<40x96xi8>) outs(%c2 : memref<?x40xi32>) {
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

// Two stages need both operands copied in 16-byte chunks: K = 70 is not a
// multiple of 16 bytes.
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @two_stages_odd_k(%a: memref<?x70xi8>, %b: memref<40x70xi8>, %c: memref<?x40xi32>) {
  // expected-error @below {{has two stages, which need both operands copied in 16-byte chunks}}
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x70xi8>, memref<40x70xi8>) outs(%c : memref<?x40xi32>) attrs = {comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>} {
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

// Two warpgroups: operands read as stored with two stages and N not
// below the tile's columns; 128 x 256, or 128 x 128 for FP8 (its sm_90a
// steps add each product to f32 accumulators). A block-scaled FP8 GEMM
// (MXFP8, scales staged per step) keeps one warpgroup.
// Where every arch adds its FP8 steps into the accumulators (all but
// sm_90a: sm_80/86 multiply f16 tiles decoded once per block), FP8 takes
// 128 x 256 too; with sm_90a (promotion) among the archs, or none named
// (any arch), 128 x 128.
// NOWGMMA-LABEL: func.func @wide_tile
// NOWGMMA-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2>, #comfyquant.gpu_gemm<fp8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2>]
// NOWGMMA:         comfyquant.warpgroup_mma {{.*}} : f8E4M3FN x f8E4M3FN : memref<1024xi32, #gpu.address_space<workgroup>>, memref<2048xi32, #gpu.address_space<workgroup>> -> vector<32x2x2xf32>
// WGMMA-LABEL: func.func @wide_tile
// WGMMA:         comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2>
// WGMMA:         comfyquant.gemm = #comfyquant.gpu_gemm<fp8, block = [128, 128], warp = [16, 128], k_bytes = 32, stages = 2>
// CHECK-LABEL: func.func @wide_tile
// CHECK:         comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2>
// CHECK:         comfyquant.gemm = #comfyquant.gpu_gemm<fp8, block = [128, 128], warp = [16, 128], k_bytes = 32, stages = 2>
// FORMED-LABEL: func.func @wide_tile
// FORMED-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2>, #comfyquant.gpu_gemm<fp8, block = [128, 128], warp = [16, 128], k_bytes = 32, stages = 2>]
// FORMED:         gpu.launch
// FORMED-SAME:      threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c256
// FORMED-SAME:      workgroup(%{{.*}} : memref<1024xi32, #gpu.address_space<workgroup>>, %{{.*}} : memref<2048xi32, #gpu.address_space<workgroup>>
// FORMED:         comfyquant.warpgroup_mma
// FORMED-SAME:      memref<1024xi32, #gpu.address_space<workgroup>>, memref<2048xi32, #gpu.address_space<workgroup>> -> vector<32x2x2xi32>
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @wide_tile(%a: memref<?x96xi8>, %b: memref<512x96xi8>, %c: memref<?x512xi32>,
                     %fa: memref<?x64xi8>, %fb: memref<300x64xi8>, %fc: memref<?x300xf32>) {
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x96xi8>, memref<512x96xi8>) outs(%c : memref<?x512xi32>) {
  ^bb0(%x: i8, %w: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %w : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%fa, %fb : memref<?x64xi8>, memref<300x64xi8>) outs(%fc : memref<?x300xf32>) {
  ^bb0(%x: i8, %w: i8, %acc: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.bitcast %w : i8 to f8E4M3FN
    %2 = arith.extf %0 : f8E4M3FN to f32
    %3 = arith.extf %1 : f8E4M3FN to f32
    %4 = arith.mulf %2, %3 : f32
    %5 = arith.addf %acc, %4 : f32
    linalg.yield %5 : f32
  }
  return
}

// -----

// The wide tile pinned where it does not apply (N = 40 below 256) is
// refused; so is one stage with it.
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @wide_tile_narrow_n(%a: memref<?x96xi8>, %b: memref<40x96xi8>, %c: memref<?x40xi32>) {
  // expected-error @below {{has two warpgroups, which need two stages, no block scales and N not below the tile's columns}}
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x96xi8>, memref<40x96xi8>) outs(%c : memref<?x40xi32>) attrs = {comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 2>} {
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

#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @wide_tile_one_stage(%a: memref<?x96xi8>, %b: memref<512x96xi8>, %c: memref<?x512xi32>) {
  // expected-error @below {{has two warpgroups, which need two stages, no block scales and N not below the tile's columns}}
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x96xi8>, memref<512x96xi8>) outs(%c : memref<?x512xi32>) attrs = {comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [128, 256], warp = [16, 256], k_bytes = 32, stages = 1>} {
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

// A weight decoded by its producer, but C is an argument (no fill and
// epilogue to copy): no decode_rows, the decode stays fused at every M.
// A config that asks for decode_rows where it cannot apply is refused.
// CHECK-LABEL: func.func @decoded_weight_into_argument
// CHECK:         comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @decoded_weight_into_argument(%a: memref<?x64xi8>, %packed: memref<256x32xi8>, %c: memref<?x256xi32>) {
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %c15 = arith.constant 15 : i8
  %c4 = arith.constant 4 : i8
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
    linalg.yield %nib : i8
  }
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : memref<?x64xi8>, memref<256x64xi8>) outs(%c : memref<?x256xi32>) {
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

#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
func.func @decode_rows_without_decoder(%a: memref<?x64xi8>, %b: memref<256x64xi8>, %c: memref<?x256xi32>) {
  // expected-error @below {{decodes once per call, which needs a static N x K B read through an integer producer (K a multiple of 16 bytes) or plain FP8 B read as stored in 16-byte chunks, A read as stored in 16-byte chunks, or NVFP4 with a static B and K a multiple of 16; and the fill and epilogue fused}}
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x64xi8>, memref<256x64xi8>) outs(%c : memref<?x256xi32>) attrs = {comfyquant.gemm = #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1, decode_rows = 128>} {
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

// Plain FP8 with both operands read as stored in 16-byte chunks and the
// fill and epilogue fused: where no arch has an FP8 MMA (sm_80, sm_86),
// from two row tiles on both operands are widened to f16 once per call
// (decode_rows); with an FP8 MMA among the archs, or none named, the
// operands are decoded per tile (no decode_rows).
// NOFP8MMA-LABEL: func.func @fp8_widened_once
// NOFP8MMA:         comfyquant.gemm = #comfyquant.gpu_gemm<fp8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2, decode_rows = 128>
// NOWGMMA-LABEL: func.func @fp8_widened_once
// NOWGMMA-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<fp8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>]
// CHECK-LABEL: func.func @fp8_widened_once
// CHECK:         comfyquant.gemm = #comfyquant.gpu_gemm<fp8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 2>
// FORMED-LABEL: func.func @fp8_widened_once
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @fp8_widened_once(%a: memref<?x64xi8>, %b: memref<96x64xi8>, %out: memref<?x96xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = memref.dim %a, %c0 : memref<?x64xi8>
  %c = memref.alloc(%m) : memref<?x96xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x96xf32>)
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x64xi8>, memref<96x64xi8>) outs(%c : memref<?x96xf32>) {
  ^bb0(%x: i8, %w: i8, %acc: f32):
    %0 = arith.bitcast %x : i8 to f8E4M3FN
    %1 = arith.extf %0 : f8E4M3FN to f32
    %2 = arith.bitcast %w : i8 to f8E4M3FN
    %3 = arith.extf %2 : f8E4M3FN to f32
    %4 = arith.mulf %1, %3 : f32
    %5 = arith.addf %acc, %4 : f32
    linalg.yield %5 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%c : memref<?x96xf32>) outs(%out : memref<?x96xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.mulf %x, %x : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// NVFP4 (whole blocks of 16 along K, B static) with the fill and epilogue
// fused: where no arch has an FP4 MMA (sm_80/86/89/90a), from two row
// tiles on both operands are widened with their block scales to f16 once
// per call; with sm_120a among the archs, or none named, not.
// NOFP8MMA-LABEL: func.func @nvfp4_widened_once
// NOFP8MMA:         comfyquant.gemm = #comfyquant.gpu_gemm<fp4_ue4m3_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1, decode_rows = 128>
// WGMMA-LABEL: func.func @nvfp4_widened_once
// WGMMA:         comfyquant.gemm = #comfyquant.gpu_gemm<fp4_ue4m3_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1, decode_rows = 128>
// NOWGMMA-LABEL: func.func @nvfp4_widened_once
// NOWGMMA-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<fp4_ue4m3_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>]
// CHECK-LABEL: func.func @nvfp4_widened_once
// CHECK:         comfyquant.gemm = #comfyquant.gpu_gemm<fp4_ue4m3_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>
// FORMED-LABEL: func.func @nvfp4_widened_once
#map_a = affine_map<(m, n, k) -> (m, k)>
#map_b = affine_map<(m, n, k) -> (n, k)>
#map_sa = affine_map<(m, n, k) -> (m, k floordiv 16)>
#map_sb = affine_map<(m, n, k) -> (n, k floordiv 16)>
#map_c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(n, k) -> (n, k)>
func.func @nvfp4_widened_once(%a: memref<?x64xi8>, %b: memref<96x64xi8>, %sa: memref<?x4xi8>, %sb: memref<96x4xi8>, %out: memref<?x96xf32>) {
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
  linalg.generic {indexing_maps = [#map_a, #map_b, #map_sa, #map_sb, #map_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b, %sa, %sb : memref<?x64xi8>, memref<96x64xi8>, memref<?x4xi8>, memref<96x4xi8>) outs(%c : memref<?x96xf32>) {
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
