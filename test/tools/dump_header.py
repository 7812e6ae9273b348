"""Prints `name DTYPE [shape]` per tensor and the sorted metadata."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

tensors, meta = st.read(sys.argv[1])
for name, (dtype, shape, _) in sorted(tensors.items()):
    print(name, dtype, "[" + ", ".join(map(str, shape)) + "]")
print(" ".join("%s=%s" % kv for kv in sorted(meta.items()) if kv[0] != "source"))
