// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-tabulate-decoders --canonicalize | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// The E2M1 decode of a low nibble (masks, shifts, an f16 bitcast, widening,
// the 2^-14 rebias) folds to the 16 E2M1 values; the block scale, a value
// of its own, still multiplies the lookup.
// CHECK-LABEL: func.func @e2m1_low_nibble
// CHECK-DAG:     %[[T:.*]] = arith.constant dense<[0.000000e+00, 5.000000e-01, 1.000000e+00, 1.500000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 6.000000e+00, -0.000000e+00, -5.000000e-01, -1.000000e+00, -1.500000e+00, -2.000000e+00, -3.000000e+00, -4.000000e+00, -6.000000e+00]> : tensor<16xf32>
// CHECK:         linalg.generic
// CHECK:         ^bb0(%[[B:.*]]: i8, %[[S:.*]]: f32, %{{.*}}: f32):
// CHECK:           %[[C:.*]] = arith.andi %[[B]], %{{.*}} : i8
// CHECK:           %[[W:.*]] = arith.extui %[[C]] : i8 to i32
// CHECK:           %[[I:.*]] = arith.index_cast %[[W]] : i32 to index
// CHECK:           %[[V:.*]] = tensor.extract %[[T]][%[[I]]] : tensor<16xf32>
// CHECK-NOT:       arith.bitcast
// CHECK:           %[[P:.*]] = arith.mulf %[[V]], %[[S]] : f32
// CHECK:           linalg.yield %[[P]] : f32
func.func @e2m1_low_nibble(%w: tensor<4x32xi8>, %s: tensor<4xf32>) -> tensor<4x32xf32> {
  %c15 = arith.constant 15 : i8
  %c7_i16 = arith.constant 7 : i16
  %c8_i16 = arith.constant 8 : i16
  %c9_i16 = arith.constant 9 : i16
  %c12_i16 = arith.constant 12 : i16
  %rebias = arith.constant 1.638400e+04 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%w, %s : tensor<4x32xi8>, tensor<4xf32>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %scale: f32, %out: f32):
    %code = arith.andi %b, %c15 : i8
    %x = arith.extui %code : i8 to i16
    %mag = arith.andi %x, %c7_i16 : i16
    %magbits = arith.shli %mag, %c9_i16 : i16
    %sign = arith.andi %x, %c8_i16 : i16
    %signbits = arith.shli %sign, %c12_i16 : i16
    %bits = arith.ori %signbits, %magbits : i16
    %h = arith.bitcast %bits : i16 to f16
    %f = arith.extf %h : f16 to f32
    %v = arith.mulf %f, %rebias : f32
    %p = arith.mulf %v, %scale : f32
    linalg.yield %p : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A high nibble (a shift leaves four bits of a byte) is a code too.
// CHECK-LABEL: func.func @high_nibble
// CHECK:         arith.shrui
// CHECK:         tensor.extract %{{.*}} : tensor<16xf32>
// CHECK-NOT:     arith.sitofp
func.func @high_nibble(%w: tensor<4x32xi8>) -> tensor<4x32xf32> {
  %c4 = arith.constant 4 : i8
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %out: f32):
    %code = arith.shrui %b, %c4 : i8
    %f = arith.uitofp %code : i8 to f32
    %v = arith.mulf %f, %half : f32
    linalg.yield %v : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// Five bits have 32 values: not a code, the arithmetic stays.
// CHECK-LABEL: func.func @five_bits
// CHECK-NOT:     tensor.extract
// CHECK:         arith.uitofp
func.func @five_bits(%w: tensor<4x32xi8>) -> tensor<4x32xf32> {
  %c31 = arith.constant 31 : i8
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %out: f32):
    %code = arith.andi %b, %c31 : i8
    %f = arith.uitofp %code : i8 to f32
    %v = arith.mulf %f, %half : f32
    linalg.yield %v : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A single op is not worth a lookup.
// CHECK-LABEL: func.func @one_op
// CHECK-NOT:     tensor.extract
// CHECK:         arith.uitofp
func.func @one_op(%w: tensor<4x32xi8>) -> tensor<4x32xf32> {
  %c15 = arith.constant 15 : i8
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %out: f32):
    %code = arith.andi %b, %c15 : i8
    %f = arith.uitofp %code : i8 to f32
    linalg.yield %f : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>

// A GEMM's body is left as it is (its decode is part of what is matched).
// CHECK-LABEL: func.func @gemm_body
// CHECK-NOT:     tensor.extract
// CHECK:         arith.uitofp
func.func @gemm_body(%a: tensor<4x32xf32>, %w: tensor<8x32xi8>, %acc: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c15 = arith.constant 15 : i8
  %half = arith.constant 0.5 : f32
  %r = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : tensor<4x32xf32>, tensor<8x32xi8>) outs(%acc : tensor<4x8xf32>) {
  ^bb0(%x: f32, %b: i8, %o: f32):
    %code = arith.andi %b, %c15 : i8
    %f = arith.uitofp %code : i8 to f32
    %v = arith.mulf %f, %half : f32
    %p = arith.mulf %x, %v : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
