"""lit driver and opt-in script: fixture modules run on the PTX emulator.

  emu_check.py BINDIR OUT_DIR [--fixtures NAME,...] [--group NAME]
               [--sweep SEED [--max-dim D]]
               [--archs LIST] [--dtypes LIST] [--m LIST] [--jobs N]
               [--mutate-ptx ARCH:FROM=>TO] [--expect-fail]

Compiles each fixture checkpoint for CUDA (the archs asked for), then runs
every module (every expert of a MoE bank: the first and the last) on
`comfyquant-run --backend cuda --emulate ARCH` for every arch, dtype and M,
and compares y with the reference path's y: integer formats bit-identical,
float formats within tolerances.json "emulated_vs_reference" (a tensor-core
sum is rounded differently from the reference's f32 sum). A hazard the
emulator reports (out-of-bounds, race, uninitialised read, divergent
barrier, missing fence) fails the case with its message.

--mutate-ptx ARCH:FROM=>TO edits that arch's PTX of every artifact (the
first occurrence of FROM in each kernel that has one, a regular expression
when FROM starts with "re:"; the cubin is removed, as a hand edit makes it
stale; the runtime runs the edited PTX as it is) before running, and only that arch runs: with
--expect-fail the run passes only if some case fails, so a mutation that the
checks do not catch fails the test (docs/Testing.md lists the mutations).

An arch whose PTX is the same text as an earlier arch's (sm_86 and sm_80:
ptx_twins) runs only the largest M: the emulator would compute the same y.

Prints one line per failing case, each twin arch, then "<n> cases, <f>
failed, <s> s".
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import check_cuda_artifacts as fixtures  # noqa: E402
import compare as cmp  # noqa: E402
import safetensors_util as st  # noqa: E402

ARCHS = "sm_80,sm_86,sm_89,sm_90a,sm_100a,sm_120a,sm_100f"

# FP8 wgmma (sm_90a): its sums keep 13 fraction bits below the largest
# term (the model, docs/Testing.md), so those GEMMs get their own bound,
# tolerances.json "emulated_vs_reference_fp8_wgmma" (the model's worst case
# per K step, not scaled by sqrt(K): each step's product starts from zero
# and is promoted to f32). They also run with exact sums, which must meet
# the usual bound: layouts, descriptors and the rest of the kernel are
# checked as tightly as everywhere else.
FP8_WGMMA = {("sm_90a", "float8_e4m3fn"), ("sm_90a", "float8_e5m2"), ("sm_90a", "mxfp8")}


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s" % (" ".join(cmd), p.returncode,
                                                 (p.stderr or p.stdout).strip()[-2000:]))
    return p.stdout


def mutate(art, spec):
    """Applies FROM=>TO to ARCH's PTX of the artifact `art`."""
    arch, edit = spec.split(":", 1)
    old, new = edit.split("=>", 1)
    ptx = os.path.join(art, "cuda", arch + ".ptx")
    text = open(ptx).read()
    # Per kernel: the first occurrence, so every kernel that has it changes.
    parts = re.split(r"(?=\.visible \.entry )", text)
    hits = 0
    for i, part in enumerate(parts):
        if old.startswith("re:"):  # a regular expression, first match
            edited = re.sub(old[3:], new, part, count=1, flags=re.S)
        else:
            edited = part.replace(old, new, 1)
        if edited != part:
            parts[i] = edited
            hits += 1
    if not hits:
        return 0
    with open(ptx, "w") as f:
        f.write("".join(parts))
    cubin = os.path.join(art, "cuda", arch + ".cubin")
    if os.path.exists(cubin):
        os.remove(cubin)
    return hits


def ptx_twins(art, archs):
    """{arch: the earlier arch of `archs` whose PTX is the same text}, but
    for the .version/.target lines and comments (sm_86 takes sm_80's
    kernels): the emulator runs PTX, so a twin's y is its first's."""
    first_of, twins = {}, {}
    for arch in archs:
        path = os.path.join(art, "cuda", arch + ".ptx")
        if not os.path.exists(path):
            continue
        body = "".join(line for line in open(path)
                       if not re.match(r"\s*(\.version|\.target|//)", line))
        first = first_of.setdefault(body, arch)
        if first != arch:
            twins[arch] = first
    return twins


def sweep_checkpoint(args):
    """--sweep SEED: a random checkpoint of every format x kind
    (make_sweep_checkpoint.py) with N and K up to --max-dim; returns its
    path and the --kind/--shape overrides the tools need."""
    ckpt = os.path.join(args.out, "sweep.safetensors")
    listing = os.path.join(args.out, "sweep.json")
    subprocess.check_call([sys.executable, os.path.join(HERE, "make_sweep_checkpoint.py"),
                           ckpt, listing, str(args.sweep), "1", "linear,embedding,moe",
                           str(args.max_dim)])
    extra = []
    for m in json.load(open(listing))["modules"]:
        extra += ["--kind", "%s=%s" % (m["name"], m["kind"]),
                  "--shape", "%s=%dx%d" % (m["name"], m["n"], m["k"])]
        args.sweep_options[m["name"]] = m.get("options", {})
    return ckpt, extra


