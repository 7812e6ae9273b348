"""The two halves of scripts/gpu-check (see there and docs/Testing.md).

  gpu_check.py prepare --bin DIR --gen MAKE_BENCH_CHECKPOINT --out BUNDLE_DIR
                       [--archs LIST] [--bench-shapes NxK,...] [--bench-m LIST]
                       [--bench-formats LIST] [--fixtures NAME,...]
  gpu_check.py run --bin DIR --lib LIBCOMFYQUANT --gen MAKE_BENCH_CHECKPOINT
                   --bundle BUNDLE_DIR [--out FILE.md] [--fake | --emulate ARCH]
                   [--budget S] [--case-timeout S]
  gpu_check.py diff WORK_A WORK_B

prepare (a machine with the compiler; no GPU): compiles every fixture
checkpoint for CUDA (all archs), writes the cases (x) and the reference
path's outputs (y, and the scale S of the float bounds) for each fixture
module x dtype (x expert), generates the benchmark checkpoint with the bench
generator, compiles it, and records how to regenerate it (the checkpoint is
too large to carry: the GPU machine writes the same one with the same tool).

run (the GPU machine: runtime only, no LLVM): every fixture case through
`comfyquant-run --backend cuda` against the bundled reference outputs
(compare.py, tolerances.json "compiled_vs_reference": integer formats
bit-identical), then each benchmark module at each M through the C API
(device pointers from torch, wall time over repeated calls after a warm-up,
cq_session_synchronize) next to the PyTorch peers on the same device, and
prints one table (also written as markdown). Each case's y is kept under
WORK/outputs with the image that ran (y's metadata, also logged with the
devices), so that `diff` can compare a GPU run with an emulated one bit for
bit (integer formats). Every subprocess has a timeout. With --fake (the fake driver,
no GPU) nothing is timed or compared: the table says so, and only the
plumbing is proved (every case runs and writes a y of the right shape).
"""
import argparse
import concurrent.futures
import ctypes as C
import datetime
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "tools"))
import check_cuda_artifacts as fixtures  # noqa: E402  (fixture groups, overrides)
import compare as cmp  # noqa: E402
import safetensors_util as st  # noqa: E402

ARCHS = "sm_80,sm_86,sm_89,sm_90a,sm_100a,sm_120a"
BENCH_SHAPES = "3072x3072,3072x12288,12288x3072,12288x12288,8192x8192"
BENCH_M = "1,16,256,4096,8192"
# Bench generator labels (bench/BenchCommon.h) and the peer each is set
# against: cuBLASLt FP8 for the FP8-family formats, cuBLAS int8 for the
# int8-executed ones.
BENCH_FORMATS = "int8_tensorwise,int8_tensorwise_convrot256,float8_e4m3fn,asym_w4a8_int8,nvfp4,mxfp8"
PEER = {"int8_tensorwise": "int_mm", "int8_tensorwise_convrot256": "int_mm",
        "asym_w4a8_int8": "int_mm", "w6a8_int8": "int_mm", "convrot_w4a4": "int_mm",
        "float8_e4m3fn": "scaled_mm", "float8_e5m2": "scaled_mm", "nvfp4": "scaled_mm",
        "mxfp8": "scaled_mm"}
# Weight bytes per element, for the decode (M <= 16) bandwidth column.
WEIGHT_BYTES = {"int8_tensorwise": 1, "int8_tensorwise_convrot256": 1, "float8_e4m3fn": 1,
                "float8_e5m2": 1, "mxfp8": 1 + 1 / 32, "nvfp4": 0.5 + 1 / 16,
                "asym_w4a8_int8": 0.5 + 1 / 16, "w6a8_int8": 0.75 + 1 / 16,
                "convrot_w4a4": 0.5 + 1 / 16}
INT_FORMATS = {"int8_tensorwise", "convrot_w4a4", "asym_w4a8_int8", "w6a8_int8"}
CASE_M = 7


def log(msg):
    print("gpu-check: " + msg, file=sys.stderr, flush=True)


def sh(cmd, timeout=1800, **kw):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise RuntimeError("%s: timed out after %d s" % (" ".join(cmd), timeout))
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s" % (" ".join(cmd), p.returncode,
                                                 (p.stderr or p.stdout).strip()[-3000:]))
    return p.stdout


