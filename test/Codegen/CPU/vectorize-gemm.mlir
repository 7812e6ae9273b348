// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-vectorize-gemm --canonicalize | FileCheck %s

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// Register blocking on tensors: M blocks of mc rows, N tiles of nr rows of
// B, M tiles of mr rows (then tiles of the powers of two below mr), a K
// loop of kv-element vector steps carrying mr x nr accumulators (here 2 x 3
// pmaddwd accumulators of vector<8xi32>), a padded K tail (K = 40 = 2 x 16 + 8), one horizontal
// reduction per accumulator, a static partial N tile (N = 7 = 2 x 3 + 1).
// CHECK-LABEL: func.func @i8_pmaddwd
// CHECK:       scf.for %[[MB:.*]] = %c0 to %{{.*}} step %c4 iter_args(%{{.*}} = %{{.*}}) -> (tensor<?x7xi32>)
// CHECK:         scf.for %[[N0:.*]] = %c0 to %c6 step %c3
// CHECK:           %[[BT:.*]] = tensor.extract_slice %arg1[%[[N0]], 0] [3, 40] [1, 1]
// CHECK:           scf.for %{{.*}} step %c2
// CHECK:             %[[ACC:.*]]:6 = scf.for %[[K:.*]] = %c0 to %c32 step %c16 iter_args({{.*}}) -> (vector<8xi32>, vector<8xi32>, vector<8xi32>, vector<8xi32>, vector<8xi32>, vector<8xi32>)
// CHECK-COUNT-2:       vector.transfer_read %arg0[%{{.*}}, %[[K]]], %c0_i8 {in_bounds = [true]} : tensor<?x40xi8>, vector<16xi8>
// CHECK-COUNT-3:       vector.transfer_read %[[BT]][%{{.*}}, %[[K]]], %c0_i8 {in_bounds = [true]} : tensor<3x40xi8>, vector<16xi8>
// CHECK:               arith.extsi %{{.*}} : vector<16xi8> to vector<16xi16>
// CHECK:               builtin.unrealized_conversion_cast %{{.*}}, %{{.*}} : vector<16xi16>, vector<16xi16> to vector<8xi32> {comfyquant.intrinsic = "llvm.x86.avx2.pmadd.wd"}
// CHECK:             vector.transfer_read %arg0[%{{.*}}, %c32], %c0_i8 : tensor<?x40xi8>, vector<16xi8>
// CHECK:             vector.reduction <add>, %{{.*}} : vector<8xi32> into i32
// CHECK:             vector.from_elements %{{.*}}, %{{.*}}, %{{.*}} : vector<3xi32>
// CHECK:             vector.transfer_write %{{.*}} {in_bounds = [true]} : vector<3xi32>, tensor<?x7xi32>
// CHECK:           scf.for %{{.*}} step %c1
// CHECK:         tensor.extract_slice %arg1[6, 0] [1, 40] [1, 1] : tensor<7x40xi8> to tensor<1x40xi8>
// CHECK:           vector.transfer_write %{{.*}} : vector<1xi32>, tensor<?x7xi32>
// CHECK-NOT:   linalg.generic
func.func @i8_pmaddwd(%a: tensor<?x40xi8>, %b: tensor<7x40xi8>) -> tensor<?x7xi32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x40xi8>
  %e = tensor.empty(%m) : tensor<?x7xi32>
  %z = arith.constant 0 : i32
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<?x7xi32>) -> tensor<?x7xi32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x40xi8>, tensor<7x40xi8>) outs(%f : tensor<?x7xi32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<i8_pmaddwd, mr = 2, nr = 3, kv = 16, mc = 4, decode = adaptive>} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %p = arith.muli %x32, %y32 : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x7xi32>
  return %r : tensor<?x7xi32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// VNNI: b ^ 0x80 as the unsigned operand of vpdpbusd, and 128·Σk A[m,k]
// (computed once per row of the M block, with vpdpbusd of ones against A)
// subtracted.
// CHECK-LABEL: func.func @i8_vnni
// CHECK:       %[[SUMS:.*]] = scf.for %[[ROW:[a-z0-9_]+]] = {{.*}} -> (tensor<8xi32>)
// CHECK:         scf.for {{.*}} -> (vector<16xi32>)
// CHECK:           %[[AROW:.*]] = vector.transfer_read %{{.*}}[%[[ROW]], %{{.*}}]
// CHECK:           {comfyquant.intrinsic = "llvm.x86.avx512.vpdpbusd.512"}
// CHECK:         vector.reduction <add>
// CHECK:         tensor.insert
// CHECK:       scf.for
// CHECK:         scf.for {{.*}} -> (vector<16xi32>)
// CHECK:           %[[B:.*]] = arith.xori %{{.*}}, %cst{{.*}} : vector<64xi8>
// CHECK:           builtin.unrealized_conversion_cast %{{.*}}, %[[B]], %{{.*}} : vector<16xi32>, vector<64xi8>, vector<64xi8> to vector<16xi32> {comfyquant.intrinsic = "llvm.x86.avx512.vpdpbusd.512"}
// CHECK:         %[[AS:.*]] = tensor.extract %[[SUMS]]
// CHECK:         %[[CORR:.*]] = arith.muli %[[AS]], %c128_i32 : i32
// CHECK:         %[[S:.*]] = vector.reduction <add>
// CHECK:         arith.subi %[[S]], %[[CORR]] : i32
func.func @i8_vnni(%a: tensor<?x128xi8>, %b: tensor<1x128xi8>) -> tensor<?x1xi32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x128xi8>
  %e = tensor.empty(%m) : tensor<?x1xi32>
  %z = arith.constant 0 : i32
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<?x1xi32>) -> tensor<?x1xi32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x128xi8>, tensor<1x128xi8>) outs(%f : tensor<?x1xi32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<i8_vnni, mr = 1, nr = 1, kv = 64, mc = 8, decode = adaptive>} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %p = arith.muli %x32, %y32 : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x1xi32>
  return %r : tensor<?x1xi32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// f32 FMA on widened bf16 A rows; B's element-wise producer (a decoder) is
