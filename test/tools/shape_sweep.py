"""Shape sweep: compiled kernels vs the reference path on random shapes.

  shape_sweep.py BINDIR WORKDIR [--kinds linear,embedding,moe] [--seed S]
                 [--per-case N] [--only NAME,...] [--variants V,...]
                 [--dtypes all|spread] [--mutate nan|scale|scale10|truncate]

Writes a seeded random checkpoint (make_sweep_checkpoint.py: every format x
kind with its variants, N and K drawn from 1..130 among the values each
format allows), compiles every module for every CPU variant and activation
dtype (comfyquant-compile links the kernels and checks that they load), then
for every variant this CPU runs, every dtype and M in {1, 2, 7, 33} runs
each module (each expert of a MoE bank) compiled and through the reference
path and compares y through compare.py with the bounds of tolerances.json:
  * "compiled_vs_reference_any_shape" for the module's format and y's dtype (integer
    formats bit-identical; float formats |a - b| <= ulps U + c 2^-24 S,
    S = sum_k |x_k pqs_k| |W_nk| + |bias_n| with W the reference's dequantized
    weight, and c given per sqrt(K)); full-precision GEMMs use the "*" entry;
  * "compiled_vs_reference_fpmm_convrot" for a full-precision GEMM of a
    ConvRot weight (the weight is un-rotated in f32 in another order and
    rounded to x's dtype: one unit of that dtype per weight, a term of S not
    scaled by sqrt(K)), plus the any-shape "*" entry's f32 GEMM term;
  * embeddings bit-identical, except ConvRot un-rotation sums ("*" entry,
    S = sum of |terms| of the butterfly).
NaN or Inf on either side where the other is finite fails, and so does a
shape or size mismatch.
Variants the CPU lacks are compiled and link-checked only, and are listed as
such; --variants narrows what is compiled (the default is every variant).
--dtypes spread gives each variant one or more of the dtypes and each dtype
one or more variants instead of all x all (the GCC and sanitizer builds,
where the clang build has run all x all of the same draw).
Prints one line per failure and a final "N passed, N failed" line.
"""
import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import compare as cmp  # noqa: E402
import safetensors_util as st  # noqa: E402

VARIANTS = ("x86-64-v3", "avx512-vnni", "avx512-bf16", "amx")
DTYPES = {"f32": ("F32", 2.0 ** -24), "bf16": ("BF16", 2.0 ** -8), "f16": ("F16", 2.0 ** -11)}
ROTATED = {"convrot_w4a4", "asym_w4a8_int8", "w6a8_int8"}


def to_dtype_bits(v, dtype):
    """Rounds an f32 value to dtype (RNE) and returns (value, raw bytes)."""
    f = struct.unpack("<f", struct.pack("<f", v))[0]
    if dtype == "F32":
        return f, struct.pack("<f", f)
    if dtype == "F16":
        raw = struct.pack("<e", f)
        return struct.unpack("<e", raw)[0], raw
    u = struct.unpack("<I", struct.pack("<f", f))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    raw = struct.pack("<H", u)
    return struct.unpack("<f", struct.pack("<I", u << 16))[0], raw


