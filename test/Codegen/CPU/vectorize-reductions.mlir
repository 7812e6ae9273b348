// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-vectorize-reductions=lanes=8 --canonicalize | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-vectorize-reductions --canonicalize | FileCheck %s --check-prefix=STRATEGY

// The row amax of an activation quantizer: per row, eight elements per
// step folded into one vector accumulator (the init broadcast: max is
// idempotent), one vector.reduction, then the 2-element tail in scalars.
// CHECK-LABEL: func.func @row_amax
// CHECK:       scf.for %[[M:.*]] = %c0 to %{{.*}} step %c1 iter_args(%[[T:.*]] = %{{.*}}) -> (tensor<?xf32>)
// CHECK:         %[[INIT:.*]] = tensor.extract %[[T]][%[[M]]]
// CHECK:         %[[B:.*]] = vector.broadcast %[[INIT]] : f32 to vector<8xf32>
// CHECK:         %[[F:.*]] = scf.for %[[K:.*]] = %c0 to %c32 step %c8 iter_args(%[[A:.*]] = %[[B]]) -> (vector<8xf32>)
// CHECK:           vector.transfer_read %{{.*}}[%[[M]], %[[K]]]{{.*}} : tensor<?x34xbf16>, vector<8xbf16>
// CHECK:           arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK:           math.absf %{{.*}} : vector<8xf32>
// CHECK:           arith.maxnumf %[[A]], %{{.*}} : vector<8xf32>
// The lanes fold as a tree of halves with the fold's own vector op
// (LLVM would expand a maxnumf reduction lane by lane).
// CHECK:         %[[LO:.*]] = vector.extract_strided_slice %[[F]] {offsets = [0], sizes = [4], strides = [1]}
// CHECK:         %[[HI:.*]] = vector.extract_strided_slice %[[F]] {offsets = [4], sizes = [4], strides = [1]}
// CHECK:         %[[H4:.*]] = arith.maxnumf %[[LO]], %[[HI]] : vector<4xf32>
// CHECK:         arith.maxnumf %{{.*}} : vector<2xf32>
// CHECK:         %[[H1:.*]] = arith.maxnumf %{{.*}} : vector<1xf32>
// CHECK:         %[[R:.*]] = vector.extract %[[H1]][0] : f32 from vector<1xf32>
// CHECK-NOT:     vector.reduction
// CHECK:         tensor.extract %{{.*}}[%[[M]], %c32]
// CHECK:         arith.maxnumf %[[R]], %{{.*}} : f32
// CHECK:         tensor.extract %{{.*}}[%[[M]], %c33]
// CHECK:         tensor.insert %{{.*}} into %[[T]][%[[M]]]
// CHECK-NOT:   linalg.generic
// STRATEGY-LABEL: func.func @row_amax
// STRATEGY:       scf.for %{{.*}} = %c0 to %c32 step %c16 {{.*}} -> (vector<16xf32>)
func.func @row_amax(%x: tensor<?x34xbf16>) -> tensor<?xf32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x34xbf16>
  %e = tensor.empty(%m) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, k) -> (m, k)>, affine_map<(m, k) -> (m)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x34xbf16>) outs(%init : tensor<?xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %f = arith.extf %in : bf16 to f32
    %a = math.absf %f : f32
    %mx = arith.maxnumf %out, %a : f32
    linalg.yield %mx : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// Block amax (NVFP4 / MXFP8 activations): [rows, blocks, 16], one vector
// per block and no tail.
// CHECK-LABEL: func.func @block_amax
// CHECK:       scf.for %[[M:.*]] = %c0 to %{{.*}} step %c1
// CHECK:         scf.for %[[J:.*]] = %c0 to %c4 step %c1
// CHECK:           vector.transfer_read %{{.*}}[%[[M]], %[[J]], %{{.*}}]{{.*}} : tensor<?x4x16xf32>, vector<8xf32>
// CHECK:           arith.maximumf %{{.*}} : vector<1xf32>
// CHECK-NOT:       tensor.extract %{{.*}}[%[[M]], %[[J]], %c{{[0-9]+}}]
// CHECK:           tensor.insert
func.func @block_amax(%x: tensor<?x4x16xf32>, %init: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(m, j, k) -> (m, j, k)>, affine_map<(m, j, k) -> (m, j)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<?x4x16xf32>) outs(%init : tensor<?x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = math.absf %in : f32
    %mx = arith.maximumf %a, %out : f32
    linalg.yield %mx : f32
  } -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}

// -----

