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

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// A zero-filled C consumed only by the epilogue that follows the GEMM: the
// write-back computes y[m][n] = epilogue(T[n - n0][m - m0]) and C is never
// written or read (no i32 matrix in memory); the fill and the epilogue go.
// CHECK-LABEL: func.func @fused_epilogue
// CHECK-NOT:   linalg.fill
// CHECK:       amx.tile_store
// CHECK:       %[[T:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<16x16xi32>
// CHECK:       memref.load %arg3[%{{.*}}, %{{.*}}] : memref<?x1xf32>
// CHECK:       memref.load %arg4[%{{.*}}] : memref<32xf32>
// CHECK:       arith.sitofp %[[T]] : i32 to f32
// CHECK:       arith.truncf %{{.*}} : f32 to bf16
// CHECK:       memref.store %{{.*}}, %arg5[%{{.*}}, %{{.*}}] : memref<?x32xbf16>
// CHECK-NOT:   memref.store %{{.*}}, %arg2
// CHECK-NOT:   linalg.generic
func.func @fused_epilogue(%a: memref<?x128xi8>, %b: memref<32x128xi8>, %c: memref<?x32xi32>, %rs: memref<?x1xf32>, %cs: memref<32xf32>, %y: memref<?x32xbf16>) {
  %z = arith.constant 0 : i32
  linalg.fill ins(%z : i32) outs(%c : memref<?x32xi32>)
  linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x128xi8>, memref<32x128xi8>) outs(%c : memref<?x32xi32>)
      attrs = {comfyquant.gemm = {ukernel = "i8-amx", mr = 16 : i64, nr = 16 : i64, kv = 64 : i64, mc = 64 : i64}} {
  ^bb0(%x: i8, %w: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %w32 = arith.extsi %w : i8 to i32
    %p = arith.muli %x32, %w32 : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, 0)>, affine_map<(m, n) -> (n)>, affine_map<(m, n) -> (m, n)>], iterator_types = ["parallel", "parallel"]}
      ins(%c, %rs, %cs : memref<?x32xi32>, memref<?x1xf32>, memref<32xf32>) outs(%y : memref<?x32xbf16>) {
  ^bb0(%v: i32, %r: f32, %q: f32, %o: bf16):
    %f = arith.sitofp %v : i32 to f32
    %t = arith.mulf %f, %r : f32
    %u = arith.mulf %t, %q : f32
    %h = arith.truncf %u : f32 to bf16
    linalg.yield %h : bf16
  }
  return
}
