"""lit helper: compares tensor `y` of two comfyquant-run outputs.

  compare_outputs.py GOT.safetensors WANT.safetensors FORMAT [CHECK]
                     [--mutate nan|scale|scale10|truncate]

dtype, shape and element count first, then values with compare.py under
the tolerances.json bound of CHECK (default compiled_vs_reference) for
FORMAT; without a weight the S term is 0, so a float format passes only
where the sums agree to its ulps (exact for inputs whose sums are exact,
such as make_input.py's). Prints PASS/FAIL and exits 1 on failure.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import compare as cmp  # noqa: E402
import safetensors_util as st  # noqa: E402

argv = sys.argv[1:]
mutation = ""
if "--mutate" in argv:  # GOT doctored first: the check's own test
    i = argv.index("--mutate")
    mutation = argv[i + 1]
    del argv[i:i + 2]
got_path, want_path, fmt = argv[0:3]
check = argv[3] if len(argv) > 3 else "compiled_vs_reference"
gdt, gshape, graw = st.read(got_path)[0]["y"]
gshape, graw = cmp.mutate(mutation, gdt, gshape, graw)
wdt, wshape, wraw = st.read(want_path)[0]["y"]
got, want = cmp.decode(gdt, graw), cmp.decode(wdt, wraw)
problem = "dtype %s != %s" % (gdt, wdt) if gdt != wdt else cmp.shape_mismatch(gshape, wshape, got, want)
if problem:
    print("FAIL %s" % problem)
    sys.exit(1)
ulps, c = cmp.tolerance(check, fmt, wdt)
r = cmp.compare(got, want, wdt, ulps, c)
print("%s %s %s %s: %s" % ("PASS" if r.ok else "FAIL", fmt, wdt, list(wshape), r.summary()))
sys.exit(0 if r.ok else 1)
