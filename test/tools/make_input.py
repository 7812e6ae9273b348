"""Writes x: make_input.py OUT DTYPE DIM... [--random]

DTYPE F32, BF16 or F16: (i % 13 - 6) / 4 (exact in every dtype, so every
sum is exact), or with --random a fixed-seed LCG in [-2, 2) with 7 fraction
bits in bf16, 10 in f16, 23 in f32 (exact in the dtype; sums then round, so
summation order shows). DTYPE I64: indices (i * 7) % DIM[-1].
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

args = [a for a in sys.argv[1:] if a != "--random"]
random = len(args) != len(sys.argv) - 1
path, dtype = args[0], args[1]
shape = [int(v) for v in args[2:]]
n = 1
for d in shape:
    n *= d
if dtype == "I64":
    raw = struct.pack("<%dq" % n, *[(i * 7) % shape[-1] for i in range(n)])
else:
    if random:
        bits = {"F32": 23, "F16": 10, "BF16": 7}[dtype]
        state, vals = 0x9E3779B9, []
        for _ in range(n):
            state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
            # A multiple of 2^-bits in [-2, 2): at most bits + 1 significant
            # bits, which the dtype holds.
            vals.append(((state >> 8) % (4 << bits) - (2 << bits)) / float(1 << bits))
    else:
        vals = [((i % 13) - 6) / 4.0 for i in range(n)]
    if dtype == "F32":
        raw = struct.pack("<%df" % n, *vals)
    elif dtype == "F16":
        raw = struct.pack("<%de" % n, *vals)
    else:  # BF16: truncation, the values are exact in bf16
        raw = b"".join(struct.pack("<f", v)[2:] for v in vals)
st.write(path, {"x": (dtype, shape, raw)})
