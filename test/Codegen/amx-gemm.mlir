// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-amx-gemm | FileCheck %s

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// AMX on buffers: the activation codes packed once (Ap[k/4][4m + k%4],
// rows padded to 16 with zeros), 16 x 64-byte tiles of the weights loaded
// where they are, tdpbssd into a transposed 16 x 16 C tile, added into C.
// CHECK-LABEL: func.func @amx
// CHECK:       %[[AP:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<32x?xi8>
// CHECK:       vector.load %arg0[%{{.*}}, %{{.*}}] : memref<?x128xi8>, vector<4xi8>
// CHECK:       vector.store %{{.*}}, %[[AP]]
// CHECK:       %[[T:.*]] = memref.alloca() : memref<16x16xi32>
// CHECK:       scf.for %[[N0:.*]] = %c0 to %c32 step %c16
// CHECK:         scf.for %[[M0:.*]] = %c0 to %{{.*}} step %c16
// CHECK:           amx.tile_zero : !amx.tile<16x16xi32>
// CHECK:           scf.for %[[K0:.*]] = %c0 to %c128 step %c64
// CHECK:             amx.tile_load %arg1[%[[N0]], %[[K0]]] : memref<32x128xi8> into !amx.tile<16x64xi8>
// CHECK:             amx.tile_load %[[AP]][%{{.*}}, %{{.*}}] : memref<32x?xi8> into !amx.tile<16x64xi8>
// CHECK:             amx.tile_muli %{{.*}}, %{{.*}}, %{{.*}} : !amx.tile<16x64xi8>, !amx.tile<16x64xi8>, !amx.tile<16x16xi32>
// CHECK:           amx.tile_store %[[T]][%c0, %c0], %{{.*}} : memref<16x16xi32>, !amx.tile<16x16xi32>
// CHECK:           memref.load %[[T]][%[[I:.*]], %[[J:.*]]] : memref<16x16xi32>
// CHECK:           memref.load %arg2
// CHECK:           arith.addi
// CHECK:           memref.store %{{.*}}, %arg2
// CHECK:       memref.dealloc %[[AP]]
// CHECK-NOT:   linalg.generic
func.func @amx(%a: memref<?x128xi8>, %b: memref<32x128xi8>, %c: memref<?x32xi32>) {
  linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x128xi8>, memref<32x128xi8>) outs(%c : memref<?x32xi32>)
      attrs = {comfyquant.gemm = {ukernel = "i8-amx", mr = 16 : i64, nr = 16 : i64, kv = 64 : i64, mc = 64 : i64}} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %p = arith.muli %x32, %y32 : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  }
  return
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// The emulation keeps the packing and write-back, with a plain tile product.
// CHECK-LABEL: func.func @emulated
// CHECK-NOT:   amx.
// CHECK:       memref.load %arg1
// CHECK:       arith.muli
// CHECK-NOT:   amx.
func.func @emulated(%a: memref<?x64xi8>, %b: memref<16x64xi8>, %c: memref<?x16xi32>) {
  linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x64xi8>, memref<16x64xi8>) outs(%c : memref<?x16xi32>)
      attrs = {comfyquant.gemm = {ukernel = "i8-amx-emulated", mr = 16 : i64, nr = 16 : i64, kv = 64 : i64, mc = 64 : i64}} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %p = arith.muli %x32, %y32 : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  }
  return
}
