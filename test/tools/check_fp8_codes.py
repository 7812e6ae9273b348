"""lit driver: every float8_e4m3fn / e5m2 weight code through the compiled
kernel, bit for bit.

Writes a 16 x 16 fp8 linear whose weight holds each of the 256 codes once
(W[n, k] = 16 n + k, weight and input scale 1.0) and runs it on the 16 x 16
identity (f32): y[i, n] = 1 · decode(W[n, i]) exactly, since every other
product is 0 (rows n holding a NaN code are NaN throughout). Compares the
compiled kernel (comfyquant-run --target cpu) with an independent Python
decoder and with the reference path (--reference).
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

bindir = sys.argv[1]
run = os.path.join(bindir, "comfyquant-run")
tmp = tempfile.mkdtemp()


def decode(code, e4m3):
    s = -1.0 if code & 0x80 else 1.0
    if e4m3:
        e, m = (code >> 3) & 0xF, code & 0x7
        if e == 0xF and m == 0x7:
            return math.nan
        return s * (m / 8.0 * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7))
    e, m = (code >> 2) & 0x1F, code & 0x3
    if e == 0x1F:
        return math.nan if m else s * math.inf
    return s * (m / 4.0 * 2.0 ** -14 if e == 0 else (1 + m / 4.0) * 2.0 ** (e - 15))


failures = 0
eye = [1.0 if i == j else 0.0 for i in range(16) for j in range(16)]
x = os.path.join(tmp, "x.safetensors")
st.write(x, {"x": ("F32", [16, 16], struct.pack("<256f", *eye))})
for fmt, dtype, e4m3 in (("float8_e4m3fn", "F8_E4M3", True), ("float8_e5m2", "F8_E5M2", False)):
    ckpt = os.path.join(tmp, fmt + ".safetensors")
    conf = json.dumps({"format": fmt}).encode()
    st.write(ckpt, {
        "fc.comfy_quant": ("U8", [len(conf)], conf),
        "fc.weight": (dtype, [16, 16], bytes(range(256))),
        "fc.weight_scale": ("F32", [], struct.pack("<f", 1.0)),
        "fc.input_scale": ("F32", [], struct.pack("<f", 1.0)),
    })
    outs = {}
    for how in (["--target", "cpu"], ["--reference"]):
        y = os.path.join(tmp, fmt + how[0] + ".safetensors")
        subprocess.check_call([run, ckpt, "--module", "fc", "--input", x, "-o", y] + how)
        outs[how[0]] = st.read(y)[0]["y"][2]
    got = st.floats(outs["--target"])
    bad = 0
    for i in range(16):      # activation row i picks weight column k = i
        for n in range(16):
            code = 16 * n + i
            row_nan = any(math.isnan(decode(16 * n + k, e4m3)) for k in range(16))
            want = math.nan if row_nan else decode(code, e4m3)
            v = got[16 * i + n]
            same = (math.isnan(v) and math.isnan(want)) or v == want
            if not same:
                bad += 1
                if bad <= 5:
                    print("FAIL %s code 0x%02x: compiled %r, expected %r" % (fmt, code, v, want))
    ref = st.floats(outs["--reference"])
    for j, (a, b) in enumerate(zip(got, ref)):
        # NaN payloads may differ; every other value bit for bit.
        if not ((math.isnan(a) and math.isnan(b)) or
                struct.pack("<f", a) == struct.pack("<f", b)):
            print("FAIL %s y[%d]: compiled %r, reference %r" % (fmt, j, a, b))
            bad += 1
    print("%s %s: 256 codes%s" % ("FAIL" if bad else "PASS", fmt, "" if bad else " bit-exact"))
    failures += bad
sys.exit(1 if failures else 0)
