"""Minimal stdlib safetensors reader for the lit drivers (no numpy/torch)."""
import json
import struct


def read(path):
    """Returns ({name: (dtype, shape, bytes)}, metadata)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], data[base + b:base + e])
    return out, meta


def floats(raw):
    return struct.unpack("<%df" % (len(raw) // 4), raw)
