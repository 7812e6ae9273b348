// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-tabulate-decoders --canonicalize | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// The E2M1 decode of a low nibble (masks, shifts, an f16 bitcast, widening,
// the 2^-14 rebias) folds to the 16 E2M1 values; the block scale, a value
// of its own, still multiplies the lookup.
// CHECK-LABEL: func.func @e2m1_low_nibble
// CHECK-DAG:     %[[T:.*]] = arith.constant dense<[0.000000e+00, 5.000000e-01, 1.000000e+00, 1.500000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 6.000000e+00, -0.000000e+00, -5.000000e-01, -1.000000e+00, -1.500000e+00, -2.000000e+00, -3.000000e+00, -4.000000e+00, -6.000000e+00]> : tensor<16xf32>
// CHECK:         linalg.generic
// CHECK:         ^bb0(%[[B:.*]]: i8, %[[S:.*]]: f32, %{{.*}}: f32):
// CHECK:           %[[C:.*]] = arith.andi %[[B]], %{{.*}} : i8
// CHECK:           %[[W:.*]] = arith.extui %[[C]] : i8 to i32
// CHECK:           %[[I:.*]] = arith.index_cast %[[W]] : i32 to index
// CHECK:           %[[V:.*]] = tensor.extract %[[T]][%[[I]]] : tensor<16xf32>
// CHECK-NOT:       arith.bitcast
// CHECK:           %[[P:.*]] = arith.mulf %[[V]], %[[S]] : f32
// CHECK:           linalg.yield %[[P]] : f32
func.func @e2m1_low_nibble(%w: tensor<4x32xi8>, %s: tensor<4xf32>) -> tensor<4x32xf32> {
  %c15 = arith.constant 15 : i8
  %c7_i16 = arith.constant 7 : i16
  %c8_i16 = arith.constant 8 : i16
  %c9_i16 = arith.constant 9 : i16
  %c12_i16 = arith.constant 12 : i16
  %rebias = arith.constant 1.638400e+04 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%w, %s : tensor<4x32xi8>, tensor<4xf32>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %scale: f32, %out: f32):
    %code = arith.andi %b, %c15 : i8
    %x = arith.extui %code : i8 to i16
    %mag = arith.andi %x, %c7_i16 : i16
    %magbits = arith.shli %mag, %c9_i16 : i16
    %sign = arith.andi %x, %c8_i16 : i16
    %signbits = arith.shli %sign, %c12_i16 : i16
    %bits = arith.ori %signbits, %magbits : i16
    %h = arith.bitcast %bits : i16 to f16
    %f = arith.extf %h : f16 to f32
    %v = arith.mulf %f, %rebias : f32
    %p = arith.mulf %v, %scale : f32
    linalg.yield %p : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A high nibble (a shift leaves four bits of a byte) is a code too.
// CHECK-LABEL: func.func @high_nibble
// CHECK:         arith.shrui
// CHECK:         tensor.extract %{{.*}} : tensor<16xf32>
// CHECK-NOT:     arith.sitofp
func.func @high_nibble(%w: tensor<4x32xi8>) -> tensor<4x32xf32> {
  %c4 = arith.constant 4 : i8
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %out: f32):
    %code = arith.shrui %b, %c4 : i8
    %f = arith.uitofp %code : i8 to f32
    %v = arith.mulf %f, %half : f32
    linalg.yield %v : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// An int8 of a nibble alone (W4A4's signed int4: (code ^ 8) - 8) is a
// 16-entry i8 table too, read by one byte shuffle per vector.
// CHECK-LABEL: func.func @signed_nibble
// CHECK:         %[[T:.*]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1]> : tensor<16xi8>
// CHECK:         linalg.generic
// CHECK-NOT:       arith.xori
// CHECK:           %[[V:.*]] = tensor.extract %[[T]][%{{.*}}] : tensor<16xi8>
// CHECK:           linalg.yield %[[V]] : i8
func.func @signed_nibble(%w: tensor<4x32xi8>) -> tensor<4x32xi8> {
  %c15 = arith.constant 15 : i8
  %c8 = arith.constant 8 : i8
  %e = tensor.empty() : tensor<4x32xi8>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xi8>) {
  ^bb0(%b: i8, %out: i8):
    %code = arith.andi %b, %c15 : i8
    %x = arith.xori %code, %c8 : i8
    %v = arith.subi %x, %c8 : i8
    linalg.yield %v : i8
  } -> tensor<4x32xi8>
  return %r : tensor<4x32xi8>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// Five bits have 32 values: not a code, the arithmetic stays.
