// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-vectorize-elementwise=lanes=8 --canonicalize | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-vectorize-elementwise --canonicalize | FileCheck %s --check-prefix=STRATEGY
// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-vectorize-elementwise=lanes=16 --canonicalize | FileCheck %s --check-prefix=AVX512
// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-vectorize-elementwise="lanes=16 tune=emeraldrapids" --canonicalize | FileCheck %s --check-prefix=AFFINE
// Without the option, the tuning is the one the strategy recorded in each
// function's #comfyquant.target.
// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-select-strategy="variant=avx512-bf16 tune=emeraldrapids" --comfyquant-cpu-vectorize-elementwise=lanes=16 --canonicalize | FileCheck %s --check-prefix=AFFINE
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-cpu-vectorize-elementwise="lanes=16 tune=pentium-z" 2>&1 >/dev/null | FileCheck %s --check-prefix=TUNE-ERR
// TUNE-ERR: error: tune = 'pentium-z' is not generic, host or an LLVM x86-64 CPU name

// A weight decoder: one row at a time, eight K elements per vector; the
// contiguous weight bytes become one vector load, the scalar scale a
// broadcast. No scalar generic is left.
// CHECK-LABEL: func.func @decode_rows
// CHECK:       scf.for %[[N:.*]] = %c0 to %c4 step %c1
// CHECK:         scf.for %[[K:.*]] = %c0 to %c32 step %c8
// CHECK:           vector.transfer_read %{{.*}} : tensor<8xi8>, vector<8xi8>
// CHECK:           arith.sitofp %{{.*}} : vector<8xi8> to vector<8xf32>
// CHECK:           arith.mulf %{{.*}} : vector<8xf32>
// CHECK:           vector.transfer_write %{{.*}} : vector<8xf32>, tensor<8xf32>
// CHECK-NOT:   linalg.generic
// The lane count comes from the function's target when not given.
// STRATEGY-LABEL: func.func @decode_rows
// STRATEGY:       scf.for %{{.*}} = %c0 to %c32 step %c16
// STRATEGY:         arith.sitofp %{{.*}} : vector<16xi8> to vector<16xf32>
func.func @decode_rows(%w: tensor<4x32xi8>, %s: tensor<f32>) -> tensor<4x32xf32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
  %e = tensor.empty() : tensor<4x32xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> ()>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w, %s : tensor<4x32xi8>, tensor<f32>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%x: i8, %sc: f32, %o: f32):
    %f = arith.sitofp %x : i8 to f32
    %m = arith.mulf %f, %sc : f32
    linalg.yield %m : f32
  } -> tensor<4x32xf32>
  return %d : tensor<4x32xf32>
}

// -----

// Rows of a dynamic M; K = 20 is 2 full vectors and a static tail of 4
// (its own tile, vector<4>), so no masks are needed.
// CHECK-LABEL: func.func @tail
// CHECK:       scf.for %{{.*}} = %c0 to %{{.*}} step %c1
// CHECK:         scf.for %{{.*}} = %c0 to %c16 step %c8
// CHECK:           arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK:       scf.for %{{.*}} = %c0 to %{{.*}} step %c1
// CHECK:         arith.truncf %{{.*}} : vector<4xf32> to vector<4xbf16>
// CHECK-NOT:   linalg.generic
// CHECK-NOT:   vector.mask
func.func @tail(%x: tensor<?x20xf32>) -> tensor<?x20xbf16> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x20xf32>
  %e = tensor.empty(%m) : tensor<?x20xbf16>
  %d = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x20xf32>) outs(%e : tensor<?x20xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x20xbf16>
  return %d : tensor<?x20xbf16>
}

// -----

// Low-first nibbles read from flat storage at row + k / 2. The vectorizer
// emits a gather; since k = k0 + lane with k0 a multiple of 8 (the tile
// loop), the index is row + k0 / 2 + [0, 0, 1, 1, ...]: one 4-byte load and
// a shuffle. k % 2 is a constant, so the nibble select has a constant mask,
// and the repeated bytes with one nibble kept per lane become the bytes of
// 16-bit lanes (w | w << 4) & 0x0F0F: low nibble, then high nibble.
// CHECK-LABEL: func.func @nibbles
// CHECK-DAG:   %[[MASK:.*]] = arith.constant dense<3855> : vector<4xi16>
// CHECK-DAG:   %[[FOUR:.*]] = arith.constant dense<4> : vector<4xi16>
// CHECK:       scf.for %[[N:.*]] = %c0 to %c2 step %c1
// CHECK:         scf.for %[[K:.*]] = %c0 to %c32 step %c8
// CHECK:           %[[ROW:.*]] = arith.muli %[[N]], %c16 : index
// CHECK:           %[[HALF:.*]] = arith.divui %[[K]], %c2 : index
// CHECK:           %[[AT:.*]] = arith.addi %[[ROW]], %[[HALF]] : index
// CHECK:           %[[B:.*]] = vector.transfer_read %{{.*}}[%[[AT]]], %{{.*}} {in_bounds = [true]} : tensor<32xi8>, vector<4xi8>
// CHECK:           %[[W:.*]] = arith.extui %[[B]] : vector<4xi8> to vector<4xi16>
// CHECK:           %[[UP:.*]] = arith.shli %[[W]], %[[FOUR]] : vector<4xi16>
// CHECK:           %[[OR:.*]] = arith.ori %[[W]], %[[UP]] : vector<4xi16>
// CHECK:           %[[P:.*]] = arith.andi %[[OR]], %[[MASK]] : vector<4xi16>
// CHECK:           vector.bitcast %[[P]] : vector<4xi16> to vector<8xi8>
// CHECK-NOT:   vector.shuffle
// CHECK-NOT:   arith.select
// CHECK-NOT:   vector.gather
// CHECK-NOT:   linalg.generic
func.func @nibbles(%w: tensor<2x16xi8>) -> tensor<2x32xi8> {
  %flat = tensor.collapse_shape %w [[0, 1]] : tensor<2x16xi8> into tensor<32xi8>
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c4 = arith.constant 4 : i32
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<2x32xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<2x32xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %row = arith.muli %n, %c16 : index
    %half = arith.divui %k, %c2 : index
    %i = arith.addi %row, %half : index
    %byte = tensor.extract %flat[%i] : tensor<32xi8>
    %b = arith.extui %byte : i8 to i32
    %odd = arith.remui %k, %c2 : index
    %lo = arith.cmpi eq, %odd, %c0 : index
    %hi = arith.shrui %b, %c4 : i32
    %l = arith.andi %b, %c15 : i32
    %v = arith.select %lo, %l, %hi : i32
    %t = arith.trunci %v : i32 to i8
    linalg.yield %t : i8
  } -> tensor<2x32xi8>
  return %d : tensor<2x32xi8>
}

// -----

// High-first nibbles (NVFP4's order), the high one masked: the pair is
// (w >> 4 | w << 8) & 0x0F0F.
// CHECK-LABEL: func.func @nibbles_high_first
// CHECK-DAG:   %[[MASK:.*]] = arith.constant dense<3855> : vector<4xi16>
// CHECK-DAG:   %[[FOUR:.*]] = arith.constant dense<4> : vector<4xi16>
// CHECK-DAG:   %[[EIGHT:.*]] = arith.constant dense<8> : vector<4xi16>
// CHECK:           %[[B:.*]] = vector.transfer_read %{{.*}} : tensor<32xi8>, vector<4xi8>
// CHECK:           %[[W:.*]] = arith.extui %[[B]] : vector<4xi8> to vector<4xi16>
// CHECK:           %[[DOWN:.*]] = arith.shrui %[[W]], %[[FOUR]] : vector<4xi16>
// CHECK:           %[[UP:.*]] = arith.shli %[[W]], %[[EIGHT]] : vector<4xi16>
// CHECK:           %[[OR:.*]] = arith.ori %[[DOWN]], %[[UP]] : vector<4xi16>
// CHECK:           %[[P:.*]] = arith.andi %[[OR]], %[[MASK]] : vector<4xi16>
// CHECK:           vector.bitcast %[[P]] : vector<4xi16> to vector<8xi8>
// CHECK-NOT:   arith.select
func.func @nibbles_high_first(%w: tensor<2x16xi8>) -> tensor<2x32xi8> {
  %flat = tensor.collapse_shape %w [[0, 1]] : tensor<2x16xi8> into tensor<32xi8>
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c4 = arith.constant 4 : i32
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<2x32xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<2x32xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %row = arith.muli %n, %c16 : index
    %half = arith.divui %k, %c2 : index
    %i = arith.addi %row, %half : index
    %byte = tensor.extract %flat[%i] : tensor<32xi8>
    %b = arith.extui %byte : i8 to i32
    %odd = arith.remui %k, %c2 : index
    %lo = arith.cmpi eq, %odd, %c0 : index
    %hi = arith.shrui %b, %c4 : i32
    %l = arith.andi %b, %c15 : i32
    %m = arith.andi %hi, %c15 : i32
    %v = arith.select %lo, %m, %l : i32
    %t = arith.trunci %v : i32 to i8
    linalg.yield %t : i8
  } -> tensor<2x32xi8>
  return %d : tensor<2x32xi8>
}

