// RUN: comfyquant-opt %s --comfyquant-cpu-codegen | FileCheck %s
// RUN: comfyquant-opt %s --comfyquant-cpu-codegen="variant=avx512-vnni" | FileCheck %s --check-prefix=VNNI
// RUN: comfyquant-opt %s --comfyquant-cpu-codegen="lower-to-llvm=false" | FileCheck %s --check-prefix=TENSOR

// The whole CPU pipeline on a decomposed int8 linear: the weight becomes an
// argument, y a destination argument at position 1 written in place, the
// GEMM a pmaddwd micro-kernel in the outer form (tiles of two vectors of 8
// columns over the column range); the result is LLVM dialect with one packed
// entry `void cq_test(void **args)` (args[i] -> descriptor of argument i)
// and every other function internal. The GEMM writes y directly, so the
// function honours its trailing column range [begin, end) and its entry is
// listed in the module's comfyquant.column_split.

comfyquant.checkpoint @checkpoint path "m.safetensors" size 4096 hash "fnv1a64:0123456789abcdef" {
  comfyquant.tensor @"p.weight" : tensor<32x64xi8> at 256
  comfyquant.tensor @"p.weight_scale" : tensor<32x1xf32> at 128
}

// TENSOR-LABEL: func.func @p(
// TENSOR-SAME:    %arg0: tensor<?x64xbf16> {bufferization.writable = false},
// TENSOR-SAME:    %arg1: memref<?x32xbf16> {comfyquant.output},
// TENSOR-SAME:    %arg2: tensor<32x64xi8> {bufferization.writable = false, comfyquant.dtype = "I8"
// TENSOR-SAME:    %arg4: index {comfyquant.column_begin}, %arg5: index {comfyquant.column_end})
// TENSOR-SAME:    comfyquant.column_range
// TENSOR-SAME:    comfyquant.target = #comfyquant.target<cpu, "x86-64-v3">
// TENSOR-SAME:    llvm.emit_c_interface
// The rotated quantizer runs row by row; no [M, K] f32 rotation exists.
// TENSOR-NOT:     tensor<?x64xf32>
// TENSOR:         scf.for {{.*}} -> (tensor<?x64xi8>, tensor<?x1xf32>)
// TENSOR:           vector<8xf32>
// TENSOR:           tensor.insert_slice {{.*}} : tensor<1x64xi8> into tensor<?x64xi8>
// TENSOR:         scf.for %{{.*}} = %arg4 to %{{.*}} step %c16
// TENSOR:         comfyquant.intrinsic = "llvm.x86.avx2.pmadd.wd"
// TENSOR:         bufferization.materialize_in_destination %{{.*}} in restrict writable %arg1 : (tensor<?x32xbf16>, memref<?x32xbf16>) -> ()
// TENSOR-NEXT:    return{{$}}

// CHECK:       module attributes {comfyquant.column_split = ["cq_test"], comfyquant.target = #comfyquant.target<cpu, "x86-64-v3">}
// CHECK-NOT:   comfyquant.
// CHECK:       llvm.func internal @p(
// CHECK:         llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"
// CHECK:       llvm.func internal @_mlir_ciface_p(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// CHECK:       llvm.func @cq_test(%[[ARGS:.*]]: !llvm.ptr) {
// CHECK-NEXT:    %[[X:.*]] = llvm.load %[[ARGS]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:    %[[P1:.*]] = llvm.getelementptr %[[ARGS]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[Y:.*]] = llvm.load %[[P1]] : !llvm.ptr -> !llvm.ptr
// CHECK:         llvm.call @_mlir_ciface_p(%[[X]], %[[Y]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64) -> ()
// CHECK-NEXT:    llvm.return

// VNNI: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"
func.func @p(%x: tensor<?x64xbf16>) -> tensor<?x32xbf16> attributes {comfyquant.entry = "cq_test"} {
  %w = comfyquant.weight @checkpoint::@"p.weight" : tensor<32x64xi8>
  %s = comfyquant.weight @checkpoint::@"p.weight_scale" : tensor<32x1xf32>
  %c, %xs = comfyquant.quantize %x <int8_row> rotation <16> : tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x1xf32>
  %y = comfyquant.qgemm %c, %w row_scale %xs : tensor<?x1xf32> col_scale %s : tensor<32x1xf32> : tensor<?x64xi8>, tensor<32x64xi8> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}