def cases_of(args, name):
    if name == "sweep":
        ckpt, extra = args.sweep_ckpt
    else:
        ckpt = os.path.join(ROOT, "test", "fixtures", "ckpt", fixtures.fixture_file(name))
        extra = fixtures.OVERRIDES.get(os.path.basename(ckpt), [])
    key = name.replace("/", "_")
    art = os.path.join(args.out, key)
    sh([os.path.join(args.bin, "comfyquant-compile"), ckpt, "--target", "cuda:" + args.archs,
        "--dtypes", args.dtypes, "-j", "1", "--quiet", "-o", art, "--overwrite"] + extra)
    if args.mutate_ptx:
        if not mutate(art, args.mutate_ptx):
            raise RuntimeError("--mutate-ptx %s: no kernel of %s has it" % (args.mutate_ptx, name))
    twins = ptx_twins(art, args.archs.split(","))
    for arch, first in twins.items():
        args.twins_seen.add((arch, first))
    report = json.loads(sh([os.path.join(args.bin, "comfyquant-translate"), "--inspect",
                            "--json", ckpt] + extra))
    out = []
    for mod in report["modules"]:
        experts = [None] if mod["kind"] != "moe" else sorted({0, mod["experts"] - 1})
        for dtype in args.dtypes.upper().split(","):
            if mod["kind"] == "embedding" and dtype != "F32":
                continue
            for expert in experts:
                for m in [int(v) for v in args.m.split(",")]:
                    out.append({"name": name, "ckpt": ckpt, "extra": extra, "art": art,
                                "mod": mod, "dtype": dtype, "expert": expert, "m": m,
                                "twins": twins})
    return out


