// RUN: comfyquant-opt %s --convert-comfyquant-to-linalg -split-input-file | FileCheck %s

// ConvRot is the radix-4 butterfly: log4(Gr) stages of stride 1, 4, 16, ...
// over [M, K/(4s), 4, s] views, each output 0.5 * (((±a ± b) ± c) ± d) in
// f32 (the sign flips where digit + input index == 3); one rounding to the
// activation type at the end. No Gr x Gr matrix appears. The four inputs
// of a stage are slices of the digit, read with projected permutations (so
// a stage vectorizes along s).

// CHECK-DAG:   #[[DIGIT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-LABEL: func.func @rotate256
// CHECK-NOT:   dense<
// CHECK:       tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2, 3]] output_shape [%{{.*}}, 128, 4, 1] : tensor<?x512xbf16> into tensor<?x128x4x1xbf16>
// CHECK:       tensor.extract_slice %{{.*}}[0, 0, 0, 0] [%{{.*}}, 128, 1, 1] [1, 1, 1, 1] : tensor<?x128x4x1xbf16> to tensor<?x128x1xbf16>
// CHECK:       tensor.extract_slice %{{.*}}[0, 0, 3, 0] [%{{.*}}, 128, 1, 1] [1, 1, 1, 1] : tensor<?x128x4x1xbf16> to tensor<?x128x1xbf16>
// CHECK:       linalg.generic {indexing_maps = [#[[DIGIT]], #[[DIGIT]], #[[DIGIT]], #[[DIGIT]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK:         %[[D:.*]] = linalg.index 2 : index
// CHECK:         %[[A:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK:         arith.cmpi eq, %[[D]], %c3
// CHECK:         arith.negf
// CHECK:         arith.addf
// CHECK:         arith.addf
// CHECK:         arith.addf
// CHECK:         arith.mulf %{{.*}}, %cst{{.*}} : f32
// CHECK:         linalg.yield %{{.*}} : f32
// CHECK:       tensor.expand_shape {{.*}} output_shape [%{{.*}}, 32, 4, 4] : tensor<?x512xf32>
// CHECK:       tensor.expand_shape {{.*}} output_shape [%{{.*}}, 8, 4, 16] : tensor<?x512xf32>
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