// -----

// A per-16-block scale at row * 4 + k / 16 (lanes 8 divide the block): one
// scalar load and a broadcast per vector. The codebook lookup, indexed by
// data, stays a gather.
// CHECK-LABEL: func.func @block_scale
// CHECK:         scf.for %[[K:.*]] = %c0 to %c64 step %c8
// CHECK:           %[[B:.*]] = arith.divui %[[K]], %c16 : index
// CHECK:           %[[AT:.*]] = arith.addi %{{.*}}, %[[B]] : index
// CHECK:           %[[S:.*]] = tensor.extract %{{.*}}[%[[AT]]] : tensor<8xf32>
// CHECK:           vector.broadcast %[[S]] : f32 to vector<8xf32>
// CHECK:           vector.gather %{{.*}} : tensor<16xf32>, vector<8xindex>, vector<8xi1>, vector<8xf32> into vector<8xf32>
func.func @block_scale(%w: tensor<2x64xi8>, %s: tensor<2x4xf32>, %cb: tensor<16xf32>) -> tensor<2x64xf32> {
  %flat = tensor.collapse_shape %s [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c15 = arith.constant 15 : i8
  %e = tensor.empty() : tensor<2x64xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<2x64xi8>) outs(%e : tensor<2x64xf32>) {
  ^bb0(%x: i8, %o: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %row = arith.muli %n, %c4 : index
    %blk = arith.divui %k, %c16 : index
    %i = arith.addi %row, %blk : index
    %sc = tensor.extract %flat[%i] : tensor<8xf32>
    %code = arith.andi %x, %c15 : i8
    %ci = arith.index_cast %code : i8 to index
    %lv = tensor.extract %cb[%ci] : tensor<16xf32>
    %v = arith.mulf %lv, %sc : f32
    linalg.yield %v : f32
  } -> tensor<2x64xf32>
  return %d : tensor<2x64xf32>
}

// -----

// A 2-D block-scale read [n, k / 16] (linearized by the vectorizer as
// n * 4 + k / 16) is one scalar read at [n, k / 16], not a gather and not a
// read of a collapsed view; a 16-entry f32 codebook indexed by i32 codes is
// two vpermps and a blend (bit 3 of the code picks the half).
// CHECK-LABEL: func.func @scale_2d_and_codebook
// CHECK:         scf.for %[[N:.*]] = %c0 to %c2 step %c1
// CHECK:           scf.for %[[K:.*]] = %c0 to %c64 step %c8
// CHECK-DAG:         %[[B:.*]] = arith.divui %[[K]], %c16 : index
// CHECK-DAG:         %[[S:.*]] = tensor.extract %arg1[%[[N]], %[[B]]] : tensor<2x4xf32>
// CHECK-DAG:         %[[LO:.*]] = vector.transfer_read %arg2[%c0], %{{.*}} {in_bounds = [true]} : tensor<16xf32>, vector<8xf32>
// CHECK-DAG:         %[[HI:.*]] = vector.transfer_read %arg2[%c8], %{{.*}} {in_bounds = [true]} : tensor<16xf32>, vector<8xf32>
// CHECK-DAG:         builtin.unrealized_conversion_cast %[[LO]], %{{.*}} : vector<8xf32>, vector<8xi32> to vector<8xf32> {comfyquant.intrinsic = "llvm.x86.avx2.permps"}
// CHECK-DAG:         builtin.unrealized_conversion_cast %[[HI]], %{{.*}} : vector<8xf32>, vector<8xi32> to vector<8xf32> {comfyquant.intrinsic = "llvm.x86.avx2.permps"}
// CHECK-DAG:         vector.broadcast %[[S]] : f32 to vector<8xf32>
// CHECK-NOT:   vector.gather
// CHECK-NOT:   tensor.collapse_shape %arg1
func.func @scale_2d_and_codebook(%w: tensor<2x64xi32>, %s: tensor<2x4xf32>, %cb: tensor<16xf32>) -> tensor<2x64xf32> {
  %c16 = arith.constant 16 : index
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<2x64xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<2x64xi32>) outs(%e : tensor<2x64xf32>) {
  ^bb0(%x: i32, %o: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %c16 : index
    %sc = tensor.extract %s[%n, %blk] : tensor<2x4xf32>
    %code = arith.andi %x, %c15 : i32
    %ci = arith.index_cast %code : i32 to index
    %lv = tensor.extract %cb[%ci] : tensor<16xf32>
    %v = arith.mulf %lv, %sc : f32
    linalg.yield %v : f32
  } -> tensor<2x64xf32>
  return %d : tensor<2x64xf32>
}

// -----

// An i8 read of a [256, 16] table at [scale byte, code], the scale byte
// one value per 16 K elements (a group): the row's 16 entries are one load
// and the codes pick from them with pshufb; for 8-lane vectors the codes
// fill both halves of the shuffle and the low half is kept.
// CHECK-LABEL: func.func @scale_row_lookup
// CHECK:         scf.for %{{.*}} = %c0 to %c64 step %c8
// CHECK-DAG:       %[[S:.*]] = tensor.extract %arg1
// CHECK-DAG:       %[[R:.*]] = arith.index_castui %[[S]] : i8 to index
// CHECK-DAG:       %[[E:.*]] = vector.transfer_read %arg2[%[[R]], %c0], %{{.*}} {in_bounds = [true]} : tensor<256x16xi8>, vector<16xi8>
// CHECK-DAG:       %[[C:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7] : vector<8xi8>, vector<8xi8>
// CHECK:           %[[P:.*]] = builtin.unrealized_conversion_cast %[[E]], %[[C]] : vector<16xi8>, vector<16xi8> to vector<16xi8> {comfyquant.intrinsic = "llvm.x86.ssse3.pshuf.b.128"}
// CHECK:           vector.shuffle %[[P]], %[[P]] [0, 1, 2, 3, 4, 5, 6, 7] : vector<16xi8>, vector<16xi8>
// CHECK-NOT:   vector.gather
func.func @scale_row_lookup(%w: tensor<2x64xi8>, %s: tensor<2x4xi8>, %t: tensor<256x16xi8>) -> tensor<2x64xi8> {
  %c16 = arith.constant 16 : index
  %c15 = arith.constant 15 : i8
  %e = tensor.empty() : tensor<2x64xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<2x64xi8>) outs(%e : tensor<2x64xi8>) {
  ^bb0(%x: i8, %o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %c16 : index
    %sc = tensor.extract %s[%n, %blk] : tensor<2x4xi8>
    %row = arith.index_castui %sc : i8 to index
    %code = arith.andi %x, %c15 : i8
    %col = arith.index_castui %code : i8 to index
    %v = tensor.extract %t[%row, %col] : tensor<256x16xi8>
    linalg.yield %v : i8
  } -> tensor<2x64xi8>
  return %d : tensor<2x64xi8>
}

// -----

// With 64 codes (6-bit) each row is four 16-entry quarters: four shuffles,
// and bits 4-5 of the code pick one.
// CHECK-LABEL: func.func @scale_row_lookup_64
// CHECK:         llvm.x86.ssse3.pshuf.b.128
// CHECK:         llvm.x86.ssse3.pshuf.b.128
// CHECK:         arith.select
// CHECK:         llvm.x86.ssse3.pshuf.b.128
// CHECK:         arith.select
// CHECK:         llvm.x86.ssse3.pshuf.b.128
// CHECK:         arith.select
// CHECK-NOT:   vector.gather
func.func @scale_row_lookup_64(%w: tensor<2x64xi8>, %s: tensor<2x4xi8>, %t: tensor<256x64xi8>) -> tensor<2x64xi8> {
  %c16 = arith.constant 16 : index
  %c63 = arith.constant 63 : i8
  %e = tensor.empty() : tensor<2x64xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<2x64xi8>) outs(%e : tensor<2x64xi8>) {
  ^bb0(%x: i8, %o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %c16 : index
    %sc = tensor.extract %s[%n, %blk] : tensor<2x4xi8>
    %row = arith.index_castui %sc : i8 to index
    %code = arith.andi %x, %c63 : i8
    %col = arith.index_castui %code : i8 to index
    %v = tensor.extract %t[%row, %col] : tensor<256x64xi8>
    linalg.yield %v : i8
  } -> tensor<2x64xi8>
  return %d : tensor<2x64xi8>
}

// -----

// With vpermb (AVX512-VBMI: the avx512-bf16 and amx variants) a 64-code
// row is one permute of the whole row per run of lanes sharing it: four
// runs of 16 lanes, each permute merged into its lanes. Each run's row is
// a scalar read of its scale byte (not a lane moved out of a vector).
// STRATEGY-LABEL: func.func @scale_row_permute_bytes
// STRATEGY-NOT:     vector.extract
// STRATEGY-NOT:     llvm.x86.ssse3.pshuf.b.128
// STRATEGY:         tensor.extract %arg1[%c0, %c0] : tensor<1x4xi8>
// STRATEGY:         vector.transfer_read %arg2[%{{.*}}, %c0], %{{.*}} : tensor<256x64xi8>, vector<64xi8>
// STRATEGY:         llvm.x86.avx512.permvar.qi.512
// STRATEGY:         tensor.extract %arg1[%c0, %c1] : tensor<1x4xi8>
// STRATEGY:         llvm.x86.avx512.permvar.qi.512
// STRATEGY:         arith.select %{{.*}} : vector<64xi1>, vector<64xi8>
// STRATEGY:         tensor.extract %arg1[%c0, %c2] : tensor<1x4xi8>
// STRATEGY:         llvm.x86.avx512.permvar.qi.512
// STRATEGY:         arith.select
// STRATEGY:         tensor.extract %arg1[%c0, %c3] : tensor<1x4xi8>
// STRATEGY:         llvm.x86.avx512.permvar.qi.512
// STRATEGY:         arith.select
// STRATEGY-NOT:     arith.select
// STRATEGY-NOT:     vector.extract
// STRATEGY-NOT:     vector.gather
// STRATEGY:         return
func.func @scale_row_permute_bytes(%w: tensor<1x64xi8>, %s: tensor<1x4xi8>, %t: tensor<256x64xi8>) -> tensor<1x64xi8> attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-bf16">} {
  %cg = arith.constant 16 : index
  %c63 = arith.constant 63 : i8
  %e = tensor.empty() : tensor<1x64xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<1x64xi8>) outs(%e : tensor<1x64xi8>) {
  ^bb0(%x: i8, %o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %cg : index
    %sc = tensor.extract %s[%n, %blk] : tensor<1x4xi8>
    %row = arith.index_castui %sc : i8 to index
    %code = arith.andi %x, %c63 : i8
    %col = arith.index_castui %code : i8 to index
    %v = tensor.extract %t[%row, %col] : tensor<256x64xi8>
    linalg.yield %v : i8
  } -> tensor<1x64xi8>
  return %d : tensor<1x64xi8>
}