// computed per N tile (the tiled producer reads a slice of the weights), and
// a non-zero accumulator is read back and added. Every tile is decoded into
// the same [nr, K] buffer, never into a slice of an [N, K] temporary. An M
// block of one row (decoding) instead evaluates the producer for each
// kv-vector inside the K loop (no tile buffer). The bf16 A is widened to f32
// once, before the nest: the FMAs read f32.
// CHECK-LABEL: func.func @f32_fused_b
// CHECK-NOT:   tensor.empty() : tensor<8x16xf32>
// CHECK:       %[[TB:.*]] = tensor.empty() : tensor<4x16xf32>
// CHECK:       %[[AW:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<?x16xbf16>) outs(%{{.*}} : tensor<?x16xf32>)
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:       scf.for %[[N0:.*]] = %c0 to %c8 step %c4
// CHECK:         %[[ONE:.*]] = arith.cmpi eq, %{{.*}}, %c1 : index
// CHECK:         scf.if %[[ONE]]
// CHECK:           scf.for %[[K1:.*]] = %c0 to %c16 step %c8 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK:             tensor.extract_slice %arg1[%[[N0]], %[[K1]]] [1, 8] [1, 1] : tensor<8x16xi8> to tensor<1x8xi8>
// CHECK:             linalg.generic {{.*}} outs(%{{.*}} : tensor<1x8xf32>)
// CHECK-COUNT-4:     vector.fma
// CHECK:         } else {
// CHECK:         %[[WS:.*]] = tensor.extract_slice %arg1[%[[N0]], 0] [4, 16] [1, 1] : tensor<8x16xi8> to tensor<4x16xi8>
// CHECK:         %[[BT:.*]] = linalg.generic {{.*}} ins(%[[WS]] : tensor<4x16xi8>) outs(%[[TB]] : tensor<4x16xf32>)
// CHECK:           arith.sitofp
// CHECK:         scf.for
// CHECK:           scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK:             vector.transfer_read %[[AW]]{{.*}} : tensor<?x16xf32>, vector<8xf32>
// CHECK-COUNT-4:     vector.transfer_read %[[BT]]
// CHECK-COUNT-4:     vector.fma
// CHECK-NOT:         arith.extf
// CHECK:           tensor.extract %{{.*}} : tensor<?x8xf32>
// CHECK:           arith.addf
func.func @f32_fused_b(%a: tensor<?x16xbf16>, %w: tensor<8x16xi8>, %c: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<8x16xi8>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%x: i8, %o: f32):
    %f = arith.sitofp %x : i8 to f32
    linalg.yield %f : f32
  } -> tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x16xbf16>, tensor<8x16xf32>) outs(%c : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 1, nr = 4, kv = 8, mc = 16, decode = adaptive>} {
  ^bb0(%x: bf16, %y: f32, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %p = arith.mulf %x32, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// The epilogue (i32 -> f32, row scale, column scale, bias, cast to bf16) is
// computed where the micro-kernel stores its reduced accumulators: the nest
// writes bf16 into the epilogue's destination and no i32 matrix exists.
// CHECK-LABEL: func.func @fused_epilogue
// CHECK-NOT:   tensor<?x5xi32>
// CHECK:       scf.for {{.*}} -> (tensor<?x5xbf16>)
// CHECK:         scf.for {{.*}} -> (vector<8xi32>, vector<8xi32>)
// CHECK:         vector.reduction <add>, %{{.*}} : vector<8xi32> into i32
// CHECK:         arith.sitofp %{{.*}} : i32 to f32
// CHECK:         tensor.extract %arg2[%{{.*}}, %c0] : tensor<?x1xf32>
// CHECK:         tensor.extract %arg3[%{{.*}}] : tensor<5xf32>
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// CHECK:         vector.from_elements %{{.*}} : vector<2xbf16>
// CHECK:         vector.transfer_write %{{.*}} : vector<2xbf16>, tensor<?x5xbf16>
// CHECK-NOT:   linalg.generic
// CHECK-NOT:   tensor<?x5xi32>
func.func @fused_epilogue(%a: tensor<?x32xi8>, %b: tensor<5x32xi8>, %rs: tensor<?x1xf32>, %cs: tensor<5xf32>) -> tensor<?x5xbf16> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x32xi8>
  %e = tensor.empty(%m) : tensor<?x5xi32>
  %z = arith.constant 0 : i32
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<?x5xi32>) -> tensor<?x5xi32>
  %acc = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x32xi8>, tensor<5x32xi8>) outs(%f : tensor<?x5xi32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<i8_pmaddwd, mr = 1, nr = 2, kv = 16, mc = 8, decode = adaptive>} {
  ^bb0(%x: i8, %y: i8, %o: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %p = arith.muli %x32, %y32 : i32
    %s = arith.addi %o, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x5xi32>
  %ye = tensor.empty(%m) : tensor<?x5xbf16>
  %y = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, 0)>, affine_map<(m, n) -> (n)>, affine_map<(m, n) -> (m, n)>], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %rs, %cs : tensor<?x5xi32>, tensor<?x1xf32>, tensor<5xf32>) outs(%ye : tensor<?x5xbf16>) {
  ^bb0(%v: i32, %r: f32, %c: f32, %o: bf16):
    %fv = arith.sitofp %v : i32 to f32
    %t = arith.mulf %fv, %r : f32
    %u = arith.mulf %t, %c : f32
    %h = arith.truncf %u : f32 to bf16
    linalg.yield %h : bf16
  } -> tensor<?x5xbf16>
  return %y : tensor<?x5xbf16>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// An accumulator with a second user is not fused: the consumer stays.
// CHECK-LABEL: func.func @shared_accumulator
// CHECK:       scf.for {{.*}} -> (tensor<4x3xf32>)
// CHECK:       linalg.generic
func.func @shared_accumulator(%a: tensor<4x8xf32>, %b: tensor<3x8xf32>) -> (tensor<4x3xf32>, tensor<4x3xbf16>) {
  %e = tensor.empty() : tensor<4x3xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %acc = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<3x8xf32>) outs(%f : tensor<4x3xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 1, nr = 1, kv = 8, mc = 4, decode = adaptive>} {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x3xf32>
  %ye = tensor.empty() : tensor<4x3xbf16>
  %y = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>], iterator_types = ["parallel", "parallel"]}
      ins(%acc : tensor<4x3xf32>) outs(%ye : tensor<4x3xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %h = arith.truncf %v : f32 to bf16
    linalg.yield %h : bf16
  } -> tensor<4x3xbf16>
  return %acc, %y : tensor<4x3xf32>, tensor<4x3xbf16>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// decode = panel: every M block decodes each N tile into the panel, with
