"""lit helper: the `cuda_kernels` of `comfyquant-compile --json` against the
artifact. Every image with a cubin must list exactly the `.entry` kernels of
its PTX, each with at least one register, the block size the PTX records
(`.maxntid`), and non-negative spill and shared-memory counts; an image
without a cubin (no ptxas) lists none. Prints one line per arch, the
largest spill seen, and OK; or FAIL lines and exits 1.

  check_kernel_resources.py SUMMARY.json ARTIFACT
"""
import json
import os
import re
import sys

summary_path, art = sys.argv[1], sys.argv[2]
with open(summary_path) as f:
    summary = json.load(f)
with open(os.path.join(art, "manifest.json")) as f:
    manifest = json.load(f)

failures = []
kernels = summary.get("cuda_kernels")
if not isinstance(kernels, list):
    failures.append("no cuda_kernels list in the summary")
    kernels = []
by_arch = {}
for k in kernels:
    by_arch.setdefault(k.get("arch"), {})[k.get("kernel")] = k

images = manifest.get("backends", {}).get("cuda", {}).get("images", [])
if not images:
    failures.append("the artifact has no CUDA images")
spilled = (0, "")
for image in images:
    arch = image["arch"]
    listed = by_arch.pop(arch, {})
    if "cubin" not in image:
        if listed:
            failures.append("%s: kernels listed without a cubin" % arch)
        print(arch, "no cubin")
        continue
    with open(os.path.join(art, image["ptx"])) as f:
        ptx = f.read()
    # Each entry and the .maxntid that follows its parameter list.
    entries = {}
    for m in re.finditer(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(", ptx):
        tail = ptx[m.end():]
        body = tail.find("{")
        head = tail[:body if body >= 0 else len(tail)]
        ntid = re.search(r"\.(?:maxntid|reqntid)\s+(\d+)\s*,\s*(\d+)\s*,\s*(\d+)", head)
        entries[m.group(1)] = (int(ntid.group(1)) * int(ntid.group(2)) *
                               int(ntid.group(3))) if ntid else 0
    if set(listed) != set(entries):
        failures.append("%s: summary kernels %s, PTX entries %s" % (
            arch, sorted(set(listed) - set(entries)), sorted(set(entries) - set(listed))))
    for name, k in sorted(listed.items()):
        if not (isinstance(k.get("registers"), int) and k["registers"] >= 1):
            failures.append("%s %s: registers %r" % (arch, name, k.get("registers")))
        for field in ("spill_store_bytes", "spill_load_bytes", "shared_bytes"):
            if not (isinstance(k.get(field), int) and k[field] >= 0):
                failures.append("%s %s: %s %r" % (arch, name, field, k.get(field)))
        if name in entries and k.get("block_threads") != entries[name]:
            failures.append("%s %s: block_threads %r, PTX %d" % (
                arch, name, k.get("block_threads"), entries[name]))
        spill = k.get("spill_store_bytes", 0) + k.get("spill_load_bytes", 0)
        if isinstance(spill, int) and spill > spilled[0]:
            spilled = (spill, "%s %s" % (arch, name))
    print(arch, "kernels", len(listed))
for arch in by_arch:
    failures.append("kernels listed for %s, which has no image" % arch)
print("largest spill", spilled[0], spilled[1])
for f in failures:
    print("FAIL", f)
print("OK" if not failures else "FAILED")
sys.exit(1 if failures else 0)
