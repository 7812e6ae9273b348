"""Shape sweep: compiled kernels vs the reference path on random shapes.

  shape_sweep.py BINDIR WORKDIR [--kinds linear,embedding,moe] [--seed S]
                 [--per-case N]

Writes a seeded random checkpoint (make_sweep_checkpoint.py: every format x
kind with its variants, N and K drawn from 1..130 among the values each
format allows), compiles every module for every CPU variant and activation
dtype (comfyquant-compile links the kernels and checks that they load), then
for every variant this CPU runs, every dtype and M in {1, 2, 7, 33} runs
each module (each expert of a MoE bank) compiled and through the reference
path and compares y:
  * integer formats and embeddings without ConvRot: bit-identical;
  * everything else (f32 GEMMs, ConvRot butterflies; summation orders differ):
    |a - b| <= (2 (K + 2) u32 + w u_y) S + u_y (|a| + |b|) per element,
    S = sum_k |x_k| |W_nk| (W the reference dequantized weight, x after
    pre_quant_scale), u_y the unit roundoff of y's dtype, w = 2 for a
    full-precision GEMM of a ConvRot weight (un-rotated in f32 in another
    order, then rounded to x's dtype: one unit there per weight), else 0;
    NaN or Inf on either side where the other is finite fails, and so does
    a shape mismatch.
Variants the CPU lacks are compiled and link-checked only, and are listed as
such. Prints one line per failure and a final "N passed, N failed" line.
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
import safetensors_util as st  # noqa: E402

VARIANTS = ("x86-64-v3", "avx512-vnni", "amx")
DTYPES = {"f32": ("F32", 2.0 ** -24), "bf16": ("BF16", 2.0 ** -8), "f16": ("F16", 2.0 ** -11)}
INTEGER = {"int8_tensorwise", "convrot_w4a4", "asym_w4a8_int8", "w6a8_int8"}


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


def decode(dtype, raw):
    if dtype == "F32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if dtype == "F16":
        return list(struct.unpack("<%de" % (len(raw) // 2), raw))
    h = struct.unpack("<%dH" % (len(raw) // 2), raw)
    return [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in h]


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
    args = ap.parse_args()
    bindir, work, seed, per_case = args.bindir, args.work, args.seed, args.per_case
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
    art = os.path.join(work, "art")
    subprocess.run(["rm", "-rf", art], check=True)
    p = subprocess.run([os.path.join(bindir, "comfyquant-compile"), ckpt, "--target", "cpu",
                        "-o", art, "--dtypes", ",".join(DTYPES),
                        "--variants", ",".join(VARIANTS)] + overrides,
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL compile (seed %d): %s" % (seed, p.stderr.strip()[-4000:]))
        print("0 passed, 1 failed")
        return 1

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
        weights[m["name"]] = (shape, decode(dt, raw))
    pqs = {}
    tensors = st.read(ckpt)[0]
    for m in modules:
        key = m["name"] + ".pre_quant_scale"
        if key in tensors:
            pqs[m["name"]] = decode("F32", tensors[key][2])

    for variant in VARIANTS:
        env = dict(os.environ, COMFYQUANT_CPU_VARIANT=variant)
        probe = modules[0]
        x = os.path.join(work, "x.safetensors")
        st.write(x, {"x": ("I64", [1], struct.pack("<q", 0))} if probe["kind"] == "embedding"
                 else {"x": ("F32", [1, probe["k"]], b"\0" * 4 * probe["k"])})
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
            for dname, (dtype, u) in DTYPES.items():
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
                    if a[0] != b[0] or a[1] != b[1] or len(a[2]) != len(b[2]):
                        fail("%s: compiled y %s %s vs reference %s %s" % (
                            what, a[0], a[1], b[0], b[1]))
                        continue
                    exact = (m["format"] in INTEGER and m["kind"] != "embedding") or (
                        m["kind"] == "embedding" and "convrot" not in m["options"])
                    exact = exact and not m["options"].get("fpmm")
                    if exact:
                        if a[2] != b[2]:
                            av, bv = decode(*a[0:1], a[2]), decode(*b[0:1], b[2])
                            bad = [i for i in range(len(av)) if struct.pack("<f", av[i]) != struct.pack("<f", bv[i])]
                            fail("%s: not bit-identical at %d of %d elements (first %d: %r vs %r)" % (
                                what, len(bad), len(av), bad[0], av[bad[0]], bv[bad[0]]))
                            continue
                        passed += 1
                        continue
                    av, bv = decode(a[0], a[2]), decode(b[0], b[2])
                    worst, where = 0.0, None
                    # A full-precision GEMM of a ConvRot weight: the weight is
                    # un-rotated in f32 (sum order differs) and rounded to x's
                    # dtype, so single weights may differ by one unit there.
                    rotated = m["format"] in ("convrot_w4a4", "asym_w4a8_int8", "w6a8_int8") or \
                        m["options"].get("convrot")
                    w_ulps = 2 if (m["options"].get("fpmm") and rotated) else 0
                    sc = pqs.get(m["name"])
                    # S exactly when that is cheap, else the upper bound
                    # max_k |x_k| * sum_k |W_nk| (large exploratory sweeps).
                    exact_s = M * N * K <= 2_000_000
                    if not exact_s and m["kind"] != "embedding":
                        wsum = [sum(abs(v) for v in w[((e or 0) * N + n) * K:((e or 0) * N + n + 1) * K])
                                for n in range(N)]
                        xmax = [max(abs(xv[r * K + k] * (sc[k] if sc else 1.0)) for k in range(K))
                                for r in range(M)]
                    for i in range(len(av)):
                        p_, q_ = av[i], bv[i]
                        if math.isnan(p_) or math.isnan(q_) or math.isinf(p_) or math.isinf(q_):
                            if not (math.isinf(p_) and p_ == q_):
                                worst, where = math.inf, i
                                break
                            continue
                        row, col = divmod(i, N) if m["kind"] != "embedding" else divmod(i, K)
                        if m["kind"] == "embedding":
                            S = sum(abs(w[idx[row] * K + k]) for k in range(K)) * 16
                        elif exact_s:
                            base = ((e or 0) * N + col) * K
                            S = sum(abs(xv[row * K + k] * (sc[k] if sc else 1.0)) * abs(w[base + k])
                                    for k in range(K))
                        else:
                            S = xmax[row] * wsum[col]
                        bound = (2 * (K + 2) * 2.0 ** -24 + w_ulps * u) * S + u * (abs(p_) + abs(q_))
                        r = abs(p_ - q_) / bound if bound > 0 else (0.0 if p_ == q_ else math.inf)
                        if r > worst:
                            worst, where = r, i
                    if worst > 1.0:
                        fail("%s: element %s: compiled %r vs reference %r (%.3g of the bound)" % (
                            what, where, av[where], bv[where], worst))
                        continue
                    passed += 1
    print("runs on this CPU: %s" % ", ".join(runnable))
    for s in skipped:
        print("compiled and link-checked only: %s" % s)
    print("%d modules, seed %d" % (len(modules), seed))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
