// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy | FileCheck %s --check-prefix=V3
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy=variant=avx512-vnni | FileCheck %s --check-prefix=VNNI
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy=variant=amx | FileCheck %s --check-prefix=AMX
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="ukernel=i8-vnni-emulated mr=2 nr=5 mc=16" 2>/dev/null | FileCheck %s --check-prefix=FORCE
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="ukernel=i8-vnni-emulated mr=2 nr=5 mc=16" 2>&1 >/dev/null | FileCheck %s --check-prefix=FORCE-ERR
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-vnni form=inner" | FileCheck %s --check-prefix=INNER
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="ukernel=i8-generic form=outer" 2>&1 >/dev/null | FileCheck %s --check-prefix=OUTER-ERR
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="form=diagonal" 2>&1 >/dev/null | FileCheck %s --check-prefix=FORM-ERR
// FORM-ERR: for the --form option: 'diagonal' is not one of: inner, outer

// The strategy is recorded on the function (its target, a CPU variant of
// the runtime's table: LLVM cpu, vector width) and on every matmul-like op
// (#comfyquant.cpu_gemm: micro-kernel, register tile mr x nr of kv-element
// accumulators, M block mc, accumulator form: the f32, pmaddwd and VNNI
// kernels take the outer form, mr rows x nr vectors of columns; mc rounds
// up to a multiple of mr).

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>

// V3-LABEL:   func.func @i8
// V3-SAME:      comfyquant.target = #comfyquant.target<cpu, "x86-64-v3">
// V3:           linalg.generic
// V3-SAME:      comfyquant.gemm = #comfyquant.cpu_gemm<i8_pmaddwd, mr = 6, nr = 2, kv = 16, mc = 66, decode = none, form = outer>
// VNNI-LABEL: func.func @i8
// VNNI-SAME:    comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">
// VNNI:         comfyquant.gemm = #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = none, form = outer>
// AMX-LABEL:  func.func @i8
// AMX-SAME:     comfyquant.min_rows = 16 : i64, comfyquant.target = #comfyquant.target<cpu, "amx">
// AMX:          comfyquant.gemm = #comfyquant.cpu_gemm<i8_amx, mr = 32, nr = 32, kv = 64, mc = 512, decode = none, min_rows = 16>
// FORCE-LABEL: func.func @i8
// FORCE:        comfyquant.gemm = #comfyquant.cpu_gemm<i8_vnni_emulated, mr = 2, nr = 5, kv = 64, mc = 16, decode = none, form = outer>
// INNER-LABEL: func.func @i8
// INNER:        comfyquant.gemm = #comfyquant.cpu_gemm<i8_vnni, mr = 4, nr = 6, kv = 64, mc = 256, decode = none>
// OUTER-ERR:    error: form = outer needs the f32-fma, pmaddwd, a VNNI or a bf16 micro-kernel, not i8_generic
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
// V3:           comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 2, kv = 8, mc = 258, decode = adaptive, form = outer>
// VNNI-LABEL: func.func @f32
// VNNI:         comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 258, decode = adaptive, form = outer>
// INNER-LABEL: func.func @f32
// INNER:        comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 4, nr = 6, kv = 16, mc = 256, decode = adaptive>
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
// V3-SAME:      comfyquant.target = #comfyquant.target<cpu, "x86-64-v3">
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

// -----

// A micro-kernel name the dialect's CpuMicroKernel does not hold: the option
// parser lists the cases.
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="ukernel=i8-sse" 2>&1 >/dev/null | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: for the --ukernel option: 'i8-sse' is not one of: f32-fma, i8-generic, i8-pmaddwd, i8-vnni, i8-vnni-emulated, i8-amx, i8-amx-emulated, bf16-dot, bf16-dot-emulated

// -----

// A module that pins its target: without a variant option the strategy
// takes it (V3 runs without one); an explicit option wins (AMX).
// V3-LABEL:   func.func @pinned
// V3-SAME:      comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">
// V3:           comfyquant.gemm = #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = none, form = outer>
// AMX-LABEL:  func.func @pinned
// AMX-SAME:     comfyquant.target = #comfyquant.target<cpu, "amx">
module attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
  func.func @pinned(%a: tensor<?x64xi8>, %b: tensor<32x64xi8>, %c: tensor<?x32xi32>) -> tensor<?x32xi32> {
    %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
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
}

