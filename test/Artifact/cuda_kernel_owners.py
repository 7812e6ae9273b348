"""lit helper: which kernel each CUDA entry launches for its GEMM, and
whether an image holds the same kernel twice.

  cuda_kernel_owners.py ARTIFACT [ARCH]

For every cuda entry of ARCH (default sm_80) it prints
"<dtype> mma <kernel> ptx-entries <n>": the entry's kernel whose PTX body
issues mma.sync, and how many .entry functions of that name the PTX holds.
Then "duplicate-kernel-bodies <n>": how many .entry bodies equal another
one once the function's own name and its label numbering are left out.
"""
import json
import os
import re
import sys

art = sys.argv[1]
arch = sys.argv[2] if len(sys.argv) > 2 else "sm_80"
with open(os.path.join(art, "manifest.json")) as f:
    manifest = json.load(f)
with open(os.path.join(art, "cuda", arch + ".ptx")) as f:
    ptx = f.read()

# name -> list of bodies (a name defined twice would show up as 2).
bodies = {}
for m in re.finditer(r"\.entry (\w+)\((.*?)\n}\n", ptx, re.S):
    bodies.setdefault(m.group(1), []).append(m.group(2))


def normalized(name, body):
    body = body.replace(name, "KERNEL")
    return re.sub(r"\$L__BB\d+_", "$L__BB_", body)


for mod in manifest["modules"]:
    for e in mod["entries"]:
        if e.get("backend") != "cuda" or e.get("arch") != arch:
            continue
        mma = [k for k in e["kernels"]
               if any("mma.sync" in b for b in bodies.get(k, []))]
        for k in mma:
            print("%s mma %s ptx-entries %d" % (e["dtype"], k, len(bodies[k])))
        if not mma:
            print("%s mma none" % e["dtype"])

seen = {}
duplicates = 0
for name, bs in bodies.items():
    for b in bs:
        key = normalized(name, b)
        duplicates += key in seen
        seen[key] = name
print("duplicate-kernel-bodies %d" % duplicates)