// A whole-tensor amax (NVFP4's dynamic global scale): the outer loop over
// the rows reduces too, so every row folds into the one element of the
// 0-d init.
// CHECK-LABEL: func.func @tensor_amax
// CHECK:       scf.for %[[M:.*]] = %c0 to %{{.*}} step %c1 iter_args(%[[T:.*]] = %{{.*}}) -> (tensor<f32>)
// CHECK:         %[[INIT:.*]] = tensor.extract %[[T]][] : tensor<f32>
// CHECK:         vector.broadcast %[[INIT]] : f32 to vector<8xf32>
// CHECK:         scf.for %[[K:.*]] = %c0 to %c64 step %c8
// CHECK:           vector.transfer_read %{{.*}}[%[[M]], %[[K]]]{{.*}} : tensor<?x64xbf16>, vector<8xbf16>
// CHECK:           arith.maximumf %{{.*}} : vector<8xf32>
// CHECK:         arith.maximumf %{{.*}} : vector<1xf32>
// CHECK:         tensor.insert %{{.*}} into %[[T]][] : tensor<f32>
// CHECK-NOT:   linalg.generic
func.func @tensor_amax(%x: tensor<?x64xbf16>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [affine_map<(m, k) -> (m, k)>, affine_map<(m, k) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<?x64xbf16>) outs(%init : tensor<f32>) {
  ^bb0(%in: bf16, %out: f32):
    %f = arith.extf %in : bf16 to f32
    %a = math.absf %f : f32
    %mx = arith.maximumf %out, %a : f32
    linalg.yield %mx : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// Rows of a [blocks, rows, 16] tensor reduced per block: the init reads
// the parallel outer loop, the middle loop reduces.
// CHECK-LABEL: func.func @middle_reduction
// CHECK:       scf.for %[[B:.*]] = %c0 to %c3 step %c1
// CHECK:         scf.for %[[R:.*]] = %c0 to %c5 step %c1
// CHECK:           tensor.extract %{{.*}}[%[[B]]] : tensor<3xi32>
// CHECK:           vector.reduction <maxsi>
// CHECK:           tensor.insert %{{.*}}[%[[B]]] : tensor<3xi32>
// CHECK-NOT:   linalg.generic
func.func @middle_reduction(%x: tensor<3x5x16xi32>, %init: tensor<3xi32>) -> tensor<3xi32> {
  %r = linalg.generic {indexing_maps = [affine_map<(b, r, k) -> (b, r, k)>, affine_map<(b, r, k) -> (b)>], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : tensor<3x5x16xi32>) outs(%init : tensor<3xi32>) {
  ^bb0(%in: i32, %out: i32):
    %v = arith.maxsi %out, %in : i32
    linalg.yield %v : i32
  } -> tensor<3xi32>
  return %r : tensor<3xi32>
}
// -----

// xor is order-free but not idempotent: the vector fold starts from zero
// and the init is folded in once, after the vector reduction.
// CHECK-LABEL: func.func @row_xor
// CHECK:       %[[Z:.*]] = arith.constant dense<0> : vector<8xi32>
// CHECK:       scf.for {{.*}} iter_args(%{{.*}} = %[[Z]]) -> (vector<8xi32>)
// CHECK:       %[[R:.*]] = vector.reduction <xor>
// CHECK:       arith.xori %{{.*}}, %[[R]] : i32
func.func @row_xor(%x: tensor<2x16xi32>, %init: tensor<2xi32>) -> tensor<2xi32> {
  %r = linalg.generic {indexing_maps = [affine_map<(m, k) -> (m, k)>, affine_map<(m, k) -> (m)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<2x16xi32>) outs(%init : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %v = arith.xori %out, %in : i32
    linalg.yield %v : i32
  } -> tensor<2xi32>
  return %r : tensor<2xi32>
}

// -----

// A float sum is left alone (regrouping it would change its rounding), as
// is a reduction over a non-innermost dimension.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT:   vector.
func.func @left_alone(%x: tensor<4x16xf32>, %init: tensor<4xf32>, %c: tensor<16xf32>) -> (tensor<4xf32>, tensor<16xf32>) {
  %s = linalg.generic {indexing_maps = [affine_map<(m, k) -> (m, k)>, affine_map<(m, k) -> (m)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x16xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.addf %out, %in : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(k, m) -> (m, k)>, affine_map<(k, m) -> (k)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x16xf32>) outs(%c : tensor<16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.maxnumf %out, %in : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %s, %t : tensor<4xf32>, tensor<16xf32>
}
