// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(comfyquant-fuse-operand-producers))' | FileCheck %s --check-prefix=CHECKED

// Contractions written by hand get the tag the conversion gives the GEMMs
// it builds; an op that is no GEMM stays untagged, and a tag already there
// is kept. comfyquant-fuse-operand-producers, the first pass to read the
// tags, checks each against the body it describes.

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @int8
// CHECK:         linalg.generic
// CHECK-SAME:      comfyquant.gemm_info = #comfyquant.gemm_info<i8, i8 x i8>
// CHECKED-LABEL: func.func @int8
func.func @int8(%x: tensor<?x32xi8>, %w: tensor<16x32xi8>, %acc: tensor<?x16xi32>) -> tensor<?x16xi32> {
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x32xi8>, tensor<16x32xi8>) outs(%acc : tensor<?x16xi32>) {
  ^bb0(%p: i8, %q: i8, %o: i32):
    %p32 = arith.extsi %p : i8 to i32
    %q32 = arith.extsi %q : i8 to i32
    %m = arith.muli %p32, %q32 : i32
    %s = arith.addi %o, %m : i32
    linalg.yield %s : i32
  } -> tensor<?x16xi32>
  return %r : tensor<?x16xi32>
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @bf16
// CHECK:         linalg.generic
// CHECK-SAME:      comfyquant.gemm_info = #comfyquant.gemm_info<float, bf16 x bf16>
func.func @bf16(%x: tensor<?x32xbf16>, %w: tensor<16x32xbf16>, %acc: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x32xbf16>, tensor<16x32xbf16>) outs(%acc : tensor<?x16xf32>) {
  ^bb0(%p: bf16, %q: bf16, %o: f32):
    %p32 = arith.extf %p : bf16 to f32
    %q32 = arith.extf %q : bf16 to f32
    %m = arith.mulf %p32, %q32 : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}

// -----

// FP8 codes stored as i8, widened through their types in the body.
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @fp8_codes
// CHECK:         linalg.generic
// CHECK-SAME:      comfyquant.gemm_info = #comfyquant.gemm_info<fp8, f8E4M3FN x f8E5M2>
func.func @fp8_codes(%x: tensor<?x32xi8>, %w: tensor<16x32xi8>, %acc: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x32xi8>, tensor<16x32xi8>) outs(%acc : tensor<?x16xf32>) {
  ^bb0(%p: i8, %q: i8, %o: f32):
    %p8 = arith.bitcast %p : i8 to f8E4M3FN
    %q8 = arith.bitcast %q : i8 to f8E5M2
    %p32 = arith.extf %p8 : f8E4M3FN to f32
    %q32 = arith.extf %q8 : f8E5M2 to f32
    %m = arith.mulf %p32, %q32 : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}

// -----

// Not a GEMM (B read at (k, n)): no tag.
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @transposed
// CHECK-NOT:     comfyquant.gemm_info
func.func @transposed(%x: tensor<?x32xf32>, %w: tensor<32x16xf32>, %acc: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x32xf32>, tensor<32x16xf32>) outs(%acc : tensor<?x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}

// -----

// A tag that does not describe the body (an i8 GEMM tagged as FP8) is kept
// by the tagger and refused where it is first read.
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @wrong_tag
// CHECK:         linalg.generic
// CHECK-SAME:      comfyquant.gemm_info = #comfyquant.gemm_info<fp8, f8E4M3FN x f8E4M3FN>
func.func @wrong_tag(%x: tensor<?x32xi8>, %w: tensor<16x32xi8>, %acc: tensor<?x16xi32>) -> tensor<?x16xi32> {
  // expected-error @below {{is tagged #comfyquant.gemm_info<fp8, f8E4M3FN x f8E4M3FN> but its body computes #comfyquant.gemm_info<i8, i8 x i8>}}
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x32xi8>, tensor<16x32xi8>) outs(%acc : tensor<?x16xi32>)
      attrs = {comfyquant.gemm_info = #comfyquant.gemm_info<fp8, f8E4M3FN x f8E4M3FN>} {
  ^bb0(%p: i8, %q: i8, %o: i32):
    %p32 = arith.extsi %p : i8 to i32
    %q32 = arith.extsi %q : i8 to i32
    %m = arith.muli %p32, %q32 : i32
    %s = arith.addi %o, %m : i32
    linalg.yield %s : i32
  } -> tensor<?x16xi32>
  return %r : tensor<?x16xi32>
}

// -----

// A tag on an op whose body is no GEMM at all.
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @not_a_gemm(%x: tensor<?x32xf32>, %w: tensor<16x32xf32>, %acc: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @below {{is tagged #comfyquant.gemm_info<float, f32 x f32> but its body is not a GEMM of that form}}
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x32xf32>, tensor<16x32xf32>) outs(%acc : tensor<?x16xf32>)
      attrs = {comfyquant.gemm_info = #comfyquant.gemm_info<float, f32 x f32>} {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.subf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}
