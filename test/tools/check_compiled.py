"""lit driver: compiled kernels vs the reference path through comfyquant-run.

For every module of a checkpoint, for f32 and bf16 inputs of M rows, runs
`comfyquant-run --artifact DIR` and `--reference` and compares y:
integer formats (exact i32 accumulation, same epilogue order) must be
bit-identical; float formats (fp8, nvfp4, mxfp8: f32 GEMMs whose summation
order differs) within 8 units of the output dtype's rounding of |a|+|b|
plus 1e-6·max|y|. The compiled output must not depend on the thread
count (--threads 1 and 3: columns or rows split across threads).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

bindir, ckpt, artifact, m_rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
run = os.path.join(bindir, "comfyquant-run")
tmp = tempfile.mkdtemp()
report = json.loads(subprocess.check_output(
    [os.path.join(bindir, "comfyquant-translate"), "--inspect", "--json", ckpt]))
INT = {"int8_tensorwise", "convrot_w4a4", "asym_w4a8_int8", "w6a8_int8"}
failures = 0


def values(path):
    dtype, shape, raw = st.read(path)[0]["y"]
    if dtype == "F32":
        return st.floats(raw), raw, 2.0 ** -24
    halves = struct.unpack("<%dH" % (len(raw) // 2), raw)
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves], raw, 2.0 ** -8


for mod in report["modules"]:
    if mod["kind"] != "linear":
        continue
    for dtype in ("F32", "BF16"):
        x = os.path.join(tmp, "x.safetensors")
        subprocess.check_call([sys.executable, os.path.join(os.path.dirname(__file__), "make_input.py"),
                               x, dtype, str(m_rows), str(mod["in_features"])])
        outs = {}
        for how in (["--artifact", artifact], ["--reference"],
                    ["--artifact", artifact, "--threads", "1"],
                    ["--artifact", artifact, "--threads", "3"]):
            key = " ".join(how[:1] + how[2:])
            out = os.path.join(tmp, "y%d.safetensors" % len(outs))
            p = subprocess.run([run, ckpt, "--module", mod["name"], "--input", x, "-o", out] + how,
                               capture_output=True, text=True)
            if p.returncode != 0:
                print("FAIL %s %s %s: %s" % (mod["name"], dtype, how[0], p.stderr.strip()))
                failures += 1
                break
            outs[key] = values(out)
        if len(outs) != 4:
            continue
        if not (outs["--artifact --threads 1"][1] == outs["--artifact --threads 3"][1]
                == outs["--artifact"][1]):
            print("FAIL %s %s: output depends on the thread count" % (mod["name"], dtype))
            failures += 1
        (a, ra, u), (b, rb, _) = outs["--artifact"], outs["--reference"]
        if mod["format"] in INT:
            ok, how = ra == rb, "bit-identical"
        else:
            big = max(abs(v) for v in b) or 1.0
            worst = max(abs(p - q) / (8 * u * (abs(p) + abs(q)) + 1e-6 * big) for p, q in zip(a, b))
            ok, how = worst <= 1.0, "within tolerance (%.2f of bound)" % worst
        print("%s %s %s %s: %s" % ("PASS" if ok else "FAIL", mod["name"], mod["format"], dtype, how))
        failures += not ok
print("%d failed" % failures)
sys.exit(1 if failures else 0)
