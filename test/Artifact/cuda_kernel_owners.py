"""lit helper: which kernels each CUDA entry shares with earlier entries,
which one runs its GEMM, and whether an image holds a kernel twice.

  cuda_kernel_owners.py ARTIFACT [ARCH]

For every cuda entry of ARCH (default sm_80) it prints
"<dtype> kernels <n> shared <s> mma <kernel> ptx-entries <e> stores <t>":
the length of its kernel list, how many of those carry another entry's
name, the kernel whose PTX body issues mma.sync ("none" if none does), how
many .entry functions of that name the PTX holds, and the st.global types
of that kernel (b16 for a bf16/f16 output, b32 for i32 or f32). Then
"duplicate-kernel-bodies <n>": how many .entry bodies equal another one
once the function's own name and its label numbering are left out.
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
        kernels = e["kernels"]
        shared = sum(1 for k in kernels if not k.startswith(e["host"] + "_"))
        mma = [k for k in kernels
               if any("mma.sync" in b for b in bodies.get(k, []))]
        stores = sorted({t for k in mma for b in bodies.get(k, [])
                         for t in re.findall(r"st\.global\.(\w+)", b)})
        print("%s kernels %d shared %d mma %s ptx-entries %d stores %s"
              % (e["dtype"], len(kernels), shared, ",".join(mma) or "none",
                 sum(len(bodies.get(k, [])) for k in mma),
                 ",".join(stores) or "none"))

seen = {}
duplicates = 0
for name, bs in bodies.items():
    for b in bs:
        key = normalized(name, b)
        duplicates += key in seen
        seen[key] = name
print("duplicate-kernel-bodies %d" % duplicates)