# ---------------------------------------------------------------------------
# prepare

def s_linear(bindir, ckpt, extra, mod, xvals, expert, tmp):
    """Per output element, 2·Σ_k |x_k·pqs_k|·|W[n,k]| + |bias_n|: the scale of
    the float bound (as check_compiled.py estimates it)."""
    w = os.path.join(tmp, "w.safetensors")
    sh([os.path.join(bindir, "comfyquant-run"), ckpt, "--module", mod["name"],
        "--dequantize", "-o", w, "--overwrite"] + extra)
    n, k = mod["out_features"], mod["in_features"]
    wv = cmp.decode("F32", st.read(w)[0]["weight"][2])[(expert or 0) * n * k:][:n * k]
    side = st.read(ckpt)[0] if ckpt.endswith(".safetensors") else {}

    def tensor(name, count, offset):
        t = side.get(mod["name"] + "." + name)
        if t is None:
            return None
        v = cmp.decode(t[0], t[2])
        return v[offset * count:][:count] if len(v) > count else v
    pqs = tensor("pre_quant_scale", k, 0) or [1.0] * k
    bias = tensor("bias", n, expert or 0) or [0.0] * n
    out = []
    for r in range(len(xvals) // k):
        xa = [abs(xvals[r * k + j] * pqs[j]) for j in range(k)]
        for i in range(n):
            row = wv[i * k:(i + 1) * k]
            out.append(2 * sum(a * abs(b) for a, b in zip(xa, row)) + abs(bias[i]))
    return out


def s_unrotation(bindir, ckpt, extra, mod, idx, tmp):
    """ConvRot embeddings: the L2 norm of each looked-up element's rotation
    group of the dequantized row (bounds Σ|terms| of the un-rotation)."""
    w = os.path.join(tmp, "w.safetensors")
    sh([os.path.join(bindir, "comfyquant-run"), ckpt, "--module", mod["name"],
        "--dequantize", "-o", w, "--overwrite"] + extra)
    d, g = mod["in_features"], mod["convrot_groupsize"]
    wv = cmp.decode("F32", st.read(w)[0]["weight"][2])
    out = []
    for row in idx:
        for g0 in range(0, d, g):
            norm = sum(v * v for v in wv[row * d + g0:row * d + g0 + g]) ** 0.5
            out += [norm] * g
    return out


def prepare_fixture(args, name, out_dir):
    """Compiles one fixture and writes its cases; returns the case list."""
    ckpt_rel = os.path.join("test", "fixtures", "ckpt", fixtures.fixture_file(name))
    ckpt = os.path.join(ROOT, ckpt_rel)
    extra = fixtures.OVERRIDES.get(os.path.basename(ckpt), [])
    key = name.replace("/", "_")
    art = os.path.join(out_dir, "fixtures", key)
    tmp = os.path.join(out_dir, "tmp", key)
    os.makedirs(tmp, exist_ok=True)
    os.makedirs(os.path.dirname(art), exist_ok=True)
    sh([os.path.join(args.bin, "comfyquant-compile"), ckpt, "--target", "cuda:" + args.archs,
        "-j", "1", "--quiet", "-o", art, "--overwrite"] + extra)
    report = json.loads(sh([os.path.join(args.bin, "comfyquant-translate"), "--inspect",
                            "--json", ckpt] + extra))
    cases = []
    for mod in report["modules"]:
        experts = [None] if mod["kind"] != "moe" else sorted({0, mod["experts"] - 1})
        for dtype in ("F32", "BF16", "F16"):
            if mod["kind"] == "embedding" and dtype != "F32":
                continue  # comfyquant-run looks embeddings up in f32
            for expert in experts:
                case = "%s%s.%s" % (mod["name"], "" if expert is None else ".e%d" % expert,
                                    dtype.lower())
                x = os.path.join(art, "cases", case + ".x.safetensors")
                want = os.path.join(art, "cases", case + ".want.safetensors")
                os.makedirs(os.path.dirname(x), exist_ok=True)
                idx = xvals = None
                if mod["kind"] == "embedding":
                    v = mod["out_features"]
                    idx = [(i * 7 + 3) % v for i in range(CASE_M - 1)] + [v - 1]
                    st.write(x, {"x": ("I64", [len(idx)], struct.pack("<%dq" % len(idx),
                                                                      *idx))})
                else:
                    sh([sys.executable, os.path.join(ROOT, "test", "tools", "make_input.py"),
                        x, dtype, str(CASE_M), str(mod["in_features"]), "--random"])
                    xvals = cmp.decode(dtype, st.read(x)[0]["x"][2])
                y = os.path.join(tmp, "y.safetensors")
                cmd = [os.path.join(args.bin, "comfyquant-run"), ckpt, "--module",
                       mod["name"], "--input", x, "--reference", "-o", y, "--overwrite"] + extra
                if expert is not None:
                    cmd += ["--expert", str(expert)]
                sh(cmd)
                ydt, yshape, yraw = st.read(y)[0]["y"]
                check = "compiled_vs_reference"
                rotated = mod["kind"] == "embedding" and mod.get("convrot_groupsize")
                if rotated:
                    check = "unrotation_vs_kitchen"
                ulps, c = cmp.tolerance(check, mod["format"], ydt, kind=mod["kind"])
                tensors = {"y": (ydt, yshape, yraw)}
                if c:
                    s = (s_unrotation(args.bin, ckpt, extra, mod, idx, tmp) if rotated else
                         s_linear(args.bin, ckpt, extra, mod, xvals, expert, tmp)
                         if mod["kind"] != "embedding" else None)
                    if s is not None:
                        tensors["s"] = ("F32", yshape, cmp.encode("F32", s))
                st.write(want, tensors, {"ulps": str(ulps), "c": str(c)})
                cases.append({"fixture": name, "checkpoint": ckpt_rel, "extra": extra,
                              "artifact": os.path.join("fixtures", key),
                              "module": mod["name"], "kind": mod["kind"],
                              "format": mod["format"], "dtype": dtype, "expert": expert,
                              "m": CASE_M,
                              "x": os.path.relpath(x, out_dir),
                              "want": os.path.relpath(want, out_dir)})
    shutil.rmtree(tmp, ignore_errors=True)
    return cases


def prepare(args):
    out = os.path.abspath(args.out)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    names = args.fixtures.split(",") if args.fixtures else \
        [n for g in fixtures.GROUPS.values() for n in g]
    start = time.time()
    cases = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futs = [pool.submit(prepare_fixture, args, n, out) for n in names]
        for n, f in zip(names, futs):
            cases += f.result()
            log("fixture %s: compiled, reference outputs written" % n)
    log("%d fixtures, %d cases, %.0f s" % (len(names), len(cases), time.time() - start))

    # The benchmark checkpoint: written here to compile against, rewritten
    # on the GPU machine by the same generator with the same arguments.
    gen_args = ["--shapes", args.bench_shapes, "--formats", args.bench_formats]
    ckdir = os.path.join(out, "tmp", "bench-ckpt")
    sh([args.gen, "--out", ckdir] + gen_args)
    index = os.path.join(ckdir, "bench.safetensors.index.json")
    sh([os.path.join(args.bin, "comfyquant-compile"), index, "--target", "cuda:" + args.archs,
        "--dtypes", "bf16", "--quiet", "-o", os.path.join(out, "bench"), "--overwrite"])
    report = json.loads(sh([os.path.join(args.bin, "comfyquant-translate"), "--inspect",
                            "--json", index]))
    shutil.rmtree(os.path.join(out, "tmp"), ignore_errors=True)
    # nlohmann/json for the runtime-only build, where the GPU machine lacks it.
    deps = os.path.join(out, "deps")
    for src, dst in (("/usr/include/nlohmann", "include/nlohmann"),
                     ("/usr/share/cmake/nlohmann_json", "share/cmake/nlohmann_json")):
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(deps, dst))
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    bundle = {"schema": "comfyquant-gpu-check", "version": 1, "commit": commit,
              "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                  timespec="seconds"),
              "archs": args.archs.split(","), "cases": cases,
              "bench": {"generator_args": gen_args, "artifact": "bench",
                        "m": [int(v) for v in args.bench_m.split(",")],
                        "modules": [{"name": m["name"], "format": m["format"],
                                     "n": m["out_features"], "k": m["in_features"]}
                                    for m in report["modules"]]}}
    with open(os.path.join(out, "bundle.json"), "w") as f:
        json.dump(bundle, f, indent=1)
    log("bundle %s: %d cases, %d benchmark modules" % (out, len(cases),
                                                         len(bundle["bench"]["modules"])))