// no one-row branch; decode = register (next): no panel at all, the
// producer is evaluated per kv-vector in every M tile's K loop; decode =
// none (last): B's producer is not fused and runs whole. Each function
// records the configs of the GEMMs it lowered (comfyquant.gemms).
// CHECK-LABEL: func.func @decode_panel
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.cpu_gemm<f32_fma, mr = 1, nr = 4, kv = 8, mc = 16, decode = panel>]
// CHECK-NOT:   scf.if
// CHECK:       %[[TB:.*]] = tensor.empty() : tensor<4x16xf32>
// CHECK:       scf.for %[[N0:.*]] = %c0 to %c8 step %c4
// CHECK:         linalg.generic {{.*}} outs(%[[TB]] : tensor<4x16xf32>)
// CHECK:         scf.for
// CHECK-COUNT-4:     vector.transfer_read %{{.*}} : tensor<4x16xf32>, vector<8xf32>
// CHECK-LABEL: func.func @decode_register
// CHECK-SAME:    decode = register>]
// CHECK-NOT:   scf.if
// CHECK-NOT:   tensor<4x16xf32>
// CHECK:       scf.for %[[N0:.*]] = %c0 to %c8 step %c4
// CHECK:         scf.for
// CHECK:           scf.for %[[K:.*]] = %c0 to %c16 step %c8
// CHECK:             tensor.extract_slice %arg1[%[[N0]], %[[K]]] [1, 8] [1, 1] : tensor<8x16xi8> to tensor<1x8xi8>
// CHECK:             linalg.generic {{.*}} outs(%{{.*}} : tensor<1x8xf32>)
// CHECK-LABEL: func.func @decode_none
// CHECK-SAME:    decode = none>]
// CHECK:       %[[WHOLE:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<8x16xf32>)
// CHECK:       scf.for
// CHECK:         tensor.extract_slice %[[WHOLE]]
func.func @decode_panel(%a: tensor<?x16xbf16>, %w: tensor<8x16xi8>, %c: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<8x16xi8>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%x: i8, %o: f32):
    %f = arith.sitofp %x : i8 to f32
    linalg.yield %f : f32
  } -> tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x16xbf16>, tensor<8x16xf32>) outs(%c : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 1, nr = 4, kv = 8, mc = 16, decode = panel>} {
  ^bb0(%x: bf16, %y: f32, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %p = arith.mulf %x32, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
func.func @decode_register(%a: tensor<?x16xbf16>, %w: tensor<8x16xi8>, %c: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<8x16xi8>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%x: i8, %o: f32):
    %f = arith.sitofp %x : i8 to f32
    linalg.yield %f : f32
  } -> tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x16xbf16>, tensor<8x16xf32>) outs(%c : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 1, nr = 4, kv = 8, mc = 16, decode = register>} {
  ^bb0(%x: bf16, %y: f32, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %p = arith.mulf %x32, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
func.func @decode_none(%a: tensor<?x16xbf16>, %w: tensor<8x16xi8>, %c: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<8x16xi8>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%x: i8, %o: f32):
    %f = arith.sitofp %x : i8 to f32
    linalg.yield %f : f32
  } -> tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x16xbf16>, tensor<8x16xf32>) outs(%c : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 1, nr = 4, kv = 8, mc = 16, decode = none>} {
  ^bb0(%x: bf16, %y: f32, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %p = arith.mulf %x32, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// form = outer, f32: tiles of nr = 2 vectors of 8 columns (N = 28: one
// 16-column tile, one 8-column vector, 4 columns in the inner form). Each
// tile's producer (the decoder) runs on the way into a K-major [K, 16]
// panel, one vector of columns per step of a loop (8 x 8 blocks transposed
// by shuffles, K = 12: one block and a 4-row tail); the micro-kernel
// broadcasts one A element per K step against the panel's vectors (A widened
// from bf16 to f32 once, before the nest: one load, no scalar conversion);
// the epilogue runs on vectors, its [N, 1] scale read as a vector through a
// collapse of the unit dim. One-row blocks take the inner form (scf.if),
// four columns at a time in a loop over the tile.
// CHECK-LABEL: func.func @outer_f32
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.cpu_gemm<f32_fma, mr = 2, nr = 2, kv = 8, mc = 16, decode = adaptive, form = outer>]
// CHECK-DAG:   %[[P16:.*]] = tensor.empty() : tensor<12x16xf32>
// CHECK-DAG:   %[[P8:.*]] = tensor.empty() : tensor<12x8xf32>
// CHECK-DAG:   %[[TAIL:.*]] = tensor.empty() : tensor<4x12xf32>
// CHECK:       %[[AW:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<?x12xbf16>) outs(%{{.*}} : tensor<?x12xf32>)
// CHECK:       scf.for
// CHECK:         scf.if
// CHECK:           scf.for %{{.*}} = %c0 to %c16 step %c4
// CHECK:             vector.fma {{.*}} : vector<8xf32>
// CHECK:         } else {
// CHECK:           %[[PANEL:.*]] = scf.for %[[COL:.*]] = %c0 to %c16 step %c8 iter_args(%[[PI:.*]] = %[[P16]])
// CHECK-COUNT-24:    vector.shuffle
// CHECK:             vector.transfer_write %{{.*}}, %[[PI]][%c0, %[[COL]]] {in_bounds = [true]} : vector<8xf32>, tensor<12x16xf32>
// CHECK:             vector.transfer_write %{{.*}}[%c11, %[[COL]]] {in_bounds = [true]} : vector<8xf32>, tensor<12x16xf32>
// CHECK:           scf.for %[[M0:.*]] = {{.*}} step %c2
// CHECK:             scf.for %[[P:.*]] = %c0 to %c12 step %c1 {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK:               vector.transfer_read %[[PANEL]][%[[P]], %c0]
// CHECK:               vector.transfer_read %[[PANEL]][%[[P]], %c8]
// CHECK:               %[[A32:.*]] = tensor.extract %[[AW]][%[[M0]], %[[P]]] : tensor<?x12xf32>
// CHECK:               %[[AB:.*]] = vector.broadcast %[[A32]] : f32 to vector<8xf32>
// CHECK:               vector.fma %[[AB]], {{.*}} : vector<8xf32>
// CHECK:             %[[S:.*]] = tensor.collapse_shape %arg2 {{\[}}[0, 1]] : tensor<28x1xf32> into tensor<28xf32>
// CHECK:             vector.transfer_read %[[S]][%c0]{{.*}} : tensor<28xf32>, vector<8xf32>
// CHECK:             arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK:             vector.transfer_write %{{.*}}[%[[M0]], %c0] {in_bounds = [true]} : vector<8xbf16>, tensor<?x28xbf16>
// CHECK:       scf.if
// CHECK:         } else {
// CHECK:           vector.transfer_write %{{.*}}, %[[P8]]
// CHECK:       scf.if
// CHECK:         } else {
// CHECK:           linalg.generic {{.*}} outs(%[[TAIL]] : tensor<4x12xf32>)
func.func @outer_f32(%a: tensor<?x12xbf16>, %w: tensor<28x12xi8>, %s: tensor<28x1xf32>) -> tensor<?x28xbf16> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x12xbf16>
  %e = tensor.empty() : tensor<28x12xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<28x12xi8>) outs(%e : tensor<28x12xf32>) {
  ^bb0(%x: i8, %o: f32):
    %f = arith.sitofp %x : i8 to f32
    linalg.yield %f : f32
  } -> tensor<28x12xf32>
  %ce = tensor.empty(%m) : tensor<?x28xf32>
  %z = arith.constant 0.0 : f32
  %cz = linalg.fill ins(%z : f32) outs(%ce : tensor<?x28xf32>) -> tensor<?x28xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x12xbf16>, tensor<28x12xf32>) outs(%cz : tensor<?x28xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 2, nr = 2, kv = 8, mc = 16, decode = adaptive, form = outer>} {
  ^bb0(%x: bf16, %y: f32, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %p = arith.mulf %x32, %y : f32
    %q = arith.addf %acc, %p : f32
    linalg.yield %q : f32
  } -> tensor<?x28xf32>
  %ye = tensor.empty(%m) : tensor<?x28xbf16>
  %y = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (n, 0)>, affine_map<(m, n) -> (m, n)>], iterator_types = ["parallel", "parallel"]}
      ins(%r, %s : tensor<?x28xf32>, tensor<28x1xf32>) outs(%ye : tensor<?x28xbf16>) {
  ^bb0(%v: f32, %sc: f32, %o: bf16):
    %t = arith.mulf %v, %sc : f32
    %u = arith.truncf %t : f32 to bf16
    linalg.yield %u : bf16
  } -> tensor<?x28xbf16>
  return %y : tensor<?x28xbf16>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// form = outer, VNNI: the panel holds 32-bit groups of four K bytes of 16
// columns (B ^ 0x80), [⌈70 / 4⌉ = 18, 16]; the K loop covers the 17 groups
// inside K, and the last group (bytes 68, 69) is read with zero padding.
// A's four bytes are broadcast as one i32; the bias correction
// 128·Σk A[m, k] is subtracted as a vector.
// CHECK-LABEL: func.func @outer_vnni
// CHECK:       %[[PANEL0:.*]] = tensor.empty() : tensor<18x16xi32>
// CHECK:       } else {
// CHECK:         arith.xori %{{.*}} : vector<64xi8>
// CHECK:         vector.bitcast %{{.*}} : vector<64xi8> to vector<16xi32>
// CHECK:         vector.shuffle
// CHECK:         scf.for %[[M0:.*]] = {{.*}} step %c2
// CHECK:           scf.for %[[P:.*]] = %c0 to %c17 step %c1
// CHECK:             %[[K:.*]] = arith.muli %[[P]], %c4 : index
// CHECK:             %[[A4:.*]] = vector.transfer_read %arg0[%[[M0]], %[[K]]], %c0_i8 {in_bounds = [true]} : tensor<?x70xi8>, vector<4xi8>
// CHECK:             %[[A1:.*]] = vector.bitcast %[[A4]] : vector<4xi8> to vector<1xi32>
// CHECK:             vector.broadcast %[[A1]] : vector<1xi32> to vector<16xi32>
// CHECK:             {comfyquant.intrinsic = "llvm.x86.avx512.vpdpbusd.512"}
// CHECK:           vector.transfer_read %arg0[%[[M0]], %c68], %c0_i8 : tensor<?x70xi8>, vector<4xi8>
// CHECK:           %[[CORR:.*]] = vector.broadcast %{{.*}} : i32 to vector<16xi32>
// CHECK:           arith.subi %{{.*}}, %[[CORR]] : vector<16xi32>
func.func @outer_vnni(%a: tensor<?x70xi8>, %b: tensor<16x70xi8>) -> tensor<?x16xi32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x70xi8>
  %e = tensor.empty(%m) : tensor<?x16xi32>
  %z = arith.constant 0 : i32
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<?x16xi32>) -> tensor<?x16xi32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x70xi8>, tensor<16x70xi8>) outs(%f : tensor<?x16xi32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<i8_vnni, mr = 2, nr = 1, kv = 64, mc = 8, decode = none, form = outer>} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %p = arith.muli %x32, %y32 : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x16xi32>
  return %r : tensor<?x16xi32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// mr = 6: the rows an M block has past its last 6-row tile (up to five) are
