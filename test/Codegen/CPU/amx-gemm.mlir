// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-amx-gemm | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-amx-gemm --canonicalize --cse | FileCheck %s --check-prefix=EMU

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// AMX on buffers: the activation codes packed once (Ap[k/4][4m + k%4],
// rows padded to 16 with zeros; 16 x 16 dwords transposed in registers), 16 x 64-byte tiles of the weights loaded
// where they are, tdpbssd into transposed 16 x 16 C tiles. tdpbssd T, W,
// Ap: T[r][c] += Σ W[r][4q+i] · Ap[q][4c+i], i.e. the weight tile is src1
// and the packed activations src2; the operands are pinned. M blocks of mc
// = 64 rows; in each, N blocks of two B tiles (32 rows; N = 48 leaves a
// one-tile N tail) times M blocks of two A tiles (a 16-row M tail under an
// scf.if): four accumulators per K step. Each tile is transposed in
// vector registers and added into C 16 columns at a time.
// CHECK-LABEL: func.func @amx
// CHECK:       %[[AP:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<32x?xi8>
// CHECK:       scf.if
// CHECK:         vector.load %arg0[%{{.*}}, %{{.*}}] : memref<?x128xi8>, vector<64xi8>
// CHECK:       vector.transpose %{{.*}}, [1, 0] : vector<16x16xi32> to vector<16x16xi32>
// CHECK:       vector.store %{{.*}}, %[[AP]][%{{.*}}, %{{.*}}] : memref<32x?xi8>, vector<64xi8>
// CHECK:       %[[T:.*]] = memref.alloca() : memref<16x16xi32>
// CHECK:       %[[TT:.*]] = memref.alloca() : memref<16x16xi32>
// CHECK:       scf.for %[[MB:.*]] = %c0 to %{{.*}} step %c64{{(_[0-9]+)?}}
// CHECK:         scf.for %[[N0:.*]] = %c0 to %{{.*}} step %{{.*}}
// CHECK:           scf.for %[[M0:.*]] = %[[MB]] to %{{.*}} step %c32{{(_[0-9]+)?}}
// CHECK-COUNT-4:     amx.tile_zero : !amx.tile<16x16xi32>
// CHECK:             %[[TILES:.*]]:4 = scf.for %[[K0:.*]] = %c0 to %c128{{(_[0-9]+)?}} step %{{.*}} iter_args({{.*}}) -> (!amx.tile<16x16xi32>, !amx.tile<16x16xi32>, !amx.tile<16x16xi32>, !amx.tile<16x16xi32>) {
// CHECK:               %[[W0:.*]] = amx.tile_load %arg1[%{{.*}}, %[[K0]]] : memref<48x128xi8> into !amx.tile<16x64xi8>
// CHECK:               %[[W1:.*]] = amx.tile_load %arg1[%{{.*}}, %[[K0]]] : memref<48x128xi8> into !amx.tile<16x64xi8>
// CHECK:               %[[A0:.*]] = amx.tile_load %[[AP]][%{{.*}}, %{{.*}}] : memref<32x?xi8> into !amx.tile<16x64xi8>
// CHECK:               %[[A1:.*]] = amx.tile_load %[[AP]][%{{.*}}, %{{.*}}] : memref<32x?xi8> into !amx.tile<16x64xi8>
// CHECK-NEXT:          %[[S00:.*]] = amx.tile_muli %[[W0]], %[[A0]], %{{.*}}
// CHECK-NEXT:          %[[S01:.*]] = amx.tile_muli %[[W0]], %[[A1]], %{{.*}}
// CHECK-NEXT:          %[[S10:.*]] = amx.tile_muli %[[W1]], %[[A0]], %{{.*}}
// CHECK-NEXT:          %[[S11:.*]] = amx.tile_muli %[[W1]], %[[A1]], %{{.*}}
// CHECK-NEXT:          scf.yield %[[S00]], %[[S01]], %[[S10]], %[[S11]]
// CHECK:             amx.tile_store %[[T]][%{{.*}}, %{{.*}}], %[[TILES]]#0
// CHECK:             %[[TV:.*]] = vector.transfer_read %[[T]]{{.*}} : memref<16x16xi32>, vector<16x16xi32>
// CHECK:             %[[TR:.*]] = vector.transpose %[[TV]], [1, 0]
// CHECK:             vector.transfer_write %[[TR]], %[[TT]]
// CHECK:             scf.for
// CHECK:               vector.load %[[TT]]{{.*}} : memref<16x16xi32>, vector<16xi32>
// CHECK:               vector.transfer_read %arg2{{.*}} : memref<?x48xi32>, vector<16xi32>
// CHECK:               arith.addi {{.*}} : vector<16xi32>
// CHECK:               vector.transfer_write {{.*}}, %arg2
// CHECK:             amx.tile_store %[[T]][%{{.*}}, %{{.*}}], %[[TILES]]#3
// CHECK:           scf.if
// CHECK-COUNT-2:     amx.tile_zero
// CHECK:             scf.for {{.*}} -> (!amx.tile<16x16xi32>, !amx.tile<16x16xi32>) {
// N tail: one B tile (rows 32..47) over the block's M tiles.
// CHECK:         scf.for %{{.*}} = %[[MB]] to %{{.*}} step %c32{{(_[0-9]+)?}}
// CHECK-COUNT-2:   amx.tile_zero
// CHECK:           amx.tile_load %arg1[%{{.*}}, %{{.*}}]
// CHECK:         scf.if
// CHECK:           amx.tile_zero
// CHECK-NOT:       amx.tile_zero
// CHECK:       memref.dealloc %[[AP]]
// CHECK-NOT:   linalg.generic
func.func @amx(%a: memref<?x128xi8>, %b: memref<48x128xi8>, %c: memref<?x48xi32>) {
  linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x128xi8>, memref<48x128xi8>) outs(%c : memref<?x48xi32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<i8_amx, mr = 32, nr = 32, kv = 64, mc = 64, decode = whole>} {
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

// The emulation: the same amx ops, each replaced by its instruction on an
// emulated tile state. The config block (palette 1; tmm0 the 16 x 16 i32
// accumulator, tmm4 the B and tmm6 the A tile, 16 rows of 64 bytes: the
// registers of a block's first accumulator and operands) is written before
// the loops; every tile op checks its use against it (ud2 otherwise) and takes
// its rows and bytes per row from it.
// CHECK-LABEL: func.func @emulated
// CHECK-NOT:   amx.
// CHECK:       llvm.intr.trap
// CHECK-NOT:   amx.
// EMU-LABEL:   func.func @emulated
// EMU-DAG:     %[[C0:.*]] = arith.constant 0 : index
// EMU-DAG:     %[[C1:.*]] = arith.constant 1 : index
// EMU-DAG:     %[[C4:.*]] = arith.constant 4 : index
// EMU-DAG:     %[[C6:.*]] = arith.constant 6 : index
// EMU-DAG:     %[[CFGDATA:.*]] = arith.constant dense<[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 16, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0]> : vector<64xi8>
// EMU:         %[[AP:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<16x?xi8>
// EMU:         %[[CFG:.*]] = memref.alloca() : memref<64xi8>
// EMU-NEXT:    %[[TMM:.*]] = memref.alloca() : memref<8x16x64xi8>
// EMU-NEXT:    vector.store %[[CFGDATA]], %[[CFG]][%[[C0]]] : memref<64xi8>, vector<64xi8>
// EMU-NEXT:    %[[T:.*]] = memref.alloca() : memref<16x16xi32>
// EMU:         scf.for %[[MB:.*]] = %[[C0]] to %{{.*}} step %c64 {
// EMU:           scf.for %[[M0:.*]] = %[[MB]] to %{{.*}} step %c16 {
// tilezero tmm0 (palette, rows and bytes per row of tmm0 checked first).
// EMU:             memref.load %[[CFG]][%c48]
// EMU:             llvm.intr.trap
// EMU:             vector.store %{{.*}}, %[[TMM]][%[[C0]], %{{.*}}, %[[C0]]] : memref<8x16x64xi8>, vector<64xi8>
// tileloadd tmm4, [W + 64·r]: rows and bytes per row from the config.
// EMU:             memref.load %[[CFG]][%c52]
// EMU:             llvm.intr.trap
// EMU:             %[[WFLAT:.*]] = memref.reinterpret_cast %arg1 to offset: [0], sizes: [1024], strides: [1]
// EMU:             scf.for %[[R:.*]] = %[[C0]] to %{{.*}} step %[[C1]] {
// EMU-NEXT:          %[[WROW:.*]] = arith.muli %[[R]], %c64 : index
// EMU-NEXT:          scf.for %[[C:.*]] = %[[C0]] to %{{.*}} step %[[C1]] {
// EMU-NEXT:            %[[WAT:.*]] = arith.addi %[[WROW]], %[[C]] : index
// EMU-NEXT:            %[[WV:.*]] = memref.load %[[WFLAT]][%[[WAT]]]
// EMU-NEXT:            memref.store %[[WV]], %[[TMM]][%[[C4]], %[[R]], %[[C]]]
// tileloadd tmm6, [Ap + 4·m0 + stride·r].
// EMU:             %[[AP0:.*]] = arith.muli %[[M0]], %[[C4]] : index
// EMU:             memref.load %[[CFG]][%c54]
// EMU:             %{{.*}}, %{{.*}}, %{{.*}}:2, %[[APSTRIDES:.*]]:2 = memref.extract_strided_metadata %[[AP]]
// EMU:             %[[APFLAT:.*]] = memref.reinterpret_cast %[[AP]]
// EMU:             scf.for %[[R2:.*]] = %[[C0]] to %{{.*}} step %[[C1]] {
// EMU-NEXT:          %[[APROW:.*]] = arith.muli %[[R2]], %[[APSTRIDES]]#0 : index
// EMU-NEXT:          %[[APSTART:.*]] = arith.addi %[[AP0]], %[[APROW]] : index
// EMU-NEXT:          scf.for %[[C2B:.*]] = %[[C0]] to %{{.*}} step %[[C1]] {
// EMU-NEXT:            %[[APAT:.*]] = arith.addi %[[APSTART]], %[[C2B]] : index
// EMU-NEXT:            %[[APV:.*]] = memref.load %[[APFLAT]][%[[APAT]]]
// EMU-NEXT:            memref.store %[[APV]], %[[TMM]][%[[C6]], %[[R2]], %[[C2B]]]
// tdpbssd tmm0, tmm4, tmm6: dst[m][n] += Σ_q Σ_i tmm4[m][4q+i] · tmm6[q][4n+i].
// EMU:             llvm.intr.trap
// EMU:             scf.for %[[M:.*]] = %[[C0]] to %{{.*}} step %[[C1]] {
// EMU-NEXT:          scf.for %[[N:.*]] = %[[C0]] to %{{.*}} step %[[C1]] {
// EMU-NEXT:            %[[N4:.*]] = arith.muli %[[N]], %[[C4]] : index
// EMU-NEXT:            %[[DST:.*]] = vector.load %[[TMM]][%[[C0]], %[[M]], %[[N4]]] : memref<8x16x64xi8>, vector<4xi8>
// EMU:                 scf.for %[[Q:.*]] = %[[C0]] to %{{.*}} step %[[C1]] iter_args(%[[S:.*]] = %{{.*}}) -> (i32) {
// EMU-NEXT:              %[[Q4:.*]] = arith.muli %[[Q]], %[[C4]] : index
// EMU-NEXT:              %[[X:.*]] = memref.load %[[TMM]][%[[C4]], %[[M]], %[[Q4]]]
// EMU-NEXT:              %[[XW:.*]] = arith.extsi %[[X]] : i8 to i32
// EMU-NEXT:              %[[Y:.*]] = memref.load %[[TMM]][%[[C6]], %[[Q]], %[[N4]]]
// EMU-NEXT:              %[[YW:.*]] = arith.extsi %[[Y]] : i8 to i32
// EMU-NEXT:              %[[P:.*]] = arith.muli %[[XW]], %[[YW]] : i32
// EMU-NEXT:              arith.addi %[[S]], %[[P]] : i32
// EMU:                   scf.yield
// EMU:                 vector.store %{{.*}}, %[[TMM]][%[[C0]], %[[M]], %[[N4]]] : memref<8x16x64xi8>, vector<4xi8>
// tilestored [T + 16·r], tmm0.
// EMU:             %[[TFLAT:.*]] = memref.reinterpret_cast %[[T]] to offset: [0], sizes: [256], strides: [1]
// EMU:             scf.for %[[R3:.*]] = %[[C0]] to %{{.*}} step %[[C1]] {
// EMU-NEXT:          %[[TROW:.*]] = arith.muli %[[R3]], %c16 : index
// EMU-NEXT:          scf.for %[[I3:.*]] = %[[C0]] to %{{.*}} step %[[C1]] {
// EMU-NEXT:            %[[I34:.*]] = arith.muli %[[I3]], %[[C4]] : index
// EMU-NEXT:            vector.load %[[TMM]][%[[C0]], %[[R3]], %[[I34]]]
// EMU:                 %[[TAT:.*]] = arith.addi %[[TROW]], %[[I3]] : index
// EMU-NEXT:            memref.store %{{.*}}, %[[TFLAT]][%[[TAT]]]
// EMU-NOT:     amx.
func.func @emulated(%a: memref<?x64xi8>, %b: memref<16x64xi8>, %c: memref<?x16xi32>) {
  linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x64xi8>, memref<16x64xi8>) outs(%c : memref<?x16xi32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<i8_amx_emulated, mr = 16, nr = 16, kv = 64, mc = 64, decode = whole>} {
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
// write-back computes y[m][n0 .. n0 + 15] = epilogue(row m - m0 of the
// transposed tile) on vectors (the column scale read as a vector, the row
// scale once and broadcast) and C is never written or read (no i32 matrix
// in memory); the fill and the epilogue go.
// CHECK-LABEL: func.func @fused_epilogue
// CHECK-NOT:   linalg.fill
// CHECK:       amx.tile_store
// CHECK:       vector.transpose
// CHECK:       scf.for
// CHECK:         %[[ACC:.*]] = vector.load %{{.*}} : memref<16x16xi32>, vector<16xi32>
// CHECK-DAG:     memref.load %arg3[%{{.*}}, %{{.*}}] : memref<?x1xf32>
// CHECK-DAG:     vector.transfer_read %arg4[%{{.*}}], %{{.*}} {in_bounds = [true]} : memref<32xf32>, vector<16xf32>
// CHECK:         arith.sitofp %[[ACC]] : vector<16xi32> to vector<16xf32>
// CHECK:         arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK:         vector.transfer_write %{{.*}}, %arg5[%{{.*}}, %{{.*}}] {in_bounds = [true]} : vector<16xbf16>, memref<?x32xbf16>
// CHECK-NOT:   %arg2
// CHECK-NOT:   linalg.generic
// EMU-LABEL:   func.func @fused_epilogue
func.func @fused_epilogue(%a: memref<?x128xi8>, %b: memref<32x128xi8>, %c: memref<?x32xi32>, %rs: memref<?x1xf32>, %cs: memref<32xf32>, %y: memref<?x32xbf16>) {
  %z = arith.constant 0 : i32
  linalg.fill ins(%z : i32) outs(%c : memref<?x32xi32>)
  linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x128xi8>, memref<32x128xi8>) outs(%c : memref<?x32xi32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<i8_amx, mr = 16, nr = 16, kv = 64, mc = 64, decode = whole>} {
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

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// AMX-BF16: bf16 operands, f32 accumulators (tdpbf16ps). The activations
// pack in pairs (Ap[k/2][2m + k%2]), tiles are 16 rows of 32 bf16, K steps
// of 32 elements; f32 tiles are added into C.
// CHECK-LABEL: func.func @bf16
// CHECK:       %[[AP:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<48x?xbf16>
// CHECK:       vector.load %arg0[%{{.*}}, %{{.*}}] : memref<?x96xbf16>, vector<32xbf16>
// CHECK:       vector.store %{{.*}}, %[[AP]][%{{.*}}, %{{.*}}] : memref<48x?xbf16>, vector<32xbf16>
// CHECK:       memref.alloca() : memref<16x16xf32>
// CHECK:       scf.for %{{.*}} = %c0 to %c96{{(_[0-9]+)?}} step %{{.*}} iter_args({{.*}}) -> (!amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>) {
// CHECK:         %[[W:.*]] = amx.tile_load %arg1[%{{.*}}, %{{.*}}] : memref<32x96xbf16> into !amx.tile<16x32xbf16>
// CHECK:         %[[A:.*]] = amx.tile_load %[[AP]][%{{.*}}, %{{.*}}] : memref<48x?xbf16> into !amx.tile<16x32xbf16>
// CHECK:         amx.tile_mulf %[[W]], %[[A]], %{{.*}} : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
// CHECK:       vector.transpose %{{.*}}, [1, 0] : vector<16x16xf32> to vector<16x16xf32>
// CHECK:       arith.addf %{{.*}} : vector<16xf32>
// The emulation: each tdpbf16ps product an f32 fma, denormal results (and
// inputs) flushed to signed zero.
// EMU-LABEL:   func.func @bf16_emulated
// EMU:           arith.extf %{{.*}} : bf16 to f32
// EMU:           math.fma %{{.*}}, %{{.*}}, %{{.*}} : f32
// EMU:           arith.andi %{{.*}}, %c2139095040_i32 : i32
// EMU-NOT:     amx.
func.func @bf16(%a: memref<?x96xbf16>, %b: memref<32x96xbf16>, %c: memref<?x32xf32>) {
  linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x96xbf16>, memref<32x96xbf16>) outs(%c : memref<?x32xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_amx, mr = 32, nr = 32, kv = 32, mc = 64, decode = whole>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
func.func @bf16_emulated(%a: memref<?x32xbf16>, %b: memref<16x32xbf16>, %c: memref<?x16xf32>) {
  linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x32xbf16>, memref<16x32xbf16>) outs(%c : memref<?x16xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<bf16_amx_emulated, mr = 16, nr = 16, kv = 32, mc = 64, decode = whole>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
