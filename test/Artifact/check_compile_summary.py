"""lit helper: checks `comfyquant-compile --json` output against the artifact.

The summary's artifact path, byte counts, module list, entry count and
times must agree with the files and manifest.json; prints the facts for
FileCheck and OK, or FAIL lines and exits 1.
"""
import json
import os
import sys

summary_path, art = sys.argv[1], sys.argv[2]
with open(summary_path) as f:
    summary = json.load(f)
with open(os.path.join(art, "manifest.json")) as f:
    manifest = json.load(f)

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


print("schema", summary.get("schema"), summary.get("schema_version"))
expect(list(summary)[:2] == ["schema", "schema_version"], "schema keys first")
expect(os.path.samefile(summary["artifact"], art), "artifact path")
expect(os.path.isabs(summary["artifact"]), "artifact path is absolute")
sizes = {f: os.path.getsize(os.path.join(art, f))
         for f in ("kernels.so", "manifest.json")}
expect(summary["files"] == sizes, "file sizes %r vs %r" % (summary["files"], sizes))
expect(summary["bytes"] == sum(sizes.values()), "total bytes")
names = [m["name"] for m in summary["modules"]]
print("modules", " ".join(names))
expect(names == [m["name"] for m in manifest["modules"]], "module list")
symbols = set()
for sm, mm in zip(summary["modules"], manifest["modules"]):
    # The summary maps dtype -> variant -> symbol; the manifest lists entries.
    by_dtype = {}
    for e in mm["entries"]:
        expect(e["backend"] == "cpu", "backend of an entry of " + sm["name"])
        by_dtype.setdefault(e["dtype"], {})[e["variant"]] = e["symbol"]
        symbols.add(e["symbol"])
    expect(sm["entry"] == by_dtype, "entries of " + sm["name"])
    expect(sm["format"] == mm["format"] and sm["kind"] == mm["kind"],
           "format/kind of " + sm["name"])
    # A module's time sums its jobs, which may run in parallel: it is not
    # bounded by the total wall time.
    expect(isinstance(sm["seconds"], (int, float)) and sm["seconds"] > 0,
           "seconds of " + sm["name"])
print("entries", summary["entries"])
expect(isinstance(summary["seconds"], (int, float)) and summary["seconds"] > 0,
       "total seconds")
expect(summary["entries"] == len(symbols), "entry count %d vs %d distinct symbols"
       % (summary["entries"], len(symbols)))
expect(all("compile_seconds" not in m for m in manifest["modules"]),
       "the manifest holds no timing")
for f in failures:
    print("FAIL", f)
print("OK" if not failures else "FAILED")
sys.exit(1 if failures else 0)