// tiles of 4, 2 and 1 rows, each loop running at most once (a 4-row rest
// is one tile of four rows, not four single rows).
// CHECK-LABEL: func.func @outer_remainder_tiles
// CHECK:         scf.for %{{.*}} step %c6
// CHECK-COUNT-24:  llvm.x86.avx512.vpdpbusd.512
// CHECK:         scf.for %{{.*}} step %c4
// CHECK-COUNT-16:  llvm.x86.avx512.vpdpbusd.512
// CHECK:         scf.for %{{.*}} step %c2
// CHECK-COUNT-8:   llvm.x86.avx512.vpdpbusd.512
// CHECK:         scf.for %{{.*}} step %c1
// CHECK-COUNT-4:   llvm.x86.avx512.vpdpbusd.512
// CHECK-NOT:       llvm.x86.avx512.vpdpbusd.512
// CHECK:       return
func.func @outer_remainder_tiles(%a: tensor<?x64xi8>, %b: tensor<64x64xi8>) -> tensor<?x64xi32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x64xi8>
  %e = tensor.empty(%m) : tensor<?x64xi32>
  %z = arith.constant 0 : i32
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<?x64xi32>) -> tensor<?x64xi32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x64xi8>, tensor<64x64xi8>) outs(%f : tensor<?x64xi32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 48, decode = panel, form = outer>} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %p = arith.muli %x32, %y32 : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x64xi32>
  return %r : tensor<?x64xi32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// form = outer, bf16 dot: the panel holds 32-bit groups of two bf16 K values
// of 16 columns, [⌈37 / 2⌉ = 19, 16]; the K loop covers the 18 pairs inside
// K and the last pair (element 36 and zero padding) follows. A's pair is
// broadcast as one i32 and multiplied as 32 bf16 values with vdpbf16ps into
// f32 columns; no horizontal reduction and no bias correction.
// CHECK-LABEL: func.func @outer_bf16
// CHECK:       %[[PANEL0:.*]] = tensor.empty() : tensor<19x16xi32>
// CHECK:         vector.bitcast %{{.*}} : vector<32xbf16> to vector<16xi32>
// CHECK:         vector.shuffle
// CHECK:         scf.for %[[M0:.*]] = {{.*}} step %c2
// CHECK:           scf.for %[[P:.*]] = %c0 to %c18 step %c1
// CHECK:             %[[K:.*]] = arith.muli %[[P]], %c2 : index
// CHECK:             %[[A2:.*]] = vector.transfer_read %arg0[%[[M0]], %[[K]]], %{{.*}} {in_bounds = [true]} : tensor<?x37xbf16>, vector<2xbf16>
// CHECK:             %[[A1:.*]] = vector.bitcast %[[A2]] : vector<2xbf16> to vector<1xi32>
// CHECK:             %[[AW:.*]] = vector.broadcast %[[A1]] : vector<1xi32> to vector<16xi32>
// CHECK:             vector.bitcast %[[AW]] : vector<16xi32> to vector<32xbf16>
// CHECK:             builtin.unrealized_conversion_cast %{{.*}} : vector<16xf32>, vector<32xbf16>, vector<32xbf16> to vector<16xf32> {comfyquant.intrinsic = "llvm.x86.avx512bf16.dpbf16ps.512"}
// CHECK:           vector.transfer_read %arg0[%[[M0]], %c36], %{{.*}} : tensor<?x37xbf16>, vector<2xbf16>
// CHECK-NOT:       vector.reduction
// CHECK:           vector.transfer_write %{{.*}} : vector<16xf32>, tensor<?x16xf32>
func.func @outer_bf16(%a: tensor<?x37xbf16>, %b: tensor<16x37xbf16>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x37xbf16>
  %e = tensor.empty(%m) : tensor<?x16xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x16xf32>) -> tensor<?x16xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x37xbf16>, tensor<16x37xbf16>) outs(%f : tensor<?x16xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_dot, mr = 2, nr = 1, kv = 32, mc = 8, decode = none, form = outer>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// The emulated bf16 dot (inner form, 256-bit: 16 bf16 values per step, 8
// f32 lanes): exact products in f32, each lane adds its odd element's
// product and then its even one's (vdpbf16ps's order), one horizontal
// reduction per accumulator.
// CHECK-LABEL: func.func @inner_bf16_emulated
// CHECK:         arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:         %[[P:.*]] = arith.mulf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:         %[[ODD:.*]] = vector.shuffle %[[P]], %[[P]] [1, 3, 5, 7, 9, 11, 13, 15] : vector<16xf32>, vector<16xf32>
// CHECK:         %[[S1:.*]] = arith.addf %{{.*}}, %[[ODD]] : vector<8xf32>
// CHECK:         %[[EVEN:.*]] = vector.shuffle %[[P]], %[[P]] [0, 2, 4, 6, 8, 10, 12, 14] : vector<16xf32>, vector<16xf32>
// CHECK:         arith.addf %[[S1]], %[[EVEN]] : vector<8xf32>
// CHECK:       vector.reduction <add>, %{{.*}} : vector<8xf32> into f32
// CHECK-NOT:   comfyquant.intrinsic
func.func @inner_bf16_emulated(%a: tensor<?x32xbf16>, %b: tensor<2x32xbf16>) -> tensor<?x2xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x32xbf16>
  %e = tensor.empty(%m) : tensor<?x2xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x32xbf16>, tensor<2x32xbf16>) outs(%f : tensor<?x2xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_dot_emulated, mr = 1, nr = 2, kv = 16, mc = 4, decode = none>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x2xf32>
  return %r : tensor<?x2xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// K blocks (kc = 16, K = 40): the blocks before the last ([0, 32) in steps
// of 16) each pack a [16, 16] panel and sum into a zeroed [mc, 16] buffer
// (read at row m - mb, written back); the last block, [32, 40), packs an
// [8, 16] panel, starts from the buffer and applies the epilogue into C.
// CHECK-LABEL: func.func @outer_kblocks
// CHECK-DAG:   tensor.empty() : tensor<16x16xf32>
// CHECK-DAG:   tensor.empty() : tensor<8x16xf32>
// CHECK-DAG:   %[[PART:.*]] = tensor.empty() : tensor<4x16xf32>
// CHECK:       %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[PART]] : tensor<4x16xf32>)
// CHECK:       %[[SUMS:.*]] = scf.for %[[K0:.*]] = %c0 to %c32 step %c16 iter_args(%[[P:.*]] = %[[ZERO]])
// CHECK:         scf.for %[[M0:.*]] = {{.*}} iter_args(%[[Q:.*]] = %[[P]])
// CHECK:           %[[R:.*]] = arith.subi %[[M0]], %{{.*}} : index
// CHECK:           vector.transfer_read %[[Q]][%[[R]], %c0]
// CHECK:           %[[K:.*]] = arith.addi %[[K0]], %{{.*}} : index
// CHECK:           tensor.extract %arg0[%[[M0]], %[[K]]]
// CHECK:           vector.transfer_write %{{.*}}, %{{.*}}[%{{.*}}, %c0] {in_bounds = [true]} : vector<16xf32>, tensor<4x16xf32>
// CHECK:       vector.transfer_read %[[SUMS]]
// CHECK:       tensor.extract %arg0[%{{.*}}, %{{.*}}]
// CHECK:       vector.transfer_write %{{.*}} : vector<16xf32>, tensor<?x16xf32>
func.func @outer_kblocks(%a: tensor<?x40xf32>, %b: tensor<16x40xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x40xf32>
  %e = tensor.empty(%m) : tensor<?x16xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x16xf32>) -> tensor<?x16xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x40xf32>, tensor<16x40xf32>) outs(%f : tensor<?x16xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 2, nr = 1, kv = 16, mc = 4, kc = 16, decode = none, form = outer>} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// A column range [begin, end) of y (within [0, N]), outer form with tiles of
