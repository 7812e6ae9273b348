// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-tag-gemms,comfyquant-fuse-operand-producers))' | FileCheck %s

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// Nibbles unpacked into a full N x K temporary, then decoded for the GEMM:
// one producer reads the packed bytes, the temporary is gone.
// CHECK-LABEL: func.func @unpack_then_decode
// CHECK-NOT:     outs(%{{.*}} : tensor<8x16xi8>)
// CHECK:         %[[B:.*]] = linalg.generic
// CHECK-SAME:      outs(%{{.*}} : tensor<8x16xf32>)
// CHECK:           tensor.extract %{{.*}} : tensor<8x8xi8>
// CHECK:           arith.sitofp
// CHECK:           arith.mulf
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%{{.*}}, %[[B]] : tensor<?x16xf32>, tensor<8x16xf32>)
func.func @unpack_then_decode(%a: tensor<?x16xf32>, %packed: tensor<8x8xi8>,
                              %acc: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %c2 = arith.constant 2 : index
  %c4_i8 = arith.constant 4 : i8
  %c15_i8 = arith.constant 15 : i8
  %scale = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<8x16xi8>
  %codes = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<8x16xi8>) {
  ^bb0(%out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c2 : index
    %v = tensor.extract %packed[%n, %byte] : tensor<8x8xi8>
    %hi = arith.shrui %v, %c4_i8 : i8
    %lo = arith.andi %v, %c15_i8 : i8
    %r = arith.remui %k, %c2 : index
    %z = arith.cmpi eq, %r, %c2 : index
    %code = arith.select %z, %lo, %hi : i8
    linalg.yield %code : i8
  } -> tensor<8x16xi8>
  %f = tensor.empty() : tensor<8x16xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%codes : tensor<8x16xi8>) outs(%f : tensor<8x16xf32>) {
  ^bb0(%c: i8, %out: f32):
    %x = arith.sitofp %c : i8 to f32
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
  } -> tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<?x16xf32>, tensor<8x16xf32>) outs(%acc : tensor<?x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// The temporary has another user: it is needed anyway, nothing is fused.
// CHECK-LABEL: func.func @shared_temporary
// CHECK:         %[[T:.*]] = linalg.generic
// CHECK-SAME:      outs(%{{.*}} : tensor<8x16xi8>)
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[T]] : tensor<8x16xi8>)
// CHECK:         return
func.func @shared_temporary(%a: tensor<?x16xf32>, %w: tensor<8x16xi8>,
                            %acc: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<8x16xi8>) {
  %c1_i8 = arith.constant 1 : i8
  %e = tensor.empty() : tensor<8x16xi8>
  %codes = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x16xi8>) outs(%e : tensor<8x16xi8>) {
  ^bb0(%v: i8, %out: i8):
    %s = arith.shrsi %v, %c1_i8 : i8
    linalg.yield %s : i8
  } -> tensor<8x16xi8>
  %f = tensor.empty() : tensor<8x16xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%codes : tensor<8x16xi8>) outs(%f : tensor<8x16xf32>) {
  ^bb0(%c: i8, %out: f32):
    %x = arith.sitofp %c : i8 to f32
    linalg.yield %x : f32
  } -> tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<?x16xf32>, tensor<8x16xf32>) outs(%acc : tensor<?x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r, %codes : tensor<?x8xf32>, tensor<8x16xi8>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// Block scales stored in another order (here transposed), relaid out by an
// op whose elements are a function of their indices, then read per block
// by the decoder: the decoder reads the stored scale where it needs it, the
// relaid-out temporary is gone.
// CHECK-LABEL: func.func @relayout_read_by_element
// CHECK-NOT:     outs(%{{.*}} : tensor<8x4xf32>)
// CHECK:         %[[B:.*]] = linalg.generic
// CHECK-SAME:      ins(%{{.*}} : tensor<8x16xi8>)
// CHECK-SAME:      outs(%{{.*}} : tensor<8x16xf32>)
// CHECK:           %[[N:.*]] = linalg.index 0
// CHECK:           %[[K:.*]] = linalg.index 1
// CHECK:           %[[G:.*]] = arith.divui %[[K]], %c4
// CHECK:           tensor.extract %{{.*}}[%[[G]], %[[N]]] : tensor<4x8xf32>
// CHECK:           arith.mulf
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%{{.*}}, %[[B]] : tensor<?x16xf32>, tensor<8x16xf32>)
func.func @relayout_read_by_element(%a: tensor<?x16xf32>, %w: tensor<8x16xi8>,
                                    %stored: tensor<4x8xf32>,
                                    %acc: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %c4 = arith.constant 4 : index
  %e = tensor.empty() : tensor<8x4xf32>
  %scales = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<8x4xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %g = linalg.index 1 : index
    %s = tensor.extract %stored[%g, %n] : tensor<4x8xf32>
    linalg.yield %s : f32
  } -> tensor<8x4xf32>
  %f = tensor.empty() : tensor<8x16xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x16xi8>) outs(%f : tensor<8x16xf32>) {
  ^bb0(%c: i8, %out: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %g = arith.divui %k, %c4 : index
    %s = tensor.extract %scales[%n, %g] : tensor<8x4xf32>
    %x = arith.sitofp %c : i8 to f32
    %y = arith.mulf %x, %s : f32
    linalg.yield %y : f32
  } -> tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<?x16xf32>, tensor<8x16xf32>) outs(%acc : tensor<?x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// The scales' op reads its destination (not a function of the indices
// alone): it stays, and the decoder reads its result.
// CHECK-LABEL: func.func @relayout_reads_its_init
// CHECK:         %[[S:.*]] = linalg.generic
// CHECK-SAME:      outs(%{{.*}} : tensor<8x4xf32>)
// CHECK:         linalg.generic
// CHECK:           tensor.extract %[[S]]
func.func @relayout_reads_its_init(%a: tensor<?x16xf32>, %w: tensor<8x16xi8>,
                                   %init: tensor<8x4xf32>,
                                   %acc: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %c4 = arith.constant 4 : index
  %scales = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%init : tensor<8x4xf32>) {
  ^bb0(%out: f32):
    %d = arith.addf %out, %out : f32
    linalg.yield %d : f32
  } -> tensor<8x4xf32>
  %f = tensor.empty() : tensor<8x16xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x16xi8>) outs(%f : tensor<8x16xf32>) {
  ^bb0(%c: i8, %out: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %g = arith.divui %k, %c4 : index
    %s = tensor.extract %scales[%n, %g] : tensor<8x4xf32>
    %x = arith.sitofp %c : i8 to f32
    %y = arith.mulf %x, %s : f32
    linalg.yield %y : f32
  } -> tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<?x16xf32>, tensor<8x16xf32>) outs(%acc : tensor<?x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
