"""Writes small sources for the quantizer's edge-case tests into DIR:

  inf.safetensors       layer.weight F32 [16, 256] with one +inf
  f16small.safetensors  layer.weight F16 [16, 64], amax 0.5 (e5m2: 1/s
                        overflows F16)
  longname.safetensors  a 2-D weight whose name is 3000 characters long
  aux.safetensors       x.weight BF16 [16, 64] beside x.weight_scale F32 []
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

out = sys.argv[1]


def values(n, scale):
    state, vals = 99, []
    for _ in range(n):
        state = (state * 1103515245 + 12345) % (1 << 31)
        vals.append((state / float(1 << 30) - 1.0) * scale)
    return vals


v = values(16 * 256, 0.05)
v[77] = float("inf")
st.write(os.path.join(out, "inf.safetensors"),
         {"layer.weight": ("F32", [16, 256], struct.pack("<%df" % len(v), *v))})
h = values(16 * 64, 0.5)
st.write(os.path.join(out, "f16small.safetensors"),
         {"layer.weight": ("F16", [16, 64], struct.pack("<%de" % len(h), *h))})
name = "blocks." + "x" * 3000 + ".weight"
st.write(os.path.join(out, "longname.safetensors"),
         {name: ("F32", [2, 64], struct.pack("<128f", *values(128, 0.1)))})
b = values(16 * 64, 0.1)
bf = b"".join(struct.pack("<f", x)[2:] for x in b)
st.write(os.path.join(out, "aux.safetensors"),
         {"x.weight": ("BF16", [16, 64], bf), "x.weight_scale": ("F32", [], struct.pack("<f", 1.0))})
