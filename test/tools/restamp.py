"""Copies a safetensors file with one more __metadata__ entry: same tensors,
different header (so a different checkpoint identity)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

tensors, meta = st.read(sys.argv[1])
meta = dict(meta)
meta["restamped"] = "1"
st.write(sys.argv[2], tensors, meta)