# ---------------------------------------------------------------------------
# run: correctness

def run_case(args, bundle_dir, case, tmp):
    """Runs one case on the cuda backend; returns (ok, detail)."""
    y = os.path.join(tmp, case["want"].replace("/", "_") + ".y")
    how = (["--reference"] if args.path == "reference" else
           ["--artifact", os.path.join(bundle_dir, case["artifact"]), "--backend", "cuda"])
    cmd = [os.path.join(args.bin, "comfyquant-run"), os.path.join(ROOT, case["checkpoint"]),
           "--module", case["module"], "--input", os.path.join(bundle_dir, case["x"]),
           "-o", y, "--overwrite"] + how + case["extra"]
    if case["expert"] is not None:
        cmd += ["--expert", str(case["expert"])]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.case_timeout)
    except subprocess.TimeoutExpired:
        return False, "timed out after %d s" % args.case_timeout
    if p.returncode != 0:
        return False, "exit %d: %s" % (p.returncode, p.stderr.strip())
    ytensors, ymeta = st.read(y)
    gdt, gshape, graw = ytensors["y"]
    # Kept (with the image that ran, from y's metadata) so that two runs,
    # a GPU's and the emulator's, can be compared bit for bit afterwards.
    keep = os.path.join(args.work, "outputs")
    os.makedirs(keep, exist_ok=True)
    shutil.copyfile(y, os.path.join(keep, os.path.basename(y)))
    case["ran"] = ymeta.get("path", "")
    if args.mutate:  # the checker's own test: a doctored y must fail
        gshape, graw = cmp.mutate(args.mutate, gdt, gshape, graw)
    want, meta = st.read(os.path.join(bundle_dir, case["want"]))
    ydt, yshape, yraw = want["y"]
    if gdt != ydt or list(gshape) != list(yshape):
        return False, "y %s %s, reference %s %s" % (gdt, gshape, ydt, yshape)
    if args.fake:
        return True, "fake driver: not computed"
    got, ref = cmp.decode(gdt, graw), cmp.decode(ydt, yraw)
    ulps, c = float(meta["ulps"]), float(meta["c"])
    if ulps == 0 and c == 0:
        r = cmp.compare_exact(graw, yraw, len(yraw) // max(len(ref), 1))
        if r.ok:
            r = cmp.compare(got, ref, ydt)
        how = "bit-identical"
    else:
        s = cmp.decode("F32", want["s"][2]) if "s" in want else None
        r = cmp.compare(got, ref, ydt, ulps, c, s)
        how = "within bound"
    return r.ok, (how + " (%s)" % r.summary()) if r.ok else r.summary()


def correctness(args, bundle_dir, bundle, tmp):
    """{format: [passed, total]} and the failure lines."""
    per_format, failures = {}, []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futs = [(c, pool.submit(run_case, args, bundle_dir, c, tmp)) for c in bundle["cases"]]
        for case, fut in futs:
            ok, detail = fut.result()
            tally = per_format.setdefault(case["format"], [0, 0, set()])
            tally[0] += ok
            tally[1] += 1
            tally[2].add(case["kind"])
            label = "%s %s%s %s %s" % (case["fixture"], case["module"],
                                       "" if case["expert"] is None else
                                       "[%d]" % case["expert"], case["format"], case["dtype"])
            if not ok:
                failures.append("FAIL %s: %s" % (label, detail))
    return per_format, failures


# ---------------------------------------------------------------------------
# run: timing

class SessionOptions(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("checkpoint", C.c_char_p),
                ("variant", C.c_char_p), ("threads", C.c_int),
                ("parallel_for", C.c_void_p), ("parallel_for_data", C.c_void_p)]


class DeviceOptions(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("backend", C.c_char_p),
                ("device", C.c_int), ("cuda_stream", C.c_void_p)]


class Ours:
    """A cuda session over the benchmark artifact (libcomfyquant.so)."""
    CQ_VERSION_OF_HEADER = None

    def __init__(self, lib_path, artifact, ckpt):
        self.lib = lib = C.CDLL(lib_path)
        lib.cq_last_error.restype = C.c_char_p
        lib.cq_version.restype = C.c_int
        lib.cq_session_open_backend_checked.argtypes = [
            C.c_int, C.c_char_p, C.POINTER(SessionOptions), C.POINTER(DeviceOptions),
            C.POINTER(C.c_void_p)]
        lib.cq_session_module_find.argtypes = [C.c_void_p, C.c_char_p,
                                               C.POINTER(C.c_size_t)]
        lib.cq_session_run_device.argtypes = [C.c_void_p, C.c_size_t, C.c_int64, C.c_int,
                                              C.c_uint64, C.c_int64, C.c_uint64, C.c_size_t]
        lib.cq_session_run.argtypes = [C.c_void_p, C.c_size_t, C.c_int, C.c_void_p,
                                       C.c_int64, C.c_void_p, C.c_size_t]
        lib.cq_session_synchronize.argtypes = [C.c_void_p]
        lib.cq_session_device.argtypes = [C.c_void_p, C.POINTER(C.c_char_p)]
        lib.cq_session_close.argtypes = [C.c_void_p]
        opts = SessionOptions(C.sizeof(SessionOptions), ckpt.encode(), None, 0, None, None)
        dev = DeviceOptions(C.sizeof(DeviceOptions), b"cuda", 0, None)
        self.session = C.c_void_p()
        # The library's own version: this script is built against no header.
        self.check(lib.cq_session_open_backend_checked(lib.cq_version(), artifact.encode(),
                                                       C.byref(opts), C.byref(dev),
                                                       C.byref(self.session)), "open")
        desc = C.c_char_p()
        self.check(lib.cq_session_device(self.session, C.byref(desc)), "device")
        self.device = desc.value.decode()

    def check(self, status, what):
        if status != 0:
            raise RuntimeError("cq %s: %s" % (what, self.lib.cq_last_error().decode()))

    def index(self, name):
        i = C.c_size_t()
        self.check(self.lib.cq_session_module_find(self.session, name.encode(), C.byref(i)),
                   "find " + name)
        return i.value

    def run_host(self, index, m, k, n):
        """One host-pointer call (bf16 zeros in, y out): the fake-driver path."""
        x = (C.c_uint16 * (m * k))()
        y = (C.c_uint16 * (m * n))()
        self.check(self.lib.cq_session_run(self.session, index, 1, x, m, y, C.sizeof(y)),
                   "run")

    def run_device(self, index, x_ptr, m, y_ptr, y_bytes):
        self.check(self.lib.cq_session_run_device(self.session, index, 0, 1, x_ptr, m,
                                                  y_ptr, y_bytes), "run_device")

    def synchronize(self):
        self.check(self.lib.cq_session_synchronize(self.session), "synchronize")


def time_calls(call, sync, min_time, max_reps):
    """Mean seconds per call after a warm-up call: batches of calls with one
    synchronization each, grown until a batch lasts min_time (or max_reps)."""
    call()
    sync()
    reps = 1
    while True:
        start = time.perf_counter()
        for _ in range(reps):
            call()
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time or reps >= max_reps:
            return elapsed / reps
        reps = min(max_reps, max(2 * reps, int(reps * min_time / max(elapsed, 1e-9)) + 1))


def timing(args, bundle_dir, bundle, ckpt_index, rows):
    """Fills the timing columns of `rows`; returns notes on the peers."""
    bench = bundle["bench"]
    artifact = os.path.join(bundle_dir, bench["artifact"])
    ours = Ours(args.lib, artifact, ckpt_index)
    notes = ["ours: %s, session device: %s" % (artifact, ours.device)]
    if args.fake or args.emulate:
        what = "fake driver" if args.fake else "PTX emulator (%s)" % args.emulate
        for row in rows:  # the C API path runs once; nothing is timed
            ours.run_host(ours.index(row["module"]), min(row["m"], 16), row["k"], row["n"])
            row["ours"] = row["peer_us"] = what + ": not timed"
        notes.append("%s: each module ran once through cq_session_run "
                     "(host pointers, M <= 16); no timing" % what)
        return notes
    import torch  # noqa: E402  (only the GPU machine needs it)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    sync = torch.cuda.synchronize
    notes.append("torch %s, CUDA %s, %s" % (torch.__version__, torch.version.cuda,
                                            torch.cuda.get_device_name(0)))
    # Device-to-device copy bandwidth (read + write), the decode reference.
    buf = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(buf)
    secs = time_calls(lambda: dst.copy_(buf), sync, 0.3, 50)
    copy_gbs = 2 * buf.numel() / secs / 1e9
    del buf, dst
    notes.append("device-to-device copy: %.0f GB/s (read + write, 1 GiB)" % copy_gbs)
    notes.append("peers at M < 17 run at the smallest M they take (torch._int_mm: 17, "
                 "torch._scaled_mm: 16)")
    deadline = time.time() + args.budget
    cache = {}
    for row in rows:
        if time.time() > deadline:
            row["ours"] = row["peer_us"] = "skipped (--budget)"
            continue
        m, n, k = row["m"], row["n"], row["k"]
        x = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
        y = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
        sync()  # x is written on torch's stream, read on the session's
        idx = ours.index(row["module"])
        try:
            s = time_calls(lambda: ours.run_device(idx, x.data_ptr(), m, y.data_ptr(),
                                                   y.numel() * 2),
                           ours.synchronize, args.min_time, args.max_reps)
            row["ours_s"] = s
            row["ours"] = "%.1f" % (s * 1e6)
            if m <= 16:
                wbytes = n * k * WEIGHT_BYTES.get(row["format"], 1)
                row["stream"] = "%.0f%%" % (100 * wbytes / s / 1e9 / copy_gbs)
        except RuntimeError as e:
            row["ours"] = "error: %s" % str(e).splitlines()[0][:80]
        key = (row["peer"], m, n, k)
        if key not in cache:
            cache[key] = peer_time(torch, row["peer"], m, n, k, dev, args)
        row["peer_us"], row["peer_s"] = cache[key]
        bkey = ("bf16", m, n, k)
        if bkey not in cache:
            cache[bkey] = peer_time(torch, "bf16", m, n, k, dev, args)
        row["bf16"] = cache[bkey][0]
        if row.get("ours_s") and row.get("peer_s"):
            row["ratio"] = "%.2f" % (row["peer_s"] / row["ours_s"])
        del x, y
    return notes


def peer_time(torch, peer, m, n, k, dev, args):
    """(µs text, seconds or None) of the vendor path for y[m,n] = x[m,k]·W[n,k]^T."""
    sync = torch.cuda.synchronize
    try:
        if peer == "int_mm":  # cuBLAS int8 GEMM, int32 out
            a = torch.randint(-127, 127, (max(m, 17), k), dtype=torch.int8, device=dev)
            b = torch.randint(-127, 127, (n, k), dtype=torch.int8, device=dev).t()
            call = lambda: torch._int_mm(a, b)  # noqa: E731
        elif peer == "scaled_mm":  # cuBLASLt FP8, bf16 out
            a = torch.randn(max(m, 16), k, device=dev).to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=dev)
            call = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,  # noqa: E731
                                            out_dtype=torch.bfloat16)
        else:
            a = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
            b = torch.randn(n, k, dtype=torch.bfloat16, device=dev).t()
            call = lambda: torch.matmul(a, b)  # noqa: E731
        s = time_calls(call, sync, args.min_time, args.max_reps)
        return "%.1f" % (s * 1e6), s
    except Exception as e:  # a shape the peer does not take
        return "n/a (%s)" % str(e).splitlines()[0][:60], None


