// RUN: comfyquant-opt %s --split-input-file --verify-diagnostics --comfyquant-tag-gemms --comfyquant-cpu-vectorize-gemm

#A = affine_map<(m, n, k) -> (m, k)>
#B = affine_map<(m, n, k) -> (n, k)>
#C = affine_map<(m, n, k) -> (m, n)>
#I = affine_map<(n, k) -> (n, k)>

// row = bf16_dot on a variant without a bf16 dot product.
func.func @row_bf16_dot_without_the_instruction(%a: tensor<?x64xbf16>, %codes: tensor<8x64xi8>, %c: tensor<?x8xf32>) -> tensor<?x8xf32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
  %eb = tensor.empty() : tensor<8x64xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<8x64xi8>) outs(%eb : tensor<8x64xbf16>) {
  ^bb0(%q: i8, %o: bf16):
    %v = arith.sitofp %q : i8 to f32
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x64xbf16>
  // expected-error @+1 {{row = bf16_dot needs bf16 operands and a CPU variant with a bf16 dot product}}
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x64xbf16>, tensor<8x64xbf16>) outs(%c : tensor<?x8xf32>)
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

// row = bf16_dot where B's decoder is not a table (it reads two bf16
// tensors): the strategy would have left the f32 kernel's own.
func.func @row_bf16_dot_without_a_table(%a: tensor<?x64xbf16>, %w: tensor<8x64xbf16>, %s: tensor<8x64xbf16>, %c: tensor<?x8xf32>) -> tensor<?x8xf32>
    attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-bf16">} {
  %eb = tensor.empty() : tensor<8x64xbf16>
  %dec = linalg.generic {indexing_maps = [#I, #I, #I], iterator_types = ["parallel", "parallel"]}
      ins(%w, %s : tensor<8x64xbf16>, tensor<8x64xbf16>) outs(%eb : tensor<8x64xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %o: bf16):
    %f = arith.mulf %x, %y : bf16
    linalg.yield %f : bf16
  } -> tensor<8x64xbf16>
  // expected-error @+1 {{row = bf16_dot reads B's decoder as a table of bf16s in registers, and it is not one}}
  %r = linalg.generic {indexing_maps = [#A, #B, #C], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dec : tensor<?x64xbf16>, tensor<8x64xbf16>) outs(%c : tensor<?x8xf32>)
      attrs = {comfyquant.gemm = #comfyquant.cpu_gemm<f32_fma, mr = 2, nr = 4, kv = 16, mc = 8, decode = adaptive, form = inner, row = bf16_dot>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %x32 = arith.extf %x : bf16 to f32
    %y32 = arith.extf %y : bf16 to f32
    %p = arith.mulf %x32, %y32 : f32
    %s2 = arith.addf %acc, %p : f32
    linalg.yield %s2 : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
