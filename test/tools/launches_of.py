"""lit helper: the kernels a fake-driver log launched against one manifest
entry.

  launches_of.py FAKE_CUDA_LOG MANIFEST DTYPE

The log's launches (in order) must be exactly the `kernels` of the single
cuda entry of DTYPE in MANIFEST. Prints "launches follow the DTYPE entry:
<launched> of <listed> kernels, <s> shared" (s: kernels named after another
entry) or a line starting "mismatch" and exits 1.
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
if launched != listed:
    print("mismatch: launched %s, listed %s" % (launched, listed))
    sys.exit(1)
own = entries[0]["host"]
shared = sum(1 for k in listed if not k.startswith(own + "_"))
print("launches follow the %s entry: %d of %d kernels, %d shared"
      % (dtype, len(launched), len(listed), shared))