// -----

// Groups of 32: two runs, two permutes.
// STRATEGY-LABEL: func.func @scale_row_permute_bytes_g32
// STRATEGY-COUNT-2: llvm.x86.avx512.permvar.qi.512
// STRATEGY-NOT:     llvm.x86.avx512.permvar.qi.512
// STRATEGY:         return
func.func @scale_row_permute_bytes_g32(%w: tensor<1x64xi8>, %s: tensor<1x2xi8>, %t: tensor<256x64xi8>) -> tensor<1x64xi8> attributes {comfyquant.target = #comfyquant.target<cpu, "amx">} {
  %cg = arith.constant 32 : index
  %c63 = arith.constant 63 : i8
  %e = tensor.empty() : tensor<1x64xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<1x64xi8>) outs(%e : tensor<1x64xi8>) {
  ^bb0(%x: i8, %o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %cg : index
    %sc = tensor.extract %s[%n, %blk] : tensor<1x2xi8>
    %row = arith.index_castui %sc : i8 to index
    %code = arith.andi %x, %c63 : i8
    %col = arith.index_castui %code : i8 to index
    %v = tensor.extract %t[%row, %col] : tensor<256x64xi8>
    linalg.yield %v : i8
  } -> tensor<1x64xi8>
  return %d : tensor<1x64xi8>
}

// -----

// AVX512-VNNI alone (Cascade Lake) has no vpermb: four quarter shuffles.
// STRATEGY-LABEL: func.func @scale_row_no_vbmi
// STRATEGY-NOT:   llvm.x86.avx512.permvar.qi.512
// STRATEGY:       llvm.x86.ssse3.pshuf.b.128
// STRATEGY-NOT:   llvm.x86.avx512.permvar.qi.512
// STRATEGY:       return
func.func @scale_row_no_vbmi(%w: tensor<1x64xi8>, %s: tensor<1x4xi8>, %t: tensor<256x64xi8>) -> tensor<1x64xi8> attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
  %cg = arith.constant 16 : index
  %c63 = arith.constant 63 : i8
  %e = tensor.empty() : tensor<1x64xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<1x64xi8>) outs(%e : tensor<1x64xi8>) {
  ^bb0(%x: i8, %o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %cg : index
    %sc = tensor.extract %s[%n, %blk] : tensor<1x4xi8>
    %row = arith.index_castui %sc : i8 to index
    %code = arith.andi %x, %c63 : i8
    %col = arith.index_castui %code : i8 to index
    %v = tensor.extract %t[%row, %col] : tensor<256x64xi8>
    linalg.yield %v : i8
  } -> tensor<1x64xi8>
  return %d : tensor<1x64xi8>
}

// -----

// An f32 [256, 16] table read at [scale byte, code]: per 8-lane register,
// the row's two halves are loaded and permuted by the code (two vpermps and
// a blend on bit 3), no gather.
// CHECK-LABEL: func.func @scale_row_permute
// CHECK-DAG:     %[[R:.*]] = arith.index_castui %{{.*}} : i8 to index
// CHECK-DAG:     %[[LO:.*]] = vector.transfer_read %arg2[%[[R]], %c0], %{{.*}} {in_bounds = [true]} : tensor<256x16xf32>, vector<8xf32>
// CHECK-DAG:     %[[HI:.*]] = vector.transfer_read %arg2[%[[R]], %c8], %{{.*}} {in_bounds = [true]} : tensor<256x16xf32>, vector<8xf32>
// CHECK-DAG:     builtin.unrealized_conversion_cast %[[LO]], %{{.*}} : vector<8xf32>, vector<8xi32> to vector<8xf32> {comfyquant.intrinsic = "llvm.x86.avx2.permps"}
// CHECK-DAG:     builtin.unrealized_conversion_cast %[[HI]], %{{.*}} : vector<8xf32>, vector<8xi32> to vector<8xf32> {comfyquant.intrinsic = "llvm.x86.avx2.permps"}
// CHECK-NOT:   vector.gather
func.func @scale_row_permute(%w: tensor<2x64xi8>, %s: tensor<2x4xi8>, %t: tensor<256x16xf32>) -> tensor<2x64xf32> {
  %c16 = arith.constant 16 : index
  %c15 = arith.constant 15 : i8
  %e = tensor.empty() : tensor<2x64xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<2x64xi8>) outs(%e : tensor<2x64xf32>) {
  ^bb0(%x: i8, %o: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %c16 : index
    %sc = tensor.extract %s[%n, %blk] : tensor<2x4xi8>
    %row = arith.index_castui %sc : i8 to index
    %code = arith.andi %x, %c15 : i8
    %col = arith.index_castui %code : i8 to index
    %v = tensor.extract %t[%row, %col] : tensor<256x16xf32>
    linalg.yield %v : f32
  } -> tensor<2x64xf32>
  return %d : tensor<2x64xf32>
}

// -----

// A bf16 [256, 16] table read at [scale byte per 16 lanes, code], AVX-512:
// per 32 lanes the two rows are loaded into one register and permuted by
// the code plus 16 in the upper half (one vpermw), no gather.
// CHECK-LABEL: func.func @word_rows
// AVX512-LABEL: func.func @word_rows
// AVX512-NOT:     vector.gather
// AVX512-DAG:     %[[OFF:.*]] = arith.constant dense<[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 16, {{.*}}]> : vector<32xi16>
// AVX512-DAG:     %[[LO:.*]] = vector.transfer_read %arg2[%{{.*}}, %c0], %{{.*}} {in_bounds = [true]} : tensor<256x16xbf16>, vector<16xbf16>
// AVX512-DAG:     %[[HI:.*]] = vector.transfer_read %arg2[%{{.*}}, %c0], %{{.*}} {in_bounds = [true]} : tensor<256x16xbf16>, vector<16xbf16>
// AVX512:         %[[BOTH:.*]] = vector.shuffle %[[LO]], %[[HI]] [0, 1, {{.*}}, 30, 31] : vector<16xbf16>, vector<16xbf16>
// AVX512:         %[[E:.*]] = vector.bitcast %[[BOTH]] : vector<32xbf16> to vector<32xi16>
// AVX512:         %[[I:.*]] = arith.ori %{{.*}}, %[[OFF]] : vector<32xi16>
// AVX512:         builtin.unrealized_conversion_cast %[[E]], %[[I]] : vector<32xi16>, vector<32xi16> to vector<32xi16> {comfyquant.intrinsic = "llvm.x86.avx512.permvar.hi.512"}
func.func @word_rows(%w: tensor<1x32xi8>, %s: tensor<1x2xi8>, %t: tensor<256x16xbf16>) -> tensor<1x32xbf16> {
  %c16 = arith.constant 16 : index
  %c15 = arith.constant 15 : i8
  %e = tensor.empty() : tensor<1x32xbf16>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<1x32xi8>) outs(%e : tensor<1x32xbf16>) {
  ^bb0(%x: i8, %o: bf16):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %c16 : index
    %sc = tensor.extract %s[%n, %blk] : tensor<1x2xi8>
    %row = arith.index_castui %sc : i8 to index
    %code = arith.andi %x, %c15 : i8
    %col = arith.index_castui %code : i8 to index
    %v = tensor.extract %t[%row, %col] : tensor<256x16xbf16>
    linalg.yield %v : bf16
  } -> tensor<1x32xbf16>
  return %d : tensor<1x32xbf16>
}

// -----

