"""lit driver: the launches of a cuda artifact against its PTX and manifest.

  check_cuda_abi.py BINDIR FAKE_LIBCUDA CHECKPOINT ARTIFACT [--cc 90,...]
                    [--m 0,1,37] [--dtypes f32,bf16,f16] [-- EXTRA run options]

Runs every module of CHECKPOINT (every dtype; a MoE bank with --expert 0 and
its last expert; an embedding on indices spread over the table, f32 only:
comfyquant-run looks embeddings up with the f32 entry) through
`comfyquant-run --backend cuda --artifact ARTIFACT` on the fake driver
(test/unit/fake_cuda: FAKE_CUDA_LOG records every launch, FAKE_CUDA_CC the
device's compute capability) and checks each launch of the log:
  - the kernel names, in order, are the manifest entry's `kernels` for that
    dtype and the arch the runtime must pick for the capability (the exact
    one, "a" archs included) at M = 1..16, less each weight-decode kernel
    (`_decode`) and the GEMM after it (their grids are empty below the
    config's decode_rows), and a subsequence of them at other M (split K's
    reduction runs only at M <= 16);
  - the parameter count is the number of `.param` of that `.entry` in that
    arch's PTX (parsed here, independently of the fake);
  - block dimensions within (1024, 1024, 64), at most 1024 threads and
    within the entry's `.maxntid` (equal to `.reqntid` where declared); grid
    dimensions non-zero (M >= 1) and within (2^31 - 1, 65535, 65535);
  - a launch with dynamic shared memory names a kernel whose PTX declares it
    `.extern .shared`;
  - every `.ptr` parameter is a non-null address.
For M = 0 the run must exit 0 and its launches (if any) must still follow
the manifest's order. The log does not record where weights were uploaded,
so parameters are not matched against weight addresses.
--mutate params|order|maxntid drops a parameter from every parsed .entry /
reverses the manifest's order / halves every .maxntid, so a test can show
that the checks fail.
Prints "PASS module[expert] dtype cc=.. M=..: n launches" or "FAIL ..." lines
and "<cases> cases, <f> failed".
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

# GpuGemmAttr::kSplitRows: the most rows at which a split-K GEMM launches
# its reduction kernel.
SPLIT_ROWS = 16

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

# Compute capability -> the arch whose image the runtime must load.
ARCH_OF_CC = {"80": "sm_80", "86": "sm_86", "89": "sm_89", "90": "sm_90a",
              "100": "sm_100a", "120": "sm_120a"}
LAUNCH = re.compile(r"^launch (\S+) grid=(\d+),(\d+),(\d+) block=(\d+),(\d+),(\d+) "
                    r"smem=(\d+) params=(.*)$")


def parse_ptx(text):
    """{entry name: ([is_pointer per param], uses dynamic shared memory,
    (.maxntid or None, .reqntid or None))}."""
    out = {}
    extern = set(re.findall(r"^\s*\.extern\s+\.shared\s[^;]*?([\w$]+)\[\]", text, re.M))
    for m in re.finditer(r"\.entry\s+([\w$]+)\s*\(([^)]*)\)", text):
        name, plist = m.group(1), m.group(2)
        params = [".ptr" in p for p in plist.split(",") if ".param" in p]
        body_end = text.find(".entry", m.end())
        body = text[m.end():body_end if body_end >= 0 else len(text)]
        dyn = [v for v in extern if re.search(r"\b%s\b" % re.escape(v), body)]
        head = body[:body.find("{")] if "{" in body else ""
        ntid = []
        for key in ("maxntid", "reqntid"):
            d = re.search(r"\.%s\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?" % key, head)
            ntid.append([int(v or 1) for v in d.groups()] if d else None)
        out[name] = (params, bool(dyn), tuple(ntid))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bindir")
    ap.add_argument("fake")
    ap.add_argument("ckpt")
    ap.add_argument("artifact")
    ap.add_argument("--cc", default="90")
    ap.add_argument("--m", default="0,1,37")
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    ap.add_argument("--mutate", default="", choices=["", "params", "order", "maxntid"],
                    help="break the expectation (a self-check: must FAIL)")
    ap.add_argument("extra", nargs="*")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.extra = extra
    tmp = tempfile.mkdtemp()
    run = os.path.join(args.bindir, "comfyquant-run")
    with open(os.path.join(args.artifact, "manifest.json")) as f:
        manifest = json.load(f)
    images = {i["arch"]: i for i in manifest["backends"]["cuda"]["images"]}
    ptx = {}
    for arch, img in images.items():
        with open(os.path.join(args.artifact, img["ptx"])) as f:
            ptx[arch] = parse_ptx(f.read())
        if args.mutate == "params":
            ptx[arch] = {k: (v[0][1:], v[1], v[2]) for k, v in ptx[arch].items()}
        if args.mutate == "maxntid":
            ptx[arch] = {k: (v[0], v[1], ([max(1, d // 2) for d in v[2][0]] if v[2][0] else [1, 1, 1],
                                          v[2][1])) for k, v in ptx[arch].items()}
    cases = failures = 0
    for mod in manifest["modules"]:
        experts = [None]
        if mod["kind"] == "moe":
            experts = sorted({0, mod["experts"] - 1})
        for dtype in args.dtypes.split(","):
            # comfyquant-run looks embeddings up with the f32 entry (y is f32
            # whatever the dtype); the other entries are the C API's.
            if mod["kind"] == "embedding" and dtype != "f32":
                continue
            for cc in args.cc.split(","):
                arch = ARCH_OF_CC[cc]
                entry = [e for e in mod["entries"] if e["backend"] == "cuda"
                         and e["dtype"] == dtype and e["arch"] == arch]
                for expert in experts:
                    for m_rows in [int(v) for v in args.m.split(",")]:
                        cases += 1
                        label = "%s%s %s cc=%s M=%d" % (
                            mod["name"], "" if expert is None else "[%d]" % expert, dtype,
                            cc, m_rows)
                        if len(entry) != 1:
                            print("FAIL %s: %d manifest entries for %s" % (label, len(entry),
                                                                            arch))
                            failures += 1
                            continue
                        problems, launches = check_case(
                            args, run, tmp, mod, dtype, cc, expert, m_rows, entry[0],
                            ptx[arch])
                        for p in problems:
                            print("FAIL %s: %s" % (label, p))
                        failures += bool(problems)
                        if not problems:
                            print("PASS %s: %d launches (%s)" % (
                                label, len(launches), ", ".join(launches)))
    print("%d cases, %d failed" % (cases, failures))
    sys.exit(1 if failures or not cases else 0)


def write_x(path, mod, dtype, m_rows):
    if mod["kind"] == "embedding":
        vocab = mod["out_features"]
        idx = [(i * 7 + 3) % vocab for i in range(m_rows)]
        st.write(path, {"x": ("I64", [m_rows], struct.pack("<%dq" % m_rows, *idx))})
        return
    k = mod["in_features"]
    n = m_rows * k
    vals = [((i % 13) - 6) / 4.0 for i in range(n)]
    if dtype == "f32":
        raw, name = struct.pack("<%df" % n, *vals), "F32"
    elif dtype == "f16":
        raw, name = struct.pack("<%de" % n, *vals), "F16"
    else:
        raw, name = b"".join(struct.pack("<f", v)[2:] for v in vals), "BF16"
    st.write(path, {"x": (name, [m_rows, k], raw)})


def check_case(args, run, tmp, mod, dtype, cc, expert, m_rows, entry, kernels):
    """Runs one case on the fake driver; returns (problems, launch count)."""
    x, y, log = (os.path.join(tmp, n) for n in ("x.safetensors", "y.safetensors", "log"))
    for p in (y, log):
        if os.path.exists(p):
            os.remove(p)
    write_x(x, mod, dtype, m_rows)
    cmd = [run, args.ckpt, "--module", mod["name"], "--input", x, "-o", y,
           "--artifact", args.artifact, "--backend", "cuda"] + args.extra
    if expert is not None:
        cmd += ["--expert", str(expert)]
    env = dict(os.environ, COMFYQUANT_LIBCUDA=args.fake, FAKE_CUDA_LOG=log, FAKE_CUDA_CC=cc)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return ["exit %d: %s" % (p.returncode, p.stderr.strip())], []
    try:
        with open(log) as f:
            lines = f.read().splitlines()
    except OSError:
        return ["no fake driver log (was the fake loaded?)"], []
    problems = [l for l in lines if "FAILED" in l or "refused" in l and "ELF" not in l]
    if not any(l.startswith("load ") and "refused" not in l for l in lines):
        problems.append("no image loaded")
    launches = [LAUNCH.match(l) for l in lines if l.startswith("launch ")]
    if None in launches:
        return problems + ["unparsed launch line"], []
    names = [l.group(1) for l in launches]
    want = entry["kernels"][::-1] if args.mutate == "order" else entry["kernels"]
    # Every kernel runs at a decode-sized M (split K's reduction included)
    # but a weight decode and the GEMM reading it; above 16 rows the
    # reduction is skipped, and M = 0 may skip anything: there the launches
    # are a subsequence of the manifest's order.
    decoded = set()
    for i, n in enumerate(want):
        if n.endswith("_decode"):
            decoded.update(want[i:i + 2])
    small = [n for n in want if n not in decoded]
    if 0 < m_rows <= SPLIT_ROWS and names != small:
        problems.append("kernels %s, manifest %s" % (names, want))
    it = iter(want)
    if not all(n in it for n in names):
        problems.append("M=%d launches %s out of the manifest's order %s"
                        % (m_rows, names, want))
    for l in launches:
        name = l.group(1)
        grid = [int(l.group(i)) for i in (2, 3, 4)]
        block = [int(l.group(i)) for i in (5, 6, 7)]
        smem = int(l.group(8))
        values = l.group(9).split(",") if l.group(9) else []
        if name not in kernels:
            problems.append("%s: not an .entry of the PTX" % name)
            continue
        ptrs, dynamic, (maxntid, reqntid) = kernels[name]
        if maxntid and (block[0] * block[1] * block[2] > maxntid[0] * maxntid[1] * maxntid[2]
                        or any(b > d for b, d in zip(block, maxntid))):
            problems.append("%s: block %s over .maxntid %s" % (name, block, maxntid))
        if reqntid and block != reqntid:
            problems.append("%s: block %s, .reqntid %s" % (name, block, reqntid))
        if len(values) != len(ptrs):
            problems.append("%s: %d parameters, the .entry has %d"
                            % (name, len(values), len(ptrs)))
        if block[0] * block[1] * block[2] > 1024 or block[0] > 1024 or block[1] > 1024 \
                or block[2] > 64 or min(block) < 1:
            problems.append("%s: block %s" % (name, block))
        if m_rows > 0 and min(grid) < 1:
            problems.append("%s: grid %s for M=%d" % (name, grid, m_rows))
        if grid[0] > 2**31 - 1 or grid[1] > 65535 or grid[2] > 65535:
            problems.append("%s: grid %s" % (name, grid))
        if smem and not dynamic:
            problems.append("%s: %d bytes of dynamic shared memory, no .extern .shared"
                            % (name, smem))
        for i, (is_ptr, v) in enumerate(zip(ptrs, values)):
            if is_ptr and v in ("0", "0x0000000000000000"):
                problems.append("%s: parameter %d is a null pointer" % (name, i))
    if not problems and not os.path.exists(y):
        problems.append("no output written")
    return problems, names


if __name__ == "__main__":
    main()