// -----

// Where B's decoder runs: in registers for one-row calls, through a
// panel otherwise (adaptive) on the vector kernels; AMX reads B decoded
// whole; the option forces a placement.
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-vnni decode=register" 2>/dev/null | FileCheck %s --check-prefix=DECODE
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="decode=whole" 2>&1 >/dev/null | FileCheck %s --check-prefix=DECODE-ERR
// V3-LABEL:     func.func @decoded_int8
// V3:             decode = adaptive, form = outer>
// VNNI-LABEL:   func.func @decoded_int8
// VNNI:           #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = adaptive, form = outer>
// AMX-LABEL:    func.func @decoded_int8
// AMX:            #comfyquant.cpu_gemm<i8_amx, mr = 32, nr = 32, kv = 64, mc = 512, decode = whole, min_rows = 16>
// DECODE-LABEL: func.func @decoded_int8
// DECODE:         #comfyquant.cpu_gemm<i8_vnni, mr = 4, nr = 6, kv = 64, mc = 256, decode = register>
// DECODE-ERR:   error: decode must be panel, register or adaptive, not 'whole'
// decode = register keeps the inner form (DECODE); with form = outer it is
// refused.
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-vnni form=outer decode=register" 2>&1 >/dev/null | FileCheck %s --check-prefix=OUTER-REG
// OUTER-REG:    error: decode = register needs form = inner (the outer form packs B per N tile)
func.func @decoded_int8(%a: tensor<?x64xi8>, %w: tensor<32x32xi8>, %c: tensor<?x32xi32>) -> tensor<?x32xi32> {
  %e = tensor.empty() : tensor<32x64xi8>
  %b = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k floordiv 2)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<32x32xi8>) outs(%e : tensor<32x64xi8>) {
  ^bb0(%x: i8, %o: i8):
    %s = arith.shrsi %x, %x : i8
    linalg.yield %s : i8
  } -> tensor<32x64xi8>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
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

