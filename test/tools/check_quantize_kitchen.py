"""lit helper: comfyquant-quantize against comfy-kitchen's eager quantizers.

  check_quantize_kitchen.py BIN CASES_DIR WORKDIR [--mutate]

For each case of CASES_DIR/cases.json (made by test/fixtures/
generate_quantize.py with the pinned kitchen): the case's `source` becomes
`layer.weight` of a checkpoint, comfyquant-quantize encodes it with the
case's format and options, and every tensor kitchen wrote is compared byte
for byte with ours. Every case must match exactly, with two exceptions the
fixtures mark:
  * outputs_identical_with_correctly_rounded_rotation false: kitchen's f32
    ConvRot rotation is an MKL/oneDNN sgemm whose sum order is not
    reproducible (ours is correctly rounded, docs/Quantize.md §3): at most 2%
    of the code bytes may differ and F32 scales lie within 4 ulp ("within");
  * kitchen_nonfinite: kitchen writes NaN or inf (an all-zero tensor, an
    underflowing f16 scale); ours must be finite and pass --verify-output
    ("finite").
--mutate flips one code byte of kitchen's first case: the check must then
fail.
"""
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

bin_dir, cases_dir, work = sys.argv[1:4]
mutate = "--mutate" in sys.argv
os.makedirs(work, exist_ok=True)
cases = json.load(open(os.path.join(cases_dir, "cases.json")))
cases = cases["cases"] if isinstance(cases, dict) else cases


def cli_for(c):
    f, o = c["format"], c["options"]
    if f == "float8_e4m3fn":
        return ["--format", "fp8-e4m3"]
    if f == "float8_e5m2":
        return ["--format", "fp8-e5m2"]
    if f in ("nvfp4", "mxfp8"):
        return ["--format", f]
    if f == "int8_tensorwise":
        if o.get("convrot"):
            return ["--format", "int8-convrot", "--convrot-group", str(o["convrot_groupsize"])]
        return ["--format", "int8" if o.get("per_row") else "int8-tensor"]
    if f == "convrot_w4a4":
        return ["--format", "w4a4", "--convrot-group", str(o.get("convrot_groupsize", 256)),
                "--w4a4-linear-dtype", o.get("linear_dtype", "int4")]
    if f in ("asym_w4a8_int8", "w6a8_int8"):
        a = ["--format", "w4a8" if f == "asym_w4a8_int8" else "w6a8",
             "--group-size", str(o.get("group_size", 16)),
             "--convrot-group", str(o.get("convrot_groupsize", 256))]
        if f == "asym_w4a8_int8":
            a += ["--codebook", o.get("codebook", "auto")]
        if o.get("scale_dtype") == "float32":
            a += ["--s-rel-dtype", "f32"]
        return a
    return None


failed = 0
tally = {}
for i, c in enumerate(cases):
    want = st.read(os.path.join(cases_dir, c["file"]))[0]
    args = cli_for(c)
    fmt = c["format"]
    t = tally.setdefault(fmt, [0, 0, 0, 0, 0])  # exact, within, failed, skipped, finite
    if args is None:
        t[3] += 1
        continue
    dt, shape, raw = want["source"]
    src = os.path.join(work, c["name"] + ".src.safetensors")
    st.write(src, {"layer.weight": (dt, shape, raw)})
    out = os.path.join(work, c["name"] + ".safetensors")
    r = subprocess.run([os.path.join(bin_dir, "comfyquant-quantize"), src, "-o", out, "--overwrite",
                        "--quiet", "--architecture", "generic"] + args, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL %s: %s" % (c["name"], r.stderr.strip()))
        t[2] += 1
        failed += 1
        continue
    got = st.read(out)[0]
    if c.get("kitchen_nonfinite"):
        v = subprocess.run([os.path.join(bin_dir, "comfyquant-quantize"), "--verify-output", out],
                           capture_output=True, text=True)
        if v.returncode != 0 or "ok" not in v.stdout:
            print("FAIL %s: our output does not verify: %s" % (c["name"], v.stdout.strip()[-300:]))
            t[2] += 1
            failed += 1
        else:
            t[4] += 1
        continue
    rotated = c.get("outputs_identical_with_correctly_rounded_rotation") is False
    worst = 0.0
    problems = []
    for key, (kdt, kshape, kraw) in sorted(want.items()):
        if key in ("source", "dequantized"):
            continue
        if mutate and key == "weight":
            kraw = bytes([kraw[0] ^ 1]) + kraw[1:]
            mutate = False
        g = got.get("layer." + key)
        if g is None:
            problems.append("%s missing" % key)
            continue
        gdt, gshape, graw = g
        if gdt != kdt or list(gshape) != list(kshape) or len(graw) != len(kraw):
            problems.append("%s: %s%s, kitchen %s%s" % (key, gdt, list(gshape), kdt, list(kshape)))
            continue
        if rotated and kdt == "F32":
            # Scales from rotated / ALS sums: within 4 units in the last place.
            n = len(kraw) // 4
            ga, ka = struct.unpack("<%di" % n, graw), struct.unpack("<%di" % n, kraw)
            far = sum(1 for a, b in zip(ga, ka) if abs(a - b) > 4)
            if far:
                problems.append("%s: %d of %d values beyond 4 ulp" % (key, far, n))
            if ga != ka:
                worst = max(worst, 1e-9)
            continue
        diff = sum(1 for a, b in zip(graw, kraw) if a != b)
        if diff:
            frac = diff / max(1, len(kraw))
            worst = max(worst, frac)
            if not rotated or frac > 0.02:
                problems.append("%s: %d of %d bytes differ" % (key, diff, len(kraw)))
    if problems:
        print("FAIL %s: %s" % (c["name"], "; ".join(problems)))
        t[2] += 1
        failed += 1
    elif worst:
        t[1] += 1
    else:
        t[0] += 1
for fmt, (ex, wi, fa, sk, de) in sorted(tally.items()):
    print("%-16s exact %2d  within %2d  finite %2d  failed %2d  skipped %2d" % (fmt, ex, wi, de, fa, sk))
print("PASS" if failed == 0 else "FAIL (%d)" % failed)
sys.exit(1 if failed else 0)