def spread_dtypes(variants):
    """Each variant's activation dtypes when a run spreads them: variant i
    takes dtype i mod 3, and with fewer than three variants also every
    dtype j with j = i mod (the variant count), so every dtype runs on some
    variant and every variant runs one or more dtypes, at a third of the
    compile work of all x all where there are three variants or more."""
    names = list(DTYPES)
    n = len(variants)
    return {v: [d for j, d in enumerate(names) if j == i % len(names) or j % n == i % n]
            for i, v in enumerate(variants)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bindir")
    ap.add_argument("work")
    ap.add_argument("--kinds", default="linear,embedding,moe")
    # The seed is fixed so a failure reproduces; COMFYQUANT_SWEEP_SEED
    # explores others.
    ap.add_argument("--seed", type=int,
                    default=int(os.environ.get("COMFYQUANT_SWEEP_SEED", "20261201")))
    ap.add_argument("--per-case", default="1")
    ap.add_argument("--max-dim", default="130", help="largest N or K drawn")
    ap.add_argument("--m", default="1,2,7,33", help="row counts M drawn from")
    ap.add_argument("--only", default="",
                    help="compile and check only these modules of the draw "
                         "(comma-separated names; the draw itself is unchanged)")
    ap.add_argument("--mutate", default="",
                    help="doctor every compiled output first (compare.py: nan, "
                         "scale, scale10, truncate): the check's own test")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="CPU variants to compile (comma-separated; default: all)")
    ap.add_argument("--dtypes", choices=("all", "spread"), default="all",
                    help="all: every variant compiles and runs every activation dtype; "
                         "spread: each dtype on some variants, each variant with some "
                         "dtypes (spread_dtypes)")
    args = ap.parse_args()
    unknown = sorted(set(args.variants.split(",")) - set(VARIANTS))
    if unknown:
        ap.error("unknown variant %s (known: %s)" % (", ".join(unknown), ", ".join(VARIANTS)))
    bindir, work, seed, per_case = args.bindir, args.work, args.seed, args.per_case
    mutation = args.mutate
    os.makedirs(work, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    ckpt = os.path.join(work, "sweep.safetensors")
    listing = os.path.join(work, "sweep.json")
    subprocess.check_call([sys.executable, os.path.join(here, "make_sweep_checkpoint.py"),
                           ckpt, listing, str(seed), per_case, args.kinds,
                           args.max_dim])
    m_values = [int(v) for v in args.m.split(",")]
    modules = json.load(open(listing))["modules"]
    overrides = []
    for m in modules:
        overrides += ["--kind", "%s=%s" % (m["name"], m["kind"]),
                      "--shape", "%s=%dx%d" % (m["name"], m["n"], m["k"])]
    selection = []
    if args.only:
        wanted = args.only.split(",")
        missing = sorted(set(wanted) - {m["name"] for m in modules})
        if missing:
            print("FAIL the draw has no module %s" % ", ".join(missing))
            print("0 passed, 1 failed")
            return 1
        modules = [m for m in modules if m["name"] in wanted]
        selection = ["--modules", args.only]
    variants = args.variants.split(",")
    dtypes_of = spread_dtypes(variants) if args.dtypes == "spread" else \
        {v: list(DTYPES) for v in variants}
    # One artifact per distinct dtype set (one in all when every variant
    # takes every dtype), compiled for the variants that take that set. An
    # embedding runs its f32 kernel whatever the run's dtype (its input is
    # indices), so with embeddings in the draw every set holds f32.
    embeddings = any(m["kind"] == "embedding" for m in modules)
    arts = {}
    for v in variants:
        compiled = [d for d in DTYPES if d in dtypes_of[v] or (embeddings and d == "f32")]
        arts.setdefault(",".join(compiled), []).append(v)
    art_of = {}
    for i, (dtypes, group) in enumerate(sorted(arts.items())):
        art = os.path.join(work, "art%d" % i)
        subprocess.run(["rm", "-rf", art], check=True)
        p = subprocess.run([os.path.join(bindir, "comfyquant-compile"), ckpt, "--target", "cpu",
                            "-o", art, "--dtypes", dtypes,
                            "--variants", ",".join(group)] + overrides + selection,
                           capture_output=True, text=True)
        if p.returncode != 0:
            print("FAIL compile (seed %d): %s" % (seed, p.stderr.strip()[-4000:]))
            print("0 passed, 1 failed")
            return 1
        for v in group:
            art_of[v] = art

    rng = random.Random(seed)
    run = os.path.join(bindir, "comfyquant-run")
    passed = failed = 0
    runnable, skipped = [], []

    def fail(msg):
        nonlocal failed
        failed += 1
        print("FAIL seed=%d %s" % (seed, msg))

    def run_y(args, what):
        out = os.path.join(work, "y.safetensors")
        if os.path.exists(out):
            os.remove(out)
        q = subprocess.run([run, ckpt] + args + ["-o", out] + overrides,
                           capture_output=True, text=True, env=env)
        if q.returncode != 0:
            return None, q.stderr.strip()
        t = st.read(out)[0]["y"]
        return t, None

    # Dequantized weights (f32, logical shape) for the bounds.
    weights = {}
    env = dict(os.environ)
    for m in modules:
        out = os.path.join(work, "w.safetensors")
        if os.path.exists(out):
            os.remove(out)
        q = subprocess.run([run, ckpt, "--module", m["name"], "--dequantize", "-o", out,
                            "--dtype", "f32"] + overrides, capture_output=True, text=True)
        if q.returncode != 0:
            fail("%s: --dequantize: %s" % (m["name"], q.stderr.strip()))
            continue
        dt, shape, raw = st.read(out)[0]["weight"]
        weights[m["name"]] = (shape, cmp.decode(dt, raw))
    pqs = {}
    tensors = st.read(ckpt)[0]
    for m in modules:
        key = m["name"] + ".pre_quant_scale"
        if key in tensors:
            pqs[m["name"]] = cmp.decode("F32", tensors[key][2])

    def bias_of(m, e):
        key = m["name"] + ".bias"
        if key not in tensors:
            return None
        vals = cmp.decode(tensors[key][0], tensors[key][2])
        n = m["n"]
        return vals[(e or 0) * n:(e or 0) * n + n] if m["kind"] == "moe" else vals

    def gemm_terms(m, e, xv, M, w):
        """S[r][n] = sum_k |x_rk pqs_k| |W_nk| (W the dequantized weight);
        beyond 2M products the upper bound max_k |x_rk pqs_k| sum_k |W_nk|."""
        N, K = m["n"], m["k"]
        sc = pqs.get(m["name"])
        xs = [abs(xv[i] * (sc[i % K] if sc else 1.0)) for i in range(M * K)]
        rows = [w[((e or 0) * N + n) * K:((e or 0) * N + n + 1) * K] for n in range(N)]
        if M * N * K <= 2_000_000:
            return [sum(xs[r * K + k] * abs(row[k]) for k in range(K))
                    for r in range(M) for row in rows]
        wsum = [sum(abs(v) for v in row) for row in rows]
        xmax = [max(xs[r * K:(r + 1) * K]) for r in range(M)]
        return [xmax[r] * wsum[n] for r in range(M) for n in range(N)]

    def unrotation_terms(m, row, k):
        """sum |H_ik q_i s_row| over k's ConvRot group (|H| = 1/sqrt(Gr))."""
        K, gr = m["k"], m["options"]["convrot"]
        q = tensors[m["name"] + ".weight"][2]
        sv = cmp.decode("F32", tensors[m["name"] + ".weight_scale"][2])
        s_row = abs(sv[row] if len(sv) > 1 else sv[0])
        g0 = k // gr * gr
        codes = struct.unpack("<%db" % gr, q[row * K + g0:row * K + g0 + gr])
        return sum(abs(v) for v in codes) * s_row / math.sqrt(gr)

    worst = {}
    for variant in variants:
        env = dict(os.environ, COMFYQUANT_CPU_VARIANT=variant)
        art = art_of[variant]
        probe, probe_dtype = modules[0], DTYPES[dtypes_of[variant][0]][0]
        x = os.path.join(work, "x.safetensors")
        st.write(x, {"x": ("I64", [1], struct.pack("<q", 0))} if probe["kind"] == "embedding"
                 else {"x": (probe_dtype, [1, probe["k"]],
                             b"\0" * (4 if probe_dtype == "F32" else 2) * probe["k"])})
        _, err = run_y(["--module", probe["name"], "--input", x, "--artifact", art], "probe")
        # The runtime's refusals of a variant this CPU (or OS) cannot run.
        if err and (("CPU variant '%s' needs" % variant) in err
                    or "AMX tile data permission" in err or "AMX needs" in err):
            skipped.append("%s (%s)" % (variant, err.split("error: ")[-1]))
            continue
        runnable.append(variant)
        for m in modules:
            if m["name"] not in weights:
                continue
            wshape, w = weights[m["name"]]
            N, K, E = m["n"], m["k"], m["experts"]
            for dname in dtypes_of[variant]:
                dtype, u = DTYPES[dname]
                M = rng.choice(m_values)
                experts = range(E) if m["kind"] == "moe" else [None]
                for e in experts:
                    if m["kind"] == "embedding":
                        idx = [rng.randrange(N) for _ in range(M)]
                        st.write(x, {"x": ("I64", [M], struct.pack("<%dq" % M, *idx))})
                        xv = None
                    else:
                        vals, raws = [], []
                        for _ in range(M * K):
                            v, r = to_dtype_bits(rng.uniform(-2.0, 2.0), dtype)
                            vals.append(v)
                            raws.append(r)
                        st.write(x, {"x": (dtype, [M, K], b"".join(raws))})
                        xv = vals
                    args = ["--module", m["name"], "--input", x]
                    if e is not None:
                        args += ["--expert", str(e)]
                    what = "%s %s %s %s %dx%d M=%d%s" % (
                        variant, m["name"], m["format"], dname, N, K, M,
                        "" if e is None else " expert=%d" % e)
                    a, err = run_y(args + ["--artifact", art], what)
                    if err:
                        fail("%s: compiled: %s" % (what, err))
                        continue
                    b, err = run_y(args + ["--reference"], what)
                    if err:
                        fail("%s: reference: %s" % (what, err))
                        continue
                    if a[0] != b[0]:
                        fail("%s: compiled y is %s, reference %s" % (what, a[0], b[0]))
                        continue
                    if mutation:
                        shape, raw = cmp.mutate(mutation, a[0], a[1], a[2])
                        a = (a[0], shape, raw) + tuple(a[3:])
                    av, bv = cmp.decode(a[0], a[2]), cmp.decode(b[0], b[2])
                    bad_shape = cmp.shape_mismatch(a[1], b[1], av, bv)
                    if bad_shape:
                        fail("%s: %s" % (what, bad_shape))
                        continue
                    fpmm = bool(m["options"].get("fpmm"))
                    rotated = m["format"] in ROTATED or bool(m["options"].get("convrot"))
                    if m["kind"] == "embedding":
                        # Gathered rows: exact, except ConvRot's un-rotation
                        # sums (butterfly vs correctly rounded).
                        check = "compiled_vs_reference_any_shape"
                        ulps, c = (0.0, 0.0) if not rotated else cmp.tolerance(check, "*", a[0])
                        S = [unrotation_terms(m, idx[i // K], i % K) for i in range(len(bv))] \
                            if rotated else None
                        bias = None
                    else:
                        # A full-precision GEMM of a ConvRot weight rounds the
                        # weight, un-rotated in another f32 order, to x's dtype.
                        check = "compiled_vs_reference_fpmm_convrot" if fpmm and rotated \
                            else "compiled_vs_reference_any_shape"
                        ulps, c = cmp.tolerance(check, "*" if fpmm else m["format"], a[0],
                                                has_bias=bias_of(m, e) is not None)
                        S, bias = gemm_terms(m, e, xv, M, w), None
                        bvec = bias_of(m, e)
                        if bvec is not None:
                            bias = [bvec[i % N] for i in range(len(bv))]
                            S = [S[i] + abs(bias[i]) for i in range(len(bv))]
                    # The sweep's any-shape entries give c per sqrt(K): the
                    # f32 sums' error grows with K. The fpmm-ConvRot entry is
                    # the weight's own rounding (one unit of x's dtype per
                    # weight, |W_nk| |x_k| each: already a term of S, so not
                    # scaled), plus the any-shape f32 GEMM's.
                    if check == "compiled_vs_reference_fpmm_convrot":
                        _, c_gemm = cmp.tolerance("compiled_vs_reference_any_shape", "*",
                                                  a[0], has_bias=bias_of(m, e) is not None)
                        c += c_gemm * math.sqrt(K)
                    else:
                        c *= math.sqrt(K)
                    if ulps == 0 and c == 0:
                        r = cmp.compare_exact(a[2], b[2], len(a[2]) // max(len(av), 1))
                    else:
                        r = cmp.compare(av, bv, a[0], ulps, c, S, bias=bias)
                    if not r.ok:
                        fail("%s: %s (%s)" % (what, r.summary(), check))
                        continue
                    key = "%s %s" % (check, a[0])
                    worst[key] = max(worst.get(key, 0.0), r.worst)
                    passed += 1
    print("runs on this CPU: %s" % ", ".join(runnable))
    for s in skipped:
        print("compiled and link-checked only: %s" % s)
    for check, v in sorted(worst.items()):
        print("worst error / bound, %s: %.2f" % (check, v))
    print("%d modules, seed %d" % (len(modules), seed))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
