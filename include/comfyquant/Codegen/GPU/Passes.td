//===- Passes.td - comfyquant GPU codegen passes ------------*- tablegen -*-===//
#ifndef COMFYQUANT_CODEGEN_GPU_PASSES_TD
#define COMFYQUANT_CODEGEN_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def ComfyQuantGPUPrepareABI
    : Pass<"comfyquant-gpu-prepare-abi", "::mlir::ModuleOp"> {
  let summary = "Give public functions the host-entry ABI of a CUDA artifact";
  let description = [{
    Each public function `(x, [expert], w...) -> y` becomes
    `(launcher, x, y, [expert], w..., workspace)`, returning nothing:
    `launcher` (`!llvm.ptr`, `comfyquant.launcher`) is the runtime's
    `cq_gpu_launcher *`; `y` (position 2) is written in place (destination-
    passing style); `workspace` (`memref<?xi8>`, `comfyquant.workspace`) is
    the device buffer that every temporary is carved from. Every argument
    except y and the workspace is read-only. The entry symbol
    (`comfyquant.entry`, default `<name>_entry`) is recorded in the module
    attribute `comfyquant.entries`.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def ComfyQuantGPUDistributeLoops
    : Pass<"comfyquant-gpu-distribute-loops", "::mlir::func::FuncOp"> {
  let summary = "Turn each top-level loop nest into a gpu.launch";
  let description = [{
    The SIMT mapping every module can use. Each top-level `scf.parallel`
    (from `convert-linalg-to-parallel-loops`) becomes a `gpu.launch` whose
    iteration space is linearized: `block-size` threads per block, one thread
    per point (the last dimension fastest, so neighbouring threads touch
    neighbouring elements), `ceildiv(points, block-size)` blocks along x.
    Reductions stay sequential loops inside the thread, in the order of
    the IR. Any other top-level operation that touches memory (a loop
    without parallel dimensions, a scalar store) runs in a one-thread
    launch, so the host never dereferences a device pointer. Scalar loads
    of read-only arguments are cloned into the launches that use them, where
    the uses begin (before the first use in the innermost block holding all
    of them, or before the outermost loop around that block): a scale only
    the final epilogue of a split-K GEMM reads is not read by its split
    launches. An
    `scf.if` holding only host code and launches (a launch conditional on
    sizes) stays on the host.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "256",
           "Threads per block">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def ComfyQuantGPUFormRowKernels
    : Pass<"comfyquant-gpu-form-row-kernels", "::mlir::func::FuncOp"> {
  let summary = "Run consecutive row-local loop nests as one kernel, a block "
                "per row";
  let description = [{
    Activation quantization is a run of loop nests over the rows of x
    (ConvRot's butterfly stages, the amax fill and reduction, the scale,
    the quantizer). Consecutive top-level `scf.parallel` nests whose first
    dimension runs over the M rows of x (from 0 by 1) form a run when every
    buffer that any nest of the run writes is accessed only at the nest's
    row (through views that keep dim 0 of an argument, an allocation or a
    view of the workspace: subviews at offset 0 and stride 1, reshapes that
    leave dim 0 alone, casts; any other origin keeps the nest out). The run
    becomes one `gpu.launch` with a block per row: each nest's other points
    are strided over the block's threads, with a barrier between nests.
    Ops between the nests may only compute sizes, views and allocations,
    or load on the host; a host load between nests or used by one must not
    read a buffer the run writes (it moves into the kernel's start).

    A nest with one point per row whose body is a reduction into memory,
    `R[i] = f(R[i], v(k))` over a loop of k, is shared by the block when f
    is associative and its value is 32-bit: thread t folds the t-th
    contiguous chunk of k (thread 0 from R[i]), xor shuffles fold each warp
    in lane order and thread 0 folds the warps in order, so the loop's left
    fold is only regrouped and the result is bit-identical. Associative:
    integer max/min/and/or/xor/add (overflow flags dropped) and the float
    max/min ops as `arith-expand` lowers them (selections with ties to the
    right operand). Float sums are never shared: their rounding depends on
    the grouping. A top-level reduction loop of that form
    (a reduction over the rows themselves, such as NVFP4's per-tensor
    amax) becomes one block that shares it the same way, instead of the
    one-thread launch `comfyquant-gpu-distribute-loops` would give it.

    A lone nest without a shared reduction keeps its one-thread-per-point
    launch (`comfyquant-gpu-distribute-loops`). The block has
    `min(block-size, work)` threads rounded up to a warp, where work is the
    largest static number of points or reduction steps of a nest per row
    (block-size when one is dynamic). A row has one block, so at M = 1 the
    whole prologue runs in it: the default of 1024 threads keeps each
    thread's share of a long row short.
    Run it after `convert-linalg-to-parallel-loops` and before
    `comfyquant-gpu-assign-workspace` (value bounds see the row count
    through allocations, not through views of the workspace).
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "1024",
           "Most threads per block (a multiple of 32)">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def ComfyQuantGPUSinkConstants
    : Pass<"comfyquant-gpu-sink-constants", "::mlir::func::FuncOp"> {
  let summary = "Clone the constants a gpu.launch uses into its body";
  let description = [{
    Constant folding places constants in the function's entry block (a
    `gpu.launch` body is not isolated from above), and
    `gpu-kernel-outlining` passes every value defined outside a launch as a
    kernel parameter. This pass clones each constant-like op a launch uses
    (of any type) into the launch body, so that kernels see constants as
    constants: NVPTX folds them, the launches carry fewer parameters, and a
    vector constant (a zero accumulator, say), which has no launch ABI,
    never becomes a parameter. Run it right before outlining.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def ComfyQuantGPUSelectStrategy
    : Pass<"comfyquant-gpu-select-strategy", "::mlir::func::FuncOp"> {
  let summary = "Choose each GEMM's tensor-core config before it is formed";
  let description = [{
    Each top-level `linalg.generic` on buffers that computes a GEMM one of
    the tensor-core kernel families covers (see
    `comfyquant-gpu-tensor-core-gemm`) gets its config as
    `comfyquant.gemm = #comfyquant.gpu_gemm<KIND, block = [64, 128],
    warp = [16, 128], k_bytes = 32, stages = 1>`: the operand kind, the
    block's tile of C, each warp's tile, the bytes of K per step and the
    shared-memory stages. A GEMM that carries a config already (test IR,
    tuning) keeps it. GEMMs no family covers get none and stay SIMT.

    `stages = 2` when both operands can be copied in 16-byte chunks (read as
    stored, K and row strides multiples of 16 bytes): two shared-memory
    stages fed by cp.async (when both are 16-byte aligned at run time);
    otherwise one stage fed from registers.

    Two warpgroups when there are two stages, no block scales (nothing per
    K step but the MMA) and N is not statically below the tile's columns:
    `block = [128, 256], warp = [16, 256]` (half the global bytes per MAC
    of the one-warpgroup `block = [64, 128], warp = [16, 128]`, which every
    other GEMM takes), or for FP8 `block = [128, 128], warp = [16, 128]`
    where `archs` holds an arch with wgmma or names none (sm_90a adds
    every step's wgmma product to f32 accumulators, and a 256-column
    product beside 256 accumulator columns spills); FP8 takes
    `block = [128, 256]` where every arch adds its steps into the
    accumulators (`mma.sync`, tcgen05, or sm_80/86's f16 tiles).
    `decode_rows` (from two row tiles on): where B is read through an
    integer producer (W4A4, W4A8, W6A8), for plain FP8 read as stored
    where no arch in `archs` has an FP8 MMA (sm_80, sm_86), or for NVFP4
    where none has an FP4 MMA (sm_80/86/89/90a), the operands are decoded
    once per call by their own kernels.

    `archs` names the CUDA archs the kernels will be lowered for (empty:
    any arch); the CUDA back end forms each GEMM once per group of
    archs that select alike (`formsKernelsAlike`) and gives each group its
    own host entry where the kernels differ.

    With static N and K, `split_k` is the number of blocks a decode-sized M
    splits K over: enough that `ceildiv(N, BN) * split_k` reaches
    `fill-ctas` (the SM count to fill), each split at least two K steps,
    at most 16; 1 (no split) when the tiles of N fill the GPU already.
  }];
  let options = [
    ListOption<"archs", "archs", "std::string",
               "CUDA archs the kernels will be lowered for (sm_80 ... "
               "sm_120f); empty: any arch">,
    Option<"fillCtas", "fill-ctas", "int64_t", "132",
           "Blocks a decode-sized GEMM should launch (the SMs of the GPU to "
           "fill; 132 is an H100 SXM)">
  ];
  let dependentDialects = ["::mlir::comfyquant::ComfyQuantDialect"];
}

def ComfyQuantGPUTensorCoreGemm
    : Pass<"comfyquant-gpu-tensor-core-gemm", "::mlir::func::FuncOp"> {
  let summary = "GEMMs on tensor cores, a 64 x 128 or 128 x 256 tile per "
                "block";
  let description = [{
    Each top-level `linalg.generic` on buffers that carries a
    `#comfyquant.gpu_gemm` config (`comfyquant-gpu-select-strategy`) and
    computes `C[m, n] += ext(A[m, k]) * ext(B[n, k])` becomes a
    `gpu.launch` of one warpgroup (128 threads) per 64 x 128 tile of C, or
    two (256 threads) per 128 x 256 or 128 x 128 tile, as the config names;
    a config whose kind does not match the operands, or whose tiles, step
    or stages are not the ones built (64 x 128 with warps of 16 x 128 and 1
    or 2 stages; 128 x 256 with warps of 16 x 256 or 128 x 128 with warps
    of 16 x 128, 2 stages, where two warpgroups fit; 32 bytes), is an
    error. The kinds, by operands:
    * i8 x i8 -> i32 (every integer format after decoding);
    * FP8 codes (i8 widened through f8E4M3FN/f8E5M2 in the body) -> f32;
      with block scales of 32 (MXFP8): when the body's scale factor is
      UE8M0(row scale) * UE8M0(column scale) (each decode is folded for all
      256 codes and compared), the step's raw scale bytes are copied to two
      more workgroup tiles and given to `comfyquant.warpgroup_mma`, a
      block-scaled MMA where the arch has one; for any other scale function
      each K step's product starts from zero and its partial sums are
      multiplied by the body's factor of (row, block) and (column, block)
      before they are added to the f32 accumulators;
    * f16 x f16 -> f32 (NVFP4 decoded exactly to f16) and bf16 x bf16 ->
      f32 (the full-precision GEMMs of bf16 activations).
    Each K step of 32 bytes (32 8-bit codes, 16 f16), the block copies its
    slices of A and B into two workgroup buffers in the core-matrix layout
    (zeros outside the operands, so every shape is computed) and issues one
    `comfyquant.warpgroup_mma`, which `comfyquant-gpu-lower-mma` lowers per
    arch; a barrier follows before the next step overwrites the tiles. The
    grid is `(ceildiv(N, BN), ceildiv(M, BM))` on every arch. f32 x f32
    GEMMs stay SIMT. The function records each GEMM's config, e.g.
    `comfyquant.gemms = [#comfyquant.gpu_gemm<s8, block = [64, 128],
    warp = [16, 128], k_bytes = 32, stages = 1>]`.

    When C is a temporary (`memref.alloc`) that nothing else uses, the
    kernel absorbs what surrounds it:
    * a zero `linalg.fill` of C before the GEMM (no memory op in between):
      the accumulators start as zero registers and the fill is erased (a
      fill of another value stays, and the kernel reads C's start);
    * C's one elementwise consumer after the GEMM, whose output is not a
      view of a GEMM operand: its body (scales, bias, cast) is evaluated
      in registers for each accumulator element and stored to its output,
      and the consumer is erased. Ops between the GEMM and the consumer
      must only read other buffers (or allocate); they move above the
      kernel.
    With both, C has no user left and is erased. Run it before
    `comfyquant-gpu-assign-workspace` so that an absorbed accumulator takes
    no workspace.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::comfyquant::ComfyQuantDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def ComfyQuantGPULowerMma
    : Pass<"comfyquant-gpu-lower-mma", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Lower comfyquant.warpgroup_mma and comfyquant.mma_fp8 for "
                "one CUDA arch";
  let description = [{
    `comfyquant.warpgroup_mma` on sm_90a becomes `wgmma.mma_async`
    m64n128k32 (s8, e4m3/e5m2) or m64n128k16 (f16) with both operands read
    from workgroup memory through matrix descriptors (no swizzle, K-major:
    leading byte offset 128, stride byte offset 256), after a
    `fence.proxy.async` that makes the block's ordinary stores visible to
    the tensor cores and a barrier; it waits for its group, so the result
    is in registers. Elsewhere each warp loads its fragments from workgroup
    memory and issues one m16n8 MMA per 8 columns: `nvgpu.mma.sync` s8
    m16n8k32 or f16 m16n8k16, or `comfyquant.mma_fp8`. With UE8M0 scale
    tiles, sm_120a issues `nvvm.mma.block_scale` m16n8k32 kind::mxf8f6f4
    (scale_vec x1); elsewhere the product starts from zero and each element
    is added to the accumulator times UE8M0(row) * UE8M0(column) in f32.

    On archs with FP8 `mma.sync` (sm_89 and later) each
    `comfyquant.mma_fp8` becomes `nvvm.inline_ptx` of
    `mma.sync.aligned.m16n8k32.row.col.f32.<a>.<b>.f32` (MLIR 22's
    `nvgpu.mma.sync` and `nvvm.mma.sync` verifiers reject FP8 operands, and
    the instruction needs PTX ISA 8.4). Elsewhere (sm_80, sm_86) the codes
    are converted to f16 in registers (exact: e5m2 is the high byte of an
    f16, e4m3 is rebiased by a multiply by 2^8, NaN kept) and the K = 32
    step becomes two `nvgpu.mma.sync` m16n8k16 with f32 accumulation. The
    two halves take the K columns in another order than the 8-bit layout,
    the same order for A and B, so the sum is the same products.

    On sm_100a every `comfyquant.warpgroup_mma` of a kernel becomes
    `tcgen05.mma` issued by thread 0 on descriptors of the tiles, with the
    accumulator in tensor memory (allocated by warp 0 at kernel entry, freed
    before each return) and completion waited for on an mbarrier (phase
    kept in a private word). Integer, FP8 and f16 steps use M = 64; MXFP8
    and NVFP4 use `tcgen05.mma.block_scale` (kind::mxf8f6f4 and
    kind::mxf4nvf4 .block16) at M = 128, on a copy of A with zero rows
    interleaved, the scale words stored into tensor memory by every warp.
    A step whose accumulator is a K loop's iteration argument used by it
    alone keeps the accumulator in tensor memory across the loop.

    The arch is the `chip` option, else the gpu.module's `comfyquant.target`
    (`#comfyquant.target<cuda, "sm_120a">`, so test IR can pin it), else
    sm_90a; the pass records it there.
  }];
  let options = [
    Option<"chip", "chip", "std::string", "\"\"",
           "CUDA arch (sm_80 ... sm_120a); empty: the gpu.module's "
           "comfyquant.target, else sm_90a">
  ];
  let dependentDialects = ["::mlir::comfyquant::ComfyQuantDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def ComfyQuantGPUAssignWorkspace
    : Pass<"comfyquant-gpu-assign-workspace", "::mlir::func::FuncOp"> {
  let summary = "Carve every temporary buffer out of the workspace argument";
  let description = [{
    Replaces each `memref.alloc` of a host entry by a `memref.view` of the
    `comfyquant.workspace` argument and erases the deallocations. A buffer
    may have one dynamic size, which must be the row count M of x; its
    bytes per row and fixed bytes are each rounded up to 256 so that every
    view starts 256-byte aligned for any M. The function records the
    rule `comfyquant.workspace_bytes = [per_row, fixed]`
    (bytes = per_row * M + fixed) for the manifest.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def ComfyQuantGPUMergeKernelModules
    : Pass<"comfyquant-gpu-merge-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "Gather outlined kernels into one gpu.module with PTX names";
  let description = [{
    After `gpu-kernel-outlining`, moves every kernel into the single
    `gpu.module` named by `module-name`, renaming each to
    `<entry>_k<i>` (i counts the launches of its host function in order;
    characters PTX does not allow in identifiers become `_`), and records
    the names on the host function as `comfyquant.kernels` in launch order.
  }];
  let options = [
    Option<"moduleName", "module-name", "std::string",
           "\"comfyquant_kernels\"", "Name of the merged gpu.module">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def ComfyQuantGPULowerLaunches
    : Pass<"comfyquant-gpu-lower-launches", "::mlir::ModuleOp"> {
  let summary = "Lower gpu.launch_func to calls through the runtime's launcher";
  let description = [{
    Runs on host code already in the LLVM dialect (memref operands of the
    launches arrive as LLVM descriptor structs behind
    `unrealized_conversion_cast`s). Each `gpu.launch_func` becomes: one
    stack slot per kernel parameter in the order the NVVM lowering expands
    them (memref: allocated, aligned, offset, sizes, strides; index: i64),
    an array of their addresses, and a call of `launcher->launch(self,
    kernel, grid, block, dynamic shared memory, params, count)`, where
    `kernel` is the launch's position in `comfyquant.kernels`. The
    gpu.modules are then removed: device code is compiled separately.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def ComfyQuantGPUExternalizeDynamicSharedMemory
    : Pass<"comfyquant-gpu-externalize-dynamic-shared-memory",
           "::mlir::gpu::GPUModuleOp"> {
  let summary = "Give dynamic shared memory external linkage";
  let description = [{
    `gpu.dynamic_shared_memory` lowers to an internal zero-length array in
    address space 3, which the NVPTX back end prints as a one-byte static
    `.shared` variable; the kernel then indexes past it into memory that
    static shared variables (mbarriers) may occupy. With external linkage
    and no initializer it is printed as `.extern .shared .b8 name[]`, the
    dynamic shared memory the launch provides. Runs on NVVM-lowered
    gpu.modules, before serialization.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def ComfyQuantGPULowerBoundedMinMax
    : Pass<"comfyquant-gpu-lower-bounded-min-max", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Float max/min against a nonzero constant as one instruction";
  let description = [{
    `arith-expand` turns every `arith.maxnumf`/`arith.minnumf` into
    compares and selects (ties to the right operand, a NaN left operand
    giving the right one), so that reductions agree bit for bit with the
    CPU back end. When the right operand is a constant other than zero and
    NaN, PTX's `max.f32`/`min.f32` compute the same value: a tie is then
    two equal nonzero values (the same bits), and a NaN left operand gives
    the constant in both. Such ops (the clamps of quantizers and weight
    decoders: six instructions each expanded) become `llvm.intr.maxnum` /
    `llvm.intr.minnum` before `arith-expand` runs.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // COMFYQUANT_CODEGEN_GPU_PASSES_TD
