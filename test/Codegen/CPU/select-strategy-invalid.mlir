// RUN: comfyquant-opt %s --comfyquant-cpu-select-strategy -verify-diagnostics
// RUN: not comfyquant-opt %s --comfyquant-cpu-select-strategy=variant=haswell 2>&1 | FileCheck %s --check-prefix=BADVARIANT

// A module pinned to a CUDA arch is not the CPU back end's (an explicit
// variant option is still checked first against the table).
// BADVARIANT: error: unknown CPU variant 'haswell'
// expected-error @+1 {{the module's target #comfyquant.target<cuda, "sm_90a"> is not a CPU variant}}
module attributes {comfyquant.target = #comfyquant.target<cuda, "sm_90a">} {
  func.func @f() {
    return
  }
}
