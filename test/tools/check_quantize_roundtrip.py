"""lit helper: quantize -> verify -> inspect -> compile and run, per format.

  check_quantize_roundtrip.py BIN SOURCE MODULE K WORKDIR FORMAT...

For each FORMAT (a --format name): comfyquant-quantize SOURCE (--validate),
comfyquant-quantize --verify-output with --source (registry rules, finite
scales, error within 0.3 relative RMSE), comfyquant-translate --inspect, then
MODULE run on x [3, K] by kernels compiled for this CPU and by the reference
path, compared with compare_outputs.py under the format's tolerance. Prints
one PASS/FAIL line per format; exit 1 on any failure.
"""
import json
import os
import subprocess
import sys

bin_dir, source, module, k, work = sys.argv[1:6]
formats = sys.argv[6:]
here = os.path.dirname(__file__)
py = sys.executable


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(" ".join(args[:3]) + ": " + r.stderr.strip()[-400:])
    return r.stdout


x = os.path.join(work, "x.safetensors")
run([py, os.path.join(here, "make_input.py"), x, "F32", "3", k])
failed = 0
for f in formats:
    out = os.path.join(work, f + ".safetensors")
    try:
        run([os.path.join(bin_dir, "comfyquant-quantize"), source, "--format", f, "-o", out,
             "--validate", "--quiet", "--overwrite"])
        run([os.path.join(bin_dir, "comfyquant-quantize"), "--verify-output", out, "--source",
             source, "--error-bound", "0.3"])
        inspect = json.loads(run([os.path.join(bin_dir, "comfyquant-translate"), "--inspect",
                                  out, "--json"]))
        fmt = [m for m in inspect["modules"] if m["name"] == module][0]["format"]
        ys = []
        for mode in (["--target", "cpu"], ["--reference"]):
            y = os.path.join(work, "%s.%s.safetensors" % (f, mode[-1].strip("-")))
            run([os.path.join(bin_dir, "comfyquant-run"), out, "--module", module, "--input", x,
                 "-o", y, "--overwrite"] + mode)
            ys.append(y)
        res = subprocess.run([py, os.path.join(here, "compare_outputs.py"), ys[0], ys[1], fmt],
                             capture_output=True, text=True)
        print("%s %s: %s" % ("PASS" if res.returncode == 0 else "FAIL", f, res.stdout.strip()))
        failed += res.returncode != 0
    except RuntimeError as e:
        print("FAIL %s: %s" % (f, e))
        failed += 1
sys.exit(1 if failed else 0)
