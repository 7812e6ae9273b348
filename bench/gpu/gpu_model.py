"""scripts/bench --gpu-model: our CUDA GEMM kernels and CUTLASS's, side by
side on the PTX emulator, counted rather than timed (no GPU needed).

  gpu_model.py --bin BUILD/bin --lib BUILD/lib [--out bench/gpu-model.md]
               [--formats LIST] [--archs LIST] [--quick] [--jobs J]
               [--work DIR] [--cutlass-include DIR]

1. The benchmark checkpoint (bench/make_bench_checkpoint.cpp, built here
   against BUILD/lib/libcomfyquant_core.a) at N = K = 1024 and 3072, every
   format, compiled for every CUDA arch (`comfyquant-compile --json`: ptxas's
   registers, spills and shared memory of every kernel).
2. Each module runs on the emulator (`comfyquant-run --emulate ARCH
   --emu-stats`) at M = N = K = 1024 and at M = 1 and 16 with N = K = 3072.
   The GEMM kernel is the one that issues tensor instructions; every other
   kernel of the module (the activation prologue) is reported on its own.
3. CUTLASS's tensor-op GEMMs (the pinned nvidia-cutlass headers, compiled by
   nvcc; test/tools/cute/cutlass_gemm.cu) at CUTLASS's default large tile
   (see PEERS) run on the same emulator at 1024^3 with D = A B (no C read):
   sm_80 int8, sm_80 bf16, sm_89 FP8 e4m3. Each of our
   kernels is compared with the CUTLASS kernel of its MMA instruction.
   CUTLASS's sm_90a/sm_100a/sm_120a kernels need TMA, which the emulator
   does not run: those rows say so instead of a ratio.

Nothing is timed. The figures are exact counts of what the PTX executes.
"""
import argparse
import concurrent.futures
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(ROOT, "test", "tools")

ARCHS = ["sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120a"]
FORMATS = ["int8_tensorwise", "int8_tensorwise_convrot256", "float8_e4m3fn",
           "float8_e5m2", "mxfp8", "nvfp4", "convrot_w4a4", "asym_w4a8_int8",
           "w6a8_int8"]
QUICK_FORMATS = ["int8_tensorwise", "float8_e4m3fn", "nvfp4"]
QUICK_ARCHS = ["sm_80", "sm_89", "sm_90a", "sm_100a"]
CUTLASS_VERSION = "4.2.0.0"
BIG = 1024
# Codes per activation scale byte of the block-scaled formats: A's scales
# are activation bytes, read by every column tile like its codes.
ACTIVATION_SCALE_BLOCK = {"nvfp4": 16, "mxfp8": 32}
DECODE = 3072
DECODE_M = [1, 16]
SMS = 132  # an H100 SXM: the SMs a decode grid should fill

# The CUTLASS peers: macro, nvcc arch, element bytes of A/B, threadblock
# tile, warp tile, stages: CUTLASS's default large tile (128 x 256 x 64,
# warps 64 x 64 x 64, 3 stages). FP8 spills there (ptxas, sm_89: about 1.3
# KB) yet executes fewer instructions and loads fewer bytes per MAC than
# the configs that do not spill (128 x 128 x 64 with warps 64 x 32: 1.76
# against 1.46 warp instructions per kMAC), so it stays the peer to beat.
PEERS = {
    "s8": ("CQ_GEMM_S8", "sm_80", 1, (128, 256, 64), (64, 64, 64), 3),
    "fp8": ("CQ_GEMM_FP8", "sm_89", 1, (128, 256, 64), (64, 64, 64), 3),
    "f16": ("", "sm_80", 2, (128, 256, 64), (64, 64, 64), 3),
}

# Per-SM limits for occupancy from ptxas figures: registers, threads,
# shared memory (bytes usable by blocks), resident blocks.
LIMITS = {
    "sm_80": (65536, 2048, 167936, 32), "sm_86": (65536, 1536, 102400, 16),
    "sm_89": (65536, 1536, 102400, 24), "sm_90a": (65536, 2048, 233472, 32),
    "sm_100a": (65536, 2048, 233472, 32), "sm_120a": (65536, 1536, 102400, 32),
}


