// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-select-strategy | FileCheck %s --check-prefix=V3
// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-select-strategy=variant=avx512-vnni | FileCheck %s --check-prefix=VNNI
// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-select-strategy=variant=amx | FileCheck %s --check-prefix=AMX
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-cpu-select-strategy="ukernel=i8-vnni-emulated mr=2 nr=5 mc=16" 2>/dev/null | FileCheck %s --check-prefix=FORCE
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-cpu-select-strategy="ukernel=i8-vnni-emulated mr=2 nr=5 mc=16" 2>&1 >/dev/null | FileCheck %s --check-prefix=FORCE-ERR

// The strategy is recorded on the function (variant, LLVM cpu, vector
// width, the GEMMs) and on every matmul-like op (micro-kernel, register tile
// mr x nr of kv-element accumulators, M block mc).

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// V3-LABEL:   func.func @i8
// V3-SAME:      comfyquant.strategy = {cpu = "x86-64-v3", features = "", gemms = [{kv = 16 : i64, mc = 64 : i64, mr = 4 : i64, nr = 2 : i64, ukernel = "i8-pmaddwd"}], variant = "x86-64-v3", vector_bits = 256 : i64}
// V3:           linalg.generic
// V3-SAME:      comfyquant.gemm = {kv = 16 : i64, mc = 64 : i64, mr = 4 : i64, nr = 2 : i64, ukernel = "i8-pmaddwd"}
// VNNI-LABEL: func.func @i8
// VNNI-SAME:    comfyquant.strategy = {cpu = "cascadelake", features = "", gemms = [{kv = 64 : i64, mc = 64 : i64, mr = 4 : i64, nr = 4 : i64, ukernel = "i8-vnni"}], variant = "avx512-vnni", vector_bits = 512 : i64}
// AMX-LABEL:  func.func @i8
// AMX-SAME:     cpu = "sapphirerapids", features = "", gemms = [{kv = 64 : i64, mc = 64 : i64, mr = 16 : i64, nr = 16 : i64, ukernel = "i8-amx"}], variant = "amx"
// FORCE-LABEL: func.func @i8
// FORCE-SAME:   gemms = [{kv = 64 : i64, mc = 16 : i64, mr = 2 : i64, nr = 5 : i64, ukernel = "i8-vnni-emulated"}]
func.func @i8(%a: tensor<?x64xi8>, %b: tensor<32x64xi8>, %c: tensor<?x32xi32>) -> tensor<?x32xi32> {
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x64xi8>, tensor<32x64xi8>) outs(%c : tensor<?x32xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %p = arith.muli %x32, %y32 : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x32xi32>
  return %r : tensor<?x32xi32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// A float GEMM whose B is decoded by an element-wise producer gets a larger
// M block (the decoder runs once per N tile and M block).
// V3-LABEL:   func.func @f32
// V3-SAME:      gemms = [{kv = 8 : i64, mc = 256 : i64, mr = 4 : i64, nr = 3 : i64, ukernel = "f32-fma"}]
// VNNI-LABEL: func.func @f32
// VNNI-SAME:    gemms = [{kv = 16 : i64, mc = 256 : i64, mr = 4 : i64, nr = 4 : i64, ukernel = "f32-fma"}]
// FORCE-ERR:  error: micro-kernel 'i8-vnni-emulated' does not apply to this GEMM
func.func @f32(%a: tensor<?x64xbf16>, %w: tensor<32x64xi8>, %c: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<32x64xi8>) outs(%e : tensor<32x64xf32>) {
  ^bb0(%x: i8, %o: f32):
    %f = arith.sitofp %x : i8 to f32
    linalg.yield %f : f32
  } -> tensor<32x64xf32>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x64xbf16>, tensor<32x64xf32>) outs(%c : tensor<?x32xf32>) {
  ^bb0(%x: bf16, %y: f32, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %p = arith.mulf %x32, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// -----

#A = affine_map<(m, n, k) -> (m, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// Not a GEMM (B indexed [k, n]): no micro-kernel.
// V3-LABEL:   func.func @not_a_gemm
// V3-SAME:      gemms = []
// V3-NOT:       comfyquant.gemm
func.func @not_a_gemm(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %r = linalg.generic {indexing_maps = [#A, affine_map<(m, n, k) -> (k, n)>, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
