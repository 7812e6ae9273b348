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
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

bindir, fixtures = sys.argv[1], sys.argv[2]
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
        ir = run([tool("comfyquant-translate"), "--import-checkpoint", path,
                  "--module", module] + extra)
        run([tool("comfyquant-opt")], stdin=ir)
        out = os.path.join(tmp, "w%d.safetensors" % i)
        run([tool("comfyquant-run"), path, "--module", module, "--dequantize",
             "-o", out] + extra)
        got, _ = st.read(out)
        dtype, shape, raw = got["weight"]
        want_t, _ = st.read(os.path.join(fixtures, fx["expected"]))
        wdtype, wshape, wraw = want_t[module]
        assert dtype == "F32" and shape == wshape, (dtype, shape, wshape)
        if fx["exact"]:
            assert raw == wraw, "dequantized bytes differ from comfy-kitchen"
            how = "bit-exact"
        else:
            a, b = st.floats(raw), st.floats(wraw)
            err = max(abs(x - y) for x, y in zip(a, b))
            assert err <= fx["atol"], "max |diff| %g > atol %g" % (err, fx["atol"])
            how = "max |diff| %.3g <= atol %.3g" % (err, fx["atol"])
        print("PASS %s :: %s (%s %s %s)" % (fx["file"], module, fx["kind"], fx["format"], how))
    except Exception as e:  # noqa: BLE001 - report every fixture
        failures += 1
        print("FAIL %s :: %s: %s" % (fx["file"], module, e))
print("%d modules, %d failed" % (len(entries), failures))
sys.exit(1 if failures else 0)
