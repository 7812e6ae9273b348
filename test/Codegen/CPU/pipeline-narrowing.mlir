// RUN: comfyquant-opt %s --comfyquant-cpu-codegen="lower-to-llvm=false" | FileCheck %s

// Integer decode arithmetic written in i32 (a nibble unpack) runs in the
// narrowest lanes its values fit after vectorization (upstream
// arith-int-range-narrowing): bytes here, a quarter of the registers and
// instructions of i32 lanes.
// CHECK-LABEL: func.func @nibbles
// CHECK:         arith.shrui %{{.*}} : vector<8xi8>
// CHECK:         arith.andi %{{.*}} : vector<8xi8>
// CHECK-NOT:     arith.shrui %{{.*}} : vector<8xi32>
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
