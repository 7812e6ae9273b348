"""lit helper: the kernels a fake-driver log launched against one manifest
entry.

  launches_of.py FAKE_CUDA_LOG MANIFEST DTYPE

The log's launches must be the `kernels` of the single cuda entry of DTYPE
in MANIFEST, in that order, but for kernels whose grid is empty at this M
(the runtime skips those: a GEMM's decode-once kernels and its copy below
`decode_rows`, the fused kernel from it). Prints "launches follow the DTYPE
entry: <launched> of <listed> kernels, <s> shared" (s: kernels named after
another entry), then "not launched: <names>" when some were skipped, or a
line starting "mismatch" and exits 1.
"""
import json
import re
import sys

log, manifest_path, dtype = sys.argv[1:4]
with open(log) as f:
    launched = re.findall(r"^launch (\S+) ", f.read(), re.M)
with open(manifest_path) as f:
    manifest = json.load(f)
entries = [e for mod in manifest["modules"] for e in mod["entries"]
           if e.get("backend") == "cuda" and e["dtype"] == dtype]
if len(entries) != 1:
    sys.exit("mismatch: %d cuda entries of %s" % (len(entries), dtype))
listed = entries[0]["kernels"]
# Launched in the listed order, each listed kernel at most once.
rest = iter(listed)
if len(set(launched)) != len(launched) or \
        not all(any(k == l for l in rest) for k in launched):
    print("mismatch: launched %s, listed %s" % (launched, listed))
    sys.exit(1)
own = entries[0]["host"]
shared = sum(1 for k in listed if not k.startswith(own + "_"))
print("launches follow the %s entry: %d of %d kernels, %d shared"
      % (dtype, len(launched), len(listed), shared))
skipped = [k for k in listed if k not in launched]
if skipped:
    print("not launched: " + " ".join(skipped))
