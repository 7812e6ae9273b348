"""lit helper for the PTX tests.

  check_cuda_ptx.py split EMITTED OUT_DIR
      Splits `comfyquant-compile --emit=ptx` output (a "// <arch>" line
      before each arch's PTX, a blank line after it) into OUT_DIR/<arch>.ptx,
      to compare with the artifact's cuda/<arch>.ptx; prints the archs.
  check_cuda_ptx.py checks ARTIFACT ARCH
      Prints FileCheck directives: one `CHECK-DAG: .entry NAME(` per kernel
      name of the cuda entries of ARCH in the manifest (a kernel shared by
      several entries once), so that FileCheck proves every name the runtime
      will look up is an `.entry` of that PTX.
"""
import json
import os
import re
import sys


def split(emitted, out_dir):
    with open(emitted) as f:
        text = f.read()
    parts = re.split(r"^// (sm_\w+)\n", text, flags=re.M)
    if parts[0].strip():
        sys.exit("check_cuda_ptx.py: text before the first '// sm_' line")
    os.makedirs(out_dir, exist_ok=True)
    for arch, body in zip(parts[1::2], parts[2::2]):
        if body.endswith("\n\n"):  # the blank line --emit=ptx prints after each
            body = body[:-1]
        with open(os.path.join(out_dir, arch + ".ptx"), "w") as f:
            f.write(body)
        print(arch)


def checks(artifact, arch):
    with open(os.path.join(artifact, "manifest.json")) as f:
        manifest = json.load(f)
    names = [k for mod in manifest["modules"] for e in mod["entries"]
             if e.get("backend") == "cuda" and e["arch"] == arch for k in e["kernels"]]
    if not names:
        sys.exit("check_cuda_ptx.py: no cuda entry for %s in %s" % (arch, artifact))
    for k in dict.fromkeys(names):
        print("CHECK-DAG: .entry %s(" % k)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "split":
        split(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "checks":
        checks(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