// An i8 read of a 16-entry table at an i32 code (a signed nibble's value):
// the table is one 16-byte load and each vector one pshufb by the codes
// narrowed to bytes (an 8-lane vector: the low half of one).
// CHECK-LABEL: func.func @byte_table
// CHECK-DAG:     %[[T:.*]] = vector.transfer_read %arg1[%c0], %{{.*}} {in_bounds = [true]} : tensor<16xi8>, vector<16xi8>
// CHECK-DAG:     %[[C:.*]] = arith.trunci %{{.*}} : vector<8xi32> to vector<8xi8>
// CHECK:         %[[W:.*]] = vector.shuffle %[[C]], %[[C]] [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7]
// CHECK:         builtin.unrealized_conversion_cast %[[T]], %[[W]] : vector<16xi8>, vector<16xi8> to vector<16xi8> {comfyquant.intrinsic = "llvm.x86.ssse3.pshuf.b.128"}
// CHECK-NOT:   vector.gather
func.func @byte_table(%w: tensor<2x64xi32>, %t: tensor<16xi8>) -> tensor<2x64xi8> {
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<2x64xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<2x64xi32>) outs(%e : tensor<2x64xi8>) {
  ^bb0(%x: i32, %o: i8):
    %code = arith.andi %x, %c15 : i32
    %ci = arith.index_cast %code : i32 to index
    %v = tensor.extract %t[%ci] : tensor<16xi8>
    linalg.yield %v : i8
  } -> tensor<2x64xi8>
  return %d : tensor<2x64xi8>
}

// -----

// A bf16 read of a constant 256-entry table at a byte code (a one-row GEMM's
// decode, comfyquant-cpu-vectorize-gemm), AVX-512: per 32 lanes two
// vpermi2w (entries 0-63, 64-127) and a blend on bit 6 of the code; the
// table is sign-magnitude (entry c + 128 is entry c negated), so bit 7 of
// the code, sign-extended to 16 bits, is the sign bit. No gather.
// AVX2 (8 lanes) has no word permute: the read stays a gather.
// CHECK-LABEL: func.func @word_table_sign_magnitude
// CHECK:         vector.gather
// AVX512-LABEL: func.func @word_table_sign_magnitude
// AVX512:         arith.extsi %{{.*}} : vector<64xi8> to vector<64xi16>
// AVX512-NOT:     arith.shli
// AVX512-COUNT-4: llvm.x86.avx512.vpermi2var.hi.512
// AVX512-NOT:     llvm.x86.avx512.vpermi2var.hi.512
// AVX512-NOT:     arith.shli
// AVX512:         arith.ori
// AVX512:         vector.bitcast %{{.*}} : vector<64xi16> to vector<64xbf16>
// AVX512-NOT:     vector.gather
func.func @word_table_sign_magnitude(%w: tensor<1x64xi8>) -> tensor<1x64xbf16> {
  %t = arith.constant dense<"0x0000803F004040408040A040C040E040004110412041304140415041604170418041884190419841A041A841B041B841C041C841D041D841E041E841F041F8410042044208420C421042144218421C422042244228422C423042344238423C424042444248424C425042544258425C426042644268426C427042744278427C42804282428442864288428A428C428E42904292429442964298429A429C429E42A042A242A442A642A842AA42AC42AE42B042B242B442B642B842BA42BC42BE42C042C242C442C642C842CA42CC42CE42D042D242D442D642D842DA42DC42DE42E042E242E442E642E842EA42EC42EE42F042F242F442F642F842FA42FC42FE42008080BF00C040C080C0A0C0C0C0E0C000C110C120C130C140C150C160C170C180C188C190C198C1A0C1A8C1B0C1B8C1C0C1C8C1D0C1D8C1E0C1E8C1F0C1F8C100C204C208C20CC210C214C218C21CC220C224C228C22CC230C234C238C23CC240C244C248C24CC250C254C258C25CC260C264C268C26CC270C274C278C27CC280C282C284C286C288C28AC28CC28EC290C292C294C296C298C29AC29CC29EC2A0C2A2C2A4C2A6C2A8C2AAC2ACC2AEC2B0C2B2C2B4C2B6C2B8C2BAC2BCC2BEC2C0C2C2C2C4C2C6C2C8C2CAC2CCC2CEC2D0C2D2C2D4C2D6C2D8C2DAC2DCC2DEC2E0C2E2C2E4C2E6C2E8C2EAC2ECC2EEC2F0C2F2C2F4C2F6C2F8C2FAC2FCC2FEC2"> : tensor<256xbf16>
  %e = tensor.empty() : tensor<1x64xbf16>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<1x64xi8>) outs(%e : tensor<1x64xbf16>) {
  ^bb0(%x: i8, %o: bf16):
    %c = arith.extui %x : i8 to i32
    %i = arith.index_cast %c : i32 to index
    %v = tensor.extract %t[%i] : tensor<256xbf16>
    linalg.yield %v : bf16
  } -> tensor<1x64xbf16>
  return %d : tensor<1x64xbf16>
}

// -----

// FP8 E4M3 codes' bf16 (a sign-magnitude table whose magnitudes are
// (c << 4) + 0x3C00 for codes 8-126; the subnormals 0-7 and the NaN 127 are
// the exceptions). Tuned for a CPU whose vpermi2w is slow, the magnitude is
// computed: a shift and an add, the exceptions from one vpermw of a
// 32-entry table (the codes' low five bits: 0-7 and 31), selected where
// the code is outside 8-126; then the sign. Elsewhere the two vpermi2w.
// AVX512-LABEL:  func.func @word_table_affine
// AVX512-COUNT-4:  llvm.x86.avx512.vpermi2var.hi.512
// AFFINE-LABEL:  func.func @word_table_affine
// AFFINE-NOT:      vpermi2var
// AFFINE:          %[[ODD:.*]] = arith.constant dense<[0, 15104, 15232, 15296, 15360, 15392, 15424, 15456, 0, {{.*}}, 0, 32704]> : vector<32xi16>
// AFFINE:          %[[MAG:.*]] = arith.andi %{{.*}}, %{{.*}} : vector<32xi16>
// AFFINE:          %[[SHL:.*]] = arith.shli %[[MAG]], %{{.*}} : vector<32xi16>
// AFFINE:          %[[LIN:.*]] = arith.addi %[[SHL]], %{{.*}} : vector<32xi16>
// AFFINE:          %[[FROM:.*]] = arith.subi %[[MAG]], %{{.*}} : vector<32xi16>
// AFFINE:          %[[OUT:.*]] = arith.cmpi ugt, %[[FROM]], %{{.*}} : vector<32xi16>
// AFFINE:          %[[EXC:.*]] = builtin.unrealized_conversion_cast %[[ODD]], %[[MAG]] : vector<32xi16>, vector<32xi16> to vector<32xi16> {comfyquant.intrinsic = "llvm.x86.avx512.permvar.hi.512"}
// AFFINE:          arith.select %[[OUT]], %[[EXC]], %[[LIN]]
// AFFINE:          arith.ori
// AFFINE-NOT:      vpermi2var
// AFFINE:          vector.bitcast %{{.*}} : vector<64xi16> to vector<64xbf16>
// AFFINE-NOT:      vector.gather
// The sitofp table above is not affine: the tune keeps its vpermi2w.
// AFFINE-LABEL:  func.func @word_table_twos_complement
// AFFINE-COUNT-8:  llvm.x86.avx512.vpermi2var.hi.512
func.func @word_table_affine(%w: tensor<1x64xi8>) -> tensor<1x64xbf16> {
  %t = arith.constant dense<"0x0000003B803BC03B003C203C403C603C803C903CA03CB03CC03CD03CE03CF03C003D103D203D303D403D503D603D703D803D903DA03DB03DC03DD03DE03DF03D003E103E203E303E403E503E603E703E803E903EA03EB03EC03ED03EE03EF03E003F103F203F303F403F503F603F703F803F903FA03FB03FC03FD03FE03FF03F0040104020403040404050406040704080409040A040B040C040D040E040F0400041104120413041404150416041704180419041A041B041C041D041E041F0410042104220423042404250426042704280429042A042B042C042D042E042F0420043104320433043404350436043704380439043A043B043C043D043E043C07F008000BB80BBC0BB00BC20BC40BC60BC80BC90BCA0BCB0BCC0BCD0BCE0BCF0BC00BD10BD20BD30BD40BD50BD60BD70BD80BD90BDA0BDB0BDC0BDD0BDE0BDF0BD00BE10BE20BE30BE40BE50BE60BE70BE80BE90BEA0BEB0BEC0BED0BEE0BEF0BE00BF10BF20BF30BF40BF50BF60BF70BF80BF90BFA0BFB0BFC0BFD0BFE0BFF0BF00C010C020C030C040C050C060C070C080C090C0A0C0B0C0C0C0D0C0E0C0F0C000C110C120C130C140C150C160C170C180C190C1A0C1B0C1C0C1D0C1E0C1F0C100C210C220C230C240C250C260C270C280C290C2A0C2B0C2C0C2D0C2E0C2F0C200C310C320C330C340C350C360C370C380C390C3A0C3B0C3C0C3D0C3E0C3C0FF"> : tensor<256xbf16>
  %e = tensor.empty() : tensor<1x64xbf16>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<1x64xi8>) outs(%e : tensor<1x64xbf16>) {
  ^bb0(%x: i8, %o: bf16):
    %c = arith.extui %x : i8 to i32
    %i = arith.index_cast %c : i32 to index
    %v = tensor.extract %t[%i] : tensor<256xbf16>
    linalg.yield %v : bf16
  } -> tensor<1x64xbf16>
  return %d : tensor<1x64xbf16>
}

