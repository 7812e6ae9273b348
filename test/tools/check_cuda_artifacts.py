"""lit driver: every fixture checkpoint compiled for every CUDA arch.

  check_cuda_artifacts.py BINDIR FIXTURES_DIR OUT_DIR --group NAME [--jobs 2]

Compiles each checkpoint of the group (GROUPS below: one `comfyquant-compile
--target cuda` per file, all archs, one dtype per checkpoint taking turns
through f32, bf16 and f16 along the group (every dtype meets every arch and
most formats; a GEMM kernel differs between dtypes only in its epilogue's
cast), --shape overrides as the CPU tests use them) with --jobs compiles at a time, then checks, per
artifact:
  - the compile exited 0 and printed no error or warning;
  - ptxas is found where the compiler looks for it, and every arch's image
    has a cubin that exists and is a CUDA ELF (machine 190): ptxas ran and
    accepted the PTX; a missing cubin is a failure, not a skip;
  - every PTX says `.target <arch>` and the manifest's `.version`;
  - the manifest's cuda entries cover every module (comfyquant-translate
    --inspect with the same overrides) x arch exactly once, in its dtype; every
    kernel named by an entry is an `.entry` of that arch's PTX, kernel names
    are unique in an image, the entry's host symbol is defined in
    cuda/host.so and host.so needs nothing but libc and libm.
Prints "PASS <fixture>: ..." or "FAIL <fixture>: <rule>" lines, the wall and
CPU seconds, and "<n> checkpoints, <f> failed" (also kept in
OUT_DIR/summary.txt). The union of GROUPS must be
every checkpoint under FIXTURES_DIR/ckpt: a new fixture without a group fails.
"""
import argparse
import concurrent.futures
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time

ARCHS = ["sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120a", "sm_100f", "sm_120f"]
DTYPES = ["f32", "bf16", "f16"]

# Padded NVFP4 storage compiled at its logical shape, as compiled-kinds.test
# and forward-padded.test do.
OVERRIDES = {
    "moe_nvfp4.safetensors": ["--shape", "model.layers.0.mlp.experts.down_proj=40x48"],
    "nvfp4_odd.safetensors": ["--shape", "blocks.0.ff.net.2=40x72"],
}

# Groups of about a minute of CPU each, so that lit runs them side by side.
GROUPS = {
    "int8-fp8": ["emb_fp8", "emb_int8_convrot64", "emb_int8_rows",
                 "exporter_int8_noformat", "fp8_e4m3_bias", "fp8_e4m3_exporter_fpmm",
                 "fp8_e4m3_linear", "fp8_e5m2_linear", "int8_convrot_g16",
                 "int8_convrot_g256", "int8_convrot_g64", "int8_rowwise", "int8_scalar",
                 "legacy_quant_metadata", "legacy_scaled_fp8", "legacy_scaled_fp8_fpmm"],
    "moe-fp4": ["moe_flat_int8_convrot16", "moe_flat_int8_rows", "moe_flat_w4a8",
                "moe_flat_w6a8", "moe_fp8", "moe_int8_per_expert", "moe_int8_scalar",
                "moe_mxfp8", "moe_nvfp4", "moe_w4a4", "mxfp8_aligned", "mxfp8_odd",
                "nvfp4_aligned", "nvfp4_odd", "nvfp4_pqs"],
    "mixed": ["sample_mixed", "sharded/model.safetensors.index.json", "w6a8_g16",
              "w6a8_g32_gr64"],
    "w4": ["w4a4_g16", "w4a4_g256", "w4a4_g256_int8act", "w4a4_g64",
           "w4a8_codebook_g16", "w4a8_codebook_g8", "w4a8_f32srel_g64_gr64",
           "w4a8_uniform_g32", "w4a8_uniform_g4"],
}


def fixture_file(name):
    return name if name.endswith(".json") else name + ".safetensors"


def find_ptxas():
    """Where comfyquant-compile looks (lib/Codegen/GPU/Target.cpp)."""
    found = shutil.which("ptxas")
    if found:
        return found
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        root = os.environ.get(var)
        if root and os.access(os.path.join(root, "bin", "ptxas"), os.X_OK):
            return os.path.join(root, "bin", "ptxas")
    if os.access("/usr/local/cuda/bin/ptxas", os.X_OK):
        return "/usr/local/cuda/bin/ptxas"
    return None


def entries_of_ptx(text):
    return re.findall(r"^\s*\.(?:visible\s+)?\.?entry\s+([A-Za-z_$][\w$]*)\s*\(", text,
                      re.M)


