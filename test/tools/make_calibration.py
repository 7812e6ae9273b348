"""Writes calibration rows: make_calibration.py OUT MODULE ROWS K [HOT]

Tensor MODULE (F32 [ROWS, K]): a fixed-seed LCG in [-1, 1), with the first
HOT columns (default 8) scaled by 30 (the outlier channels AWQ is for).
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

out, module, rows, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
hot = int(sys.argv[5]) if len(sys.argv) > 5 else 8
state = 12345
vals = []
for r in range(rows):
    for c in range(k):
        state = (state * 1103515245 + 12345) % (1 << 31)
        v = state / float(1 << 30) - 1.0
        vals.append(v * (30.0 if c < hot else 1.0))
st.write(out, {module: ("F32", [rows, k], struct.pack("<%df" % len(vals), *vals))})
