"""Writes x: <dtype> <shape...> (F32, BF16, F16) filled with (i % 13 - 6) / 4
(exact in every dtype), or I64 indices (i * 7) % shape[-1]."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

path, dtype = sys.argv[1], sys.argv[2]
shape = [int(v) for v in sys.argv[3:]]
n = 1
for d in shape:
    n *= d
if dtype == "I64":
    raw = struct.pack("<%dq" % n, *[(i * 7) % shape[-1] for i in range(n)])
else:
    vals = [((i % 13) - 6) / 4.0 for i in range(n)]
    if dtype == "F32":
        raw = struct.pack("<%df" % n, *vals)
    elif dtype == "F16":
        raw = struct.pack("<%de" % n, *vals)
    else:  # BF16: the values are exact in bf16
        raw = b"".join(struct.pack("<f", v)[2:] for v in vals)
st.write(path, {"x": (dtype, shape, raw)})
