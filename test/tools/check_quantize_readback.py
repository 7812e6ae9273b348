"""lit helper: what comfyquant-quantize writes, read back by comfy-kitchen.

  check_quantize_readback.py BIN DIR WORKDIR [--mutate]

DIR is test/fixtures/quantize_readback (made by test/fixtures/
generate_quantize_readback.py): source.safetensors, the tool's output per
format (<F>.safetensors), formats.json (the quantize arguments, the modules
and their logical shapes) and kitchen_dequantized.safetensors, where tensor
`<F>/<module>` is the F32 weight comfy-kitchen 0.2.40 decodes from that file
when it is loaded the way ComfyUI loads it. No torch is needed here.

For each format F:
  1. comfyquant-quantize DIR/source.safetensors is run again with F's
     arguments into WORKDIR and must give DIR/<F>.safetensors byte for byte
     (`cmp`), so kitchen's committed read-back still describes what the tool
     writes today. The one difference let through (and reported as a NOTE)
     is the tool version inside the `comfyquant_quantize` metadata entry:
     kitchen does not read it, and a version bump should not need torch to
     regenerate the fixture.
  2. For each module M: `comfyquant-run DIR/<F>.safetensors --module M
     --dequantize --dtype f32 --shape M=NxK` (our reference dequantization;
     --shape gives the logical shape as a model definition does, since padded
     NVFP4/MXFP8 storage does not state it) against kitchen's tensor:
       * formats without ConvRot (fp8, int8 per row / per tensor, nvfp4,
         mxfp8): bit-identical. Both decode to f32 with one rounding per
         product (kitchen: q.float() * scale; nvfp4 e2m1 * f32(scale_2 * d);
         mxfp8 e4m3 * 2^e), so there is no tolerance to give;
       * ConvRot formats (int8-convrot, w4a4, int4-convrot, w4a8, w6a8):
         kitchen un-rotates with an f32 matmul (MKL/oneDNN sum order), ours
         in a fixed order, so the results may differ in the last bits. Bound
         per element: |ours - kitchen| <= 8 * 2^-24 * ||g||_2, g the
         element's ConvRot group of kitchen's dequantized row. ||g||_2 equals
         the rotated group's 2-norm (H is orthogonal) and majorizes
         S = sum_i |Wrot_i * H_ji| = sum_i |Wrot_i| / sqrt(G), the scale of
         the sum's rounding error; c = 8 is the `unrotation_vs_kitchen` bound
         of tolerances.json (check_fixtures.py).
     Each line reports the max abs difference and the relative RMSE
     (||ours - kitchen||_2 / ||kitchen||_2).
Prints one PASS/FAIL line per file and per module, then "N files, F failed"
and "N modules, F failed"; exit 1 on any failure.

--mutate multiplies the largest-magnitude element of each of kitchen's
tensors by 1.01 before the comparison (far outside every bound): every
module must then FAIL.
"""
import json
import math
import os
import subprocess
import sys
from array import array

sys.path.insert(0, os.path.dirname(__file__))
import compare as cmp  # noqa: E402
import safetensors_util as st  # noqa: E402

argv = [a for a in sys.argv[1:] if a != "--mutate"]
mutate = len(argv) != len(sys.argv) - 1
if len(argv) != 3:
    sys.exit(__doc__)
bin_dir, fixture_dir, work = argv
os.makedirs(work, exist_ok=True)
spec = json.load(open(os.path.join(fixture_dir, "formats.json")))
kitchen, kitchen_meta = st.read(os.path.join(fixture_dir, "kitchen_dequantized.safetensors"))
source = os.path.join(fixture_dir, "source.safetensors")
UNROTATION_C = cmp.tolerance("unrotation_vs_kitchen", "*", "F32")[1]   # 8


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (os.path.basename(args[0]), r.returncode,
                                                 r.stderr.strip()[-400:]))
    return r.stdout


def floats(raw):
    a = array("f")
    a.frombytes(raw)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def same_but_version(got_path, want_path):
    """None when the files differ in more than the tool version of the
    `comfyquant_quantize` metadata entry, else a note naming the versions."""
    got, gmeta = st.read(got_path)
    want, wmeta = st.read(want_path)
    if got != want or set(gmeta) != set(wmeta):
        return None
    note = None
    for key in gmeta:
        if gmeta[key] == wmeta[key]:
            continue
        if key != "comfyquant_quantize":
            return None
        g, w = json.loads(gmeta[key]), json.loads(wmeta[key])
        gv, wv = g.pop("version", None), w.pop("version", None)
        if g != w:
            return None
        note = "tool version %s, fixture written by %s" % (gv, wv)
    return note


def convrot_group(conf):
    """The ConvRot group of a comfy_quant marker, or None without ConvRot."""
    fmt = conf["format"]
    if fmt == "int8_tensorwise" and not conf.get("convrot"):
        return None
    if fmt in ("int8_tensorwise", "convrot_w4a4", "asym_w4a8_int8", "w6a8_int8"):
        return int(conf.get("convrot_groupsize", 256))
    return None


