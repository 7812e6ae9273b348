"""Writes a ptxas wrapper for tests: the real ptxas on a copy of the PTX
whose every kernel is capped at N registers (.maxnreg N beside its
.maxntid), so kernels that need more spill.

  capped_ptxas.py OUT N

The real ptxas is the one on PATH, else $CUDA_HOME/bin/ptxas, else
/usr/local/cuda/bin/ptxas (the compiler's own search order).
"""
import os
import shutil
import sys

WRAPPER = '''#!{python}
import os, re, sys, tempfile
args = sys.argv[1:]
for i, a in enumerate(args):
    if a.endswith(".ptx"):
        text = re.sub(r"^(\\.maxntid [^\\n]*)$", r"\\1\\n.maxnreg {n}", open(a).read(),
                      flags=re.M)
        # Beside the wrapper (the test's own directory), not in /tmp.
        fd, capped = tempfile.mkstemp(suffix=".ptx",
                                      dir=os.path.dirname(os.path.abspath(sys.argv[0])))
        with os.fdopen(fd, "w") as f:
            f.write(text)
        args[i] = capped
os.execv({ptxas!r}, [{ptxas!r}] + args)
'''


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    ptxas = shutil.which("ptxas") or os.path.join(
        os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas")
    with open(out, "w") as f:
        f.write(WRAPPER.format(python=sys.executable, n=n, ptxas=ptxas))
    os.chmod(out, 0o755)


if __name__ == "__main__":
    main()
