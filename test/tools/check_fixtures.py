"""lit driver: every comfy-kitchen fixture imports, inspects and dequantizes
through the command-line tools.

For each entry of test/fixtures/fixtures.json:
  * `comfyquant-translate --inspect --json` reports the module with the kind,
    format, out_features, in_features and experts kitchen used (padded
    NVFP4/MXFP8 storage without bias states no logical shape: the report must
    then give the padded shape, and `--shape` the real one);
  * `comfyquant-translate --import-checkpoint --module` prints IR that
    `comfyquant-opt` parses and verifies (every registry rule re-checked);
  * `comfyquant-run --dequantize` writes tensor `weight`, F32, logical shape,
    bit-identical to kitchen where docs/Formats.md §10 defines the result, within
    the fixture's stated atol for ConvRot un-rotation sums.
Prints one line per module and exits non-zero on any failure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import compare as cmp  # noqa: E402
import safetensors_util as st  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("bindir")
ap.add_argument("fixtures")
ap.add_argument("--mutate", default="")
args = ap.parse_args()
bindir, fixtures = args.bindir, args.fixtures
tool = lambda name: os.path.join(bindir, name)


def run(cmd, stdin=None):
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("%s -> exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr))
    return p.stdout


entries = json.load(open(os.path.join(fixtures, "fixtures.json")))
failures = 0
tmp = tempfile.mkdtemp()
for i, fx in enumerate(entries):
    path = os.path.join(fixtures, fx["file"])
    module = fx["module"]
    try:
        report = json.loads(run([tool("comfyquant-translate"), "--inspect", "--json", path]))
        mods = {m["name"]: m for m in report["modules"]}
        m = mods[module]
        extra = []
        n, k = fx["out_features"], fx["in_features"]
        if (m["out_features"], m["in_features"]) != (n, k):
            assert fx["format"] in ("nvfp4", "mxfp8"), "shape %s" % m
            pad = 16 if fx["format"] == "nvfp4" else 32
            up = lambda x: (x + pad - 1) // pad * pad
            assert (m["out_features"], m["in_features"]) == (up(n), up(k)), m
            extra = ["--shape", "%s=%dx%d" % (module, n, k)]
            m = {x["name"]: x for x in json.loads(run(
                [tool("comfyquant-translate"), "--inspect", "--json", path] + extra))["modules"]}[module]
        for key, want in (("kind", fx["kind"]), ("format", fx["format"]),
                          ("out_features", n), ("in_features", k),
                          ("experts", fx["experts"])):
            assert m[key] == want, "%s: %r != %r" % (key, m[key], want)
        if not args.mutate:  # mutations test the value check only
            ir = run([tool("comfyquant-translate"), "--import-checkpoint", path,
                      "--module", module] + extra)
            run([tool("comfyquant-opt")], stdin=ir)
        out = os.path.join(tmp, "w%d.safetensors" % i)
        if os.path.exists(out):
            os.remove(out)
        run([tool("comfyquant-run"), path, "--module", module, "--dequantize",
             "-o", out] + extra)
        got, _ = st.read(out)
        dtype, shape, raw = got["weight"]
        shape, raw = cmp.mutate(args.mutate, dtype, shape, raw)
        want_t, _ = st.read(os.path.join(fixtures, fx["expected"]))
        wdtype, wshape, wraw = want_t[module]
        a, b = cmp.decode(dtype, raw), cmp.decode(wdtype, wraw)
        problem = "dtype %s" % dtype if dtype != "F32" else cmp.shape_mismatch(shape, wshape, a, b)
        assert not problem, problem
        if fx["exact"]:
            r = cmp.compare_exact(raw, wraw, 4)
            assert r.ok, "dequantized bits differ from comfy-kitchen: " + r.summary()
            how = "bit-exact"
        else:
            rot_t, _ = st.read(os.path.join(fixtures, fx["expected_rotated"]))
            rot = cmp.decode("F32", rot_t[module][2])
            assert len(rot) == len(b), "expected_rotated has %d elements" % len(rot)
            g = fx["convrot_groupsize"]
            s_abs = []
            for g0 in range(0, len(rot), g):
                s = sum(abs(v) for v in rot[g0:g0 + g]) / g ** 0.5
                s_abs += [s] * g
            ulps, c = cmp.tolerance("unrotation_vs_kitchen", fx["format"], "F32")
            r = cmp.compare(a, b, "F32", ulps, c, s_abs)
            assert r.ok, r.summary()
            how = "un-rotation %s (bound %g u32*S)" % (r.summary(), c)
        print("PASS %s :: %s (%s %s %s)" % (fx["file"], module, fx["kind"], fx["format"], how))
    except Exception as e:  # noqa: BLE001 - report every fixture
        failures += 1
        print("FAIL %s :: %s: %s" % (fx["file"], module, e))
print("%d modules, %d failed" % (len(entries), failures))
sys.exit(1 if failures else 0)
