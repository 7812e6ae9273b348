"""lit driver: compiled kernels and the reference path vs comfy-kitchen's
forward results (test/fixtures/forward).

For each checkpoint that has forward fixtures (forward.json: every format
and variant; Linear, every expert of the MoE banks, embeddings; padded
NVFP4/MXFP8 at their logical shape), it compiles the checkpoint
(`comfyquant-compile --dtypes f32,bf16`, the CPU variants of --variants) and
runs every forward fixture of it through `comfyquant-run --artifact` once
per variant given ($COMFYQUANT_CPU_VARIANT: each variant this CPU runs, not
only the best) and `--reference`, comparing y with kitchen's y per element
within the bound of
tolerances.json ("vs_kitchen", see compare.py and docs/Testing.md). Embedding
outputs are F32 through comfyquant-run, so only the f32 embedding fixtures
are compared here (the unit tests cover bf16).

  check_forward_compiled.py BINDIR FIXTURES [--only SUBSTR] [--mutate KIND]
                            [--paths compiled,reference] [--checkpoints A,B]
                            [--variants V1,V2]
--mutate doctors every output before the comparison (nan, scale, truncate:
compare.py), so lit can check that the driver then fails.
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
ap.add_argument("fixtures")
ap.add_argument("--only", default="")
ap.add_argument("--checkpoints", default="", help="comma-separated, instead of CHECKPOINTS")
ap.add_argument("--mutate", default="")
ap.add_argument("--paths", default="compiled,reference")
ap.add_argument("--variants", default="",
                help="CPU variants to compile (default: the compiler's, all)")
args = ap.parse_args()
variants = ["--variants", args.variants] if args.variants else []
bindir, fixtures = args.bindir, args.fixtures
PADDED = {"nvfp4", "mxfp8"}
tmp = tempfile.mkdtemp()
cases = json.load(open(os.path.join(fixtures, "forward.json")))
# Every checkpoint kitchen has forward results of, in a fixed order.
CHECKPOINTS = sorted({fx["checkpoint"] for fx in cases})
# The compiled path runs once per variant asked for (none: the runtime's
# choice); the reference path once.
run_variants = args.variants.split(",") if args.variants else [""]
modules = json.load(open(os.path.join(fixtures, "fixtures.json")))
paths = args.paths.split(",")
failures = total = 0


def run(cmd, variant=""):
    env = dict(os.environ)
    if variant:
        env["COMFYQUANT_CPU_VARIANT"] = variant
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return p.returncode, p.stderr.strip()


for ck in (args.checkpoints.split(",") if args.checkpoints else CHECKPOINTS):
    if args.only not in ck:
        continue
    ckpt = os.path.join(fixtures, ck)
    # Padded NVFP4/MXFP8 storage without bias does not state the logical
    # shape: give it, as a user of such a checkpoint must.
    shapes = []
    for m in modules:
        if m["file"] == ck and m["format"] in PADDED:
            shapes += ["--shape", "%s=%dx%d" % (m["module"], m["out_features"], m["in_features"])]
    art = os.path.join(tmp, os.path.basename(ck) + ".art")
    if "compiled" in paths:
        rc, err = run([os.path.join(bindir, "comfyquant-compile"), ckpt, "--target", "cpu",
                       "--dtypes", "f32,bf16", "-o", art] + variants + shapes)
        if rc != 0:
            print("FAIL compile %s: %s" % (ck, err))
            failures += 1
            continue
    bias_t = st.read(ckpt)[0]
    for fx in cases:
        if fx["checkpoint"] != ck:
            continue
        data, _ = st.read(os.path.join(fixtures, fx["file"]))
        ydt, yshape, yraw = data["y"]
        if fx["kind"] == "embedding":
            if ydt != "F32":
                continue  # comfyquant-run writes embeddings as F32
            x = os.path.join(tmp, "idx.safetensors")
            st.write(x, {"x": data["indices"]})
        else:
            x = os.path.join(fixtures, fx["file"])
        want = cmp.decode(ydt, yraw)
        s_abs = cmp.decode("BF16", data["s_abs"][2])
        # kitchen adds the bias in x's dtype after rounding: the bound
        # counts that rounding at the pre-bias value.
        bias = None
        if fx["has_bias"]:
            bdt, bshape, braw = bias_t[fx["module"] + ".bias"]
            n = yshape[-1]
            b = cmp.decode(bdt, braw)
            b = b[(fx["expert"] or 0) * n:][:n]
            bias = [b[i % n] for i in range(len(want))]
        ulps, c = cmp.tolerance("vs_kitchen", fx["format"], ydt, fx["has_bias"], fx["kind"])
        runs = [(how, v) for how in paths
                for v in (run_variants if how == "compiled" else [""])]
        for how, variant in runs:
            total += 1
            out = os.path.join(tmp, "y_%s.safetensors" % how)
            if os.path.exists(out):
                os.remove(out)
            cmd = [os.path.join(bindir, "comfyquant-run"), ckpt, "--module", fx["module"],
                   "--input", x, "-o", out] + shapes
            cmd += ["--artifact", art] if how == "compiled" else ["--reference"]
            if fx["expert"] is not None:
                cmd += ["--expert", str(fx["expert"])]
            rc, err = run(cmd, variant)
            name = "%s%s %s (%s %s %s)" % (how, ":" + variant if variant else "",
                                           fx["file"], fx["format"], fx["kind"], ydt)
            if rc != 0:
                print("FAIL %s: exit %d: %s" % (name, rc, err))
                failures += 1
                continue
            gdt, gshape, graw = st.read(out)[0]["y"]
            gshape, graw = cmp.mutate(args.mutate, gdt, gshape, graw)
            got = cmp.decode(gdt, graw)
            problem = ("dtype %s != %s" % (gdt, ydt) if gdt != ydt else
                       cmp.shape_mismatch(gshape, yshape, got, want))
            if problem:
                print("FAIL %s: %s" % (name, problem))
                failures += 1
                continue
            r = cmp.compare(got, want, ydt, ulps, c, s_abs, bias=bias)
            failures += not r.ok
            print("%s %s: %s (bound %g ulp + %g u32*S)" % (
                "PASS" if r.ok else "FAIL", name, r.summary(), ulps, c))
print("%d cases, %d failed" % (total, failures))
sys.exit(1 if failures or total == 0 else 0)
