//===- Passes.td - comfyquant CPU codegen passes ------------*- tablegen -*-===//
#ifndef COMFYQUANT_CODEGEN_CPU_PASSES_TD
#define COMFYQUANT_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def ComfyQuantCPUPrepareABI
    : Pass<"comfyquant-cpu-prepare-abi", "::mlir::ModuleOp"> {
  let summary = "Give public functions the packed-entry ABI of the artifact";
  let description = [{
    Each public function with one tensor result `y` gets a memref argument
    at position 1 that the result is materialized into (destination-passing
    style, so bufferization writes `y` in place), returns nothing, and is
    marked `llvm.emit_c_interface`. The activation argument is read-only.
    Two trailing `index` arguments (`comfyquant.column_begin`,
    `comfyquant.column_end`) name the columns of y the call must compute;
    kernels whose GEMM writes y directly honour them (and are marked
    `comfyquant.column_range`), others compute all of y.
    The entry symbol of each function (`comfyquant.entry`, default
    `<name>_entry`) is recorded in the module attribute
    `comfyquant.entries` for `comfyquant-emit-packed-entries`.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect"];
}

def ComfyQuantCPUSelectStrategy
    : Pass<"comfyquant-cpu-select-strategy", "::mlir::ModuleOp"> {
  let summary = "Choose the CPU variant and the GEMM micro-kernels";
  let description = [{
    Records the decision as typed IR attributes: on every function
    `comfyquant.target = #comfyquant.target<cpu, "VARIANT">` (an entry of
    the runtime's target table: LLVM cpu, features, vector width) and on
    every matmul-like `linalg.generic` (`C[m,n] += A[m,k]·B[n,k]`, i8·i8
    -> i32 or f32/bf16/f16 -> f32) `comfyquant.gemm =
    #comfyquant.cpu_gemm<ukernel, mr, nr, kv, mc, decode, form, row>`: the
    micro-kernel, the register tile, the M block, where B's decoder runs,
    the accumulator form (inner: mr rows x nr columns of accumulators of kv
    K-elements each; outer: mr rows x nr vectors of columns) and the
    micro-kernel of one-row calls; both are verified.

    | variant (LLVM cpu)           | float GEMM                | i8 GEMM                          |
    |------------------------------|---------------------------|----------------------------------|
    | x86-64-v3 (x86-64-v3)        | f32-fma, outer 6x2, kv 8  | i8-pmaddwd, inner 4x2, kv 16     |
    | avx512-vnni (cascadelake)    | f32-fma, outer 6x4, kv 16 | i8-vnni, outer 6x4, kv 64        |
    | avx512-bf16 (cascadelake +avx512bf16) | bf16 operands: bf16-dot, outer 6x4, kv 32; else f32-fma | i8-vnni, outer 6x4, kv 64 |
    | amx (sapphirerapids)         | bf16 operands: bf16-amx (2x2 tiles of 16x16) when N % 16 == 0 and K % 32 == 0; else as avx512-bf16 | i8-amx (2x2 tiles of 16x16) when N % 16 == 0 and K % 64 == 0, else i8-vnni |

    Float GEMMs read bf16 operands where every decoded value is a bf16
    (`convert-comfyquant-to-linalg`: FP8 and NVFP4); the bf16 dot product
    multiplies pairs of them exactly into f32 accumulators, as f32-fma
    does one at a time.

    mc is 64 rows, 256 when B is decoded per N tile or on a 512-bit variant,
    rounded up to a multiple of mr. AMX: 2 x 2 tiles (mr = nr = 32), mc
    the rows whose packed codes fill 1 MB of L2 (between mr and 512), and
    `min_rows` the `amx-min-rows` option (16: the tile height), which the
    function also records as `comfyquant.min_rows` for the manifest; a call
    with fewer rows runs another variant's entry. kc (outer form) is 0, all of
    K in one panel (measured: no gain from K blocks on Zen 5 up to
    K = 12288 for int8 and bf16 panels), unless the option asks for K
    blocks or one N tile's whole-K panel would exceed 1 MB (f32 at
    K = 12288: 3 MB, leaving a 2 MB L2): then blocks of at most 512 KB of
    panel (pmaddwd: 512 by default). `decode = register` keeps
    the inner form unless `form = outer` is asked for (an error).

    `tune` names the CPU the kernels are tuned for, beyond what the variant
    says (as LLVM's -mtune): `generic` (the default: the table above),
    `host` (the compiling machine, as LLVM names it) or an LLVM x86 CPU
    name. On the server cores where vdpbf16ps issues at half the rate of
    f32 FMAs (sapphirerapids, emeraldrapids, graniterapids,
    graniterapids-d) bf16 operands take f32-fma instead, each bf16 widened
    exactly (measured on an Emerald Rapids Xeon, 3072², M = 256, one core:
    f32-fma 148–158 GOPS, bf16-dot 83). Elsewhere (Zen 4 and 5) bf16-dot
    does twice the f32 FMA's work per instruction.

    `row` is the micro-kernel of one-row calls (M = 1), which use each
    decoded element of B once: left out (the GEMM's own) for a bf16 kernel
    whose B decoder is a table of bf16s read in registers (a function of its
    byte alone, possibly times a scale uniform over each K-vector, or a read
    of a table of rows: the test comfyquant-cpu-vectorize-gemm builds its
    tables by), `f32_fma` for a bf16 kernel otherwise, and `bf16_dot` for
    the tuned f32 kernel on bf16 operands whose B decoder is such a table
    (fewer instructions per weight than FMAs on a decoded f32).

    The variant is the `variant` option, else the module's
    `comfyquant.target` (so test IR can pin it), else x86-64-v3; the tuning
    is the `tune` option, else the pinned target's (while its variant is
    the one used), else generic. Each function records the result as its
    `#comfyquant.target<cpu, "variant", tune = "...">`, which the vectorizers
    read.
  }];
  let dependentDialects = ["::mlir::comfyquant::ComfyQuantDialect"];
  let options = [
    Option<"variant", "variant", "std::string", "\"\"",
           "CPU variant: x86-64-v3, avx512-vnni, avx512-bf16 or amx; empty: "
           "the module's comfyquant.target, else x86-64-v3">,
    Option<"ukernel", "ukernel",
           "::mlir::comfyquant::EnumChoice<::mlir::comfyquant::CpuMicroKernel>",
           "::mlir::comfyquant::EnumChoice<::mlir::comfyquant::CpuMicroKernel>()",
           "Force a micro-kernel (a CpuMicroKernel case: f32-fma, bf16-dot, "
           "i8-vnni, i8-amx, ...; empty: the strategy's)">,
    Option<"mr", "mr", "int64_t", "0", "Register tile rows (0: default)">,
    Option<"nr", "nr", "int64_t", "0", "Register tile columns (0: default)">,
    Option<"mc", "mc", "int64_t", "0", "M block (0: default)">,
    Option<"kc", "kc", "int64_t", "-1",
           "K block of the outer form, a multiple of its kv (0: all of K; -1: default; inner forms ignore it)">,
    Option<"decode", "decode",
           "::mlir::comfyquant::EnumChoice<::mlir::comfyquant::CpuDecode>",
           "::mlir::comfyquant::EnumChoice<::mlir::comfyquant::CpuDecode>()",
           "Where B's decoder runs: panel, register or adaptive (empty: "
           "the strategy's)">,
    Option<"form", "form",
           "::mlir::comfyquant::EnumChoice<::mlir::comfyquant::CpuGemmForm>",
           "::mlir::comfyquant::EnumChoice<::mlir::comfyquant::CpuGemmForm>()",
           "Accumulator layout of the vector micro-kernels: inner or outer "
           "(empty: the strategy's)">,
    Option<"row", "row",
           "::mlir::comfyquant::EnumChoice<::mlir::comfyquant::CpuRowKernel>",
           "::mlir::comfyquant::EnumChoice<::mlir::comfyquant::CpuRowKernel>()",
           "Micro-kernel of one-row calls: ukernel (the GEMM's own), "
           "f32-fma, bf16-dot or i8-planes (empty: the strategy's)">,
    Option<"amxMinRows", "amx-min-rows", "int64_t", "16",
           "Fewest rows of A a call runs the AMX kernel with (min_rows of "
           "its config; fewer: the runtime takes another variant)">,
    Option<"tune", "tune", "std::string", "\"\"",
           "CPU the kernels are tuned for: generic, host (this machine) or "
           "an LLVM x86 CPU name (e.g. znver4, emeraldrapids); empty: the "
           "pinned target's tune, else generic">
  ];
}

def ComfyQuantCPUTabulateDecoders
    : Pass<"comfyquant-cpu-tabulate-decoders", "::mlir::func::FuncOp"> {
  let summary = "Replace decoders of small codes by table lookups";
  let description = [{
    Runs on linalg on tensors, before vectorization. In the body of an
    all-parallel `linalg.generic`, an integer value whose range is known to
    lie in [0, 16) (a nibble: `andi x, 15`, a shift leaving at most four
    bits, a select or extension of such) often feeds a chain of pure scalar
    ops that computes an f32 from it alone: the E2M1 decode of NVFP4
    weights and activations (masks, shifts, an f16 bitcast, a widening and a
    scale; W4A4's signed int4). Each f32 or i8 result of such a chain (of
    at least two ops) is folded at the 16 codes into a constant
    `tensor<16xf32>` (or `xi8`, read by one `pshufb`) and replaced by a
    lookup, `tensor.extract %table[index_cast x]`. The vectorizer turns the
    lookup into a gather and `comfyquant-cpu-vectorize-elementwise` into
    register permutes (one `vpermps` per vector on AVX-512, two and a blend
    on AVX2), so a decode of several vector ops per element becomes one.
    The values are the chain's own, folded by MLIR's folders, so results
    are bit-identical.

    Second, an int8 computed from a code of up to six bits and a scale byte
    (an i8 `tensor.extract` whose index reads the innermost loop only
    through a division by a multiple of 16, so it is one value per 16
    lanes), or an f32 computed from a 4-bit code and such a byte, is
    replaced by a read of a `[256, codes]` table (codes rounded up to 16):
    the W4A8 / W6A8 int8 grid `clamp(RNE(level · s_rel))` and NVFP4's
    `E2M1 · E4M3` weight value. The table is a `linalg.generic` inserted
    before the decoder whose body is a clone of the ops that compute the
    value, with the byte and the code taken from its two indices; it runs
    once per call (a codebook is a runtime tensor, so the table cannot be
    folded). comfyquant-cpu-vectorize-elementwise reads a row per 16 lanes
    with byte shuffles or register permutes. Same ops, same results.

    Third, an f32 computed from such a scale byte alone by four ops or more
    (MXFP8's E8M0 decode: a shift into the exponent, a bitcast, the selects
    of codes 0 and 255), which no pair table took, is folded at the 256 byte
    values into a constant `tensor<256xf32>` and read at the byte: one value
    per 16 lanes, so a scalar load where the decode was a chain of scalar
    ops and mask moves per vector.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}


def ComfyQuantCPUVectorizeGemm
    : Pass<"comfyquant-cpu-vectorize-gemm", "::mlir::func::FuncOp"> {
  let summary = "Register-blocked, vectorized GEMMs on tensors";
  let description = [{
    Rewrites every `linalg.generic` carrying `comfyquant.gemm` into loops on
    tensors (before bufferization): M blocks of `mc` rows, N tiles of `nr`
    rows of B (an elementwise producer of B, e.g. a weight decoder, is tiled
    into the N loop so it runs once per tile), M tiles of `mr` rows, and a K
    loop of `kv`-element vector steps keeping mr x nr vector accumulators in
    registers, reduced horizontally once per tile. The rows of an M block
    past its last mr-row tile are tiles of the powers of two below mr
    (4, 2, 1 for mr = 6: a full register tile keeps the FMA / VNNI ports
    busy where single rows would reload the panel per row); a partial N
    tile is static; a K tail uses padded transfers.

    B's producer writes each tile into one reused [nr, K] buffer; an M
    block of a single row instead evaluates the producer for each
    kv-vector inside the K loop, so decoded weights stay in registers. A
    single elementwise consumer of the accumulator (the epilogue: scales,
    bias, cast) is computed where the reduced accumulators are stored, into
    its own destination: no accumulator matrix is materialized. When that
    result is what the function writes to y, the N loop runs over the
    function's column-range arguments and the function is marked
    `comfyquant.column_range`.

    `form = outer` (f32-fma, VNNI): each N tile of nr vectors of columns is
    packed once per M block into a K-major panel (B's producer evaluated
    per vector on the way, lanes x lanes blocks transposed by shuffles; for
    VNNI 32-bit groups of four K bytes, biased to unsigned); the
    micro-kernel broadcasts A (one element, or four bytes) against the
    panel's vectors, and the epilogue runs on vectors of columns. One-row M
    blocks (decode adaptive or none) and column tails narrower than a
    vector take the inner form; in a column range, whole vectors take the
    outer one, so a column's form does not depend on how columns are split.

    One-row calls (M = 1) under `bf16_dot` run f32 FMAs on B's decoder,
    with a copy that yields the f32 before an exact narrowing to bf16;
    where B's decoder is a function of its byte alone (FP8 codes with the
    scale in the epilogue), the call keeps `vdpbf16ps` and reads each
    code's bf16 from a 256-entry constant table (the decoder folded at
    every code), two products per lane; where it narrows a product of such
    a function of the byte and a scale that is the same over each K-vector
    (MXFP8: a block of 32), the table holds the byte's part and each
    vector's dot product, taken from zero, is multiplied by the scale in
    an FMA into the accumulator (also under `decode = register`, which
    decodes B in registers at any M); where it narrows a read of an f32
    [R, C] table made before it (NVFP4's E2M1 x E4M3 rows), the table is
    narrowed once and the call reads bf16 rows.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def ComfyQuantCPUVectorizeReductions
    : Pass<"comfyquant-cpu-vectorize-reductions", "::mlir::func::FuncOp"> {
  let summary = "Vectorize order-free row reductions (amax, min, bitwise)";
  let description = [{
    Runs after `comfyquant-cpu-vectorize-gemm`, on tensors. A
    `linalg.generic` whose innermost loop reduces a contiguous row (every
    input indexed by all loops in order, the init by the parallel ones; outer
    loops may reduce too, as NVFP4's whole-tensor amax does, each row then
    folding into the same element) with a combiner whose result does not depend
    on the order of the fold — `maxnumf`/`minnumf`/`maximumf`/`minimumf`
    (the activation amax), integer max/min and `and`/`or`/`xor` — becomes a
    loop nest over the outer dimensions and, per row, a loop of
    `lanes`-wide vector steps folding into one vector accumulator, a
    reduction of it (float max / min as a tree of halves combined by the
    fold's vector op: LLVM expands those reductions lane by lane; others a
    `vector.reduction`) and a scalar tail. The body is widened op by op
    (elementwise-mappable ops only). Floating-point sums are left alone:
    regrouping them would change their rounding. The lane count is the
    target's vector width / 32 unless `lanes` is set.
  }];
  let options = [
    Option<"lanes", "lanes", "int64_t", "0",
           "Vector lanes (0: from the function's comfyquant.target)">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def ComfyQuantCPUVectorizeElementwise
    : Pass<"comfyquant-cpu-vectorize-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Vectorize elementwise linalg.generics along their innermost dimension";
  let description = [{
    Runs after `comfyquant-cpu-vectorize-gemm`, on tensors. Every
    all-parallel `linalg.generic` (activation quantization, weight decoders,
    including the per-N-tile decoders the GEMM pass created, epilogues) whose
    innermost loop has a static extent of at least 2 is tiled to one vector:
    tile 1 on every outer loop and `lanes` elements on the innermost one
    (a remainder of fewer than `lanes` elements becomes its own static tile),
    and each tile is vectorized by upstream `linalg::vectorize` with
    `tensor.extract` support: contiguous reads become vector loads, uniform
    ones broadcasts, the rest (nibble, codebook and block-scale lookups)
    `vector.gather`. Gathers that are lane-affine become loads and
    shuffles; gathers from at most 16 f32 entries, register permutes; reads
    of a `[256, codes]` table (comfyquant-cpu-tabulate-decoders) at a row
    that is one value per 16 lanes, a row load and `pshufb` (i8; a
    64-code row on a target with VBMI: one `vpermb` per run of lanes that
    shares the row) or `vpermps` (f32); a lane taken out of a vector of
    casts of a tensor read is read as a scalar; on a 512-bit target with
    VBMI, a field of at most three bits that each lane takes from a byte a
    shuffle replicates (`andi(shrui(shuffle(x), shifts), mask)`: W6A8's
    2-bit plane) is one shuffle of the bytes into qwords and one
    `vpmultishiftqb`, and a nibble pair select into sixteen 32-bit lanes
    (NVFP4's codes at M = 1) one `vpmovzxbq`, one `vpmultishiftqb` and a
    mask (into thirty-two, for a bf16 kernel: `vpmovzxwq`, a multishift
    into 16-bit lanes, a mask); on a 512-bit target, a 16-bit read of a constant 256-entry table
    at a byte is two `vpermi2w` and a blend per 32 lanes (entries 0-127),
    then the sign bit from the byte's bit 7 where the table is
    sign-magnitude, else two more and a blend (with `tune` naming a CPU
    whose `vpermi2w` is slow, comfyquant-cpu-select-strategy's tuning, a
    sign-magnitude table whose magnitudes are `(c << s) + b` but for at
    most 32 codes is computed instead: a shift, an add, and one `vpermw`
    of a 32-entry table of the other codes, selected by one unsigned
    compare; FP8 one-row calls on Emerald Rapids ~1.1x); a 16-bit read of a
    `[R, 16]` table at a row that is one value per 16 lanes, the two rows
    of 32 lanes loaded into one register and one `vpermw`. The lane count is the function's
    target's vector width / 32 (`comfyquant.target`) unless `lanes` is
    set. An op the
    vectorizer rejects is left as it is. Elementwise arithmetic is the same
    per element, so results are bit-identical to the scalar loops.
  }];
  let options = [
    Option<"lanes", "lanes", "int64_t", "0",
           "Vector length along the innermost dimension (0: from the "
           "function's comfyquant.target)">,
    Option<"tune", "tune", "std::string", "\"\"",
           "CPU the kernels are tuned for: generic, host or an LLVM x86 CPU "
           "name; empty: the function's target's (recorded by comfyquant-"
           "cpu-select-strategy), else generic">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect"];
}

def ComfyQuantCPUCheckColumnRange
    : Pass<"comfyquant-cpu-check-column-range", "::mlir::func::FuncOp"> {
  let summary = "Keep comfyquant.column_range only where y is written in place";
  let description = [{
    Runs after bufferization. A function marked `comfyquant.column_range`
    computes only the columns its column-range arguments name, so
    concurrent calls for disjoint ranges must touch disjoint parts of y.
    That holds when y (the `comfyquant.output` argument) is only written
    element- or vector-wise, possibly through views. Any other writer (a
    copy of a temporary into y, a linalg op, a call) would write every
    column: the mark is removed, and the runtime then never splits columns
    (it passes [0, N), which such a kernel computes completely).
  }];
}

def ComfyQuantCPUAmxGemm
    : Pass<"comfyquant-cpu-amx-gemm", "::mlir::func::FuncOp"> {
  let summary = "AMX tile GEMMs (tdpbssd, tdpbf16ps) on buffers";
  let description = [{
    Runs after bufferization (the amx dialect works on memrefs). Rewrites
    every `linalg.generic` whose `comfyquant.gemm` micro-kernel is `i8-amx`
    or `bf16-amx` (or their `-emulated` forms) into AMX tile loops: the
    operand B [N, K] (the weights as stored, or decoded whole) loads as
    16-row tiles of 64 bytes of K straight from its buffer; the activations
    are packed once per call so that Ap[k/g][g·m + k%g] = A[m][k] (g = 4
    i8 or 2 bf16 per dword; rows padded to a multiple of 16 with zeros);
    each `tdpbssd` (`tdpbf16ps`) accumulates a transposed 16 x 16 i32 (f32)
    tile of C. Loops: M blocks of `mc` rows, N blocks of `nr` rows of B,
    M blocks of `mr` rows (2 x 2 tiles: four accumulators), K steps of 64
    bytes; N and M tails take one tile. Each tile is transposed in vector
    registers and added into C, or, when C is zero-filled just before the
    GEMM and read only by the elementwise epilogue that follows it (scales,
    bias, cast; comfyquant-cpu-vectorize-elementwise leaves that one), the
    epilogue is computed on 16 columns at a time and y stored instead: C
    is never written or read. N % 16 == 0 and K a multiple of 64 bytes are
    required (the strategy only picks AMX then). The `-emulated` kernels
    build the same amx ops, then replace each by scalar code with its
    instruction's semantics on an emulated tile state (ldtilecfg block,
    eight tile registers; tdpbf16ps as a chain of f32 multiply-adds with
    denormals read and written as zero): the whole kernel, tile config,
    strides and operand order included, runs on any CPU (the int8 one
    bit-exact); a config that does not match a tile's use traps.
  }];
  let dependentDialects = ["::mlir::amx::AMXDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def ComfyQuantCPUConvertCFAndAMXToLLVM
    : Pass<"comfyquant-cpu-convert-cf-amx-to-llvm", "::mlir::ModuleOp"> {
  let summary = "cf and amx to LLVM with one type converter";
  let description = [{
    `convert-cf-to-llvm` does not know `!amx.tile`, so a tile carried
    across loop iterations (a block argument after scf-to-cf) cannot be
    converted by it. This pass lowers control flow and the amx ops in one
    conversion whose type converter maps tiles to `!llvm.x86_amx`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // COMFYQUANT_CODEGEN_CPU_PASSES_TD