failed = 0          # modules
files_failed = 0
modules = 0
for fmt, args in spec["quantize_args"].items():
    committed = os.path.join(fixture_dir, fmt + ".safetensors")
    fresh = os.path.join(work, fmt + ".safetensors")
    # 1. the tool still writes the committed bytes
    try:
        run([os.path.join(bin_dir, "comfyquant-quantize"), source, "-o", fresh, "--overwrite",
             "--quiet"] + args)
        if open(fresh, "rb").read() == open(committed, "rb").read():
            print("PASS %s: comfyquant-quantize writes %s.safetensors byte for byte" % (fmt, fmt))
        else:
            note = same_but_version(fresh, committed)
            if note is None:
                raise RuntimeError("comfyquant-quantize now writes other bytes than %s.safetensors "
                                   "(regenerate with test/fixtures/generate_quantize_readback.py)" % fmt)
            print("PASS %s: comfyquant-quantize writes %s.safetensors byte for byte except the "
                  "metadata version (NOTE: %s)" % (fmt, fmt, note))
    except (RuntimeError, OSError) as e:
        print("FAIL %s: %s" % (fmt, e))
        files_failed += 1
    # 2. our dequantization of the committed file against kitchen's read-back
    tensors, _ = st.read(committed)
    for module, (n, k) in spec["modules"].items():
        modules += 1
        label = "%s %s" % (fmt, module)
        try:
            conf = json.loads(tensors[module + ".comfy_quant"][2])
            kdt, kshape, kraw = kitchen["%s/%s" % (fmt, module)]
            if kdt != "F32" or kshape != [n, k]:
                raise RuntimeError("kitchen tensor is %s %s, expected F32 %s" % (kdt, kshape, [n, k]))
            want = floats(kraw)
            if mutate:
                i = max(range(len(want)), key=lambda j: abs(want[j]))
                want[i] *= 1.01
            out = os.path.join(work, "%s.%s.safetensors" % (fmt, module))
            run([os.path.join(bin_dir, "comfyquant-run"), committed, "--module", module,
                 "--dequantize", "-o", out, "--dtype", "f32", "--shape", "%s=%dx%d" % (module, n, k),
                 "--overwrite"])
            odt, oshape, oraw = st.read(out)[0]["weight"]
            if odt != "F32" or oshape != [n, k]:
                raise RuntimeError("comfyquant-run wrote %s %s, expected F32 %s" % (odt, oshape, [n, k]))
            got = floats(oraw)
            diff = [abs(a - b) for a, b in zip(got, want)]
            max_abs = max(diff)
            ref = math.sqrt(sum(b * b for b in want))
            rel_rmse = math.sqrt(sum(d * d for d in diff)) / ref if ref > 0 else float("inf")
            stats = "max |diff| %.3g, rel. RMSE %.3g" % (max_abs, rel_rmse)
            if not all(math.isfinite(v) for v in got) or not all(math.isfinite(v) for v in want):
                raise RuntimeError("non-finite values (%s)" % stats)
            g = convrot_group(conf)
            if g is None:
                r = cmp.compare_exact(got.tobytes(), want.tobytes(), 4)
                if not r.ok:
                    raise RuntimeError("not bit-identical to kitchen: %s; %s" % (r.summary(), stats))
                print("PASS %s: %s: bit-identical (%s)" % (label, conf["format"], stats))
            else:
                bound = []
                for r0 in range(0, n * k, g):
                    norm = math.sqrt(sum(v * v for v in want[r0:r0 + g]))
                    bound += [UNROTATION_C * cmp.F32_UNIT * norm] * g
                worst = 0.0
                bad = [i for i in range(n * k) if diff[i] > bound[i]]
                for i in range(n * k):
                    if bound[i] > 0:
                        worst = max(worst, diff[i] / bound[i])
                    elif diff[i] > 0:
                        worst = math.inf
                if bad:
                    raise RuntimeError("%d of %d elements beyond %g * 2^-24 * ||group||_2 (first at "
                                       "%d: %r vs kitchen %r); %s" % (len(bad), n * k, UNROTATION_C,
                                                                      bad[0], got[bad[0]], want[bad[0]], stats))
                print("PASS %s: %s, ConvRot group %d: within %g * 2^-24 * ||group||_2 (worst %.2f of "
                      "bound, %d elements differ; %s)" % (label, conf["format"], g, UNROTATION_C, worst,
                                                          sum(1 for d in diff if d), stats))
        except (RuntimeError, KeyError, ValueError, OSError) as e:
            print("FAIL %s: %s" % (label, e))
            failed += 1
print("%d files, %d failed" % (len(spec["quantize_args"]), files_failed))
print("%d modules, %d failed" % (modules, failed))
sys.exit(1 if failed or files_failed else 0)