// CHECK-LABEL: func.func @five_bits
// CHECK-NOT:     tensor.extract
// CHECK:         arith.uitofp
func.func @five_bits(%w: tensor<4x32xi8>) -> tensor<4x32xf32> {
  %c31 = arith.constant 31 : i8
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %out: f32):
    %code = arith.andi %b, %c31 : i8
    %f = arith.uitofp %code : i8 to f32
    %v = arith.mulf %f, %half : f32
    linalg.yield %v : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A single op is not worth a lookup.
// CHECK-LABEL: func.func @one_op
// CHECK-NOT:     tensor.extract
// CHECK:         arith.uitofp
func.func @one_op(%w: tensor<4x32xi8>) -> tensor<4x32xf32> {
  %c15 = arith.constant 15 : i8
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %out: f32):
    %code = arith.andi %b, %c15 : i8
    %f = arith.uitofp %code : i8 to f32
    linalg.yield %f : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>

// A GEMM's body is left as it is (its decode is part of what is matched).
// CHECK-LABEL: func.func @gemm_body
// CHECK-NOT:     tensor.extract
// CHECK:         arith.uitofp
func.func @gemm_body(%a: tensor<4x32xf32>, %w: tensor<8x32xi8>, %acc: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c15 = arith.constant 15 : i8
  %half = arith.constant 0.5 : f32
  %r = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : tensor<4x32xf32>, tensor<8x32xi8>) outs(%acc : tensor<4x8xf32>) {
  ^bb0(%x: f32, %b: i8, %o: f32):
    %code = arith.andi %b, %c15 : i8
    %f = arith.uitofp %code : i8 to f32
    %v = arith.mulf %f, %half : f32
    %p = arith.mulf %x, %v : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// The W4A8 grid: clamp(RNE(codebook[code] · e4m3(s_rel))) depends on a
// nibble and a scale byte read once per group of 16 along K. It becomes a
// [256, 16] table computed by the same ops before the decoder (the codebook
// is a runtime tensor, so the table is built per call), and a read of it.
// CHECK-LABEL: func.func @grid_of_code_and_scale
// CHECK:         %[[T:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<256x16xi8>)
// CHECK:           %[[ROW:.*]] = linalg.index 0
// CHECK:           %[[COL:.*]] = linalg.index 1
// CHECK-DAG:       arith.index_cast %[[ROW]] : index to i8
// CHECK-DAG:       tensor.extract %arg2[%[[COL]]] : tensor<16xf32>
// CHECK:           math.roundeven
// CHECK:           arith.fptosi %{{.*}} : f32 to i8
// CHECK:         linalg.generic
// CHECK-NOT:       math.roundeven
// CHECK:           %[[S:.*]] = tensor.extract %arg1
// CHECK-DAG:       %[[R:.*]] = arith.index_castui %[[S]] : i8 to index
// CHECK-DAG:       %[[C:.*]] = arith.index_castui %{{.*}} : i32 to index
// CHECK:           %[[V:.*]] = tensor.extract %[[T]][%[[R]], %[[C]]] : tensor<256x16xi8>
// CHECK:           linalg.yield %[[V]] : i8
func.func @grid_of_code_and_scale(%w: tensor<4x16xi8>, %s: tensor<4x2xi8>, %cb: tensor<16xf32>) -> tensor<4x32xi8> {
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c0 = arith.constant 0 : index
  %c4_i32 = arith.constant 4 : i32
  %c15_i32 = arith.constant 15 : i32
  %c7_i16 = arith.constant 7 : i16
  %mask = arith.constant -16512 : i16
  %c127_i8 = arith.constant 127 : i8
  %rebias = arith.constant 2.560000e+02 : f32
  %nan = arith.constant 0x7FC00000 : f32
  %lo = arith.constant -1.270000e+02 : f32
  %hi = arith.constant 1.270000e+02 : f32
  %e = tensor.empty() : tensor<4x32xi8>
  %r = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x32xi8>) {
  ^bb0(%out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %kb = arith.divui %k, %c2 : index
    %byte = tensor.extract %w[%n, %kb] : tensor<4x16xi8>
    %wide = arith.extui %byte : i8 to i32
    %odd = arith.remui %k, %c2 : index
    %even = arith.cmpi eq, %odd, %c0 : index
    %hs = arith.shrui %wide, %c4_i32 : i32
    %hn = arith.andi %hs, %c15_i32 : i32
    %ln = arith.andi %wide, %c15_i32 : i32
    %code = arith.select %even, %ln, %hn : i32
    %ci = arith.index_cast %code : i32 to index
    %level = tensor.extract %cb[%ci] : tensor<16xf32>
    %g = arith.divui %k, %c16 : index
    %sb = tensor.extract %s[%n, %g] : tensor<4x2xi8>
    %sx = arith.extsi %sb : i8 to i16
    %sh = arith.shli %sx, %c7_i16 : i16
    %bits = arith.andi %sh, %mask : i16
    %h = arith.bitcast %bits : i16 to f16
    %f = arith.extf %h : f16 to f32
    %sf = arith.mulf %f, %rebias : f32
    %mag = arith.andi %sb, %c127_i8 : i8
    %isnan = arith.cmpi eq, %mag, %c127_i8 : i8
    %scale = arith.select %isnan, %nan, %sf : f32
    %p = arith.mulf %level, %scale : f32
    %rn = math.roundeven %p : f32
    %c1 = arith.maxnumf %rn, %lo : f32
    %c2v = arith.minnumf %c1, %hi : f32
    %q = arith.fptosi %c2v : f32 to i8
    linalg.yield %q : i8
  } -> tensor<4x32xi8>
  return %r : tensor<4x32xi8>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A 6-bit code (a nibble or'ed with two high bits shifted by 4) has 64
// values: a [256, 64] table.
// CHECK-LABEL: func.func @six_bit_grid
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<256x64xi8>)
// CHECK:         tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<256x64xi8>
func.func @six_bit_grid(%w: tensor<4x32xi8>, %hb: tensor<4x32xi8>, %s: tensor<4x2xi8>) -> tensor<4x32xi8> {
  %c16 = arith.constant 16 : index
  %c4_i8 = arith.constant 4 : i8
  %c3_i8 = arith.constant 3 : i8
  %c15_i8 = arith.constant 15 : i8
  %c32 = arith.constant 3.200000e+01 : f32
  %lo = arith.constant -1.270000e+02 : f32
  %hi = arith.constant 1.270000e+02 : f32
  %e = tensor.empty() : tensor<4x32xi8>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%w, %hb : tensor<4x32xi8>, tensor<4x32xi8>) outs(%e : tensor<4x32xi8>) {
  ^bb0(%b: i8, %h: i8, %out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %low = arith.andi %b, %c15_i8 : i8
    %high = arith.andi %h, %c3_i8 : i8
    %hs = arith.shli %high, %c4_i8 : i8
    %code = arith.ori %low, %hs : i8
    %v = arith.uitofp %code : i8 to f32
    %lv = arith.subf %v, %c32 : f32
    %g = arith.divui %k, %c16 : index
    %sb = tensor.extract %s[%n, %g] : tensor<4x2xi8>
    %sf = arith.sitofp %sb : i8 to f32
    %p = arith.mulf %lv, %sf : f32
    %rn = math.roundeven %p : f32
    %c1 = arith.maxnumf %rn, %lo : f32
    %c2 = arith.minnumf %c1, %hi : f32
    %q = arith.fptosi %c2 : f32 to i8
    linalg.yield %q : i8
  } -> tensor<4x32xi8>
  return %r : tensor<4x32xi8>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// Not tabulated: a scale byte per 8 K elements changes within a 16-lane
// shuffle (the table row would not be one per vector), and a code computed
// from the byte that scales it (the two do not index a table separately).
// CHECK-LABEL: func.func @no_grid_table
// CHECK-NOT:     tensor<256x
// CHECK:         math.roundeven
// CHECK:         math.roundeven
func.func @no_grid_table(%w: tensor<4x32xi8>, %s: tensor<4x4xi8>) -> (tensor<4x32xi8>, tensor<4x32xi8>) {
  %c8 = arith.constant 8 : index
  %c15_i8 = arith.constant 15 : i8
  %lo = arith.constant -1.270000e+02 : f32
  %hi = arith.constant 1.270000e+02 : f32
  %e = tensor.empty() : tensor<4x32xi8>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xi8>) {
  ^bb0(%b: i8, %out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %code = arith.andi %b, %c15_i8 : i8
    %v = arith.uitofp %code : i8 to f32
    %g = arith.divui %k, %c8 : index
    %sb = tensor.extract %s[%n, %g] : tensor<4x4xi8>
    %sf = arith.sitofp %sb : i8 to f32
    %p = arith.mulf %v, %sf : f32
    %rn = math.roundeven %p : f32
    %c1 = arith.maxnumf %rn, %lo : f32
    %c2 = arith.minnumf %c1, %hi : f32
    %q = arith.fptosi %c2 : f32 to i8
    linalg.yield %q : i8
  } -> tensor<4x32xi8>
  %r2 = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x32xi8>) {
  ^bb0(%out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %z = arith.constant 0 : index
    %sb = tensor.extract %s[%n, %z] : tensor<4x4xi8>
    %code = arith.andi %sb, %c15_i8 : i8
    %v = arith.uitofp %code : i8 to f32
    %sf = arith.sitofp %sb : i8 to f32
    %p = arith.mulf %v, %sf : f32
    %rn = math.roundeven %p : f32
    %c1 = arith.maxnumf %rn, %lo : f32
    %c2 = arith.minnumf %c1, %hi : f32
    %q = arith.fptosi %c2 : f32 to i8
    linalg.yield %q : i8
  } -> tensor<4x32xi8>
  return %r, %r2 : tensor<4x32xi8>, tensor<4x32xi8>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// An f32 function of a nibble and a block's scale byte (the NVFP4 weight
// value: E2M1 level times the E4M3 block scale) becomes a [256, 16] f32
// table; the rounding to bf16 after it stays and reads the lookup.
// CHECK-LABEL: func.func @scaled_level
// CHECK:         %[[T:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<256x16xf32>)
// CHECK:         linalg.generic
// CHECK:           %[[V:.*]] = tensor.extract %[[T]][%{{.*}}, %{{.*}}] : tensor<256x16xf32>
// CHECK-NOT:       arith.mulf
// CHECK:           %[[B:.*]] = arith.truncf %[[V]] : f32 to bf16
// CHECK:           linalg.yield %[[B]] : bf16
func.func @scaled_level(%w: tensor<4x32xi8>, %s: tensor<4x2xi8>) -> tensor<4x32xbf16> {
  %c16 = arith.constant 16 : index
  %c15_i8 = arith.constant 15 : i8
  %half = arith.constant 5.000000e-01 : f32
  %e = tensor.empty() : tensor<4x32xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xbf16>) {
  ^bb0(%b: i8, %out: bf16):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %code = arith.andi %b, %c15_i8 : i8
    %v = arith.uitofp %code : i8 to f32
    %lv = arith.mulf %v, %half : f32
    %g = arith.divui %k, %c16 : index
    %sb = tensor.extract %s[%n, %g] : tensor<4x2xi8>
    %sw = arith.extsi %sb : i8 to i32
    %sf = arith.sitofp %sw : i32 to f32
    %p = arith.mulf %lv, %sf : f32
    %q = arith.truncf %p : f32 to bf16
    linalg.yield %q : bf16
  } -> tensor<4x32xbf16>
  return %r : tensor<4x32xbf16>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// An f32 of a 6-bit code and a scale byte is not tabulated: 64 f32 entries
// per row do not fit the register permutes the lookup lowers to.
// CHECK-LABEL: func.func @wide_f32_level
// CHECK-NOT:     tensor<256x
// CHECK:         arith.mulf
func.func @wide_f32_level(%w: tensor<4x32xi8>, %s: tensor<4x2xi8>) -> tensor<4x32xf32> {
  %c16 = arith.constant 16 : index
  %c63_i8 = arith.constant 63 : i8
  %half = arith.constant 5.000000e-01 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %out: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %code = arith.andi %b, %c63_i8 : i8
    %v = arith.uitofp %code : i8 to f32
    %lv = arith.mulf %v, %half : f32
    %g = arith.divui %k, %c16 : index
    %sb = tensor.extract %s[%n, %g] : tensor<4x2xi8>
    %sw = arith.extsi %sb : i8 to i32
    %sf = arith.sitofp %sw : i32 to f32
    %p = arith.mulf %lv, %sf : f32
    linalg.yield %p : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A code below 10 reading a 10-entry codebook: the table's 16 columns clamp
// the code to 9, so its padding columns never read past the codebook.
// CHECK-LABEL: func.func @short_codebook
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<256x16xi8>)
// CHECK:           %[[COL:.*]] = linalg.index 1
// CHECK:           %[[C:.*]] = arith.minui %[[COL]], %c9 : index
// CHECK:           %[[C8:.*]] = arith.index_cast %[[C]] : index to i8
// CHECK:           %[[CI:.*]] = arith.index_castui %[[C8]] : i8 to index
// CHECK:           tensor.extract %arg2[%[[CI]]] : tensor<10xf32>
func.func @short_codebook(%w: tensor<4x32xi8>, %s: tensor<4x2xi8>, %cb: tensor<10xf32>) -> tensor<4x32xi8> {
  %c16 = arith.constant 16 : index
  %c10_i8 = arith.constant 10 : i8
  %lo = arith.constant -1.270000e+02 : f32
  %hi = arith.constant 1.270000e+02 : f32
  %e = tensor.empty() : tensor<4x32xi8>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xi8>) {
  ^bb0(%b: i8, %out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %code = arith.remui %b, %c10_i8 : i8
    %ci = arith.index_castui %code : i8 to index
    %lv = tensor.extract %cb[%ci] : tensor<10xf32>
    %g = arith.divui %k, %c16 : index
    %sb = tensor.extract %s[%n, %g] : tensor<4x2xi8>
    %sf = arith.sitofp %sb : i8 to f32
    %p = arith.mulf %lv, %sf : f32
    %rn = math.roundeven %p : f32
    %c1 = arith.maxnumf %rn, %lo : f32
    %c2 = arith.minnumf %c1, %hi : f32
    %q = arith.fptosi %c2 : f32 to i8
    linalg.yield %q : i8
  } -> tensor<4x32xi8>
  return %r : tensor<4x32xi8>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A read indexed by the scale byte (a 128-entry table) is not tabulated:
// the table would evaluate all 256 bytes.
// CHECK-LABEL: func.func @byte_indexed_read
// CHECK-NOT:     tensor<256x
// CHECK:         math.roundeven
func.func @byte_indexed_read(%w: tensor<4x32xi8>, %s: tensor<4x2xi8>, %lut: tensor<128xf32>) -> tensor<4x32xi8> {
  %c16 = arith.constant 16 : index
  %c15_i8 = arith.constant 15 : i8
  %lo = arith.constant -1.270000e+02 : f32
  %hi = arith.constant 1.270000e+02 : f32
  %e = tensor.empty() : tensor<4x32xi8>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xi8>) {
  ^bb0(%b: i8, %out: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %code = arith.andi %b, %c15_i8 : i8
    %v = arith.uitofp %code : i8 to f32
    %g = arith.divui %k, %c16 : index
    %sb = tensor.extract %s[%n, %g] : tensor<4x2xi8>
    %si = arith.index_castui %sb : i8 to index
    %sf = tensor.extract %lut[%si] : tensor<128xf32>
    %p = arith.mulf %v, %sf : f32
    %rn = math.roundeven %p : f32
    %c1 = arith.maxnumf %rn, %lo : f32
    %c2 = arith.minnumf %c1, %hi : f32
    %q = arith.fptosi %c2 : f32 to i8
    linalg.yield %q : i8
  } -> tensor<4x32xi8>
  return %r : tensor<4x32xi8>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// An f32 computed from a block's scale byte alone by four ops or more (the
// E8M0 decode: a shift into the exponent, a bitcast, the selects of codes 0
// and 255) becomes a read of a 256-entry constant table, folded at every
// byte value (little-endian f32 bits: 2^-127, 2^-126, 2^-125, ..., NaN);
// the FP8 code it scales (eight bits: no pair table) stays.
// CHECK-LABEL: func.func @scale_byte_table
// CHECK:         %[[T:.*]] = arith.constant dense<"0x000040000000800000000001{{[0-9A-F]*}}0000C07F"> : tensor<256xf32>
// CHECK:         linalg.generic
// CHECK:           %[[SB:.*]] = tensor.extract %{{.*}} : tensor<4x2xi8>
// CHECK:           %[[I32:.*]] = arith.extui %[[SB]] : i8 to i32
// CHECK:           %[[I:.*]] = arith.index_cast %[[I32]] : i32 to index
// CHECK:           %[[S:.*]] = tensor.extract %[[T]][%[[I]]] : tensor<256xf32>
// CHECK-NOT:       arith.shli
// CHECK:           arith.mulf %{{.*}}, %[[S]] : f32
func.func @scale_byte_table(%w: tensor<4x32xi8>, %s: tensor<4x2xi8>) -> tensor<4x32xf32> {
  %c16 = arith.constant 16 : index
  %c0_i32 = arith.constant 0 : i32
  %c255_i32 = arith.constant 255 : i32
  %c23_i32 = arith.constant 23 : i32
  %tiny = arith.constant 5.87747175E-39 : f32
  %nan = arith.constant 0x7FC00000 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %out: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %v = arith.sitofp %b : i8 to f32
    %g = arith.divui %k, %c16 : index
    %sb = tensor.extract %s[%n, %g] : tensor<4x2xi8>
    %u = arith.extui %sb : i8 to i32
    %sh = arith.shli %u, %c23_i32 : i32
    %f = arith.bitcast %sh : i32 to f32
    %z = arith.cmpi eq, %u, %c0_i32 : i32
    %f0 = arith.select %z, %tiny, %f : f32
    %m = arith.cmpi eq, %u, %c255_i32 : i32
    %sf = arith.select %m, %nan, %f0 : f32
    %p = arith.mulf %v, %sf : f32
    linalg.yield %p : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// Not tabulated: a scale byte per 8 K elements (a vector would read a table
// entry per lane), and a byte's decode of fewer than four ops.
// CHECK-LABEL: func.func @no_scale_byte_table
// CHECK-NOT:     tensor<256xf32>
// CHECK:         arith.shli
// CHECK:         arith.sitofp %{{.*}} : i8 to f32
// CHECK-NOT:     tensor<256xf32>
func.func @no_scale_byte_table(%w: tensor<4x32xi8>, %s: tensor<4x4xi8>, %t: tensor<4x2xi8>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c0_i32 = arith.constant 0 : i32
  %c255_i32 = arith.constant 255 : i32
  %c23_i32 = arith.constant 23 : i32
  %tiny = arith.constant 5.87747175E-39 : f32
  %nan = arith.constant 0x7FC00000 : f32
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %out: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %v = arith.sitofp %b : i8 to f32
    %g = arith.divui %k, %c8 : index
    %sb = tensor.extract %s[%n, %g] : tensor<4x4xi8>
    %u = arith.extui %sb : i8 to i32
    %sh = arith.shli %u, %c23_i32 : i32
    %f = arith.bitcast %sh : i32 to f32
    %z = arith.cmpi eq, %u, %c0_i32 : i32
    %f0 = arith.select %z, %tiny, %f : f32
    %m = arith.cmpi eq, %u, %c255_i32 : i32
    %sf = arith.select %m, %nan, %f0 : f32
    %p = arith.mulf %v, %sf : f32
    linalg.yield %p : f32
  } -> tensor<4x32xf32>
  %r2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x32xi8>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%b: i8, %out: f32):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %v = arith.sitofp %b : i8 to f32
    %g = arith.divui %k, %c16 : index
    %sb = tensor.extract %t[%n, %g] : tensor<4x2xi8>
    %sf = arith.sitofp %sb : i8 to f32
    %sh = arith.mulf %sf, %half : f32
    %p = arith.mulf %v, %sh : f32
    linalg.yield %p : f32
  } -> tensor<4x32xf32>
  return %r, %r2 : tensor<4x32xf32>, tensor<4x32xf32>
}