def run_case(args, case):
    mod, dtype, m = case["mod"], case["dtype"], case["m"]
    tag = "%s.%s%s.%s.m%d" % (case["name"].replace("/", "_"), mod["name"],
                               "" if case["expert"] is None else ".e%d" % case["expert"],
                               dtype.lower(), m)
    work = os.path.join(args.out, "cases", tag)
    os.makedirs(work, exist_ok=True)
    x = os.path.join(work, "x.safetensors")
    if mod["kind"] == "embedding":
        import struct
        v = mod["out_features"]
        idx = [(i * 7 + 3) % v for i in range(m - 1)] + [v - 1]
        st.write(x, {"x": ("I64", [len(idx)], struct.pack("<%dq" % len(idx), *idx))})
        case["idx"] = idx
    else:
        sh([sys.executable, os.path.join(HERE, "make_input.py"), x, dtype, str(m),
            str(mod["in_features"]), "--random"])
    base = [os.path.join(args.bin, "comfyquant-run"), case["ckpt"], "--module", mod["name"],
            "--input", x, "--overwrite"] + case["extra"]
    if case["expert"] is not None:
        base += ["--expert", str(case["expert"])]
    want = os.path.join(work, "want.safetensors")
    sh(base + ["--reference", "-o", want])
    wdt, wshape, wraw = st.read(want)[0]["y"]
    ref = cmp.decode(wdt, wraw)
    check = "emulated_vs_reference"
    if mod["kind"] == "embedding" and mod.get("convrot_groupsize"):
        check = "unrotation_vs_kitchen"
    # A full-precision GEMM (sweep option fpmm) is a float GEMM whatever the
    # format: the "*" entry; of a ConvRot weight, plus the weight's own
    # rounding to x's dtype (compiled_vs_reference_fpmm_convrot, as the
    # shape sweep states it).
    opts = args.sweep_options.get(mod["name"], {})
    fpmm = bool(opts.get("fpmm"))
    rotated = mod["format"] == "convrot_w4a4" or bool(mod.get("convrot_groupsize")) or \
        bool(opts.get("convrot"))
    ulps, c = cmp.tolerance(check, "*" if fpmm else mod["format"], wdt, kind=mod["kind"])
    c_fixed = 0.0
    if fpmm and rotated and mod["kind"] != "embedding":
        _, c_fixed = cmp.tolerance("compiled_vs_reference_fpmm_convrot", "*", wdt)
    s = None
    sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
    import gpu_check  # noqa: E402  (the S term of the float bound)
    if c_fixed and not c:
        c = c_fixed
    if c and check == "unrotation_vs_kitchen":
        s = gpu_check.s_unrotation(args.bin, case["ckpt"], case["extra"], mod, case["idx"], work)
    elif c and mod["kind"] != "embedding":
        s = gpu_check.s_linear(args.bin, case["ckpt"], case["extra"], mod,
                               cmp.decode(dtype, st.read(x)[0]["x"][2]), case["expert"], work)
        # The bound grows with sqrt(K): tensor-core sums of K products.
        c = c * max(1.0, mod["in_features"] ** 0.5) + c_fixed
    results = []
    runs = []
    largest_m = max(int(v) for v in args.m.split(","))
    for arch in args.archs.split(","):
        # An arch whose PTX is another's (ptx_twins) computes the same y;
        # it still launches once per module and dtype, through its own
        # image and the runtime's checks for its compute capability.
        if arch in case["twins"] and m != largest_m:
            continue
        fp8 = (arch, mod["format"]) in FP8_WGMMA and mod["kind"] != "embedding"
        runs.append((arch, "hardware", fp8))
        if fp8:
            runs.append((arch, "exact", False))
    fp8_ulps, fp8_c = cmp.tolerance("emulated_vs_reference_fp8_wgmma", mod["format"], wdt,
                                    kind=mod["kind"])
    for arch, sums, fp8 in runs:
        y = os.path.join(work, "y.%s.%s.safetensors" % (arch, sums))
        env = dict(os.environ, COMFYQUANT_EMU_SUMS=sums)
        p = subprocess.run(base + ["--artifact", case["art"], "--backend", "cuda",
                                   "--emulate", arch, "-o", y],
                           capture_output=True, text=True, env=env)
        label = "%s %s %s%s" % (tag, arch, mod["format"],
                                "" if sums == "hardware" else " (exact sums)")
        if p.returncode != 0:
            results.append((False, "%s: exit %d: %s" % (label, p.returncode,
                                                         p.stderr.strip()[-1500:])))
            continue
        gdt, gshape, graw = st.read(y)[0]["y"]
        if gdt != wdt or list(gshape) != list(wshape):
            results.append((False, "%s: y %s %s, reference %s %s" % (label, gdt, gshape, wdt,
                                                                      wshape)))
            continue
        got = cmp.decode(gdt, graw)
        if fp8:
            r = cmp.compare(got, ref, wdt, fp8_ulps, fp8_c, s)
        elif ulps == 0 and c == 0:
            r = cmp.compare_exact(graw, wraw, len(wraw) // max(len(ref), 1))
            if r.ok:
                r = cmp.compare(got, ref, wdt)
        else:
            r = cmp.compare(got, ref, wdt, ulps, c, s)
        results.append((r.ok, "%s: %s" % (label, r.summary())))
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("out")
    ap.add_argument("--fixtures", default="")
    ap.add_argument("--group", default="")
    ap.add_argument("--archs", default=ARCHS)
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    ap.add_argument("--m", default="7")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--mutate-ptx", default="")
    ap.add_argument("--sweep", type=int, default=None,
                    help="instead of fixtures: a random checkpoint of every format and kind "
                         "(make_sweep_checkpoint.py, this seed) with N, K up to --max-dim")
    ap.add_argument("--max-dim", type=int, default=300)
    ap.add_argument("--expect-fail", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    args.out = os.path.abspath(args.out)
    args.sweep_options = {}
    args.twins_seen = set()
    if args.mutate_ptx:
        args.archs = args.mutate_ptx.split(":", 1)[0]
    os.makedirs(args.out, exist_ok=True)
    if args.sweep is not None:
        if os.environ.get("COMFYQUANT_SWEEP_SEED") and not args.mutate_ptx:
            args.sweep = int(os.environ["COMFYQUANT_SWEEP_SEED"])
        args.sweep_ckpt = sweep_checkpoint(args)
        names = ["sweep"]
    elif args.fixtures:
        names = args.fixtures.split(",")
    elif args.group:
        names = fixtures.GROUPS[args.group]
    else:
        names = [n for g in fixtures.GROUPS.values() for n in g]
    start = time.time()
    cases = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for got in pool.map(lambda n: cases_of(args, n), names):
            cases += got
    total = failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for results in pool.map(lambda c: run_case(args, c), cases):
            for ok, line in results:
                total += 1
                failed += not ok
                if not ok:
                    print("FAIL " + line)
                elif args.verbose:
                    print("PASS " + line)
    for arch, first in sorted(args.twins_seen):
        print("%s: some artifacts' PTX is %s's: those run at M = %s only" % (
            arch, first, max(int(v) for v in args.m.split(","))))
    print("%d cases, %d failed, %.0f s" % (total, failed, time.time() - start))
    if args.expect_fail:
        print("mutation %s" % ("caught" if failed else "NOT caught"))
        return 0 if failed else 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