// bf16 x bf16 operands (FP8 and NVFP4 decode to them): the bf16 dot product
// on variants that have it (AVX512-BF16, AMX), f32-fma elsewhere; the
// emulated kernel runs on any variant, the native one only where the CPU
// has it, and neither takes f32 operands (@f32 above).
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy=variant=avx512-bf16 | FileCheck %s --check-prefix=BF16
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="ukernel=bf16-dot-emulated" 2>/dev/null | FileCheck %s --check-prefix=BF16-EMU
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-vnni ukernel=bf16-dot" 2>&1 >/dev/null | FileCheck %s --check-prefix=BF16-ERR
// V3-LABEL:     func.func @bf16_operands
// V3:             #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 2, kv = 8, mc = 258, decode = adaptive, form = outer>
// VNNI-LABEL:   func.func @bf16_operands
// VNNI:           #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 258, decode = adaptive, form = outer>
// BF16-LABEL:   func.func @bf16_operands
// BF16-SAME:      comfyquant.target = #comfyquant.target<cpu, "avx512-bf16"{{(, tune = "znver4")?}}>
// BF16:           #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer>
// AMX-LABEL:    func.func @bf16_operands
// AMX-SAME:       comfyquant.min_rows = 16 : i64
// AMX:            #comfyquant.cpu_gemm<bf16_amx, mr = 32, nr = 32, kv = 32, mc = 512, decode = whole, min_rows = 16>
// BF16-EMU-LABEL: func.func @bf16_operands
// BF16-EMU:       #comfyquant.cpu_gemm<bf16_dot_emulated, mr = 6, nr = 2, kv = 16, mc = 258, decode = adaptive, form = outer, row = f32_fma>
// BF16-ERR:     error: micro-kernel 'bf16-dot' needs a variant with AVX512-BF16
// The tuning CPU: where vdpbf16ps issues at half the f32 FMA rate
// (emeraldrapids) bf16 operands take f32-fma on the same variant; Zen 4 and
// generic keep the bf16 dot product; a name LLVM does not know is an error.
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-bf16 tune=emeraldrapids" | FileCheck %s --check-prefix=TUNE-FMA
// The amx variant takes AMX-BF16 tiles whatever the tuning (K = 12288: M
// blocks of 32 rows, 768 KB of bf16 codes).
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=amx tune=sapphirerapids" | FileCheck %s --check-prefix=AMX-TUNE
// AMX-TUNE-LABEL: func.func @bf16_operands
// AMX-TUNE:         #comfyquant.cpu_gemm<bf16_amx, mr = 32, nr = 32, kv = 32, mc = 512, decode = whole, min_rows = 16>
// AMX-TUNE-LABEL: func.func @bf16_long_k
// AMX-TUNE:         #comfyquant.cpu_gemm<bf16_amx, mr = 32, nr = 32, kv = 32, mc = 32, decode = whole, min_rows = 16>
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-bf16 tune=znver4" | FileCheck %s --check-prefix=BF16
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-bf16 tune=generic" | FileCheck %s --check-prefix=BF16
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-bf16 tune=pentium-z" 2>&1 >/dev/null | FileCheck %s --check-prefix=TUNE-ERR
// TUNE-FMA-LABEL: func.func @bf16_operands
// TUNE-FMA:         #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 258, decode = adaptive, form = outer, row = bf16_dot>
// TUNE-ERR:       error: tune = 'pentium-z' is not generic, host or an LLVM x86-64 CPU name
// K blocks: kc applies to outer forms (a multiple of kv; at least K is one
// block, so no kc), not to inner ones.
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-bf16 kc=32" 2>/dev/null | FileCheck %s --check-prefix=KC
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-bf16 kc=64" | FileCheck %s --check-prefix=KC-ALL
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-bf16 kc=48" 2>&1 >/dev/null | FileCheck %s --check-prefix=KC-ERR
// KC-LABEL:     func.func @bf16_operands
// KC:             #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, kc = 32, decode = adaptive, form = outer>
// KC-ALL-LABEL: func.func @bf16_operands
// KC-ALL:         #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer>
// KC-ERR:       error: kc = 48 must be a multiple of kv = 32
func.func @bf16_operands(%a: tensor<?x64xbf16>, %w: tensor<32x64xi8>, %c: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %e = tensor.empty() : tensor<32x64xbf16>
  %b = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<32x64xi8>) outs(%e : tensor<32x64xbf16>) {
  ^bb0(%x: i8, %o: bf16):
    %f = arith.sitofp %x : i8 to bf16
    linalg.yield %f : bf16
  } -> tensor<32x64xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x64xbf16>, tensor<32x64xbf16>) outs(%c : tensor<?x32xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// -----

// A whole-K panel over 1 MB is blocked into K blocks of at most 512 KB of
// panel: 64 columns of f32 (tuned f32-fma) at K = 12288 are 3 MB (kc =
// 2048), of bf16 pairs 1.5 MB (kc = 4096); the VNNI kernel's 768 KB of
// bytes and AVX2's f32 panel (16 columns: 768 KB) stay whole.
// TUNE-FMA-LABEL: func.func @bf16_long_k
// TUNE-FMA:         #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 258, kc = 2048, decode = adaptive, form = outer, row = bf16_dot>
// BF16-LABEL:     func.func @bf16_long_k
// BF16:             #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, kc = 4096, decode = adaptive, form = outer>
// V3-LABEL:       func.func @bf16_long_k
// V3:               #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 2, kv = 8, mc = 258, decode = adaptive, form = outer>
func.func @bf16_long_k(%a: tensor<?x12288xbf16>, %w: tensor<64x12288xi8>, %c: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %e = tensor.empty() : tensor<64x12288xbf16>
  %b = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<64x12288xi8>) outs(%e : tensor<64x12288xbf16>) {
  ^bb0(%x: i8, %o: bf16):
    %f = arith.sitofp %x : i8 to bf16
    linalg.yield %f : bf16
  } -> tensor<64x12288xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x12288xbf16>, tensor<64x12288xbf16>) outs(%c : tensor<?x64xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>
  return %r : tensor<?x64xf32>
}