def log(msg):
    print("gpu-model: " + msg, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode:
        raise RuntimeError("%s failed (%d):\n%s%s" % (" ".join(cmd[:3]), p.returncode,
                                                     p.stdout[-2000:], p.stderr[-4000:]))
    return p.stdout


def occupancy(arch, regs, smem, threads):
    """Resident blocks per SM from ptxas's registers and shared memory."""
    reg_limit, thread_limit, smem_limit, block_limit = LIMITS[arch]
    warps = (threads + 31) // 32
    per_warp = ((max(regs, 1) * 32 + 255) // 256) * 256
    by_regs = (reg_limit // per_warp) // warps
    by_threads = thread_limit // (warps * 32)
    by_smem = smem_limit // smem if smem else block_limit
    return max(0, min(by_regs, by_threads, by_smem, block_limit))


def header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))


def module_bytes(ckpt_dir, index, module):
    """Bytes of every tensor of `module` (weights, scales, everything)."""
    total = 0
    for name, shard in index["weight_map"].items():
        if name.startswith(module + "."):
            h = header(os.path.join(ckpt_dir, shard))
            lo, hi = h[name]["data_offsets"]
            total += hi - lo
    return total


def mma_kind(stats_kernel):
    """The MMA instruction family a kernel's stats show it issued."""
    names = stats_kernel["warp_instructions"].keys()
    for n in names:
        if n.startswith("mma.sync") or n.startswith("wgmma.mma_async") or \
                n.startswith("tcgen05.mma"):
            if "kind::mxf" in n or "block_scale" in n:
                return "block-scaled"
            if n.startswith("mma.sync"):
                if ".s8" in n or ".u8" in n or ".s4" in n:
                    return "s8"
                if "e4m3" in n or "e5m2" in n:
                    return "fp8"
                if "f16" in n or "bf16" in n:
                    return "f16"
            return n.split(".")[0]
    return "none"


def is_operand_decode(k):
    """The kernel that decodes a GEMM operand once per call (GpuGemmAttr's
    decode_rows): its PTX name ends with _decode. Its work is the GEMM's."""
    return k["name"].endswith("_decode")


def gemm_and_prologue(stats):
    """The GEMM kernel (the one with the most tensor instructions), the
    operand-decode kernels that ran for it, and the other kernels (the
    activation prologue)."""
    kernels = stats["kernels"]
    gemm = max(kernels, key=lambda k: k["tensor_instructions"])
    if not gemm["tensor_instructions"]:
        gemm = max(kernels, key=lambda k: k["warp_instructions_total"])
    decode = [k for k in kernels if k is not gemm and is_operand_decode(k)]
    rest = [k for k in kernels if k is not gemm and not is_operand_decode(k)]
    return gemm, decode, rest


def with_decode(gemm, decode):
    """The GEMM kernel's counts with its operand decode's added: the
    instructions and the global bytes (the decode reads the stored weights
    and the GEMM reads what it wrote)."""
    if not decode:
        return gemm
    k = dict(gemm)
    for d in decode:
        k["warp_instructions_total"] += d["warp_instructions_total"]
        k["global_load_bytes"] += d["global_load_bytes"]
        widths = dict(k["global_load_instructions_by_width"])
        for w, n in d["global_load_instructions_by_width"].items():
            widths[w] = widths.get(w, 0) + n
        k["global_load_instructions_by_width"] = widths
    return k


# Where a kernel's warp instructions go, by PTX opcode.
CATEGORIES = (
    ("tensor", ("mma.", "wgmma.", "tcgen05.mma")),
    ("shared", ("ld.shared", "st.shared", "ldmatrix", "stmatrix", "tcgen05.ld",
                "tcgen05.st", "tcgen05.cp")),
    ("global", ("ld.global", "st.global", "cp.async", "ld.param")),
    ("sync", ("bar.", "barrier.", "mbarrier.", "fence.", "tcgen05.wait",
              "tcgen05.commit", "wgmma.fence", "wgmma.commit", "wgmma.wait")),
)


def breakdown(kernels, macs):
    """Warp instructions per 1000 MACs of `kernels` together, by category
    (CATEGORIES; everything else is "alu": integer and float arithmetic,
    conversions, moves, branches)."""
    out = {c: 0.0 for c, _ in CATEGORIES}
    out["alu"] = 0.0
    for k in kernels:
        for op, n in k["warp_instructions"].items():
            cat = "alu"
            # The first category whose prefix matches, sync before tensor
            # for wgmma's fence/commit/wait.
            for c, prefixes in sorted(CATEGORIES, key=lambda x: x[0] != "sync"):
                if op.startswith(prefixes):
                    cat = c
                    break
            out[cat] += 1000.0 * n / macs
    return out


def share16(k):
    loads = k["global_load_instructions_by_width"]
    total = k["global_load_bytes"]
    return 16 * loads.get("16", 0) / total if total else 0.0


def ctas(k):
    g = k["grid"]
    return g[0] * g[1] * g[2] * k["launches"]


def metrics(k, macs, kbytes):
    """Per-MAC and per-step figures of one GEMM kernel's stats. kbytes: K
    in bytes of the A operand (the K steps are normalised to 64 bytes)."""
    blocks = ctas(k)
    steps64 = kbytes / 64.0
    return {
        "ipm": 1000.0 * k["warp_instructions_total"] / macs,
        "bpm": 1000.0 * k["global_load_bytes"] / macs,
        "s16": share16(k),
        "bar": k["barriers"] / blocks / steps64,
        "tpk": k["tensor_instructions"] / blocks / steps64,
        "ctas": blocks,
    }


# ---------------------------------------------------------------------------
# CUTLASS


def cutlass_include(arg):
    cands = [arg, os.environ.get("COMFYQUANT_CUTLASS_INCLUDE"),
             os.path.join(os.path.expanduser("~"), ".cache", "comfyquant",
                          "cutlass-" + CUTLASS_VERSION, "include")]
    for c in cands:
        if c and os.path.exists(os.path.join(c, "cute", "layout.hpp")):
            return c
    return None


def run_cutlass(kind, args, work):
    macro, arch, elem, tile, warp, stages = PEERS[kind]
    inc = cutlass_include(args.cutlass_include)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    src = os.path.join(TOOLS, "cute", "cutlass_gemm.cu")
    d = os.path.join(work, "cutlass-" + kind)
    os.makedirs(d, exist_ok=True)
    defs = ["-DCQ_%s_%s=%d" % (what, axis, v)
            for what, shape in (("TILE", tile), ("WARP", warp))
            for axis, v in zip("MNK", shape)] + ["-DCQ_STAGES=%d" % stages,
                                                 "-DCQ_NO_SOURCE"]
    if macro:
        defs.append("-D" + macro)
    common = [nvcc, "-std=c++17", "-arch=" + arch, "-I" + inc,
              "-I" + os.path.join(ROOT, "runtime")] + defs
    ptx = os.path.join(d, "k.ptx")
    exe = os.path.join(d, "gemm")
    sh(common + ["-ptx", src, "-o", ptx])
    sh(common + [src, "-o", exe, "-L" + args.lib, "-lcomfyquant_ptxemu",
                 "-Xlinker", "-rpath=" + args.lib])
    stats = os.path.join(d, "stats.json")
    line = sh([exe, ptx, str(BIG), str(BIG), str(BIG), stats]).strip()
    if not line.startswith("PASS"):
        raise RuntimeError("CUTLASS %s: %s" % (kind, line))
    p = subprocess.run([shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas", "-v",
                        "-arch=" + arch, ptx, "-o", os.path.join(d, "k.cubin")],
                       capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("ptxas on CUTLASS's %s PTX failed:\n%s" % (kind, p.stderr))
    text = p.stdout + p.stderr
    regs = int(re.search(r"Used (\d+) registers", text).group(1))
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    smem = int(re.search(r"dynamic shared memory (\d+) bytes", line).group(1))
    with open(stats) as f:
        k = json.load(f)["kernels"][0]
    name = re.search(r"PASS (.*?) M=", line).group(1)
    m = metrics(k, BIG ** 3, BIG * elem)
    threads = k["block"][0] * k["block"][1] * k["block"][2]
    m.update({"name": name, "regs": regs, "mix": breakdown([k], BIG ** 3),
              "spill": int(spill.group(1)) + int(spill.group(2)) if spill else 0,
              "smem": smem, "threads": threads, "stages": stages,
              "occ": occupancy(arch, regs, smem, threads), "arch": arch,
              "kstep": 64 * elem})
    return m


# ---------------------------------------------------------------------------
# Ours


def build_generator(args, work):
    exe = os.path.join(work, "make_bench_checkpoint")
    cxx = os.environ.get("CXX") or shutil.which("clang++-22") or shutil.which("g++")
    sh([cxx, "-O2", "-std=c++17", "-I" + os.path.join(ROOT, "runtime", "include"),
        "-I" + os.path.join(ROOT, "bench"), os.path.join(ROOT, "bench", "make_bench_checkpoint.cpp"),
        os.path.join(args.lib, "libcomfyquant_core.a"), "-lpthread", "-o", exe])
    return exe


def run_ours(args, case):
    fmt, arch, m, n, module, art, ckpt, work = case
    d = os.path.join(work, "runs", "%s-%s-%d" % (module, arch, m))
    os.makedirs(d, exist_ok=True)
    x = os.path.join(d, "x.safetensors")
    sh([sys.executable, os.path.join(TOOLS, "make_input.py"), x, "BF16", str(m), str(n),
        "--random"])
    stats = os.path.join(d, "stats.json")
    sh([os.path.join(args.bin, "comfyquant-run"), ckpt, "--module", module, "--input", x,
        "-o", os.path.join(d, "y.safetensors"), "--overwrite", "--artifact", art,
        "--backend", "cuda", "--emulate", arch, "--emu-stats", stats])
    with open(stats) as f:
        return case, json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "gpu-model.md"))
    ap.add_argument("--formats", default="")
    ap.add_argument("--archs", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--work", default="")
    ap.add_argument("--cutlass-include", default="")
    args = ap.parse_args()
    formats = args.formats.split(",") if args.formats else \
        (QUICK_FORMATS if args.quick else FORMATS)
    archs = args.archs.split(",") if args.archs else (QUICK_ARCHS if args.quick else ARCHS)
    work = args.work or tempfile.mkdtemp(prefix="comfyquant-gpu-model.")
    os.makedirs(work, exist_ok=True)
    log("work directory " + work)
    if not cutlass_include(args.cutlass_include):
        sys.exit("gpu-model: error: no CUTLASS headers (scripts/bootstrap unpacks "
                 "nvidia-cutlass==%s; or --cutlass-include DIR)" % CUTLASS_VERSION)

    gen = build_generator(args, work)
    ckdir = os.path.join(work, "ckpt")
    sh([gen, "--out", ckdir, "--shapes", "%dx%d,%dx%d" % (BIG, BIG, DECODE, DECODE),
        "--formats", ",".join(formats)])
    ckpt = os.path.join(ckdir, "bench.safetensors.index.json")
    with open(ckpt) as f:
        index = json.load(f)
    art = os.path.join(work, "art")
    log("compiling %d formats for %s" % (len(formats), ",".join(archs)))
    summary = json.loads(sh([os.path.join(args.bin, "comfyquant-compile"), ckpt,
                             "--target", "cuda:" + ",".join(archs), "--dtypes", "bf16",
                             "-j", str(args.jobs), "--quiet", "--json", "-o", art,
                             "--overwrite"]))
    with open(os.path.join(work, "compile-summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    resources = {(k["arch"], k["kernel"]): k for k in summary["cuda_kernels"]}
    # make_bench_checkpoint names each module bench.LABEL.nN_kK.
    modules = {}
    for m in summary["modules"]:
        parts = m["name"].split(".")
        if len(parts) == 3 and parts[0] == "bench":
            modules[(parts[1], m["out_features"])] = m

    peers = {}
    for kind in PEERS:
        log("CUTLASS %s: nvcc, then the emulator at %d^3" % (kind, BIG))
        peers[kind] = run_cutlass(kind, args, work)

    cases = []
    for fmt in formats:
        for arch in archs:
            for m, n in [(BIG, BIG)] + [(mm, DECODE) for mm in DECODE_M]:
                mod = modules.get((fmt, n))
                if not mod:
                    raise RuntimeError("no %s module of N = %d in the compile summary" % (fmt, n))
                cases.append((fmt, arch, m, n, mod["name"], art, ckpt, work))
    log("%d emulated runs, %d at a time" % (len(cases), args.jobs))
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        for i, (case, stats) in enumerate(ex.map(lambda c: run_ours(args, c), cases)):
            results[case[:3]] = (case, stats)
            if (i + 1) % 10 == 0 or i + 1 == len(cases):
                log("%d/%d runs" % (i + 1, len(cases)))

    write_report(args, formats, archs, index, ckdir, resources, peers, results)
    log("wrote " + args.out)


# The mechanism behind a 1024^3 miss, by format and the MMA the kernel
# runs (docs/GpuCodegen.md "Not done yet" has the design gaps). A miss
# not listed here says so rather than borrowing another's cause.
CAUSES = {
    ("float8_e4m3fn", "f16"):
        "no FP8 MMA (sm_80/86): both operands widened to f16 once per call "
        "(e4m3's decoder: 14 instructions per 4 codes, against e5m2's two "
        "byte permutes), then an f16 GEMM; the widening's instructions and "
        "its f16 traffic are in the figures",
    ("mxfp8", "f16"):
        "no FP8 or block-scaled MMA: 64 x 128 tile, the FP8 tiles decoded to "
        "f16 in shared memory by the block every K step (A once per column "
        "tile, B once per row tile; no decode-once form: UE8M0 factors times "
        "codes are not exact in f16) and each 32-wide step's partial "
        "sums rescaled into the f32 accumulators: three instructions per "
        "accumulator element and step (row factor times column factor, "
        "times the sum, plus the accumulator; the factors decoded once per "
        "step into shared memory)",
    ("mxfp8", "fp8"):
        "FP8 MMA but no block-scaled one (sm_89): 64 x 128 tile, each "
        "32-wide K step's partial sums start from zero and are rescaled into "
        "the f32 accumulators, three instructions per accumulator element "
        "and step (the factors decoded once per step into shared memory); "
        "B's 2.1x global bytes are the small tile's",
    ("nvfp4", "f16"):
        "no FP4 MMA (sm_80/86/89): both operands times their block scales "
        "widened to f16 once per call (A's codes loaded a byte at a time, "
        "packed into nibble words, decoded with the scale), then an f16 GEMM",
}


def miss_cause(fmt, kind):
    return CAUSES.get((fmt, kind), "not stated yet")


def target_for(fmt, kind):
    if kind in ("s8", "fp8") and fmt in ("int8_tensorwise", "float8_e4m3fn", "float8_e5m2"):
        return 1.2, 1.1
    return 1.5, None


def write_report(args, formats, archs, index, ckdir, resources, peers, results):
    out = []
    w = out.append
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain"],
                           capture_output=True, text=True).stdout.strip()
    w("# CUDA kernels on the PTX emulator, ours beside CUTLASS")
    w("")
    w("Generated by `scripts/bench --gpu-model` at %s, commit %s%s. Counts, not "
      "times: what each kernel's PTX executes on `libcomfyquant-ptxemu` (no GPU). "
      "bf16 activations; the weights of `bench/make_bench_checkpoint`." %
      (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), rev,
       " (uncommitted changes)" if dirty else ""))
    w("")
    w("## CUTLASS peers (M = N = K = %d)" % BIG)
    w("")
    w("| MMA kind | kernel | warp instr / kMAC | global B / kMAC | 16-B load share "
      "| barriers / CTA / 64 B of K | tensor instr / CTA / 64 B of K | regs | spill B "
      "| smem B | CTAs/SM |")
    w("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for kind, p in peers.items():
        w("| %s | %s | %.3f | %.4f | %.0f %% | %.2f | %.1f | %d | %d | %d | %d |" % (
            kind, p["name"], p["ipm"], p["bpm"], 100 * p["s16"], p["bar"], p["tpk"],
            p["regs"], p["spill"], p["smem"], p["occ"]))
    w("")
    w("## Ours at M = N = K = %d: the GEMM kernel against the CUTLASS kernel of its MMA "
      "instruction" % BIG)
    w("")
    w("Targets: INT8/FP8 on mma.sync archs at most 1.2x CUTLASS's warp "
      "instructions per MAC and 1.1x its global bytes per MAC; the other formats at "
      "most 1.5x. sm_90a/sm_100a rows (wgmma, tcgen05) and block-scaled mma.sync "
      "have no emulable CUTLASS peer (their CUTLASS kernels need TMA).")
    w("")
    w("| format | arch | MMA | grid x block | warp instr / kMAC (ratio) | of which "
      "operand decode | global B / kMAC "
      "(ratio) | 16-B share | barriers / CTA / 64 B | tensor instr / CTA / 64 B | regs "
      "| spill B | smem B | CTAs/SM | prologue warp instr / kMAC | target |")
    w("|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    misses = []
    decode_misses = []
    spills = []
    for fmt in formats:
        for arch in archs:
            case, stats = results[(fmt, arch, BIG)]
            gemm, decode, rest = gemm_and_prologue(stats)
            kind = mma_kind(gemm)
            kbytes = BIG  # 8-bit A operand bytes per row; ratios use the same K
            mm = metrics(with_decode(gemm, decode), BIG ** 3, kbytes)
            dec = 1000.0 * sum(k["warp_instructions_total"] for k in decode) / BIG ** 3
            res = resources.get((arch, gemm["name"]), {})
            regs = res.get("registers", 0)
            spill = res.get("spill_store_bytes", 0) + res.get("spill_load_bytes", 0)
            smem = res.get("shared_bytes", 0)
            threads = gemm["block"][0] * gemm["block"][1] * gemm["block"][2]
            occ = occupancy(arch, regs, smem, threads)
            pro = 1000.0 * sum(k["warp_instructions_total"] for k in rest) / BIG ** 3
            peer = peers.get(kind) if arch not in ("sm_90a", "sm_100a") else None
            ipm = "%.3f" % mm["ipm"]
            bpm = "%.4f" % mm["bpm"]
            verdict = "no emulable peer"
            if peer:
                # Per MAC of the same problem; for a 16-bit peer the K bytes
                # differ, the per-MAC figures do not.
                ri, rb = mm["ipm"] / peer["ipm"], mm["bpm"] / peer["bpm"]
                ipm += " (%.2fx)" % ri
                bpm += " (%.2fx)" % rb
                ti, tb = target_for(fmt, kind)
                ok = ri <= ti and (tb is None or rb <= tb)
                verdict = ("met" if ok else "missed") + " (<= %.1fx%s vs %s)" % (
                    ti, "" if tb is None else ", <= %.1fx B" % tb, kind)
                if not ok:
                    misses.append((fmt, arch, kind, ri, rb,
                                   breakdown([gemm] + decode, BIG ** 3), peer))
            g = gemm["grid"]
            w("| %s | %s | %s | %dx%dx%d x %d | %s | %s | %s | %.0f %% | %.2f | %.1f | %d | "
              "%d | %d | %d | %.3f | %s |" % (
                  fmt, arch, kind, g[0], g[1], g[2], threads, ipm,
                  "%.3f" % dec if decode else "-", bpm, 100 * mm["s16"],
                  mm["bar"], mm["tpk"], regs, spill, smem, occ, pro, verdict))
    w("")
    w("## Decode: M = 1 and 16, N = K = %d" % DECODE)
    w("")
    w("Targets: the GEMM grid at least %d CTAs (an H100's SMs) at N >= 3072, and "
      "the weights read once: (GEMM global bytes - activation bytes) / module "
      "bytes at most 1.01, where the module's bytes are its weights and scales "
      "and the activation bytes are what each column tile must read of A "
      "(M K bytes of 8-bit codes, and for NVFP4 and MXFP8 M K / 16 and M K / 32 "
      "bytes of their block scales, once per tile: times the grid's x, the "
      "tiles of N). Anything "
      "more is weights read twice or activation rows read that are not there "
      "(rows past M)." % SMS)
    w("")
    w("| format | arch | M | GEMM CTAs | global B / module B | weights read / weight B "
      "| 16-B share | warp instr (GEMM) | warp instr (prologue) | target |")
    w("|---|---|--:|--:|--:|--:|--:|--:|--:|---|")
    with open(os.path.join(ckdir, "bench.safetensors.index.json")) as f:
        idx = json.load(f)
    for fmt in formats:
        for arch in archs:
            for m in DECODE_M:
                case, stats = results[(fmt, arch, m)]
                gemm, decode, rest = gemm_and_prologue(stats)
                gemm = with_decode(gemm, decode)
                mb = module_bytes(ckdir, idx, case[4])
                ratio = gemm["global_load_bytes"] / mb
                # Each column tile (the grid's x) reads the M rows of A: its
                # codes and, block-scaled, one scale byte per block of them.
                per_row = DECODE + DECODE // ACTIVATION_SCALE_BLOCK.get(fmt, DECODE * 2)
                activation = m * per_row * gemm["grid"][0]
                weights = (gemm["global_load_bytes"] - activation) / mb
                n_ctas = ctas(gemm)
                ok = n_ctas >= SMS and weights <= 1.01
                if not ok:
                    decode_misses.append((fmt, arch, m, n_ctas, weights, gemm, mb))
                w("| %s | %s | %d | %d | %.2f | %.3f | %.0f %% | %d | %d | %s |" % (
                    fmt, arch, m, n_ctas, ratio, weights, 100 * share16(gemm),
                    gemm["warp_instructions_total"],
                    sum(k["warp_instructions_total"] for k in rest),
                    "met" if ok else "missed"))
    w("")
    # Every kernel ptxas reported, whichever case ran it (the decode-only
    # modules too); one not run by any case is named by its kernel alone.
    owner = {}
    for (fmt, arch, _), (_, stats) in sorted(results.items()):
        for k in stats["kernels"]:
            owner.setdefault((arch, k["name"]), fmt)
    for (arch, name), r in sorted(resources.items()):
        b = r.get("spill_store_bytes", 0) + r.get("spill_load_bytes", 0)
        if b:
            spills.append("%s %s %s: %d B" % (owner.get((arch, name), "(not run)"),
                                               arch, name, b))
    w("## Misses and their causes")
    w("")
    if not misses and not decode_misses:
        w("None: every row with a target meets it.")
    if misses:
        w("Where each missed 1024^3 kernel's warp instructions go, per 1000 MACs, "
          "against its CUTLASS peer (tensor: MMAs; shared: shared-memory loads, "
          "stores and ldmatrix; global: global loads, stores and cp.async; sync: "
          "barriers and fences; alu: everything else, which is where operand "
          "decoders and block-scale rescales run), and the mechanism behind the "
          "excess.")
        w("")
        w("| format | arch | MMA | ratio | tensor | shared | global | sync | alu "
          "| peer tensor / shared / global / sync / alu | cause |")
        w("|---|---|---|--:|--:|--:|--:|--:|--:|---|---|")
        for fmt, arch, kind, ri, rb, mix, peer in misses:
            pm = peer["mix"]
            w("| %s | %s | %s | %.2fx | %.3f | %.3f | %.3f | %.3f | %.3f | "
              "%.3f / %.3f / %.3f / %.3f / %.3f | %s |" % (
                  fmt, arch, kind, ri, mix["tensor"], mix["shared"], mix["global"],
                  mix["sync"], mix["alu"], pm["tensor"], pm["shared"], pm["global"],
                  pm["sync"], pm["alu"], miss_cause(fmt, kind)))
        w("")
    if decode_misses:
        w("Decode rows that miss: the CTAs against %d, and the bytes loaded past "
          "the module's weights and the activation rows, by load width." % SMS)
        w("")
        for fmt, arch, m, n_ctas, weights, gemm, mb in decode_misses:
            widths = ", ".join("%s B: %d" % (wd, n) for wd, n in sorted(
                gemm["global_load_instructions_by_width"].items(), key=lambda x: int(x[0])))
            w("- %s %s M = %d: %d CTAs; weights read %.3fx (%d bytes over the "
              "module's %d); loads by width: %s." % (
                  fmt, arch, m, n_ctas, weights, int((weights - 1) * mb), mb, widths))
        w("")
    w("## Spills")
    w("")
    w("\n".join("- " + s for s in spills) if spills else "None: every kernel of every "
      "arch compiled without spills.")
    w("")
    w("## Reading the tables")
    w("")
    w("- warp instr / kMAC: warp-level instructions executed per 1000 multiply-adds "
      "of the problem (M N K), not of the tensor instructions (sm_100a's M = 64 "
      "tcgen05 path issues twice the MACs the problem needs).")
    w("- global B / kMAC: bytes loaded from global memory per 1000 MACs (tile reuse).")
    w("- 16-B share: bytes moved by 16-byte global loads or cp.async, of all global "
      "bytes loaded.")
    w("- barriers and tensor instructions are per CTA and per 64 bytes of K, so "
      "kernels with different K steps compare.")
    w("- CTAs/SM: resident blocks per SM from ptxas's registers and shared memory and "
      "the arch's limits.")
    w("- operand decode: the kernels that decode operands once per call from "
      "the config's decode_rows on (W4A8/W6A8's weights to their int8 grid, W4A4's "
      "nibbles to int8; on archs without the format's MMA both FP8 operands, and "
      "both NVFP4 operands times their block scales, to f16, the GEMM then an f16 "
      "one), part of the GEMM's figures (instructions and bytes), shown on their "
      "own too.")
    w("- prologue: every other kernel of the module (activation rotation and "
      "quantization), per MAC of the GEMM.")
    with open(args.out + ".tmp", "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(args.out + ".tmp", args.out)
    if misses:
        log("%d format/arch pairs miss their target (see the table)" % len(misses))


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        sys.exit("gpu-model: error: %s" % e)
