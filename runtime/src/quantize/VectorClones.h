//===- VectorClones.h - build a loop per vector ISA ------------*- C++ -*-===//
//
// CQ_VECTOR_CLONES builds a hot loop for AVX-512, AVX2 and the baseline,
// picked at load time (ifunc): the runtime itself is built for the baseline
// x86-64. Only on definitions that precede every use in their file;
// functions other files call are in VectorKernels.cpp and declared without
// it. Instrumented builds define CQ_NO_TARGET_CLONES (runtime/CMakeLists.txt).
//===----------------------------------------------------------------------===//

#ifndef COMFYQUANT_RUNTIME_QUANTIZE_VECTORCLONES_H
#define COMFYQUANT_RUNTIME_QUANTIZE_VECTORCLONES_H

#if defined(__x86_64__) && !defined(CQ_NO_TARGET_CLONES)
#define CQ_VECTOR_CLONES                                                       \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CQ_VECTOR_CLONES
#endif

#endif // COMFYQUANT_RUNTIME_QUANTIZE_VECTORCLONES_H
