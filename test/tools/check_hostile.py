"""lit driver: every hostile input fails with its named diagnostic.

test/hostile/{container,module}/EXPECTED.txt list one file per line:
    container:  <file> TAB <rule substring>
    module:     <file> TAB <module or tensor name> TAB <rule substring>
For each file, every tool (`comfyquant-translate --inspect`,
`--import-checkpoint`, `comfyquant-run --dequantize`, `comfyquant-compile`)
must exit with status 1
(not 0, not a signal), print the file path, the name and the rule on stderr
(literal substrings), write no output, and leave the file's bytes unchanged.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

bindir, hostile = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
total = failures = 0


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


for sub in ("container", "module"):
    folder = os.path.join(hostile, sub)
    with open(os.path.join(folder, "EXPECTED.txt"), encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    for line in lines:
        parts = line.split("\t")
        name, rule = parts[0], parts[-1]
        subject = parts[1] if len(parts) == 3 else None
        path = os.path.join(folder, name)
        before = sha(path)
        out = os.path.join(tmp, "out.safetensors")
        cmds = [
            [os.path.join(bindir, "comfyquant-translate"), "--inspect", path],
            [os.path.join(bindir, "comfyquant-translate"), "--import-checkpoint",
             path, "-o", out],
            [os.path.join(bindir, "comfyquant-run"), path, "--module",
             subject or "m", "--dequantize", "-o", out],
            [os.path.join(bindir, "comfyquant-compile"), path, "--target", "cpu",
             "--variants", "x86-64-v3", "--dtypes", "f32", "-o", out],
        ]
        problems = []
        for cmd in cmds:
            p = subprocess.run(cmd, capture_output=True, text=True,
                               errors="replace")
            tool = os.path.basename(cmd[0])
            if p.returncode != 1:
                problems.append("%s exit %d" % (tool, p.returncode))
                continue
            if cmd is cmds[2] and sub == "module" and subject and \
                    "no such quantized module" in p.stderr:
                continue  # the subject is a tensor or metadata, not a module
            # Look for the name and the rule after the path, so a file name
            # cannot satisfy them.
            err = p.stderr.replace(path, "<FILE>", 1)
            if "<FILE>" not in err:
                problems.append("%s: path missing: %s" % (tool, p.stderr.strip()))
            elif subject and subject not in err.split("<FILE>", 1)[1]:
                problems.append("%s: name %r missing: %s" % (tool, subject, p.stderr.strip()))
            elif rule not in err.split("<FILE>", 1)[1]:
                problems.append("%s: rule %r missing: %s" % (tool, rule, p.stderr.strip()))
            if os.path.exists(out):
                problems.append("%s wrote an output" % tool)
                if os.path.isdir(out):
                    shutil.rmtree(out)
                else:
                    os.remove(out)
        if sha(path) != before:
            problems.append("source file modified")
        total += 1
        if problems:
            failures += 1
            print("FAIL %s/%s: %s" % (sub, name, "; ".join(problems)))
        else:
            print("PASS %s/%s: %s" % (sub, name, rule))
print("%d hostile files, %d failed" % (total, failures))
sys.exit(1 if failures else 0)