// nr = 2 vectors of 8 columns: 16-column tiles, then 8-column vectors, then
// single columns in the inner form. Loops whose step exceeds N could never
// run and are not built: N = 6 has only the single-column loop, N = 12 the
// vector loop and the single-column loop, N = 20 all three.
// CHECK-LABEL: func.func @column_range_narrow(
// CHECK-SAME:    %[[B:[^:]*]]: index {comfyquant.column_begin}, %[[E:[^:]*]]: index {comfyquant.column_end})
// CHECK-SAME:    comfyquant.column_range
// CHECK-NOT:     step %c16
// CHECK-NOT:     step %c8
// CHECK:         scf.for %{{.*}} = %[[B]] to %[[E]] step %c1
// CHECK-NOT:     step %c16
// CHECK-NOT:     step %c8
// CHECK:         return
func.func @column_range_narrow(%a: tensor<?x4xf32>, %y: memref<?x6xf32> {comfyquant.output}, %w: tensor<6x4xf32>, %begin: index {comfyquant.column_begin}, %end: index {comfyquant.column_end}) {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x4xf32>
  %ce = tensor.empty(%m) : tensor<?x6xf32>
  %z = arith.constant 0.0 : f32
  %cz = linalg.fill ins(%z : f32) outs(%ce : tensor<?x6xf32>) -> tensor<?x6xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : tensor<?x4xf32>, tensor<6x4xf32>) outs(%cz : tensor<?x6xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 2, nr = 2, kv = 8, mc = 32, decode = none, form = outer>} {
  ^bb0(%x: f32, %v: f32, %acc: f32):
    %p = arith.mulf %x, %v : f32
    %q = arith.addf %acc, %p : f32
    linalg.yield %q : f32
  } -> tensor<?x6xf32>
  bufferization.materialize_in_destination %r in restrict writable %y : (tensor<?x6xf32>, memref<?x6xf32>) -> ()
  return
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// CHECK-LABEL: func.func @column_range_vectors(
// CHECK-SAME:    %[[B:[^:]*]]: index {comfyquant.column_begin}, %[[E:[^:]*]]: index {comfyquant.column_end})
// CHECK-NOT:     step %c16
// CHECK:         %[[V:.*]] = scf.for %{{.*}} = %[[B]] to %{{.*}} step %c8
// CHECK-NOT:     step %c16
// CHECK:         scf.for %{{.*}} = %{{.*}} to %[[E]] step %c1
// CHECK:         return
func.func @column_range_vectors(%a: tensor<?x4xf32>, %y: memref<?x12xf32> {comfyquant.output}, %w: tensor<12x4xf32>, %begin: index {comfyquant.column_begin}, %end: index {comfyquant.column_end}) {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x4xf32>
  %ce = tensor.empty(%m) : tensor<?x12xf32>
  %z = arith.constant 0.0 : f32
  %cz = linalg.fill ins(%z : f32) outs(%ce : tensor<?x12xf32>) -> tensor<?x12xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : tensor<?x4xf32>, tensor<12x4xf32>) outs(%cz : tensor<?x12xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 2, nr = 2, kv = 8, mc = 32, decode = none, form = outer>} {
  ^bb0(%x: f32, %v: f32, %acc: f32):
    %p = arith.mulf %x, %v : f32
    %q = arith.addf %acc, %p : f32
    linalg.yield %q : f32
  } -> tensor<?x12xf32>
  bufferization.materialize_in_destination %r in restrict writable %y : (tensor<?x12xf32>, memref<?x12xf32>) -> ()
  return
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// CHECK-LABEL: func.func @column_range_tiles(
// CHECK-SAME:    %[[B:[^:]*]]: index {comfyquant.column_begin}, %[[E:[^:]*]]: index {comfyquant.column_end})
// CHECK:         scf.for %{{.*}} = %[[B]] to %{{.*}} step %c16
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c8
// CHECK:         scf.for %{{.*}} = %{{.*}} to %[[E]] step %c1
// CHECK:         return
func.func @column_range_tiles(%a: tensor<?x4xf32>, %y: memref<?x20xf32> {comfyquant.output}, %w: tensor<20x4xf32>, %begin: index {comfyquant.column_begin}, %end: index {comfyquant.column_end}) {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x4xf32>
  %ce = tensor.empty(%m) : tensor<?x20xf32>
  %z = arith.constant 0.0 : f32
  %cz = linalg.fill ins(%z : f32) outs(%ce : tensor<?x20xf32>) -> tensor<?x20xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : tensor<?x4xf32>, tensor<20x4xf32>) outs(%cz : tensor<?x20xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 2, nr = 2, kv = 8, mc = 32, decode = none, form = outer>} {
  ^bb0(%x: f32, %v: f32, %acc: f32):
    %p = arith.mulf %x, %v : f32
    %q = arith.addf %acc, %p : f32
    linalg.yield %q : f32
  } -> tensor<?x20xf32>
  bufferization.materialize_in_destination %r in restrict writable %y : (tensor<?x20xf32>, memref<?x20xf32>) -> ()
  return
}

// -----

// form = outer, pmaddwd (AVX2's exact int8 route): A is sign-extended to
// i16 once, before the nest; each N tile's B is packed K-major as i32 pairs
// of i16 (K = 20: ten pair rows); the micro-kernel broadcasts one pair of A
// (a 32-bit load) per panel row and multiplies it against the panel's
// vectors with pmaddwd.
// CHECK-LABEL: func.func @outer_pmaddwd
// CHECK:       tensor.empty() : tensor<10x8xi32>
// CHECK:       %[[AW:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<?x20xi8>) outs(%{{.*}} : tensor<?x20xi16>)
// CHECK:         arith.extsi %{{.*}} : i8 to i16
// CHECK:       vector.bitcast %{{.*}} : vector<16xi16> to vector<8xi32>
// CHECK:       %[[P:.*]] = vector.transfer_read %[[AW]][%{{.*}}, %{{.*}}], %{{.*}} {in_bounds = [true]} : tensor<?x20xi16>, vector<2xi16>
// CHECK:       %[[W:.*]] = vector.bitcast %[[P]] : vector<2xi16> to vector<1xi32>
// CHECK:       vector.broadcast %[[W]] : vector<1xi32> to vector<8xi32>
// CHECK:       comfyquant.intrinsic = "llvm.x86.avx2.pmadd.wd"
#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
func.func @outer_pmaddwd(%a: tensor<?x20xi8>, %b: tensor<8x20xi8>) -> tensor<?x8xi32> {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0 : i32
  %m = tensor.dim %a, %c0 : tensor<?x20xi8>
  %e = tensor.empty(%m) : tensor<?x8xi32>
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<?x8xi32>) -> tensor<?x8xi32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x20xi8>, tensor<8x20xi8>) outs(%f : tensor<?x8xi32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<i8_pmaddwd, mr = 2, nr = 1, kv = 16, mc = 4, decode = none, form = outer>} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %p = arith.muli %x32, %y32 : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x8xi32>
  return %r : tensor<?x8xi32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>

