"""lit helper: the quantizer's plan for every architecture fixture matches
test/fixtures/architectures/expected.json (the detected policy and, for each
2-D weight, quantize or keep; written by hand from the real models).

  check_quantize_plans.py BIN FIXTURES_DIR [--mutate]

--mutate flips one expected action first: the check must then fail.
"""
import json
import os
import subprocess
import sys

bin_dir, fixtures = sys.argv[1], sys.argv[2]
mutate = "--mutate" in sys.argv
expected = json.load(open(os.path.join(fixtures, "expected.json")))["fixtures"]
failures = 0
for name, want in sorted(expected.items()):
    if mutate:
        t = sorted(want["tensors"])[0]
        want["tensors"][t] = "keep" if want["tensors"][t] == "quantize" else "quantize"
        mutate = False
    path = os.path.join(fixtures, name if name.endswith(".safetensors") else name + ".safetensors")
    out = subprocess.run([os.path.join(bin_dir, "comfyquant-quantize"), path, "--dry-run",
                          "--format", "int8", "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"FAIL {name}: {out.stderr.strip()}")
        failures += 1
        continue
    plan = json.loads(out.stdout)
    if plan["architecture"] != want["architecture"]:
        print(f"FAIL {name}: detected {plan['architecture']}, want {want['architecture']}")
        failures += 1
    got = {t["name"]: t["action"] for t in plan["tensors"]}
    for tensor, action in sorted(want["tensors"].items()):
        if got.get(tensor) != action:
            print(f"FAIL {name}: {tensor}: {got.get(tensor)}, want {action}")
            failures += 1
    print(f"{name}: {plan['architecture']}, {plan['totals']['selected']} selected")
print("PASS" if failures == 0 else f"FAIL ({failures})")
sys.exit(1 if failures else 0)
