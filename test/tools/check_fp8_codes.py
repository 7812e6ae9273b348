"""lit driver: every float8_e4m3fn / e5m2 weight code through the compiled
kernel, each checked by value.

Writes a 256 x 16 fp8 linear whose row n holds code n once, at column
n % 16, and +0 (code 0x00) everywhere else (weight and input scale 1.0), and
runs it on x = [[1]*16, [2]*16] and on its first row alone (a one-row call:
its own kernels), in f32 and in bf16 (1 and 2 are exact in fp8 and bf16, and
so is every product): y[r, n] = (r + 1) · decode(n) + 0 exactly, and no
output depends on a second code, so a NaN or infinite code is seen only in
its own output (NaN codes are expected NaN individually; -0 reads as +0
after the sum). Compares the compiled kernel (comfyquant-run --target cpu)
with an independent Python decoder and with the reference path
(--reference, bit for bit except NaN payloads).

With --tune CPU the module is compiled by comfyquant-compile --cpu-tune CPU
(the micro-kernels and decodes a tuned artifact takes) and run from it.

  check_fp8_codes.py BINDIR [--mutate nan|scale|truncate] [--tune CPU]
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import compare as cmp  # noqa: E402
import safetensors_util as st  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("bindir")
ap.add_argument("--mutate", default="")
ap.add_argument("--tune", default="")
args = ap.parse_args()
run = os.path.join(args.bindir, "comfyquant-run")
compile_ = os.path.join(args.bindir, "comfyquant-compile")
tmp = tempfile.mkdtemp()
N, K = 256, 16


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


def input_bytes(xdtype, values):
    if xdtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    # bf16: the high half of the f32 (exact for 1 and 2).
    return b"".join(struct.pack("<f", v)[2:] for v in values)


failures = 0
weight = bytearray(N * K)
for n in range(N):
    weight[n * K + n % K] = n
cases = [(fmt, dtype, e4m3, M, xdtype)
         for fmt, dtype, e4m3 in (("float8_e4m3fn", "F8_E4M3", True),
                                  ("float8_e5m2", "F8_E5M2", False))
         for xdtype in ("F32", "BF16") for M in (2, 1)]
for fmt, dtype, e4m3, M, xdtype in cases:
    x = os.path.join(tmp, "x%d%s.safetensors" % (M, xdtype))
    st.write(x, {"x": (xdtype, [M, K], input_bytes(xdtype, ([1.0] * K + [2.0] * K)[:M * K]))})
    ckpt = os.path.join(tmp, fmt + ".safetensors")
    conf = json.dumps({"format": fmt}).encode()
    st.write(ckpt, {
        "fc.comfy_quant": ("U8", [len(conf)], conf),
        "fc.weight": (dtype, [N, K], bytes(weight)),
        "fc.weight_scale": ("F32", [], struct.pack("<f", 1.0)),
        "fc.input_scale": ("F32", [], struct.pack("<f", 1.0)),
    })
    outs = {}
    compiled = ["--target", "cpu"]
    if args.tune:
        art = os.path.join(tmp, "art-%s-%s" % (fmt, args.tune))
        if not os.path.isdir(art):
            subprocess.check_call([compile_, ckpt, "--target", "cpu", "--dtypes", "f32,bf16",
                                   "--cpu-tune", args.tune, "-o", art, "--quiet"])
        compiled = ["--artifact", art]
    for how in (compiled, ["--reference"]):
        y = os.path.join(tmp, "%s%d%s%s.safetensors" % (fmt, M, xdtype, how[0]))
        subprocess.check_call([run, ckpt, "--module", "fc", "--input", x, "-o", y] + how)
        outs[how[0]] = st.read(y)[0]["y"]
    gdt, gshape, graw = outs[compiled[0]]
    gshape, graw = cmp.mutate(args.mutate, gdt, gshape, graw)
    got = cmp.decode(gdt, graw)
    want = [(r + 1) * decode(n, e4m3) for r in range(M) for n in range(N)]
    want = [v + 0.0 for v in want]  # the sum turns -0 into +0
    nan_code = lambda i: math.isnan(decode(i % N, e4m3))  # noqa: E731
    problem = cmp.shape_mismatch(gshape, [M, N], got, want)
    if problem:
        print("FAIL %s M=%d %s: compiled %s" % (fmt, M, xdtype, problem))
        failures += 1
        continue
    checks = [("decoder", cmp.compare(got, want, "F32", nan_ok=nan_code))]
    rdt, rshape, rraw = outs["--reference"]
    ref = cmp.decode(rdt, rraw)
    problem = cmp.shape_mismatch(rshape, [M, N], ref, want)
    checks.append(("reference", cmp.compare(got, ref, "F32", nan_ok=nan_code))
                  if not problem else ("reference", None))
    bad = False
    for what, r in checks:
        if r is None:
            print("FAIL %s: reference %s" % (fmt, problem))
            bad = True
        elif not r.ok:
            print("FAIL %s vs %s: %s" % (fmt, what, r.summary()))
            bad = True
    # Every code is seen: count the NaN, infinite and finite codes checked.
    nans = sum(1 for n in range(N) if math.isnan(decode(n, e4m3)))
    infs = sum(1 for n in range(N) if math.isinf(decode(n, e4m3)))
    print("%s %s M=%d %s: 256 codes by value (%d finite, %d infinite, %d NaN)%s" % (
        "FAIL" if bad else "PASS", fmt, M, xdtype, N - nans - infs, infs, nans,
        "" if bad else " bit-exact"))
    failures += bad
sys.exit(1 if failures else 0)
