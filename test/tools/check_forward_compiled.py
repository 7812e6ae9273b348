"""lit driver: compiled kernels vs comfy-kitchen's forward (test/fixtures/forward).

For one checkpoint per format and kind (CHECKPOINTS below), compiles it
(`comfyquant-compile --dtypes f32,bf16`) and runs every forward fixture of
it through `comfyquant-run --artifact`, comparing y with kitchen's y per
element within c·u·S: S = Σ|terms| (+|bias|) of that output (the fixture's
s_abs), u = 2^-8 (bf16) or 2^-24 (f32), c = 4 (bf16) or 16 (f32) — the
epilogue order and float-GEMM summation order differ from kitchen's
(docs/Numerics.md §8 items 11-12; test/fixtures/README.md).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

bindir, fixtures = sys.argv[1], sys.argv[2]
CHECKPOINTS = [
    "ckpt/fp8_e4m3_linear.safetensors", "ckpt/fp8_e5m2_linear.safetensors",
    "ckpt/nvfp4_pqs.safetensors", "ckpt/mxfp8_aligned.safetensors",
    "ckpt/int8_rowwise.safetensors", "ckpt/int8_convrot_g16.safetensors",
    "ckpt/w4a4_g64.safetensors", "ckpt/w4a4_g256_int8act.safetensors",
    "ckpt/w4a8_codebook_g16.safetensors", "ckpt/w6a8_g16.safetensors",
    "ckpt/sample_mixed.safetensors", "ckpt/moe_flat_w4a8.safetensors",
    "ckpt/fp8_e4m3_exporter_fpmm.safetensors",
]
tmp = tempfile.mkdtemp()
cases = json.load(open(os.path.join(fixtures, "forward.json")))
failures = total = 0


def floats(dtype, raw):
    if dtype == "F32":
        return st.floats(raw)
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
            for h in struct.unpack("<%dH" % (len(raw) // 2), raw)]


for ck in CHECKPOINTS:
    art = os.path.join(tmp, os.path.basename(ck) + ".art")
    p = subprocess.run([os.path.join(bindir, "comfyquant-compile"), os.path.join(fixtures, ck),
                        "--target", "cpu", "--dtypes", "f32,bf16", "-o", art],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL compile %s: %s" % (ck, p.stderr.strip()))
        failures += 1
        continue
    for fx in cases:
        if fx["checkpoint"] != ck or fx["kind"] == "embedding":
            continue
        total += 1
        data, _ = st.read(os.path.join(fixtures, fx["file"]))
        out = os.path.join(tmp, "y.safetensors")
        cmd = [os.path.join(bindir, "comfyquant-run"), os.path.join(fixtures, ck), "--module",
               fx["module"], "--input", os.path.join(fixtures, fx["file"]), "--artifact", art,
               "-o", out]
        if fx["expert"] is not None:
            cmd += ["--expert", str(fx["expert"])]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print("FAIL %s: %s" % (fx["file"], p.stderr.strip()))
            failures += 1
            continue
        ydt, _, yraw = data["y"]
        got = floats(ydt, st.read(out)[0]["y"][2])
        want = floats(ydt, yraw)
        s_abs = floats("BF16", data["s_abs"][2])
        u, c = (2.0 ** -8, 4) if ydt == "BF16" else (2.0 ** -24, 16)
        worst = max((abs(a - b) / (u * s) if s > 0 else (0 if a == b else 1e9))
                    for a, b, s in zip(got, want, s_abs))
        ok = worst <= c
        failures += not ok
        print("%s %s (%s %s): worst %.2f u*S (limit %d)" % (
            "PASS" if ok else "FAIL", fx["file"], fx["format"], ydt, worst, c))
print("%d cases, %d failed" % (total, failures))
sys.exit(1 if failures or total == 0 else 0)