// -----

// Not sign-magnitude (two's complement codes): entries 128-255 take two
// more vpermi2w per 32 lanes and a blend on bit 7.
// CHECK-LABEL: func.func @word_table_twos_complement
// AVX512-LABEL: func.func @word_table_twos_complement
// AVX512-NOT:     vector.gather
// AVX512-COUNT-8: llvm.x86.avx512.vpermi2var.hi.512
// AVX512-NOT:     llvm.x86.avx512.vpermi2var.hi.512
// AVX512:         vector.bitcast %{{.*}} : vector<64xi16> to vector<64xbf16>
func.func @word_table_twos_complement(%w: tensor<1x64xi8>) -> tensor<1x64xbf16> {
  %t = arith.constant dense<"0x0000803F004040408040A040C040E040004110412041304140415041604170418041884190419841A041A841B041B841C041C841D041D841E041E841F041F8410042044208420C421042144218421C422042244228422C423042344238423C424042444248424C425042544258425C426042644268426C427042744278427C42804282428442864288428A428C428E42904292429442964298429A429C429E42A042A242A442A642A842AA42AC42AE42B042B242B442B642B842BA42BC42BE42C042C242C442C642C842CA42CC42CE42D042D242D442D642D842DA42DC42DE42E042E242E442E642E842EA42EC42EE42F042F242F442F642F842FA42FC42FE4200C3FEC2FCC2FAC2F8C2F6C2F4C2F2C2F0C2EEC2ECC2EAC2E8C2E6C2E4C2E2C2E0C2DEC2DCC2DAC2D8C2D6C2D4C2D2C2D0C2CEC2CCC2CAC2C8C2C6C2C4C2C2C2C0C2BEC2BCC2BAC2B8C2B6C2B4C2B2C2B0C2AEC2ACC2AAC2A8C2A6C2A4C2A2C2A0C29EC29CC29AC298C296C294C292C290C28EC28CC28AC288C286C284C282C280C27CC278C274C270C26CC268C264C260C25CC258C254C250C24CC248C244C240C23CC238C234C230C22CC228C224C220C21CC218C214C210C20CC208C204C200C2F8C1F0C1E8C1E0C1D8C1D0C1C8C1C0C1B8C1B0C1A8C1A0C198C190C188C180C170C160C150C140C130C120C110C100C1E0C0C0C0A0C080C040C000C080BF"> : tensor<256xbf16>
  %e = tensor.empty() : tensor<1x64xbf16>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<1x64xi8>) outs(%e : tensor<1x64xbf16>) {
  ^bb0(%x: i8, %o: bf16):
    %c = arith.extui %x : i8 to i32
    %i = arith.index_cast %c : i32 to index
    %v = tensor.extract %t[%i] : tensor<256xbf16>
    linalg.yield %v : bf16
  } -> tensor<1x64xbf16>
  return %d : tensor<1x64xbf16>
}

// -----

// 48 lanes are neither one 32-lane register nor whole ones: the read stays
// a gather.
// CHECK-LABEL: func.func @word_table_48_lanes
// AVX512-LABEL: func.func @word_table_48_lanes
// AVX512-NOT:     llvm.x86.avx512.vpermi2var.hi.512
// AVX512:         vector.gather
func.func @word_table_48_lanes(%w: tensor<1x48xi8>) -> tensor<1x48xbf16> {
  %t = arith.constant dense<"0x0000803F004040408040A040C040E040004110412041304140415041604170418041884190419841A041A841B041B841C041C841D041D841E041E841F041F8410042044208420C421042144218421C422042244228422C423042344238423C424042444248424C425042544258425C426042644268426C427042744278427C42804282428442864288428A428C428E42904292429442964298429A429C429E42A042A242A442A642A842AA42AC42AE42B042B242B442B642B842BA42BC42BE42C042C242C442C642C842CA42CC42CE42D042D242D442D642D842DA42DC42DE42E042E242E442E642E842EA42EC42EE42F042F242F442F642F842FA42FC42FE42008080BF00C040C080C0A0C0C0C0E0C000C110C120C130C140C150C160C170C180C188C190C198C1A0C1A8C1B0C1B8C1C0C1C8C1D0C1D8C1E0C1E8C1F0C1F8C100C204C208C20CC210C214C218C21CC220C224C228C22CC230C234C238C23CC240C244C248C24CC250C254C258C25CC260C264C268C26CC270C274C278C27CC280C282C284C286C288C28AC28CC28EC290C292C294C296C298C29AC29CC29EC2A0C2A2C2A4C2A6C2A8C2AAC2ACC2AEC2B0C2B2C2B4C2B6C2B8C2BAC2BCC2BEC2C0C2C2C2C4C2C6C2C8C2CAC2CCC2CEC2D0C2D2C2D4C2D6C2D8C2DAC2DCC2DEC2E0C2E2C2E4C2E6C2E8C2EAC2ECC2EEC2F0C2F2C2F4C2F6C2F8C2FAC2FCC2FEC2"> : tensor<256xbf16>
  %e = tensor.empty() : tensor<1x48xbf16>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<1x48xi8>) outs(%e : tensor<1x48xbf16>) {
  ^bb0(%x: i8, %o: bf16):
    %c = arith.extui %x : i8 to i32
    %i = arith.index_cast %c : i32 to index
    %v = tensor.extract %t[%i] : tensor<256xbf16>
    linalg.yield %v : bf16
  } -> tensor<1x48xbf16>
  return %d : tensor<1x48xbf16>
}

// -----

// A scale byte per 4 K elements differs within a vector: the table read
// stays a gather (correct, not a shuffle of the wrong row).
// CHECK-LABEL: func.func @scale_row_varies
// CHECK-NOT:     llvm.x86.ssse3.pshuf.b.128
// CHECK:         vector.gather
func.func @scale_row_varies(%w: tensor<2x64xi8>, %s: tensor<2x16xi8>, %t: tensor<256x16xi8>) -> tensor<2x64xi8> {
  %c4 = arith.constant 4 : index
  %c15 = arith.constant 15 : i8
  %e = tensor.empty() : tensor<2x64xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<2x64xi8>) outs(%e : tensor<2x64xi8>) {
  ^bb0(%x: i8, %o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %c4 : index
    %sc = tensor.extract %s[%n, %blk] : tensor<2x16xi8>
    %row = arith.index_castui %sc : i8 to index
    %code = arith.andi %x, %c15 : i8
    %col = arith.index_castui %code : i8 to index
    %v = tensor.extract %t[%row, %col] : tensor<256x16xi8>
    linalg.yield %v : i8
  } -> tensor<2x64xi8>
  return %d : tensor<2x64xi8>
}

// -----

// Left alone: a reduction (amax of a row), a dynamic innermost extent and a
// GEMM that comfyquant-cpu-vectorize-gemm owns.
// CHECK-LABEL: func.func @untouched
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT:   vector.
func.func @untouched(%x: tensor<4x16xf32>, %y: tensor<?xf32>, %w: tensor<3x16xf32>) -> (tensor<4xf32>, tensor<?xf32>, tensor<4x3xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %amax = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x16xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %abs = math.absf %a : f32
    %m = arith.maxnumf %o, %abs : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %c0 = arith.constant 0 : index
  %n = tensor.dim %y, %c0 : tensor<?xf32>
  %e2 = tensor.empty(%n) : tensor<?xf32>
  %neg = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%y : tensor<?xf32>) outs(%e2 : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.negf %a : f32
    linalg.yield %v : f32
  } -> tensor<?xf32>
  %e3 = tensor.empty() : tensor<4x3xf32>
  %f3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x16xf32>, tensor<3x16xf32>) outs(%f3 : tensor<4x3xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 1, nr = 1, kv = 8, mc = 4, decode = adaptive>} {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x3xf32>
  return %amax, %neg, %g : tensor<4xf32>, tensor<?xf32>, tensor<4x3xf32>
}

// -----

// K = 17: two vectors of 8 and a one-element remainder, which has no loop
// left once its unit dimensions are dropped: it stays a scalar generic
// (lowered to loops later), and the function records the scalar path.
// CHECK-LABEL: func.func @scalar_tail
// CHECK-SAME:    comfyquant.elementwise = "vector+scalar"
// CHECK:         arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK:         linalg.generic
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
func.func @scalar_tail(%x: tensor<3x17xf32>) -> tensor<3x17xbf16>
    attributes {comfyquant.target = #comfyquant.target<cpu, "x86-64-v3">} {
  %e = tensor.empty() : tensor<3x17xbf16>
  %d = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<3x17xf32>) outs(%e : tensor<3x17xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<3x17xbf16>
  return %d : tensor<3x17xbf16>
}

