"""lit driver: compiled kernels vs the reference path through comfyquant-run.

  check_compiled.py BINDIR CHECKPOINT ARTIFACT M [--dtypes F32,BF16,F16]
                    [--mutate KIND] [--exact-inputs]
                    [-- EXTRA comfyquant-run options]

For every module of a checkpoint (Linear; every expert of a MoE bank;
embeddings on M indices spread over the table), for each activation dtype,
runs `comfyquant-run --artifact DIR` and `--reference` on a deterministic x
of M rows (make_input.py --random, so float sums round) and compares y (compare.py, "compiled_vs_reference" in
tolerances.json): integer formats (exact i32 accumulation, the same
epilogue) bit-identical; float formats (f32 GEMMs whose summation order
differs) within ulps of the output dtype plus c·2^-24·S, S estimated as
2·Σ|x|·|W| + |bias| from the dequantized weight; ConvRot embeddings (f32
un-rotation sums in the kernel, correctly rounded in the reference) within
"unrotation_vs_kitchen", S bounded by the L2 norm of each rotation group.
The compiled output must not depend on the thread count (--threads 1 and 3;
lookups take no --threads). Every module must run: the last line counts the
checked (module, expert, dtype) cases.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import compare as cmp  # noqa: E402
import safetensors_util as st  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("bindir")
ap.add_argument("ckpt")
ap.add_argument("artifact")
ap.add_argument("m_rows", type=int)
ap.add_argument("--dtypes", default="F32,BF16,F16")
ap.add_argument("--mutate", default="")
ap.add_argument("--exact-inputs", action="store_true",
                help="x whose sums are exact (default: random x, sums round)")
ap.add_argument("extra", nargs="*")
args = ap.parse_args()
bindir, ckpt, artifact, m_rows = args.bindir, args.ckpt, args.artifact, args.m_rows
run = os.path.join(bindir, "comfyquant-run")
tmp = tempfile.mkdtemp()
report = json.loads(subprocess.check_output(
    [os.path.join(bindir, "comfyquant-translate"), "--inspect", "--json", ckpt] + args.extra))
INT = {"int8_tensorwise", "convrot_w4a4", "asym_w4a8_int8", "w6a8_int8"}
tensors = {}
if ckpt.endswith(".safetensors"):
    tensors = st.read(ckpt)[0]
failures = cases = 0


def fresh(name):
    path = os.path.join(tmp, name)
    if os.path.exists(path):
        os.remove(path)
    return path


def run_y(mod, x, how, expert):
    out = fresh("y.safetensors")
    cmd = [run, ckpt, "--module", mod["name"], "--input", x, "-o", out] + how + args.extra
    if expert is not None:
        cmd += ["--expert", str(expert)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, "%s: exit %d: %s" % (" ".join(how), p.returncode, p.stderr.strip())
    return st.read(out)[0]["y"], None


def side_tensor(mod, name, expert, n):
    t = tensors.get(mod["name"] + "." + name)
    if t is None:
        return None
    v = cmp.decode(t[0], t[2])
    return v[(expert or 0) * n:][:n] if len(v) > n else v


def s_estimate(mod, xvals, expert, dtype):
    """2·Σ_k |x_k·pqs_k|·|W[n,k]| + |bias_n| per output: an upper estimate of
    Σ|terms| (activation quantization moves |x| by less than a factor 2)."""
    w = fresh("w.safetensors")
    subprocess.check_call([run, ckpt, "--module", mod["name"], "--dequantize", "-o", w]
                          + args.extra)
    n, k = mod["out_features"], mod["in_features"]
    wv = cmp.decode("F32", st.read(w)[0]["weight"][2])[(expert or 0) * n * k:][:n * k]
    pqs = side_tensor(mod, "pre_quant_scale", None, k) or [1.0] * k
    bias = side_tensor(mod, "bias", expert, n) or [0.0] * n
    rows = len(xvals) // k
    out = []
    for r in range(rows):
        xa = [abs(xvals[r * k + j] * pqs[j]) for j in range(k)]
        for i in range(n):
            row = wv[i * k:(i + 1) * k]
            out.append(2 * sum(a * abs(b) for a, b in zip(xa, row)) + abs(bias[i]))
    return out


def s_unrotation(mod, idx):
    """For a ConvRot embedding: S of each looked-up element's un-rotation sum,
    Σ_group |Wrot| / sqrt(Gr), bounded above by the L2 norm of its group of
    the dequantized row (the rotation is orthonormal)."""
    w = fresh("w.safetensors")
    subprocess.check_call([run, ckpt, "--module", mod["name"], "--dequantize", "-o", w]
                          + args.extra)
    d, g = mod["in_features"], mod["convrot_groupsize"]
    wv = cmp.decode("F32", st.read(w)[0]["weight"][2])
    out = []
    for row in idx:
        for g0 in range(0, d, g):
            norm = sum(v * v for v in wv[row * d + g0:row * d + g0 + g]) ** 0.5
            out += [norm] * g
    return out


def check(mod, dtype, x, xvals, expert, idx=None):
    """Runs one case; returns the number of failures (0 or 1)."""
    label = "%s%s %s %s" % (mod["name"], "" if expert is None else "[%d]" % expert,
                            mod["format"], dtype)
    outs = {}
    runs = [("compiled", ["--artifact", artifact]), ("reference", ["--reference"])]
    if mod["kind"] != "embedding":  # lookups take no --threads
        runs += [("threads1", ["--artifact", artifact, "--threads", "1"]),
                 ("threads3", ["--artifact", artifact, "--threads", "3"])]
    for key, how in runs:
        outs[key], err = run_y(mod, x, how, expert)
        if err:
            print("FAIL %s: %s" % (label, err))
            return 1
    if len(runs) > 2 and not outs["threads1"][2] == outs["threads3"][2] == outs["compiled"][2]:
        print("FAIL %s: output depends on the thread count" % label)
        return 1
    (gdt, gshape, graw), (ydt, yshape, yraw) = outs["compiled"], outs["reference"]
    gshape, graw = cmp.mutate(args.mutate, gdt, gshape, graw)
    got, want = cmp.decode(gdt, graw), cmp.decode(ydt, yraw)
    problem = ("dtype %s != %s" % (gdt, ydt) if gdt != ydt else
               cmp.shape_mismatch(gshape, yshape, got, want))
    if problem:
        print("FAIL %s: %s" % (label, problem))
        return 1
    ulps, c = cmp.tolerance("compiled_vs_reference", mod["format"], ydt, kind=mod["kind"])
    rotated = mod["kind"] == "embedding" and mod.get("convrot_groupsize")
    if rotated:  # the un-rotation sums are not correctly rounded in the kernel
        ulps, c = cmp.tolerance("unrotation_vs_kitchen", mod["format"], ydt)
    if ulps == 0 and c == 0:
        r, how = cmp.compare_exact(graw, yraw, len(yraw) // max(len(want), 1)), "bit-identical"
        if r.ok:  # NaN with identical bits would pass compare_exact
            r = cmp.compare(got, want, ydt)
    else:
        s = (s_unrotation(mod, idx) if rotated else
             s_estimate(mod, xvals, expert, ydt) if mod["kind"] != "embedding" else None)
        r = cmp.compare(got, want, ydt, ulps, c, s)
        how = "within tolerance"
    print("%s %s: %s" % ("PASS" if r.ok else "FAIL", label,
                         how + " (%s)" % r.summary() if r.ok else r.summary()))
    return 0 if r.ok else 1


modules = report["modules"]
if not modules:
    print("FAIL %s: no quantized module" % ckpt)
    failures += 1
for mod in modules:
    for dtype in args.dtypes.split(","):
        x = fresh("x.safetensors")
        if mod["kind"] == "embedding":
            if dtype != "F32":
                continue  # y of an embedding is F32 whatever the input
            v = mod["out_features"]
            idx = [(i * 7 + 3) % v for i in range(m_rows - 1)] + [v - 1]
            st.write(x, {"x": ("I64", [len(idx)], b"".join(i.to_bytes(8, "little") for i in idx))})
            xvals = None
        else:
            idx = None
            subprocess.check_call([sys.executable, os.path.join(os.path.dirname(__file__),
                                                                "make_input.py"),
                                   x, dtype, str(m_rows), str(mod["in_features"])]
                                  + ([] if args.exact_inputs else ["--random"]))
            xvals = cmp.decode(dtype, st.read(x)[0]["x"][2])
        experts = range(mod["experts"]) if mod["kind"] == "moe" else [None]
        for e in experts:
            cases += 1
            failures += check(mod, dtype, x, xvals, e, idx)
print("%d cases, %d failed" % (cases, failures))
sys.exit(1 if failures or cases == 0 else 0)
