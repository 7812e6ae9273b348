// RUN: comfyquant-opt %s -split-input-file --comfyquant-cpu-codegen="lower-to-llvm=false" | FileCheck %s

// Integer decode arithmetic written in i32 (2-bit codes at bit 2·(k mod 4)
// of byte k / 4) runs in the narrowest lanes its values fit after
// vectorization (upstream arith-int-range-narrowing): bytes here, a quarter
// of the registers and instructions of i32 lanes.
// CHECK-LABEL: func.func @two_bit_codes
// CHECK:         arith.shrui %{{.*}} : vector<8xi8>
// CHECK:         arith.andi %{{.*}} : vector<8xi8>
// CHECK-NOT:     arith.shrui %{{.*}} : vector<8xi32>
func.func @two_bit_codes(%w: tensor<4x16xi8>) -> tensor<4x64xf32> {
  %c3 = arith.constant 3 : i32
  %c2i = arith.constant 2 : i32
  %c4 = arith.constant 4 : index
  %e = tensor.empty() : tensor<4x64xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<4x64xf32>) {
  ^bb0(%o: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %q = arith.divui %k, %c4 : index
    %b = tensor.extract %w[%n, %q] : tensor<4x16xi8>
    %u = arith.extui %b : i8 to i32
    %r = arith.remui %k, %c4 : index
    %ri = arith.index_cast %r : index to i32
    %sh = arith.muli %ri, %c2i : i32
    %s = arith.shrui %u, %sh : i32
    %c = arith.andi %s, %c3 : i32
    %f = arith.sitofp %c : i32 to f32
    linalg.yield %f : f32
  } -> tensor<4x64xf32>
  return %d : tensor<4x64xf32>
}

// -----

// A nibble unpack takes neither i32 nor byte lanes: each packed byte
// widened to a 16-bit lane holds both of its nibbles, moved to the lane's
// two bytes (comfyquant-cpu-vectorize-elementwise's nibble pairs).
// CHECK-LABEL: func.func @nibbles
// CHECK:         arith.extui %{{.*}} : vector<4xi8> to vector<4xi16>
// CHECK:         arith.shli %{{.*}} : vector<4xi16>
// CHECK:         vector.bitcast %{{.*}} : vector<4xi16> to vector<8xi8>
// CHECK-NOT:     arith.shrui %{{.*}} : vector<8xi32>
// CHECK-NOT:     arith.select
func.func @nibbles(%w: tensor<4x32xi8>) -> tensor<4x64xf32> {
  %c4 = arith.constant 4 : i32
  %c15 = arith.constant 15 : i32
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %e = tensor.empty() : tensor<4x64xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<4x64xf32>) {
  ^bb0(%o: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %h = arith.divui %k, %c2 : index
    %b = tensor.extract %w[%n, %h] : tensor<4x32xi8>
    %u = arith.extui %b : i8 to i32
    %r = arith.remui %k, %c2 : index
    %lo = arith.cmpi eq, %r, %c0 : index
    %s = arith.shrui %u, %c4 : i32
    %hi = arith.andi %s, %c15 : i32
    %l = arith.andi %u, %c15 : i32
    %c = arith.select %lo, %l, %hi : i32
    %f = arith.sitofp %c : i32 to f32
    linalg.yield %f : f32
  } -> tensor<4x64xf32>
  return %d : tensor<4x64xf32>
}