// -----

// Every tile vectorizes: the function records that.
// CHECK-LABEL: func.func @vector_only
// CHECK-SAME:    comfyquant.elementwise = "vector"
func.func @vector_only(%x: tensor<2x16xf32>) -> tensor<2x16xbf16>
    attributes {comfyquant.target = #comfyquant.target<cpu, "x86-64-v3">} {
  %e = tensor.empty() : tensor<2x16xbf16>
  %d = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x16xf32>) outs(%e : tensor<2x16xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x16xbf16>
  return %d : tensor<2x16xbf16>
}

// -----

// A block scale loaded once per block and repeated over its lanes (four
// blocks of four): its decode runs on the four loaded lanes, and only the
// decoded f32 is repeated, just before it meets the per-lane values.
// CHECK-LABEL: func.func @block_scale_decoded_per_block
// CHECK-SAME:    (%[[S:.*]]: vector<4xi8>, %[[V:.*]]: vector<16xf32>)
// CHECK:         %[[W:.*]] = arith.extui %[[S]] : vector<4xi8> to vector<4xi32>
// CHECK:         %[[SH:.*]] = arith.shli %[[W]], %{{.*}} : vector<4xi32>
// CHECK:         %[[F:.*]] = arith.bitcast %[[SH]] : vector<4xi32> to vector<4xf32>
// CHECK:         %[[Z:.*]] = arith.cmpi eq, %[[S]], %{{.*}} : vector<4xi8>
// CHECK:         %[[SEL:.*]] = arith.select %[[Z]], %{{.*}}, %[[F]] : vector<4xi1>, vector<4xf32>
// CHECK:         %[[R:.*]] = vector.shuffle %[[SEL]], %[[SEL]] [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
// CHECK:         arith.mulf %[[V]], %[[R]] : vector<16xf32>
func.func @block_scale_decoded_per_block(%s: vector<4xi8>, %v: vector<16xf32>) -> vector<16xf32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
  %c23 = arith.constant dense<23> : vector<16xi32>
  %zero = arith.constant dense<0> : vector<16xi8>
  %tiny = arith.constant dense<1.0e-38> : vector<16xf32>
  %r = vector.shuffle %s, %s [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3] : vector<4xi8>, vector<4xi8>
  %w = arith.extui %r : vector<16xi8> to vector<16xi32>
  %sh = arith.shli %w, %c23 : vector<16xi32>
  %f = arith.bitcast %sh : vector<16xi32> to vector<16xf32>
  %z = arith.cmpi eq, %r, %zero : vector<16xi8>
  %sel = arith.select %z, %tiny, %f : vector<16xi1>, vector<16xf32>
  %y = arith.mulf %v, %sel : vector<16xf32>
  return %y : vector<16xf32>
}

// -----

// A constant that differs within a block (the per-lane shift of 2-bit
// fields) cannot be narrowed: the shuffle stays above the shift. One that
// agrees with the repetition is narrowed.
// CHECK-LABEL: func.func @lane_constants
// CHECK:         arith.constant dense<[1, 2, 3, 4]> : vector<4xi32>
// CHECK:         %[[E:.*]] = arith.extui %{{.*}} : vector<4xi8> to vector<4xi32>
// CHECK:         %[[A:.*]] = arith.addi %[[E]], %{{.*}} : vector<4xi32>
// CHECK:         %[[R:.*]] = vector.shuffle %[[A]], %[[A]] [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
// CHECK:         arith.shrui %[[R]], %{{.*}} : vector<16xi32>
func.func @lane_constants(%s: vector<4xi8>) -> vector<16xi32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
  %blockwise = arith.constant dense<[1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4]> : vector<16xi32>
  %lanewise = arith.constant dense<[0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6]> : vector<16xi32>
  %r = vector.shuffle %s, %s [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3] : vector<4xi8>, vector<4xi8>
  %w = arith.extui %r : vector<16xi8> to vector<16xi32>
  %a = arith.addi %w, %blockwise : vector<16xi32>
  %y = arith.shrui %a, %lanewise : vector<16xi32>
  return %y : vector<16xi32>
}

// -----

// Pairs (a nibble's byte repeated twice) stay as they are: the wider
// result shuffle would cost more than the lanes saved.
// CHECK-LABEL: func.func @pairs_stay
// CHECK:         %[[R:.*]] = vector.shuffle %{{.*}} [0, 0, 1, 1, 2, 2, 3, 3]
// CHECK:         arith.extui %[[R]] : vector<8xi8> to vector<8xi32>
func.func @pairs_stay(%s: vector<4xi8>) -> vector<8xi32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "x86-64-v3">} {
  %r = vector.shuffle %s, %s [0, 0, 1, 1, 2, 2, 3, 3] : vector<4xi8>, vector<4xi8>
  %w = arith.extui %r : vector<8xi8> to vector<8xi32>
  return %w : vector<8xi32>
}

// -----

// A widening cast whose users cannot take the shuffle keeps it above: the
// shuffle stays on bytes (and the bytes' range stays visible to integer
// narrowing).
// CHECK-LABEL: func.func @widening_stays
// CHECK:         %[[R:.*]] = vector.shuffle %{{.*}} [0, 0, 0, 0, 1, 1, 1, 1]
// CHECK:         %[[W:.*]] = arith.extui %[[R]] : vector<8xi8> to vector<8xi32>
// CHECK:         arith.shrui %[[W]], %{{.*}} : vector<8xi32>
func.func @widening_stays(%s: vector<2xi8>) -> vector<8xi32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "x86-64-v3">} {
  %lanewise = arith.constant dense<[0, 2, 4, 6, 0, 2, 4, 6]> : vector<8xi32>
  %r = vector.shuffle %s, %s [0, 0, 0, 0, 1, 1, 1, 1] : vector<2xi8>, vector<2xi8>
  %w = arith.extui %r : vector<8xi8> to vector<8xi32>
  %y = arith.shrui %w, %lanewise : vector<8xi32>
  return %y : vector<8xi32>
}

// -----

// A butterfly stage of stride 4 (blocks of 16) read by index, eight lanes
// per tile: the tile lies in one half of a block, so each input is one
// 4-element load repeated twice, and the digit (k % 16) / 4 is the tile's
// scalar digit plus [0, 0, 0, 0, 1, 1, 1, 1]: no gather, no vector division.
// CHECK-LABEL: func.func @butterfly_stride4
// CHECK-NOT:     vector.gather
// CHECK:         %[[IN:.*]] = arith.remui %{{.*}}, %c16 : index
// CHECK:         %[[D:.*]] = arith.divui %[[IN]], %c4 : index
// CHECK:         %[[DV:.*]] = vector.broadcast %[[D]] : index to vector<8xindex>
// CHECK:         arith.addi %[[DV]], %{{.*}} : vector<8xindex>
// Each input's 4-element span lies in an aligned window of 8 (the block
// start is a multiple of 16, the row of 32 a multiple of 8): the window is
// read whole and shuffled.
// CHECK:         %[[L:.*]] = vector.transfer_read %arg0[%{{.*}}, %{{.*}}], %{{.*}} {in_bounds = [true]} : tensor<2x32xf32>, vector<8xf32>
// CHECK:         vector.shuffle %[[L]], %[[L]] [0, 1, 2, 3, 0, 1, 2, 3] : vector<8xf32>, vector<8xf32>
// CHECK:         vector.shuffle %{{.*}} [4, 5, 6, 7, 4, 5, 6, 7] : vector<8xf32>, vector<8xf32>
// CHECK:         vector.shuffle %{{.*}} [0, 1, 2, 3, 0, 1, 2, 3] : vector<8xf32>, vector<8xf32>
// CHECK:         vector.shuffle %{{.*}} [4, 5, 6, 7, 4, 5, 6, 7] : vector<8xf32>, vector<8xf32>
// CHECK-NOT:     vector<4xf32>
// CHECK-NOT:     arith.divui %{{.*}} : vector<
// CHECK-NOT:     arith.remui %{{.*}} : vector<
// CHECK-NOT:     vector.gather
// CHECK:         return
func.func @butterfly_stride4(%x: tensor<2x32xf32>) -> tensor<2x32xf32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "x86-64-v3">} {
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c12 = arith.constant 12 : index
  %c16 = arith.constant 16 : index
  %init = tensor.empty() : tensor<2x32xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      outs(%init : tensor<2x32xf32>) {
  ^bb0(%out: f32):
    %row = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %c16 : index
    %first = arith.muli %blk, %c16 : index
    %in = arith.remui %k, %c16 : index
    %d = arith.divui %in, %c4 : index
    %lane = arith.remui %k, %c4 : index
    %i0 = arith.addi %first, %lane : index
    %i1 = arith.addi %i0, %c4 : index
    %i2 = arith.addi %i0, %c8 : index
    %i3 = arith.addi %i0, %c12 : index
    %x0 = tensor.extract %x[%row, %i0] : tensor<2x32xf32>
    %x1 = tensor.extract %x[%row, %i1] : tensor<2x32xf32>
    %x2 = tensor.extract %x[%row, %i2] : tensor<2x32xf32>
    %x3 = tensor.extract %x[%row, %i3] : tensor<2x32xf32>
    %flip = arith.cmpi eq, %d, %c3 : index
    %n0 = arith.negf %x0 : f32
    %t0 = arith.select %flip, %n0, %x0 : f32
    %s1 = arith.addf %t0, %x1 : f32
    %s2 = arith.addf %s1, %x2 : f32
    %s3 = arith.addf %s2, %x3 : f32
    linalg.yield %s3 : f32
  } -> tensor<2x32xf32>
  return %y : tensor<2x32xf32>
}