# ---------------------------------------------------------------------------
# run

def use_emulator(args):
    """--emulate ARCH: the runtime (comfyquant-run and the C API session in
    this process) loads the PTX emulator's driver and runs ARCH's PTX."""
    lib = os.path.join(os.path.dirname(os.path.abspath(args.lib)), "libcomfyquant-ptxemu.so")
    if not os.path.exists(lib):
        raise SystemExit("gpu-check: --emulate: %s is missing" % lib)
    os.environ["COMFYQUANT_LIBCUDA"] = lib
    os.environ["COMFYQUANT_EMU_ARCH"] = args.emulate
    os.environ["COMFYQUANT_CUDA_IMAGE"] = args.emulate


def diff(args):
    """Two runs' kept outputs (WORK/outputs of a GPU run and of an emulated
    one): integer formats must be bit-identical case by case."""
    def load(work):
        with open(os.path.join(work, "outputs", "index.json")) as f:
            return {c["case"]: c for c in json.load(f)}
    a, b = load(args.a), load(args.b)
    same = differ = 0
    for case in sorted(set(a) & set(b)):
        if a[case]["format"] not in INT_FORMATS:
            continue
        ya = st.read(os.path.join(args.a, "outputs", a[case]["y"]))[0]["y"]
        yb = st.read(os.path.join(args.b, "outputs", b[case]["y"]))[0]["y"]
        if ya == yb:
            same += 1
        else:
            differ += 1
            print("DIFFER %s (%s vs %s)" % (case, a[case]["ran"], b[case]["ran"]))
    print("integer-format cases: %d bit-identical, %d differ, %d only in one run"
          % (same, differ, len(set(a) ^ set(b))))
    return 1 if differ else 0


