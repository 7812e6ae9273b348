// RUN: comfyquant-opt %s --convert-comfyquant-to-linalg -split-input-file | FileCheck %s

// ConvRot is the radix-4 butterfly: log4(Gr) stages of stride 1, 4, 16, ...,
// each output 0.5 * (((±a ± b) ± c) ± d) in f32 (the sign flips where digit
// + input index == 3); one rounding to the activation type at the end. No
// Gr x Gr matrix appears. Strides 1 and 4 read their four inputs by index
// (k / 4s) * 4s + c * s + k % s from the unreshaped tensor (widened to f32
// first), so they vectorize along k; wider strides read slices of the digit of
// [M, K/(4s), 4, s] views with projected permutations and vectorize along s.

// CHECK-DAG:   #[[DIGIT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-LABEL: func.func @rotate256
// CHECK-NOT:   dense<
// CHECK:       %[[X:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<?x512xbf16>) outs(%{{.*}} : tensor<?x512xf32>)
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:       linalg.generic {indexing_maps = [#{{.*}}], iterator_types = ["parallel", "parallel"]} outs(%{{.*}} : tensor<?x512xf32>)
// CHECK:         %[[ROW:.*]] = linalg.index 0 : index
// CHECK:         %[[K:.*]] = linalg.index 1 : index
// CHECK:         %[[BLOCK:.*]] = arith.divui %[[K]], %c4 : index
// CHECK:         %[[FIRST:.*]] = arith.muli %[[BLOCK]], %c4 : index
// CHECK:         %[[D:.*]] = arith.remui %[[K]], %c4 : index
// CHECK:         tensor.extract %[[X]][%[[ROW]], %[[FIRST]]] : tensor<?x512xf32>
// CHECK:         %[[I3:.*]] = arith.addi %[[FIRST]], %c3 : index
// CHECK:         tensor.extract %[[X]][%[[ROW]], %[[I3]]] : tensor<?x512xf32>
// CHECK:         arith.cmpi eq, %[[D]], %c3
// CHECK:         arith.negf
// CHECK:         arith.addf
// CHECK:         arith.addf
// CHECK:         arith.addf
// CHECK:         arith.mulf %{{.*}}, %cst{{.*}} : f32
// CHECK:         linalg.yield %{{.*}} : f32
// CHECK:       linalg.generic {indexing_maps = [#{{.*}}], iterator_types = ["parallel", "parallel"]} outs(%{{.*}} : tensor<?x512xf32>)
// CHECK:         %[[K4:.*]] = linalg.index 1 : index
// CHECK:         arith.divui %[[K4]], %c16 : index
// CHECK:         %[[IN:.*]] = arith.remui %[[K4]], %c16 : index
// CHECK:         arith.divui %[[IN]], %c4 : index
// CHECK:         arith.remui %[[K4]], %c4 : index
// CHECK:         arith.addi %{{.*}}, %c12 : index
// CHECK:       tensor.expand_shape {{.*}} output_shape [%{{.*}}, 8, 4, 16] : tensor<?x512xf32>
// CHECK:       linalg.generic {indexing_maps = [#[[DIGIT]], #[[DIGIT]], #[[DIGIT]], #[[DIGIT]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK:         linalg.index 2 : index
// CHECK:       tensor.expand_shape {{.*}} output_shape [%{{.*}}, 2, 4, 64] : tensor<?x512xf32>
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// CHECK-NOT:   linalg.generic
// CHECK:       return %{{.*}} : tensor<?x512xbf16>
func.func @rotate256(%x: tensor<?x512xbf16>) -> tensor<?x512xbf16> {
  %r = comfyquant.rotate %x <256> : tensor<?x512xbf16>
  return %r : tensor<?x512xbf16>
}

// -----

// CHECK-LABEL: func.func @rotate16
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT:   linalg.generic
func.func @rotate16(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %r = comfyquant.rotate %x <16> : tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}