// -----

// A row of 36 is not a multiple of 8: a window past a span could end
// beyond the row, so each span is read as it is.
// CHECK-LABEL: func.func @butterfly_stride4_row_of_36
// CHECK:         vector.transfer_read %arg0[%{{.*}}, %{{.*}}], %{{.*}} {in_bounds = [true]} : tensor<2x36xf32>, vector<4xf32>
// CHECK-NOT:     tensor<2x36xf32>, vector<8xf32>
// CHECK:         return
func.func @butterfly_stride4_row_of_36(%x: tensor<2x36xf32>) -> tensor<2x36xf32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "x86-64-v3">} {
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c12 = arith.constant 12 : index
  %c16 = arith.constant 16 : index
  %init = tensor.empty() : tensor<2x36xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      outs(%init : tensor<2x36xf32>) {
  ^bb0(%out: f32):
    %row = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %c16 : index
    %first = arith.muli %blk, %c16 : index
    %in = arith.remui %k, %c16 : index
    %d = arith.divui %in, %c4 : index
    %lane = arith.remui %k, %c4 : index
    %i0 = arith.addi %first, %lane : index
    %i1 = arith.addi %i0, %c4 : index
    %i2 = arith.addi %i0, %c8 : index
    %i3 = arith.addi %i0, %c12 : index
    %x0 = tensor.extract %x[%row, %i0] : tensor<2x36xf32>
    %x1 = tensor.extract %x[%row, %i1] : tensor<2x36xf32>
    %x2 = tensor.extract %x[%row, %i2] : tensor<2x36xf32>
    %x3 = tensor.extract %x[%row, %i3] : tensor<2x36xf32>
    %flip = arith.cmpi eq, %d, %c3 : index
    %n0 = arith.negf %x0 : f32
    %t0 = arith.select %flip, %n0, %x0 : f32
    %s1 = arith.addf %t0, %x1 : f32
    %s2 = arith.addf %s1, %x2 : f32
    %s3 = arith.addf %s2, %x3 : f32
    linalg.yield %s3 : f32
  } -> tensor<2x36xf32>
  return %y : tensor<2x36xf32>
}


// -----

// An int8 activation quantizer: x / s rounded to bf16, then to an integer.
// Each register of the rounding is one x86 round instruction (LLVM would
// otherwise narrow roundeven(extf(bf16)) to a bf16 roundeven and round lane
// by lane); the 4-lane remainder of the 20-wide row is one SSE4.1 round.
// A 3-lane remainder (a 19-wide row) fits no register and keeps
// math.roundeven.
// CHECK-LABEL: func.func @quantize_rounding
// CHECK:         scf.for
// CHECK:           arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK-NEXT:      %[[Q:.*]] = arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK-NEXT:      %[[R:.*]] = builtin.unrealized_conversion_cast %[[Q]], %{{.*}} : vector<8xf32>, i32 to vector<8xf32> {comfyquant.intrinsic = "llvm.x86.avx.round.ps.256"}
// CHECK:           arith.maximumf %[[R]]
// CHECK:           arith.fptosi
// CHECK:         unrealized_conversion_cast %{{.*}}, %{{.*}} : vector<4xf32>, i32 to vector<4xf32> {comfyquant.intrinsic = "llvm.x86.sse41.round.ps"}
// CHECK-NOT:     math.roundeven
// AVX512-LABEL: func.func @quantize_rounding
// AVX512:         arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// AVX512-NEXT:    %[[Q:.*]] = arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// AVX512-NEXT:    builtin.unrealized_conversion_cast %[[Q]], %{{.*}}, %[[Q]], %{{.*}}, %{{.*}} : vector<16xf32>, i32, vector<16xf32>, i16, i32 to vector<16xf32> {comfyquant.intrinsic = "llvm.x86.avx512.mask.rndscale.ps.512"}
// AVX512:         unrealized_conversion_cast %{{.*}}, %{{.*}} : vector<4xf32>, i32 to vector<4xf32> {comfyquant.intrinsic = "llvm.x86.sse41.round.ps"}
// AVX512-NOT:     math.roundeven
func.func @quantize_rounding(%x: tensor<3x20xbf16>, %s: tensor<3x1xf32>) -> tensor<3x20xi8> {
  %lo = arith.constant -128.0 : f32
  %hi = arith.constant 127.0 : f32
  %e = tensor.empty() : tensor<3x20xi8>
  %q = linalg.generic {indexing_maps = [affine_map<(m, k) -> (m, k)>, affine_map<(m, k) -> (m, 0)>, affine_map<(m, k) -> (m, k)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<3x20xbf16>, tensor<3x1xf32>) outs(%e : tensor<3x20xi8>) {
  ^bb0(%a: bf16, %b: f32, %o: i8):
    %af = arith.extf %a : bf16 to f32
    %d = arith.divf %af, %b : f32
    %t = arith.truncf %d : f32 to bf16
    %w = arith.extf %t : bf16 to f32
    %r = math.roundeven %w : f32
    %c0 = arith.maximumf %r, %lo : f32
    %c1 = arith.minimumf %c0, %hi : f32
    %i = arith.fptosi %c1 : f32 to i8
    linalg.yield %i : i8
  } -> tensor<3x20xi8>
  return %q : tensor<3x20xi8>
}

// -----

// CHECK-LABEL: func.func @quantize_rounding_odd
// CHECK:         llvm.x86.avx.round.ps.256
// CHECK:         math.roundeven %{{.*}} : vector<3xf32>
// AVX512-LABEL: func.func @quantize_rounding_odd
// AVX512:         llvm.x86.avx512.mask.rndscale.ps.512
// AVX512:         math.roundeven %{{.*}} : vector<3xf32>
func.func @quantize_rounding_odd(%x: tensor<3x19xbf16>, %s: tensor<3x1xf32>) -> tensor<3x19xi8> {
  %lo = arith.constant -128.0 : f32
  %hi = arith.constant 127.0 : f32
  %e = tensor.empty() : tensor<3x19xi8>
  %q = linalg.generic {indexing_maps = [affine_map<(m, k) -> (m, k)>, affine_map<(m, k) -> (m, 0)>, affine_map<(m, k) -> (m, k)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<3x19xbf16>, tensor<3x1xf32>) outs(%e : tensor<3x19xi8>) {
  ^bb0(%a: bf16, %b: f32, %o: i8):
    %af = arith.extf %a : bf16 to f32
    %d = arith.divf %af, %b : f32
    %t = arith.truncf %d : f32 to bf16
    %w = arith.extf %t : bf16 to f32
    %r = math.roundeven %w : f32
    %c0 = arith.maximumf %r, %lo : f32
    %c1 = arith.minimumf %c0, %hi : f32
    %i = arith.fptosi %c1 : f32 to i8
    linalg.yield %i : i8
  } -> tensor<3x19xi8>
  return %q : tensor<3x19xi8>
}

// -----

// Four 2-bit fields per byte (W6A8's high plane: byte k/4 shifted by
// 2·(k%4), masked to 2 bits) with vpmultishiftqb (AVX512-VBMI): one
// shuffle puts the two bytes each qword's eight lanes read into that qword
// (zeros after them: a vpmovzxwq), one multishift takes each lane's field
// at bit 2·j of its qword, the mask keeps its two bits. No replication of
// bytes to lanes, no widening, no variable shifts.
// STRATEGY-LABEL: func.func @two_bit_fields
// STRATEGY-DAG:     %[[CTRL:.*]] = arith.constant dense<[0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14, {{.*}}]> : vector<64xi8>
// STRATEGY-DAG:     %[[THREE:.*]] = arith.constant dense<3> : vector<64xi8>
// STRATEGY:         %[[BYTES:.*]] = vector.transfer_read %arg0{{.*}} : tensor<1x16xi8>, vector<16xi8>
// STRATEGY:         %[[DATA:.*]] = vector.shuffle %[[BYTES]], %{{.*}} [0, 1, 16, 16, 16, 16, 16, 16, 2, 3, 16, 16, 16, 16, 16, 16, 4, 5, {{.*}}] : vector<16xi8>, vector<16xi8>
// STRATEGY:         %[[F:.*]] = builtin.unrealized_conversion_cast %[[CTRL]], %[[DATA]] : vector<64xi8>, vector<64xi8> to vector<64xi8> {comfyquant.intrinsic = "llvm.x86.avx512.pmultishift.qb.512"}
// STRATEGY:         arith.andi %[[F]], %[[THREE]] : vector<64xi8>
// STRATEGY-NOT:     arith.shrui
func.func @two_bit_fields(%p: tensor<1x16xi8>) -> tensor<1x64xi8> attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-bf16">} {
  %c4 = arith.constant 4 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : i32
  %e = tensor.empty() : tensor<1x64xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<1x64xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c4 : index
    %b = tensor.extract %p[%n, %byte] : tensor<1x16xi8>
    %r = arith.remui %k, %c4 : index
    %s = arith.muli %r, %c2 : index
    %s32 = arith.index_cast %s : index to i32
    %w = arith.extui %b : i8 to i32
    %sh = arith.shrui %w, %s32 : i32
    %f = arith.andi %sh, %c3 : i32
    %t = arith.trunci %f : i32 to i8
    linalg.yield %t : i8
  } -> tensor<1x64xi8>
  return %d : tensor<1x64xi8>
}