def run(args):
    if args.emulate:
        use_emulator(args)
    bundle_dir = os.path.abspath(args.bundle)
    with open(os.path.join(bundle_dir, "bundle.json")) as f:
        bundle = json.load(f)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    tmp = os.path.join(work, "y")
    os.makedirs(tmp, exist_ok=True)
    args.work = work
    if args.path == "cuda":  # the driver and device the cases run on
        devices = subprocess.run([os.path.join(args.bin, "comfyquant-run"), "--devices"],
                                 capture_output=True, text=True, timeout=300)
        log("devices: %s" % (devices.stdout.strip() or devices.stderr.strip()))
    start = time.time()
    per_format, failures = correctness(args, bundle_dir, bundle, tmp)
    images = sorted({c.get("ran", "") for c in bundle["cases"]} - {""})
    log("images that ran: %s" % (", ".join(images) or "none"))
    os.makedirs(os.path.join(work, "outputs"), exist_ok=True)
    with open(os.path.join(work, "outputs", "index.json"), "w") as f:
        json.dump([{"case": c["want"], "y": os.path.basename(
            os.path.join(tmp, c["want"].replace("/", "_") + ".y")), "ran": c.get("ran", ""),
            "format": c["format"]} for c in bundle["cases"]], f, indent=1)
    log("correctness: %d cases, %d failed, %.0f s" % (len(bundle["cases"]), len(failures),
                                                      time.time() - start))
    for line in failures:
        print(line)
    if args.path == "reference":
        for fmt, (ok, total, kinds) in sorted(per_format.items()):
            print("reference path: %s (%s): %d/%d cases pass" % (fmt, ",".join(sorted(kinds)),
                                                                ok, total))
        return 1 if failures else 0

    ckdir = os.path.join(work, "bench-ckpt")
    index = os.path.join(ckdir, "bench.safetensors.index.json")
    if not os.path.exists(index):
        sh([args.gen, "--out", ckdir] + bundle["bench"]["generator_args"])
    rows = []
    for mod in bundle["bench"]["modules"]:
        ms = bundle["bench"]["m"]
        if mod["n"] == mod["k"] == 8192:
            ms = [8192]  # 8192³
        for m in ms:
            fmt = mod["format"]
            label = mod["name"].split(".")[1]
            tally = per_format.get(fmt)
            corr = ("fake driver: not computed" if args.fake else
                    "emulated %s: %d/%d fixture cases" % (args.emulate, tally[0], tally[1])
                    if args.emulate and tally else
                    "%d/%d fixture cases" % (tally[0], tally[1]) if tally else "no fixture")
            rows.append({"label": label, "format": fmt, "module": mod["name"], "m": m,
                         "n": mod["n"], "k": mod["k"], "peer": PEER.get(fmt, "bf16"),
                         "correct": corr})
    rows.sort(key=lambda r: (r["m"] > 16 and r["n"] * r["k"] != 8192 * 8192, r["m"],
                             r["label"], r["n"], r["k"]))
    start = time.time()
    notes = timing(args, bundle_dir, bundle, index, rows)
    log("timing: %d rows, %.0f s" % (len(rows), time.time() - start))
    rows.sort(key=lambda r: (r["label"], r["n"] * r["k"] == 8192 * 8192, r["n"], r["k"],
                             r["m"]))
    write_table(args, bundle, rows, per_format, failures, notes)
    return 1 if failures else 0