// VNNI-LABEL: func.func @i8_12288
// VNNI:         comfyquant.gemm = #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = none, form = outer>
func.func @i8_12288(%a: tensor<?x12288xi8>, %b: tensor<64x12288xi8>, %c: tensor<?x64xi32>) -> tensor<?x64xi32> {
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x12288xi8>, tensor<64x12288xi8>) outs(%c : tensor<?x64xi32>) {
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

// The outer pmaddwd kernel (AVX2 int8) blocks K by 512 by default (its
// i16 panel of a block stays in L1); K = 1024 is two blocks.
// V3-LABEL:   func.func @i8_long_k
// V3:           comfyquant.gemm = #comfyquant.cpu_gemm<i8_pmaddwd, mr = 6, nr = 2, kv = 16, mc = 66, kc = 512, decode = none, form = outer>
// VNNI-LABEL: func.func @i8_long_k
// VNNI:         comfyquant.gemm = #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = none, form = outer>
func.func @i8_long_k(%a: tensor<?x1024xi8>, %b: tensor<32x1024xi8>, %c: tensor<?x32xi32>) -> tensor<?x32xi32> {
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x1024xi8>, tensor<32x1024xi8>) outs(%c : tensor<?x32xi32>) {
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

// One-row calls (row): the bf16 kernels read B's decoder as a table of
// bf16s in registers where it is one (a byte's function, above: row left
// out, or bf16_dot under the FMA tuning); this decoder reads two bf16
// tensors, so one-row calls take f32 FMAs (row = f32_fma) and the tuned
// f32 kernel keeps its own.
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy=variant=avx512-bf16 | FileCheck %s --check-prefix=ROW
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-bf16 tune=emeraldrapids" | FileCheck %s --check-prefix=ROW-TUNE
// ROW-LABEL:      func.func @bf16_not_a_table
// ROW:              #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer, row = f32_fma>
// ROW-TUNE-LABEL: func.func @bf16_not_a_table
// ROW-TUNE:         #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 258, decode = adaptive, form = outer>
func.func @bf16_not_a_table(%a: tensor<?x64xbf16>, %w: tensor<32x64xbf16>, %s: tensor<32x64xbf16>, %c: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %e = tensor.empty() : tensor<32x64xbf16>
  %b = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%w, %s : tensor<32x64xbf16>, tensor<32x64xbf16>) outs(%e : tensor<32x64xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %o: bf16):
    %f = arith.mulf %x, %y : bf16
    linalg.yield %f : bf16
  } -> tensor<32x64xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x64xbf16>, tensor<32x64xbf16>) outs(%c : tensor<?x32xf32>) {
  ^bb0(%x: bf16, %y: bf16, %o: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s2 = arith.addf %o, %p : f32
    linalg.yield %s2 : f32
  } -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// -----

// A scale per 32 K elements (one vdpbf16ps vector) factors out of each
// vector's dot product: a table (row left out). Per 16: no table.
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy=variant=avx512-bf16 | FileCheck %s --check-prefix=ROW-BLOCK
// ROW-BLOCK-LABEL: func.func @bf16_block_scaled_32
// ROW-BLOCK:         #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer>
// ROW-BLOCK-LABEL: func.func @bf16_block_scaled_16
// ROW-BLOCK:         #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer, row = f32_fma>
func.func @bf16_block_scaled_32(%a: tensor<?x128xbf16>, %codes: tensor<8x128xi8>, %scales: tensor<8x4xf32>, %c: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %cb = arith.constant 32 : index
  %c16 = arith.constant 16 : i32
  %eb = tensor.empty() : tensor<8x128xbf16>
  %dec = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
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
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x128xbf16>, tensor<8x128xbf16>) outs(%c : tensor<?x8xf32>) {
  ^bb0(%x: bf16, %y: bf16, %o: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s2 = arith.addf %o, %p : f32
    linalg.yield %s2 : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
func.func @bf16_block_scaled_16(%a: tensor<?x128xbf16>, %codes: tensor<8x128xi8>, %scales: tensor<8x8xf32>, %c: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %cb = arith.constant 16 : index
  %c16 = arith.constant 16 : i32
  %eb = tensor.empty() : tensor<8x128xbf16>
  %dec = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>], iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<8x128xi8>) outs(%eb : tensor<8x128xbf16>) {
  ^bb0(%q: i8, %o: bf16):
    %x = arith.sitofp %q : i8 to f32
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %blk = arith.divui %k, %cb : index
    %sc = tensor.extract %scales[%n, %blk] : tensor<8x8xf32>
    %v = arith.mulf %x, %sc : f32
    %bits = arith.bitcast %v : f32 to i32
    %hi = arith.shrui %bits, %c16 : i32
    %h = arith.trunci %hi : i32 to i16
    %r = arith.bitcast %h : i16 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x128xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x128xbf16>, tensor<8x128xbf16>) outs(%c : tensor<?x8xf32>) {
  ^bb0(%x: bf16, %y: bf16, %o: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s2 = arith.addf %o, %p : f32
    linalg.yield %s2 : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

// A target pinned with its tuning: the strategy reads the tune from it (f32
// FMAs for bf16 operands on emeraldrapids) and records it on the function,
// where the vectorizers read it; a tune option overrides it; a variant
// option naming another variant drops it (generic).
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy | FileCheck %s --check-prefix=PIN-TUNE
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy=tune=znver4 | FileCheck %s --check-prefix=PIN-RETUNE
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy=variant=amx | FileCheck %s --check-prefix=PIN-OTHER
// PIN-TUNE-LABEL:   func.func @pinned_tune
// PIN-TUNE-SAME:      comfyquant.target = #comfyquant.target<cpu, "avx512-bf16", tune = "emeraldrapids">
// PIN-TUNE:           #comfyquant.cpu_gemm<f32_fma,
// PIN-RETUNE-LABEL: func.func @pinned_tune
// PIN-RETUNE-SAME:    comfyquant.target = #comfyquant.target<cpu, "avx512-bf16", tune = "znver4">
// PIN-RETUNE:         #comfyquant.cpu_gemm<bf16_dot,
// PIN-OTHER-LABEL:  func.func @pinned_tune
// PIN-OTHER-SAME:     comfyquant.target = #comfyquant.target<cpu, "amx">}
// PIN-OTHER:          #comfyquant.cpu_gemm<bf16_amx,
module attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-bf16", tune = "emeraldrapids">} {
  func.func @pinned_tune(%a: tensor<?x64xbf16>, %b: tensor<32x64xbf16>, %c: tensor<?x32xf32>) -> tensor<?x32xf32> {
    %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%a, %b : tensor<?x64xbf16>, tensor<32x64xbf16>) outs(%c : tensor<?x32xf32>) {
    ^bb0(%x: bf16, %y: bf16, %acc: f32):
      %x32 = arith.extf %x : bf16 to f32
      %y32 = arith.extf %y : bf16 to f32
      %p = arith.mulf %x32, %y32 : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<?x32xf32>
    return %r : tensor<?x32xf32>
  }
}

// -----

// The amx variant: 2 x 2 tiles; the M block is the rows whose codes fill 1 MB
// (K = 12288: 64 rows; K = 64 above: capped at 512); min_rows, the
// fewest rows a call runs the tiles with (recorded on the function for the
// manifest), is the amx-min-rows option: 1 leaves both out.
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=amx amx-min-rows=1" | FileCheck %s --check-prefix=AMX-FLOOR1
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=amx amx-min-rows=0" 2>&1 >/dev/null | FileCheck %s --check-prefix=AMX-FLOOR0
// AMX-LABEL:   func.func @amx_deep_k
// AMX-SAME:      comfyquant.min_rows = 16 : i64
// AMX:           #comfyquant.cpu_gemm<i8_amx, mr = 32, nr = 32, kv = 64, mc = 64, decode = none, min_rows = 16>
// AMX-FLOOR1-LABEL: func.func @amx_deep_k
// AMX-FLOOR1-NOT:   comfyquant.min_rows
// AMX-FLOOR1:       #comfyquant.cpu_gemm<i8_amx, mr = 32, nr = 32, kv = 64, mc = 64, decode = none>
// AMX-FLOOR1-NOT:   min_rows
// AMX-FLOOR0:   error: amx-min-rows = 0 must be at least 1
// VNNI-LABEL:  func.func @amx_deep_k
// VNNI-NOT:      comfyquant.min_rows
// VNNI:          #comfyquant.cpu_gemm<i8_vnni
// VNNI-NOT:      min_rows
#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
func.func @amx_deep_k(%a: tensor<?x12288xi8>, %b: tensor<48x12288xi8>, %c: tensor<?x48xi32>) -> tensor<?x48xi32> {
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x12288xi8>, tensor<48x12288xi8>) outs(%c : tensor<?x48xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %xe = arith.extsi %x : i8 to i32
    %ye = arith.extsi %y : i8 to i32
    %p = arith.muli %xe, %ye : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x48xi32>
  return %r : tensor<?x48xi32>
}

// -----

// One-row calls of integer GEMMs whose B decoder reads nibbles (k / 2 and
// k % 2) take B as two nibble planes (row = i8_planes) where every other
// read of K is the same over a step of 2·kv elements: k / 256 on both
// variants; k / 32 on x86-64-v3 alone (kv = 16: steps of 32), not on VNNI
// (kv = 64); k / 16 on neither. The row option forces a one-row kernel; a
// decoder that does not read planes is an error.
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy | FileCheck %s --check-prefix=PLANES-V3
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy=variant=avx512-vnni | FileCheck %s --check-prefix=PLANES-VNNI
// RUN: comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-vnni row=ukernel" | FileCheck %s --check-prefix=PLANES-OFF
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-vnni row=i8-planes" 2>&1 >/dev/null | FileCheck %s --check-prefix=PLANES-ERR
// RUN: not comfyquant-opt %s --split-input-file --comfyquant-tag-gemms --comfyquant-cpu-select-strategy="variant=avx512-vnni row=f32-fma" 2>&1 >/dev/null | FileCheck %s --check-prefix=ROW-ERR
// PLANES-V3-LABEL:   func.func @nibbles_g256
// PLANES-V3:           #comfyquant.cpu_gemm<i8_pmaddwd, mr = 6, nr = 2, kv = 16, mc = 258, decode = adaptive, form = outer, row = i8_planes>
// PLANES-V3-LABEL:   func.func @nibbles_g32
// PLANES-V3:           #comfyquant.cpu_gemm<i8_pmaddwd, mr = 6, nr = 2, kv = 16, mc = 258, decode = adaptive, form = outer, row = i8_planes>
// PLANES-V3-LABEL:   func.func @nibbles_g16
// PLANES-V3:           #comfyquant.cpu_gemm<i8_pmaddwd, mr = 6, nr = 2, kv = 16, mc = 258, decode = adaptive, form = outer>
// PLANES-VNNI-LABEL: func.func @nibbles_g256
// PLANES-VNNI:         #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = adaptive, form = outer, row = i8_planes>
// PLANES-VNNI-LABEL: func.func @nibbles_g32
// PLANES-VNNI:         #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = adaptive, form = outer>
// PLANES-VNNI-LABEL: func.func @nibbles_g16
// PLANES-VNNI:         #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = adaptive, form = outer>
// PLANES-OFF-LABEL:  func.func @nibbles_g256
// PLANES-OFF:          #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = adaptive, form = outer>
// PLANES-ERR:        error: row = i8_planes needs B's decoder to read K only as k / 2, k % 2 and k / d, d a multiple of 128
// ROW-ERR:           error: row = f32_fma is for a bf16 micro-kernel, not i8_vnni
#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#E = affine_map<(n, k) -> (n, k)>
func.func @nibbles_g256(%a: tensor<?x512xi8>, %w: tensor<8192xi8>, %s: tensor<64xi8>, %c: tensor<?x32xi32>) -> tensor<?x32xi32> {
  %c2 = arith.constant 2 : index
  %c256 = arith.constant 256 : index
  %c4 = arith.constant 4 : i32
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<32x512xi8>
  %b = linalg.generic {indexing_maps = [#E], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<32x512xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %half = arith.divui %k, %c2 : index
    %row = arith.muli %n, %c256 : index
    %at = arith.addi %row, %half : index
    %byte = tensor.extract %w[%at] : tensor<8192xi8>
    %u = arith.extui %byte : i8 to i32
    %p = arith.remui %k, %c2 : index
    %shift = arith.index_cast %p : index to i32
    %bits = arith.muli %shift, %c4 : i32
    %sh = arith.shrui %u, %bits : i32
    %nib = arith.andi %sh, %c15 : i32
    %g = arith.divui %k, %c256 : index
    %sat = arith.addi %n, %g : index
    %sc = tensor.extract %s[%sat] : tensor<64xi8>
    %sc32 = arith.extsi %sc : i8 to i32
    %v = arith.muli %nib, %sc32 : i32
    %v8 = arith.trunci %v : i32 to i8
    linalg.yield %v8 : i8
  } -> tensor<32x512xi8>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x512xi8>, tensor<32x512xi8>) outs(%c : tensor<?x32xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %m = arith.muli %x32, %y32 : i32
    %sum = arith.addi %acc, %m : i32
    linalg.yield %sum : i32
  } -> tensor<?x32xi32>
  return %r : tensor<?x32xi32>
}
func.func @nibbles_g32(%a: tensor<?x512xi8>, %w: tensor<8192xi8>, %s: tensor<512xi8>, %c: tensor<?x32xi32>) -> tensor<?x32xi32> {
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c256 = arith.constant 256 : index
  %c4 = arith.constant 4 : i32
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<32x512xi8>
  %b = linalg.generic {indexing_maps = [#E], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<32x512xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %half = arith.divui %k, %c2 : index
    %row = arith.muli %n, %c256 : index
    %at = arith.addi %row, %half : index
    %byte = tensor.extract %w[%at] : tensor<8192xi8>
    %u = arith.extui %byte : i8 to i32
    %p = arith.remui %k, %c2 : index
    %shift = arith.index_cast %p : index to i32
    %bits = arith.muli %shift, %c4 : i32
    %sh = arith.shrui %u, %bits : i32
    %nib = arith.andi %sh, %c15 : i32
    %g = arith.divui %k, %c32 : index
    %sat = arith.addi %n, %g : index
    %sc = tensor.extract %s[%sat] : tensor<512xi8>
    %sc32 = arith.extsi %sc : i8 to i32
    %v = arith.muli %nib, %sc32 : i32
    %v8 = arith.trunci %v : i32 to i8
    linalg.yield %v8 : i8
  } -> tensor<32x512xi8>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x512xi8>, tensor<32x512xi8>) outs(%c : tensor<?x32xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %m = arith.muli %x32, %y32 : i32
    %sum = arith.addi %acc, %m : i32
    linalg.yield %sum : i32
  } -> tensor<?x32xi32>
  return %r : tensor<?x32xi32>
}
func.func @nibbles_g16(%a: tensor<?x512xi8>, %w: tensor<8192xi8>, %s: tensor<1024xi8>, %c: tensor<?x32xi32>) -> tensor<?x32xi32> {
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c256 = arith.constant 256 : index
  %c4 = arith.constant 4 : i32
  %c15 = arith.constant 15 : i32
  %e = tensor.empty() : tensor<32x512xi8>
  %b = linalg.generic {indexing_maps = [#E], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<32x512xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %k = linalg.index 1 : index
    %half = arith.divui %k, %c2 : index
    %row = arith.muli %n, %c256 : index
    %at = arith.addi %row, %half : index
    %byte = tensor.extract %w[%at] : tensor<8192xi8>
    %u = arith.extui %byte : i8 to i32
    %p = arith.remui %k, %c2 : index
    %shift = arith.index_cast %p : index to i32
    %bits = arith.muli %shift, %c4 : i32
    %sh = arith.shrui %u, %bits : i32
    %nib = arith.andi %sh, %c15 : i32
    %g = arith.divui %k, %c16 : index
    %sat = arith.addi %n, %g : index
    %sc = tensor.extract %s[%sat] : tensor<1024xi8>
    %sc32 = arith.extsi %sc : i8 to i32
    %v = arith.muli %nib, %sc32 : i32
    %v8 = arith.trunci %v : i32 to i8
    linalg.yield %v8 : i8
  } -> tensor<32x512xi8>
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<?x512xi8>, tensor<32x512xi8>) outs(%c : tensor<?x32xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %x32 = arith.extsi %x : i8 to i32
    %y32 = arith.extsi %y : i8 to i32
    %m = arith.muli %x32, %y32 : i32
    %sum = arith.addi %acc, %m : i32
    linalg.yield %sum : i32
  } -> tensor<?x32xi32>
  return %r : tensor<?x32xi32>
}
