"""lit helper: rewrites a version-3 or -4 CPU manifest.json in place into the
version-2 form comfyquant-compile wrote before (top-level "target" and
"variants", per module "entry": {dtype: {variant: symbol}} and
"column_split": [symbols]), so tests can check the runtime still reads it.
"""
import json
import sys

path = sys.argv[1]
with open(path) as f:
    m = json.load(f)
assert m["version"] in (3, 4) and list(m["backends"]) == ["cpu"], "a CPU-only v3/v4 manifest"
v2 = {
    "schema": m["schema"],
    "version": 2,
    "target": "cpu",
    "checkpoint": m["checkpoint"],
    "variants": m["backends"]["cpu"]["variants"],
    "dtypes": m["dtypes"],
    "modules": [],
}
for mod in m["modules"]:
    out = {k: mod[k] for k in ("name", "kind", "format", "out_features",
                               "in_features", "experts", "rotation_group",
                               "row_independent")}
    entry, split = {}, []
    for e in mod["entries"]:
        entry.setdefault(e["dtype"], {})[e["variant"]] = e["symbol"]
        if e["column_split"]:
            split.append(e["symbol"])
    out["entry"] = entry
    out["column_split"] = split
    out["weights"] = mod["weights"]
    v2["modules"].append(out)
with open(path, "w") as f:
    json.dump(v2, f, indent=2)
