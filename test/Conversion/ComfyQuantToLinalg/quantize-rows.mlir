// RUN: comfyquant-opt %s --convert-comfyquant-to-linalg="rotated-quantize=rows" -split-input-file | FileCheck %s

// rotated-quantize=rows (the CPU layout): a rotated row-wise quantizer runs
// one row per scf.for iteration. The butterfly, the amax and the codes of a
// row work on static [1, K] tensors; no [M, K] f32 tensor is made.
// CHECK-LABEL: func.func @int8_row_rotated
// CHECK-NOT:   tensor<?x64xf32>
// CHECK:       %[[M:.*]] = tensor.dim %arg0, %c0 : tensor<?x64xbf16>
// CHECK:       %[[C0:.*]] = tensor.empty(%[[M]]) : tensor<?x64xi8>
// CHECK:       %[[S0:.*]] = tensor.empty(%[[M]]) : tensor<?x1xf32>
// CHECK:       %[[R:.*]]:2 = scf.for %[[I:.*]] = %c0 to %[[M]] step %c1 iter_args(%[[C:.*]] = %[[C0]], %[[S:.*]] = %[[S0]])
// CHECK:         %[[ROW:.*]] = tensor.extract_slice %arg0[%[[I]], 0] [1, 64] [1, 1] : tensor<?x64xbf16> to tensor<1x64xbf16>
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:         } -> tensor<1x64xf32>
// CHECK:         tensor.collapse_shape %{{.*}} : tensor<1x1x4x16xbf16> into tensor<1x64xbf16>
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK:           math.absf
// CHECK:         arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:         arith.fptosi %{{.*}} : f32 to i8
// CHECK:         } -> tensor<1x64xi8>
// CHECK:         %[[NC:.*]] = tensor.insert_slice %{{.*}} into %[[C]][%[[I]], 0] [1, 64] [1, 1] : tensor<1x64xi8> into tensor<?x64xi8>
// CHECK:         %[[NS:.*]] = tensor.insert_slice %{{.*}} into %[[S]][%[[I]], 0] [1, 1] [1, 1] : tensor<1x1xf32> into tensor<?x1xf32>
// CHECK:         scf.yield %[[NC]], %[[NS]]
// CHECK:       return %[[R]]#0, %[[R]]#1
func.func @int8_row_rotated(%x: tensor<?x64xbf16>) -> (tensor<?x64xi8>, tensor<?x1xf32>) {
  %c, %s = comfyquant.quantize %x <int8_row> rotation <64> : tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x1xf32>
  return %c, %s : tensor<?x64xi8>, tensor<?x1xf32>
}

// -----

// int4 codes (sign-extended i8 rows) are cast back to i4 after the loop.
// CHECK-LABEL: func.func @int4_row_rotated
// CHECK:       %[[R:.*]]:2 = scf.for
// CHECK:         tensor.extract_slice %arg0[%{{.*}}, 0] [1, 32] [1, 1] : tensor<?x32xf16> to tensor<1x32xf16>
// CHECK:         math.roundeven
// CHECK:         scf.yield
// CHECK:       %[[C:.*]] = builtin.unrealized_conversion_cast %[[R]]#0 : tensor<?x32xi8> to tensor<?x32xi4>
// CHECK:       return %[[C]], %[[R]]#1
func.func @int4_row_rotated(%x: tensor<?x32xf16>) -> (tensor<?x32xi4>, tensor<?x1xf32>) {
  %c, %s = comfyquant.quantize %x <int4_row> rotation <16> : tensor<?x32xf16> -> tensor<?x32xi4>, tensor<?x1xf32>
  return %c, %s : tensor<?x32xi4>, tensor<?x1xf32>
}

// -----

// Without a rotation nothing is row-looped: two passes over x (amax, codes)
// make no f32 temporary.
// CHECK-LABEL: func.func @int8_row_plain
// CHECK-NOT:   scf.for
// CHECK:       linalg.generic {{.*}} ins(%arg0 : tensor<?x64xbf16>)
// CHECK-NOT:   scf.for
// CHECK:       return
func.func @int8_row_plain(%x: tensor<?x64xbf16>) -> (tensor<?x64xi8>, tensor<?x1xf32>) {
  %c, %s = comfyquant.quantize %x <int8_row> : tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x1xf32>
  return %c, %s : tensor<?x64xi8>, tensor<?x1xf32>
}
