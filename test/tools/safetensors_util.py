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


def write(path, tensors, metadata=None):
    """tensors: {name: (dtype, shape, bytes)}; contiguous, in the given order."""
    import json as _json
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = _json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