def defined_dynamic_symbols(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True,
                         text=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


def needed_libraries(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True)
    return re.findall(r"\(NEEDED\).*\[(.*)\]", out.stdout)


def undefined_symbols(path):
    out = subprocess.run(["nm", "-D", "--undefined-only", path], capture_output=True,
                         text=True)
    return [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]


def compile_one(bindir, ckpt, out, extra, dtype):
    cmd = [os.path.join(bindir, "comfyquant-compile"), ckpt, "--target", "cuda",
           "--dtypes", dtype, "-j", "1", "-o", out, "--overwrite"] + extra
    start = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p, time.time() - start


# comfyquant-compile's warning for a kernel ptxas made spill.
SPILL = re.compile(r"warning: (sm_\w+): kernel '([^']+)' spills \((.*)\)")


def check_artifact(bindir, name, ckpt, art, extra, proc, dtype):
    """Returns the list of broken rules for one compiled checkpoint."""
    problems = []
    if proc.returncode != 0:
        return ["comfyquant-compile exited %d: %s" % (proc.returncode,
                                                       proc.stderr.strip()[-2000:])]
    for line in proc.stderr.splitlines():
        # Spills are reported, not refused (docs/GpuCodegen.md): listed by
        # main as SPILL lines, not failures.
        if SPILL.search(line):
            continue
        if re.search(r"\b(error|warning)\b", line, re.I):
            problems.append("compile printed: " + line)
    with open(os.path.join(art, "manifest.json")) as f:
        manifest = json.load(f)
    cuda = manifest.get("backends", {}).get("cuda")
    if not cuda:
        return problems + ["manifest has no cuda backend"]
    images = {img["arch"]: img for img in cuda["images"]}
    if sorted(images) != sorted(ARCHS):
        problems.append("images for %s, want %s" % (sorted(images), sorted(ARCHS)))
    entries_in = {}
    for arch, img in images.items():
        if not img.get("cubin"):
            problems.append("%s: no cubin (ptxas did not run)" % arch)
        else:
            path = os.path.join(art, img["cubin"])
            try:
                with open(path, "rb") as f:
                    head = f.read(20)
            except OSError as e:
                problems.append("%s: cubin %s: %s" % (arch, img["cubin"], e.strerror))
                head = b""
            if head and (head[:4] != b"\x7fELF" or int.from_bytes(head[18:20], "little") != 190):
                problems.append("%s: %s is not a CUDA ELF" % (arch, img["cubin"]))
        with open(os.path.join(art, img["ptx"])) as f:
            ptx = f.read()
        target = re.search(r"^\.target\s+(\S+)", ptx, re.M)
        version = re.search(r"^\.version\s+(\S+)", ptx, re.M)
        if not target or target.group(1).rstrip(",") != arch:
            problems.append("%s: PTX .target %s" % (arch, target and target.group(1)))
        if not version or version.group(1) != img.get("ptx_version"):
            problems.append("%s: PTX .version %s, manifest %s"
                            % (arch, version and version.group(1), img.get("ptx_version")))
        names = entries_of_ptx(ptx)
        if len(names) != len(set(names)):
            problems.append("%s: duplicate .entry names" % arch)
        entries_in[arch] = set(names)
    host = os.path.join(art, cuda.get("host_library", ""))
    host_symbols = defined_dynamic_symbols(host) if os.path.isfile(host) else set()
    if not host_symbols:
        problems.append("no host library %s" % cuda.get("host_library"))
    if host_symbols:
        # Like kernels.so: libc and libm only; no MLIR runner or CUDA wrappers
        # (launches go through the runtime's cq_gpu_launcher).
        foreign = [lib for lib in needed_libraries(host)
                   if lib not in ("libc.so.6", "libm.so.6")]
        foreign += [s for s in undefined_symbols(host)
                    if re.match(r"(_mlir|mgpu|cu[A-Z]|memrefCopy)", s)]
        if foreign:
            problems.append("host.so needs %s" % ", ".join(foreign))
    report = json.loads(subprocess.check_output(
        [os.path.join(bindir, "comfyquant-translate"), "--inspect", "--json", ckpt] + extra))
    want_modules = sorted(m["name"] for m in report["modules"])
    got_modules = sorted(m["name"] for m in manifest["modules"])
    if want_modules != got_modules or not want_modules:
        problems.append("modules %s, inspect says %s" % (got_modules, want_modules))
    used = set()
    for mod in manifest["modules"]:
        seen = {}
        for e in mod["entries"]:
            if e.get("backend") != "cuda":
                continue
            key = (e["dtype"], e["arch"])
            seen[key] = seen.get(key, 0) + 1
            if not e["kernels"]:
                problems.append("%s %s %s: no kernels" % (mod["name"], *key))
            missing = [k for k in e["kernels"] if k not in entries_in.get(e["arch"], ())]
            if missing:
                problems.append("%s %s %s: kernels not in the PTX: %s"
                                % (mod["name"], e["dtype"], e["arch"], missing[:3]))
            used.update((e["arch"], k) for k in e["kernels"])
            if e["host"] not in host_symbols:
                problems.append("%s %s: host symbol %s not in host.so"
                                % (mod["name"], e["dtype"], e["host"]))
        for arch in ARCHS:
            if seen.get((dtype, arch)) != 1:
                problems.append("%s: %d cuda entries for %s %s"
                                % (mod["name"], seen.get((dtype, arch), 0), dtype, arch))
        others = sorted(k for k in seen if k[0] != dtype)
        if others:
            problems.append("%s: cuda entries of another dtype: %s" % (mod["name"], others[:3]))
    for arch, names in entries_in.items():
        unused = [n for n in names if (arch, n) not in used]
        if unused:
            problems.append("%s: .entry not named by any manifest entry: %s"
                            % (arch, unused[:3]))
    return problems


_lines = []


def emit(line):
    """Prints a result line and keeps it for OUT_DIR/summary.txt."""
    print(line, flush=True)
    _lines.append(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bindir")
    ap.add_argument("fixtures")
    ap.add_argument("out")
    ap.add_argument("--group", required=True, choices=sorted(GROUPS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="one fixture of the group")
    ap.add_argument("--mutate", default="", choices=["", "cubin"],
                    help="cubin: delete one arch's cubin after compiling, as if ptxas "
                    "had not run (a self-check: must FAIL)")
    args = ap.parse_args()
    ckpt_dir = os.path.join(args.fixtures, "ckpt")
    on_disk = {f[:-len(".safetensors")] for f in os.listdir(ckpt_dir)
               if f.endswith(".safetensors")}
    on_disk |= {"sharded/" + f for f in os.listdir(os.path.join(ckpt_dir, "sharded"))
                if f.endswith(".index.json")}
    grouped = [n for g in GROUPS.values() for n in g]
    failures = 0
    for name in sorted(on_disk - set(grouped)):
        emit("FAIL %s: in no group of check_cuda_artifacts.py" % name)
        failures += 1
    for name in sorted(set(grouped) - on_disk):
        emit("FAIL %s: no such fixture" % name)
        failures += 1
    ptxas = find_ptxas()
    if not ptxas:
        emit("FAIL ptxas: not on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin")
        failures += 1
    else:
        ver = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
        emit("ptxas %s: %s" % (ptxas, ver.strip().splitlines()[-1] if ver.strip() else "?"))

    names = GROUPS[args.group]
    if args.only:
        names = [n for n in names if n == args.only]
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    jobs = {}
    # The dtype takes turns along the whole group (not only the --only one).
    dtype_of = {n: DTYPES[i % len(DTYPES)] for i, n in enumerate(GROUPS[args.group])}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for name in names:
            ckpt = os.path.join(ckpt_dir, fixture_file(name))
            extra = OVERRIDES.get(os.path.basename(fixture_file(name)), [])
            art = os.path.join(args.out, name.replace("/", "_"))
            jobs[name] = (ckpt, art, extra, pool.submit(compile_one, args.bindir, ckpt, art,
                                                        extra, dtype_of[name]))
        for name in names:
            ckpt, art, extra, fut = jobs[name]
            proc, secs = fut.result()
            if args.mutate == "cubin" and proc.returncode == 0:
                os.remove(os.path.join(art, "cuda", "sm_90a.cubin"))
            problems = check_artifact(args.bindir, name, ckpt, art, extra, proc,
                                      dtype_of[name])
            for line in proc.stderr.splitlines():
                m = SPILL.search(line)
                if m:
                    emit("SPILL %s: %s %s: %s" % (name, m.group(1), m.group(2), m.group(3)))
            for p in problems:
                emit("FAIL %s: %s" % (name, p))
            if problems:
                failures += 1
            else:
                emit("PASS %s: %s, %d archs, cubins, every module x arch (%.1f s)"
                      % (name, dtype_of[name], len(ARCHS), secs))
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    emit("time: %.1f s wall, %.1f s CPU (children)"
          % (time.time() - start, usage.ru_utime + usage.ru_stime))
    emit("%d checkpoints, %d failed" % (len(names), failures))
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write("\n".join(_lines) + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