def write_table(args, bundle, rows, per_format, failures, notes):
    head = ["format", "M", "N", "K", "ours µs", "peer", "peer µs", "ratio (peer/ours)",
            "bf16 matmul µs", "weight stream (M ≤ 16, % of copy)", "correctness"]
    peers = {"int_mm": "torch._int_mm (cuBLAS int8)",
             "scaled_mm": "torch._scaled_mm (cuBLASLt FP8 e4m3, bf16 out)",
             "bf16": "torch.matmul bf16"}
    body = [[r["label"], str(r["m"]), str(r["n"]), str(r["k"]), r.get("ours", "-"),
             r["peer"], r.get("peer_us", "-"), r.get("ratio", "-"), r.get("bf16", "-"),
             r.get("stream", "-"), r["correct"]] for r in rows]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(b) + " |" for b in body]
    corr = ["| format | kinds | fixture cases passed |", "|---|---|---|"]
    for fmt, (ok, total, kinds) in sorted(per_format.items()):
        corr.append("| %s | %s | %s |" % (fmt, ",".join(sorted(kinds)),
                                          "fake driver: not computed" if args.fake
                                          else "%d/%d%s" % (ok, total,
                                                            " (emulated %s)" % args.emulate
                                                            if args.emulate else "")))
    md = ["# GPU check", "",
          "Written by `scripts/gpu-check --run` (%s). Bundle of commit %s, %s."
          % ("FAKE DRIVER, no GPU: nothing below is a measurement" if args.fake
             else "PTX EMULATOR (%s), no GPU: values computed, nothing timed" % args.emulate
             if args.emulate else "measured on the machine named below", bundle["commit"],
             bundle["created"]),
          "", "Date: %s; host: %s." % (datetime.datetime.now(datetime.timezone.utc)
                                       .isoformat(timespec="seconds"), platform.node()), ""]
    md += ["- " + n for n in notes]
    md += ["- peers: " + "; ".join("%s = %s" % kv for kv in peers.items()),
           "- ours: comfyquant kernels through the C API on device pointers "
           "(cq_session_run_device, bf16 activations, quantization included), "
           "wall time over repeated calls after a warm-up, synchronized",
           "- ratio = peer µs / ours µs (> 1: ours faster)",
           "", "## Speed", ""] + lines + ["", "## Correctness (GPU vs the reference path)",
                                           ""] + corr
    if failures:
        md += ["", "Failures:", ""] + ["    " + f for f in failures]
    text = "\n".join(md) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        log("wrote " + args.out)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--bin", required=True)
    p.add_argument("--gen", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--archs", default=ARCHS)
    p.add_argument("--fixtures", default="")
    p.add_argument("--bench-shapes", default=BENCH_SHAPES)
    p.add_argument("--bench-m", default=BENCH_M)
    p.add_argument("--bench-formats", default=BENCH_FORMATS)
    p.add_argument("--jobs", type=int, default=2)
    r = sub.add_parser("run")
    r.add_argument("--bin", required=True)
    r.add_argument("--lib", required=True)
    r.add_argument("--gen", required=True)
    r.add_argument("--bundle", required=True)
    r.add_argument("--work", required=True)
    r.add_argument("--out", default="")
    r.add_argument("--fake", action="store_true")
    r.add_argument("--case-timeout", type=int, default=600,
                   help="seconds one comfyquant-run case may take")
    r.add_argument("--emulate", default="",
                   help="run the cuda cases and the C API path on the PTX emulator for this "
                        "arch (libcomfyquant-ptxemu.so beside --lib): values are compared, "
                        "nothing is timed")
    r.add_argument("--mutate", default="",
                   choices=["", "nan", "scale", "scale10", "scale005", "ulpdown",
                            "truncate"],
                   help="doctor every output before the comparison (the "
                        "checker's self-test: every case must then fail)")
    r.add_argument("--path", choices=["cuda", "reference"], default="cuda",
                   help="reference: run the cases on the reference path and stop "
                   "(a check of the comparison itself: every case must pass)")
    r.add_argument("--jobs", type=int, default=8)
    r.add_argument("--budget", type=float, default=150,
                   help="seconds for the timing rows; later rows are skipped")
    r.add_argument("--min-time", type=float, default=0.2)
    r.add_argument("--max-reps", type=int, default=200)
    d = sub.add_parser("diff", help="two runs' kept outputs (--work dirs), integer "
                                    "formats bit for bit: a GPU run against an emulated one")
    d.add_argument("a")
    d.add_argument("b")
    args = ap.parse_args()
    if args.mode == "prepare":
        prepare(args)
        return 0
    if args.mode == "diff":
        return diff(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