// -----

// Without VBMI (avx512-vnni), the shifts stay.
// STRATEGY-LABEL: func.func @two_bit_fields_no_vbmi
// STRATEGY-NOT:     pmultishift
// STRATEGY:         arith.shrui
// STRATEGY-NOT:     pmultishift
func.func @two_bit_fields_no_vbmi(%p: tensor<1x16xi8>) -> tensor<1x64xi8> attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
  %c4 = arith.constant 4 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : i32
  %e = tensor.empty() : tensor<1x64xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<1x64xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c4 : index
    %b = tensor.extract %p[%n, %byte] : tensor<1x16xi8>
    %r = arith.remui %k, %c4 : index
    %s = arith.muli %r, %c2 : index
    %s32 = arith.index_cast %s : index to i32
    %w = arith.extui %b : i8 to i32
    %sh = arith.shrui %w, %s32 : i32
    %f = arith.andi %sh, %c3 : i32
    %t = arith.trunci %f : i32 to i8
    linalg.yield %t : i8
  } -> tensor<1x64xi8>
  return %d : tensor<1x64xi8>
}

// -----

// Nibbles (two fields per byte) keep their cheaper shift-and-mask lowering.
// STRATEGY-LABEL: func.func @nibble_fields
// STRATEGY-NOT:     pmultishift
// STRATEGY:         return
func.func @nibble_fields(%p: tensor<1x32xi8>) -> tensor<1x64xi8> attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-bf16">} {
  %per = arith.constant 2 : index
  %width = arith.constant 4 : index
  %mask = arith.constant 15 : i32
  %e = tensor.empty() : tensor<1x64xi8>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<1x64xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %per : index
    %b = tensor.extract %p[%n, %byte] : tensor<1x32xi8>
    %r = arith.remui %k, %per : index
    %s = arith.muli %r, %width : index
    %s32 = arith.index_cast %s : index to i32
    %w = arith.extui %b : i8 to i32
    %sh = arith.shrui %w, %s32 : i32
    %f = arith.andi %sh, %mask : i32
    %t = arith.trunci %f : i32 to i8
    linalg.yield %t : i8
  } -> tensor<1x64xi8>
  return %d : tensor<1x64xi8>
}

// -----

// A nibble pair select into sixteen 32-bit lanes (NVFP4's E2M1 codes at
// M = 1, high nibble first) with VBMI: each byte into its own qword (a
// vpmovzxbq), one vpmultishiftqb taking bits 4-11 (the high nibble and
// zeros) into the even dword and bits 0-7 into the odd one, every other
// byte from bits 8-15 (zeros), then the mask of the odd lanes' high
// nibble. Without VBMI, the 16-bit pair form widened to dwords.
// STRATEGY-LABEL: func.func @nibble_dwords
// STRATEGY-DAG:     %[[FIFTEEN:.*]] = arith.constant dense<15> : vector<16xi32>
// STRATEGY-DAG:     %[[CTRL:.*]] = arith.constant dense<[4, 8, 8, 8, 0, 8, 8, 8, 4, 8, 8, 8, 0, 8, 8, 8, {{.*}}]> : vector<64xi8>
// STRATEGY:         %[[B:.*]] = vector.transfer_read {{.*}} : tensor<1x8xi8>, vector<8xi8>
// STRATEGY:         %[[Q:.*]] = vector.shuffle %[[B]], %{{.*}} [0, 8, 8, 8, 8, 8, 8, 8, 1, 8, 8, 8, 8, 8, 8, 8, 2, {{.*}}] : vector<8xi8>, vector<8xi8>
// STRATEGY:         %[[F:.*]] = builtin.unrealized_conversion_cast %[[CTRL]], %[[Q]] {{.*}} {comfyquant.intrinsic = "llvm.x86.avx512.pmultishift.qb.512"}
// STRATEGY:         %[[D:.*]] = vector.bitcast %[[F]] : vector<64xi8> to vector<16xi32>
// STRATEGY:         arith.andi %[[D]], %[[FIFTEEN]] : vector<16xi32>
// STRATEGY-LABEL: func.func @nibble_dwords_no_vbmi
// STRATEGY-NOT:     pmultishift
// STRATEGY:         vector.bitcast %{{.*}} : vector<8xi16> to vector<16xi8>
// STRATEGY:         arith.extui %{{.*}} : vector<16xi8> to vector<16xi32>
func.func @nibble_dwords(%p: tensor<1x8xi8>) -> tensor<1x16xi32> attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-bf16">} {
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : i32
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<1x16xi32>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<1x16xi32>) {
  ^bb0(%o: i32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c2 : index
    %b = tensor.extract %p[%n, %byte] : tensor<1x8xi8>
    %w = arith.extui %b : i8 to i32
    %r = arith.remui %k, %c2 : index
    %even = arith.cmpi eq, %r, %c0 : index
    %hi = arith.shrui %w, %c4 : i32
    %hin = arith.andi %hi, %c15 : i32
    %lon = arith.andi %w, %c15 : i32
    %code = arith.select %even, %hin, %lon : i32
    linalg.yield %code : i32
  } -> tensor<1x16xi32>
  return %d : tensor<1x16xi32>
}

// -----

func.func @nibble_dwords_no_vbmi(%p: tensor<1x8xi8>) -> tensor<1x16xi32> attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : i32
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<1x16xi32>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<1x16xi32>) {
  ^bb0(%o: i32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c2 : index
    %b = tensor.extract %p[%n, %byte] : tensor<1x8xi8>
    %w = arith.extui %b : i8 to i32
    %r = arith.remui %k, %c2 : index
    %even = arith.cmpi eq, %r, %c0 : index
    %hi = arith.shrui %w, %c4 : i32
    %hin = arith.andi %hi, %c15 : i32
    %lon = arith.andi %w, %c15 : i32
    %code = arith.select %even, %hin, %lon : i32
    linalg.yield %code : i32
  } -> tensor<1x16xi32>
  return %d : tensor<1x16xi32>
}

// -----

// 32 lanes (a bf16 kernel's codes, high nibble first): each pair of packed
// bytes into a qword, one multishift puts the four nibbles in the low bytes
// of its four words (offsets 4, 0, 12, 8; the high bytes read the zeros at
// bit 16), a mask per word, widened.
// STRATEGY-LABEL: func.func @nibble_words
// STRATEGY-DAG:     %[[CTRL:.*]] = arith.constant dense<[4, 16, 0, 16, 12, 16, 8, 16, 4, 16, 0, 16, 12, 16, 8, 16, {{.*}}]> : vector<64xi8>
// STRATEGY-DAG:     %[[FIFTEEN:.*]] = arith.constant dense<15> : vector<32xi16>
// STRATEGY:         %[[B:.*]] = vector.transfer_read {{.*}} : tensor<1x16xi8>, vector<16xi8>
// STRATEGY:         %[[Q:.*]] = vector.shuffle %[[B]], %{{.*}} [0, 1, 16, 16, 16, 16, 16, 16, 2, 3, 16, {{.*}}] : vector<16xi8>, vector<16xi8>
// STRATEGY:         %[[F:.*]] = builtin.unrealized_conversion_cast %[[CTRL]], %[[Q]] {{.*}} {comfyquant.intrinsic = "llvm.x86.avx512.pmultishift.qb.512"}
// STRATEGY:         %[[W:.*]] = vector.bitcast %[[F]] : vector<64xi8> to vector<32xi16>
// STRATEGY:         %[[N:.*]] = arith.andi %[[W]], %[[FIFTEEN]] : vector<32xi16>
// STRATEGY:         arith.extui %[[N]] : vector<32xi16> to vector<32xi32>
func.func @nibble_words(%p: tensor<1x16xi8>) -> tensor<1x32xi32> attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-bf16">} {
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : i32
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<1x32xi32>
  %d = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<1x32xi32>) {
  ^bb0(%o: i32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %byte = arith.divui %k, %c2 : index
    %b = tensor.extract %p[%n, %byte] : tensor<1x16xi8>
    %w = arith.extui %b : i8 to i32
    %r = arith.remui %k, %c2 : index
    %even = arith.cmpi eq, %r, %c0 : index
    %hi = arith.shrui %w, %c4 : i32
    %hin = arith.andi %hi, %c15 : i32
    %lon = arith.andi %w, %c15 : i32
    %code = arith.select %even, %hin, %lon : i32
    linalg.yield %code : i32
  } -> tensor<1x32xi32>
  return %d : tensor<1x32xi32>
}