// A one-row call under a bf16 dot runs f32 FMAs (row = f32_fma, the
// strategy's choice) where B's producer is not a function of its byte
// alone, nor one times a scale uniform over a K-vector (here: a scale per
// element): it narrows an f32
// that is a bf16 exactly to bf16 (its high half), so the one-row branch
// evaluates a copy yielding the f32 itself rather than narrowing and
// widening back each element; the other rows still decode to bf16 for
// vdpbf16ps.
// CHECK-LABEL: func.func @one_row_exact_narrowing
// CHECK:         scf.if
// CHECK:           linalg.generic {{.*}} outs(%{{.*}} : tensor<1x16xf32>)
// CHECK-NEXT:      ^bb0(%[[Q:.*]]: i8, %[[S:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:        %[[V:.*]] = arith.sitofp %[[Q]] : i8 to f32
// CHECK-NEXT:        %[[W:.*]] = arith.mulf %[[V]], %[[S]] : f32
// CHECK-NEXT:        linalg.yield %[[W]] : f32
// CHECK-NOT:       arith.extf {{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:           vector.fma
// CHECK:         } else {
// CHECK:           linalg.generic {{.*}} outs(%{{.*}} : tensor<4x64xbf16>)
// CHECK:             arith.shrui
// CHECK:             llvm.x86.avx512bf16.dpbf16ps.512
func.func @one_row_exact_narrowing(%a: tensor<?x64xbf16>, %codes: tensor<8x64xi8>, %scales: tensor<8x64xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : i32
  %m = tensor.dim %a, %c0 : tensor<?x64xbf16>
  %eb = tensor.empty() : tensor<8x64xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes, %scales : tensor<8x64xi8>, tensor<8x64xf32>) outs(%eb : tensor<8x64xbf16>) {
  ^bb0(%q: i8, %sc: f32, %o: bf16):
    %u = arith.sitofp %q : i8 to f32
    %v = arith.mulf %u, %sc : f32
    %bits = arith.bitcast %v : f32 to i32
    %hi = arith.shrui %bits, %c16 : i32
    %h = arith.trunci %hi : i32 to i16
    %r = arith.bitcast %h : i16 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x64xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x64xbf16>, tensor<8x64xbf16>) outs(%f : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_dot, mr = 2, nr = 4, kv = 32, mc = 8, decode = adaptive, form = inner, row = f32_fma>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>
#R = affine_map<(n, k) -> (n)>

// A rounding narrowing is kept: the one-row branch widens what it yields.
// CHECK-LABEL: func.func @one_row_rounded_narrowing
// CHECK:         scf.if
// CHECK:           linalg.generic {{.*}} outs(%{{.*}} : tensor<1x16xbf16>)
// CHECK:           arith.extf {{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:           vector.fma
func.func @one_row_rounded_narrowing(%a: tensor<?x64xbf16>, %codes: tensor<8x64xi8>, %scales: tensor<8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x64xbf16>
  %eb = tensor.empty() : tensor<8x64xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #R, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes, %scales : tensor<8x64xi8>, tensor<8xf32>) outs(%eb : tensor<8x64xbf16>) {
  ^bb0(%q: i8, %sc: f32, %o: bf16):
    %u = arith.sitofp %q : i8 to f32
    %v = arith.mulf %u, %sc : f32
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x64xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x64xbf16>, tensor<8x64xbf16>) outs(%f : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_dot, mr = 2, nr = 4, kv = 32, mc = 8, decode = adaptive, form = inner, row = f32_fma>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>

// B's producer is a function of its byte alone: the one-row call keeps the
// bf16 dot and reads each code's bf16 from a 256-entry table (the decoder
// evaluated at every code); the other rows decode as before.
// CHECK-LABEL: func.func @one_row_byte_table
// CHECK:         %[[T:.*]] = arith.constant dense<"0x0000803F0040{{[0-9A-F]+}}00C080BF"> : tensor<256xbf16>
// CHECK:         scf.if
// CHECK:           linalg.generic {{.*}} outs(%{{.*}} : tensor<1x32xbf16>)
// CHECK-NEXT:      ^bb0(%[[Q:.*]]: i8, %{{.*}}: bf16):
// CHECK-NEXT:        %[[I:.*]] = arith.extui %[[Q]] : i8 to i32
// CHECK-NEXT:        %[[X:.*]] = arith.index_cast %[[I]] : i32 to index
// CHECK-NEXT:        %[[E:.*]] = tensor.extract %[[T]][%[[X]]] : tensor<256xbf16>
// CHECK-NEXT:        linalg.yield %[[E]] : bf16
// CHECK-NOT:       vector.fma
// CHECK:           llvm.x86.avx512bf16.dpbf16ps.512
// CHECK:         } else {
// CHECK:           linalg.generic {{.*}} outs(%{{.*}} : tensor<4x64xbf16>)
// CHECK:             arith.sitofp
// CHECK:             llvm.x86.avx512bf16.dpbf16ps.512
func.func @one_row_byte_table(%a: tensor<?x64xbf16>, %codes: tensor<8x64xi8>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x64xbf16>
  %eb = tensor.empty() : tensor<8x64xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<8x64xi8>) outs(%eb : tensor<8x64xbf16>) {
  ^bb0(%q: i8, %o: bf16):
    %v = arith.sitofp %q : i8 to f32
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x64xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x64xbf16>, tensor<8x64xbf16>) outs(%f : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_dot, mr = 2, nr = 4, kv = 32, mc = 8, decode = adaptive, form = inner>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>

// The f32 FMA kernel on bf16 operands (the strategy's choice where
// vdpbf16ps is the slower one) of a variant with a bf16 dot product: a
// one-row call (row = bf16_dot) reads B's table into vdpbf16ps, with A as
// stored; the other rows widen A once and multiply the decoder's f32 with
// FMAs.
// CHECK-LABEL: func.func @one_row_table_under_fma
// CHECK:         arith.constant dense<"0x0000803F0040{{[0-9A-F]+}}00C080BF"> : tensor<256xbf16>
// CHECK:         arith.extf {{.*}} : bf16 to f32
// CHECK:         scf.if
// CHECK:           tensor.extract %{{.*}} : tensor<256xbf16>
// CHECK-NOT:       vector.fma
// CHECK:           llvm.x86.avx512bf16.dpbf16ps.512
// CHECK:         } else {
// CHECK-NOT:       dpbf16ps
// CHECK:           arith.sitofp
// CHECK-NOT:       arith.truncf
// CHECK-NOT:       dpbf16ps
// CHECK:           vector.fma
// CHECK-NOT:       dpbf16ps
// CHECK:         return
func.func @one_row_table_under_fma(%a: tensor<?x64xbf16>, %codes: tensor<8x64xi8>) -> tensor<?x8xf32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-bf16">} {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x64xbf16>
  %eb = tensor.empty() : tensor<8x64xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<8x64xi8>) outs(%eb : tensor<8x64xbf16>) {
  ^bb0(%q: i8, %o: bf16):
    %v = arith.sitofp %q : i8 to f32
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x64xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x64xbf16>, tensor<8x64xbf16>) outs(%f : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 2, nr = 4, kv = 16, mc = 8, decode = adaptive, form = inner, row = bf16_dot>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>

// Without a bf16 dot product (avx512-vnni) there is no table: both
// branches multiply f32s.
// CHECK-LABEL: func.func @one_row_fma_without_bf16_dot
// CHECK-NOT:     tensor<256xbf16>
// CHECK-NOT:     dpbf16ps
// CHECK:         return
func.func @one_row_fma_without_bf16_dot(%a: tensor<?x64xbf16>, %codes: tensor<8x64xi8>) -> tensor<?x8xf32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x64xbf16>
  %eb = tensor.empty() : tensor<8x64xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<8x64xi8>) outs(%eb : tensor<8x64xbf16>) {
  ^bb0(%q: i8, %o: bf16):
    %v = arith.sitofp %q : i8 to f32
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x64xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x64xbf16>, tensor<8x64xbf16>) outs(%f : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 2, nr = 4, kv = 16, mc = 8, decode = adaptive, form = inner>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>

// An E5M2 decoder (the code as an f16's high byte, widened, its high half
// kept) folds at every code, the signaling NaN codes included (widened to a
// quiet NaN of their sign): 0x7C is +inf (0x7F80), 0x7D and 0x7E NaNs
// (0x7FC0), 0x7F a quiet NaN with its payload (0x7FE0); likewise negative.
// CHECK-LABEL: func.func @one_row_e5m2_table
// CHECK:         arith.constant dense<"0x{{[0-9A-F]+}}807FC07FC07FE07F{{[0-9A-F]+}}80FFC0FFC0FFE0FF"> : tensor<256xbf16>
// CHECK:         scf.if
// CHECK:           tensor.extract %{{.*}} : tensor<256xbf16>
// CHECK:           llvm.x86.avx512bf16.dpbf16ps.512
func.func @one_row_e5m2_table(%a: tensor<?x64xbf16>, %codes: tensor<8x64xi8>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : i16
  %c16 = arith.constant 16 : i32
  %m = tensor.dim %a, %c0 : tensor<?x64xbf16>
  %eb = tensor.empty() : tensor<8x64xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<8x64xi8>) outs(%eb : tensor<8x64xbf16>) {
  ^bb0(%q: i8, %o: bf16):
    %w = arith.extui %q : i8 to i16
    %hb = arith.shli %w, %c8 : i16
    %h = arith.bitcast %hb : i16 to f16
    %v = arith.extf %h : f16 to f32
    %bits = arith.bitcast %v : f32 to i32
    %hi = arith.shrui %bits, %c16 : i32
    %t = arith.trunci %hi : i32 to i16
    %r = arith.bitcast %t : i16 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x64xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x64xbf16>, tensor<8x64xbf16>) outs(%f : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_dot, mr = 2, nr = 4, kv = 32, mc = 8, decode = adaptive, form = inner>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>

// B's decoder narrows X · S, X of the byte alone (a bf16 at every code), S
// a scale per 32 K elements (a multiple of kv): the one-row call reads X
// from a table and multiplies each vector's bf16 dot product, taken from
// zero, by S (an FMA into the accumulator).
// CHECK-LABEL: func.func @one_row_block_scaled_table
// CHECK:         %[[T:.*]] = arith.constant dense<"0x0000803F0040{{[0-9A-F]+}}00C080BF"> : tensor<256xbf16>
// CHECK:         scf.if
// CHECK:           %[[S:.*]] = tensor.extract %arg2[%{{.*}}, %{{.*}}] : tensor<8x4xf32>
// CHECK:           vector.broadcast %[[S]] : f32 to vector<16xf32>
// CHECK:           tensor.extract %[[T]]
// CHECK:           %[[D:.*]] = builtin.unrealized_conversion_cast %cst{{.*}} {comfyquant.intrinsic = "llvm.x86.avx512bf16.dpbf16ps.512"}
// CHECK:           vector.fma %[[D]], %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:         } else {
// CHECK:           linalg.generic {{.*}} outs(%{{.*}} : tensor<4x128xbf16>)
// CHECK:             arith.mulf
func.func @one_row_block_scaled_table(%a: tensor<?x128xbf16>, %codes: tensor<8x128xi8>, %scales: tensor<8x4xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %cb = arith.constant 32 : index
  %c16 = arith.constant 16 : i32
  %m = tensor.dim %a, %c0 : tensor<?x128xbf16>
  %eb = tensor.empty() : tensor<8x128xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<8x128xi8>) outs(%eb : tensor<8x128xbf16>) {
  ^bb0(%q: i8, %o: bf16):
    %x = arith.sitofp %q : i8 to f32
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %cb : index
    %sc = tensor.extract %scales[%n, %blk] : tensor<8x4xf32>
    %v = arith.mulf %x, %sc : f32
    %bits = arith.bitcast %v : f32 to i32
    %hi = arith.shrui %bits, %c16 : i32
    %h = arith.trunci %hi : i32 to i16
    %r = arith.bitcast %h : i16 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x128xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x128xbf16>, tensor<8x128xbf16>) outs(%f : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_dot, mr = 2, nr = 4, kv = 32, mc = 8, decode = adaptive, form = inner>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>

// decode = register decodes B in registers at any M: the kernel reads the
// same table and scales each vector's dot product by its block's scale.
// CHECK-LABEL: func.func @register_block_scaled_table
// CHECK:         %[[T:.*]] = arith.constant dense<"0x0000803F0040{{[0-9A-F]+}}00C080BF"> : tensor<256xbf16>
// CHECK-NOT:     scf.if
// CHECK:         tensor.extract %[[T]]
// CHECK:         %[[D:.*]] = builtin.unrealized_conversion_cast %cst{{.*}} {comfyquant.intrinsic = "llvm.x86.avx512bf16.dpbf16ps.512"}
// CHECK:         vector.fma %[[D]], %{{.*}}, %{{.*}} : vector<16xf32>
func.func @register_block_scaled_table(%a: tensor<?x128xbf16>, %codes: tensor<8x128xi8>, %scales: tensor<8x4xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %cb = arith.constant 32 : index
  %c16 = arith.constant 16 : i32
  %m = tensor.dim %a, %c0 : tensor<?x128xbf16>
  %eb = tensor.empty() : tensor<8x128xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<8x128xi8>) outs(%eb : tensor<8x128xbf16>) {
  ^bb0(%q: i8, %o: bf16):
    %x = arith.sitofp %q : i8 to f32
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %cb : index
    %sc = tensor.extract %scales[%n, %blk] : tensor<8x4xf32>
    %v = arith.mulf %x, %sc : f32
    %bits = arith.bitcast %v : f32 to i32
    %hi = arith.shrui %bits, %c16 : i32
    %h = arith.trunci %hi : i32 to i16
    %r = arith.bitcast %h : i16 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x128xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x128xbf16>, tensor<8x128xbf16>) outs(%f : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_dot, mr = 2, nr = 4, kv = 32, mc = 8, decode = register, form = inner>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>

// A scale per 16 K elements changes within a 32-element vector: no table
// (the strategy's row = f32_fma), the one-row call runs f32 FMAs on the
// decoder.
// CHECK-LABEL: func.func @one_row_block_smaller_than_vector
// CHECK-NOT:     tensor<256xbf16>
// CHECK:         scf.if
// CHECK:           vector.fma
// CHECK-NOT:       llvm.x86.avx512bf16.dpbf16ps.512
// CHECK:         } else {
func.func @one_row_block_smaller_than_vector(%a: tensor<?x128xbf16>, %codes: tensor<8x128xi8>, %scales: tensor<8x4xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %cb = arith.constant 16 : index
  %c16 = arith.constant 16 : i32
  %m = tensor.dim %a, %c0 : tensor<?x128xbf16>
  %eb = tensor.empty() : tensor<8x128xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<8x128xi8>) outs(%eb : tensor<8x128xbf16>) {
  ^bb0(%q: i8, %o: bf16):
    %x = arith.sitofp %q : i8 to f32
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %cb : index
    %sc = tensor.extract %scales[%n, %blk] : tensor<8x4xf32>
    %v = arith.mulf %x, %sc : f32
    %bits = arith.bitcast %v : f32 to i32
    %hi = arith.shrui %bits, %c16 : i32
    %h = arith.trunci %hi : i32 to i16
    %r = arith.bitcast %h : i16 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x128xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x128xbf16>, tensor<8x128xbf16>) outs(%f : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_dot, mr = 2, nr = 4, kv = 32, mc = 8, decode = adaptive, form = inner, row = f32_fma>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>

// B's decoder narrows a read of an f32 [256, 16] table made before it (a
// scale byte's row, a code's column: NVFP4's E2M1 x E4M3): the table is
// narrowed once beside its definition, and the one-row call reads bf16 rows
// and keeps the bf16 dot; the other rows decode as before.
// CHECK-LABEL: func.func @one_row_table_rows
// CHECK:         %[[TB:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<256x16xf32>) outs(%{{.*}} : tensor<256x16xbf16>)
// CHECK:           arith.shrui
// CHECK:         scf.if
// CHECK:           tensor.extract %[[TB]][%{{.*}}, %{{.*}}] : tensor<256x16xbf16>
// CHECK-NOT:       vector.fma
// CHECK:           llvm.x86.avx512bf16.dpbf16ps.512
// CHECK:         } else {
// CHECK:           tensor.extract %arg2[%{{.*}}, %{{.*}}] : tensor<256x16xf32>
func.func @one_row_table_rows(%a: tensor<?x64xbf16>, %codes: tensor<8x64xi8>, %t: tensor<256x16xf32>, %scales: tensor<8x4xi8>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c15 = arith.constant 15 : i8
  %c16i = arith.constant 16 : i32
  %m = tensor.dim %a, %c0 : tensor<?x64xbf16>
  %eb = tensor.empty() : tensor<8x64xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<8x64xi8>) outs(%eb : tensor<8x64xbf16>) {
  ^bb0(%q: i8, %o: bf16):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %c16 : index
    %sb = tensor.extract %scales[%n, %blk] : tensor<8x4xi8>
    %row = arith.index_castui %sb : i8 to index
    %code = arith.andi %q, %c15 : i8
    %col = arith.index_castui %code : i8 to index
    %v = tensor.extract %t[%row, %col] : tensor<256x16xf32>
    %bits = arith.bitcast %v : f32 to i32
    %hi = arith.shrui %bits, %c16i : i32
    %h = arith.trunci %hi : i32 to i16
    %r = arith.bitcast %h : i16 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x64xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x64xbf16>, tensor<8x64xbf16>) outs(%f : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_dot, mr = 2, nr = 4, kv = 32, mc = 8, decode = adaptive, form = inner>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

// row = i8_planes: 2·kv elements of K per step as two nibble planes. A's
// row is read 128 bytes at a time and shuffled into its even and odd
// elements; each column's decoder is evaluated twice, at the bytes k / 2
// of the step with the low nibble (even k) and the high one (odd k), each
// into its own accumulator. The signed-nibble table plus 8 (the least bias
// that makes it unsigned) is the nibble xor 8, so no table is read and no
// xor with 0x80 follows; the correction is 8·Σ A over the planes plus
// 128·Σ A over the rest of K (here the last 64 elements, one whole step of
// the GEMM's own kernel, B biased by 128 there).
// CHECK-LABEL: func.func @planes
// CHECK-DAG:     %[[C120:.*]] = arith.constant 120 : i32
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : i32
// CHECK-DAG:     %[[X8:.*]] = arith.constant 8 : i8
// CHECK:         %[[BOTH:.*]] = vector.transfer_read %arg0[%{{.*}}, %c0]{{.*}} vector<128xi8>
// CHECK:         %[[EVEN:.*]] = vector.shuffle %[[BOTH]], %[[BOTH]] [0, 2, 4,
// CHECK:         %[[ODD:.*]] = vector.shuffle %[[BOTH]], %[[BOTH]] [1, 3, 5,
// CHECK:         linalg.generic
// CHECK-NOT:       arith.shrui
// CHECK:           arith.andi %{{.*}}, %c15_i32
// CHECK:           %[[LO:.*]] = arith.xori %{{.*}}, %[[X8]] : i8
// CHECK:           linalg.yield %[[LO]]
// CHECK:         linalg.generic
// CHECK:           arith.shrui %{{.*}}, %c4_i32
// CHECK:           %[[HI:.*]] = arith.xori %{{.*}}, %[[X8]] : i8
// CHECK:           linalg.yield %[[HI]]
// CHECK:         %[[S0:.*]] = builtin.unrealized_conversion_cast %{{.*}}, %{{.*}}, %[[EVEN]] {{.*}}vpdpbusd
// CHECK:         %[[S1:.*]] = builtin.unrealized_conversion_cast %{{.*}}, %{{.*}}, %[[ODD]] {{.*}}vpdpbusd
// CHECK:         arith.addi %[[S0]], %[[S1]] : vector<16xi32>
// CHECK:         vector.transfer_read %arg0[%{{.*}}, %c128]{{.*}} vector<64xi8>
// CHECK:         tensor.extract %{{.*}} : tensor<16xi8>
// CHECK:         arith.muli %{{.*}}, %[[C8]] : i32
// CHECK:         arith.muli %{{.*}}, %[[C120]] : i32
#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#E = affine_map<(n, k) -> (n, k)>
func.func @planes(%a: tensor<?x192xi8>, %w: tensor<768xi8>, %c: tensor<?x8xi32>) -> tensor<?x8xi32> {
  %c2 = arith.constant 2 : index
  %c96 = arith.constant 96 : index
  %c4 = arith.constant 4 : i32
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<8x192xi8>
  %b = linalg.generic {indexing_maps = [#E], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<8x192xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %half = arith.divui %k, %c2 : index
    %row = arith.muli %n, %c96 : index
    %at = arith.addi %row, %half : index
    %byte = tensor.extract %w[%at] : tensor<768xi8>
    %u = arith.extui %byte : i8 to i32
    %p = arith.remui %k, %c2 : index
    %shift = arith.index_cast %p : index to i32
    %bits = arith.muli %shift, %c4 : i32
    %sh = arith.shrui %u, %bits : i32
    %nib = arith.andi %sh, %c15 : i32
    %table = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1]> : tensor<16xi8>
    %i = arith.index_cast %nib : i32 to index
    %v = tensor.extract %table[%i] : tensor<16xi8>
    linalg.yield %v : i8
  } -> tensor<8x192xi8>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x192xi8>, tensor<8x192xi8>) outs(%c : tensor<?x8xi32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<i8_vnni, mr = 1, nr = 2, kv = 64, mc = 16, decode = register, row = i8_planes>} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %m = arith.muli %x32, %y32 : i32
    %sum = arith.addi %acc, %m : i32
    linalg.yield %sum : i32
  } -> tensor<?x8xi32>
  return %r : tensor<?x8xi32>
}
