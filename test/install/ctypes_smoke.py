#!/usr/bin/env python3
"""Smoke test of libcomfyquant.so through Python ctypes.

  ctypes_smoke.py LIBCOMFYQUANT_SO CHECKPOINT [ARTIFACT_DIR]

Loads the shared library with no other help (no headers, no C++ runtime
preloaded), checks cq_version against the installed version.h, opens the
checkpoint, lists its modules, runs the reference forward of one Linear
module and checks it against a dequantize-then-multiply done here, and checks
the status and message of a failing call. With an artifact compiled from
CHECKPOINT: opens a session (a wrong header version is refused), runs one
Linear module on 2 threads and compares it with the reference forward.
Exits 1 on the first failure.
"""
import ctypes as C
import math
import os
import re
import sys


def fail(msg):
    print(f"ctypes_smoke: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


class ModuleInfo(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("name", C.c_char_p),
                ("format", C.c_char_p), ("kind", C.c_int),
                ("out_features", C.c_int64), ("in_features", C.c_int64),
                ("experts", C.c_int64), ("rotation_group", C.c_int64),
                ("group_size", C.c_int64),
                ("full_precision_matrix_mult", C.c_int)]


class SessionOptions(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("checkpoint", C.c_char_p),
                ("variant", C.c_char_p), ("threads", C.c_int),
                ("parallel_for", C.c_void_p),
                ("parallel_for_data", C.c_void_p)]


CQ_OK, CQ_ERROR_NOT_FOUND, CQ_ERROR_IO = 0, 2, 3
CQ_ERROR_BUFFER_TOO_SMALL, CQ_ERROR_VERSION = 7, 8
CQ_KIND_LINEAR, CQ_DTYPE_F32 = 0, 0


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    so, ckpt_path = sys.argv[1], sys.argv[2]
    artifact = sys.argv[3] if len(sys.argv) == 4 else None
    lib = C.CDLL(so)
    lib.cq_version.restype = C.c_int
    lib.cq_version_string.restype = C.c_char_p
    lib.cq_last_error.restype = C.c_char_p
    lib.cq_status_string.restype = C.c_char_p
    lib.cq_status_string.argtypes = [C.c_int]
    for f in ("cq_checkpoint_open", "cq_module_count", "cq_module_info_at",
              "cq_module_find", "cq_dequantize_rows", "cq_reference_linear"):
        getattr(lib, f).restype = C.c_int
    lib.cq_checkpoint_open.argtypes = [C.c_char_p, C.POINTER(C.c_void_p)]
    lib.cq_checkpoint_close.argtypes = [C.c_void_p]
    lib.cq_module_count.argtypes = [C.c_void_p, C.POINTER(C.c_size_t)]
    lib.cq_module_info_at.argtypes = [C.c_void_p, C.c_size_t,
                                      C.POINTER(ModuleInfo)]
    lib.cq_module_find.argtypes = [C.c_void_p, C.c_char_p,
                                   C.POINTER(C.c_size_t)]
    lib.cq_dequantize_rows.argtypes = [C.c_void_p, C.c_size_t, C.c_int64,
                                       C.c_int64, C.c_int64,
                                       C.POINTER(C.c_float), C.c_size_t]
    lib.cq_reference_linear.argtypes = [C.c_void_p, C.c_size_t, C.c_int64,
                                        C.c_int, C.c_void_p, C.c_int64,
                                        C.c_void_p, C.c_size_t]

    # The library's version is the one its installed header states.
    header = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(so))),
                          "include", "comfyquant", "version.h")
    with open(header) as f:
        text = f.read()
    parts = [int(re.search(rf"#define CQ_VERSION_{p} (\d+)", text).group(1))
             for p in ("MAJOR", "MINOR", "PATCH")]
    expected = parts[0] * 10000 + parts[1] * 100 + parts[2]
    if lib.cq_version() != expected:
        fail(f"cq_version() = {lib.cq_version()}, version.h says {expected}")
    if lib.cq_version_string().decode() != ".".join(map(str, parts)):
        fail(f"cq_version_string() = {lib.cq_version_string()!r}")

    ck = C.c_void_p()
    st = lib.cq_checkpoint_open(ckpt_path.encode(), C.byref(ck))
    if st != CQ_OK:
        fail(f"cq_checkpoint_open: {lib.cq_last_error().decode()}")
    count = C.c_size_t()
    if lib.cq_module_count(ck, C.byref(count)) != CQ_OK or count.value == 0:
        fail("no modules")
    linear = None
    for i in range(count.value):
        info = ModuleInfo(struct_size=C.sizeof(ModuleInfo))
        if lib.cq_module_info_at(ck, i, C.byref(info)) != CQ_OK:
            fail(f"cq_module_info_at({i}): {lib.cq_last_error().decode()}")
        print(f"ctypes_smoke: {info.name.decode()} {info.format.decode()} "
              f"{info.out_features}x{info.in_features}")
        if info.kind == CQ_KIND_LINEAR and linear is None:
            linear = (i, info.out_features, info.in_features)
    if linear is None:
        fail("no Linear module")

    # Reference forward of one row vs the dequantized weight times x.
    i, n, k = linear
    x = (C.c_float * k)(*[((j * 5) % 11 - 5) / 4.0 for j in range(k)])
    y = (C.c_float * n)()
    st = lib.cq_reference_linear(ck, i, 0, CQ_DTYPE_F32, x, 1, y, C.sizeof(y))
    if st != CQ_OK:
        fail(f"cq_reference_linear: {lib.cq_last_error().decode()}")
    w = (C.c_float * (n * k))()
    if lib.cq_dequantize_rows(ck, i, 0, 0, n, w, n * k) != CQ_OK:
        fail(f"cq_dequantize_rows: {lib.cq_last_error().decode()}")
    if len(y) != n or not all(math.isfinite(v) for v in y):
        fail("reference output is not n finite values")
    # The format quantizes the activations, possibly after an orthonormal
    # rotation: an error vector e with |e| <= |x| sqrt(K)/254 (int8 step of
    # max|x_rot|/127 <= |x|/127) or |x|/16 (fp8 e4m3), so
    # |W.x - y|_r <= |w_r| |e|. Twice that: loose, but a wrong row, column or
    # scale is far outside it.
    xnorm = math.sqrt(sum(v * v for v in x))
    rel = max(math.sqrt(k) / 127, 1 / 8)
    worst = 0.0
    for r in range(n):
        row = w[r * k:(r + 1) * k]
        dot = sum(a * b for a, b in zip(row, x))
        bound = math.sqrt(sum(a * a for a in row)) * xnorm * rel + 1e-6
        err = abs(dot - y[r])
        if not err <= bound:
            fail(f"row {r}: reference {y[r]} vs W.x {dot} (bound {bound})")
        worst = max(worst, err / bound)

    # Failing calls: status codes and their messages.
    st = lib.cq_reference_linear(ck, i, 0, CQ_DTYPE_F32, x, 1, y,
                                 C.sizeof(y) - 1)
    if st != CQ_ERROR_BUFFER_TOO_SMALL:
        fail(f"short y: status {st}")
    idx = C.c_size_t()
    st = lib.cq_module_find(ck, b"no.such.module", C.byref(idx))
    msg = lib.cq_last_error().decode()
    if st != CQ_ERROR_NOT_FOUND or "no.such.module" not in msg:
        fail(f"find of a missing module: status {st}, message {msg!r}")
    if lib.cq_status_string(st).decode() != "CQ_ERROR_NOT_FOUND":
        fail("cq_status_string")
    if artifact:
        run_session(lib, ck, artifact)
    lib.cq_checkpoint_close(ck)
    bad = C.c_void_p()
    st = lib.cq_checkpoint_open(b"/nonexistent/x.safetensors", C.byref(bad))
    if st != CQ_ERROR_IO or bad.value is not None:
        fail(f"open of a missing file: status {st}")
    print(f"ctypes_smoke: OK (comfyquant {lib.cq_version_string().decode()}, "
          f"worst |W.x - y| {worst:.3g} of its bound)")
    return 0


def run_session(lib, ck, artifact):
    lib.cq_session_open_checked.restype = C.c_int
    lib.cq_session_open_checked.argtypes = [
        C.c_int, C.c_char_p, C.POINTER(SessionOptions), C.POINTER(C.c_void_p)]
    lib.cq_session_close.argtypes = [C.c_void_p]
    lib.cq_session_module_find.restype = C.c_int
    lib.cq_session_module_find.argtypes = [C.c_void_p, C.c_char_p,
                                           C.POINTER(C.c_size_t)]
    lib.cq_session_run.restype = C.c_int
    lib.cq_session_run.argtypes = [C.c_void_p, C.c_size_t, C.c_int,
                                   C.c_void_p, C.c_int64, C.c_void_p,
                                   C.c_size_t]
    opts = SessionOptions(struct_size=C.sizeof(SessionOptions), threads=2)
    s = C.c_void_p()
    # A caller built against another major version is refused.
    st = lib.cq_session_open_checked(lib.cq_version() + 10000,
                                     artifact.encode(), C.byref(opts),
                                     C.byref(s))
    if st != CQ_ERROR_VERSION or s.value is not None:
        fail(f"a header of the next major version: status {st}")
    st = lib.cq_session_open_checked(lib.cq_version(), artifact.encode(),
                                     C.byref(opts), C.byref(s))
    if st != CQ_OK:
        fail(f"cq_session_open_checked: {lib.cq_last_error().decode()}")
    # The first Linear module of the checkpoint, by name in the session.
    count = C.c_size_t()
    lib.cq_module_count(ck, C.byref(count))
    for i in range(count.value):
        info = ModuleInfo(struct_size=C.sizeof(ModuleInfo))
        lib.cq_module_info_at(ck, i, C.byref(info))
        if info.kind == CQ_KIND_LINEAR:
            break
    idx = C.c_size_t()
    if lib.cq_session_module_find(s, info.name, C.byref(idx)) != CQ_OK:
        fail(f"cq_session_module_find: {lib.cq_last_error().decode()}")
    m, n, k = 5, info.out_features, info.in_features
    x = (C.c_float * (m * k))(*[((j * 3) % 13 - 6) / 4.0
                                for j in range(m * k)])
    y = (C.c_float * (m * n))()
    ref = (C.c_float * (m * n))()
    if lib.cq_session_run(s, idx, CQ_DTYPE_F32, x, m, y, C.sizeof(y)) != CQ_OK:
        fail(f"cq_session_run: {lib.cq_last_error().decode()}")
    if lib.cq_reference_linear(ck, i, 0, CQ_DTYPE_F32, x, m, ref,
                               C.sizeof(ref)) != CQ_OK:
        fail(f"cq_reference_linear: {lib.cq_last_error().decode()}")
    scale = max(1.0, max(abs(v) for v in ref))
    # NaN or Inf on either side is a failure, never skipped by max().
    errs = [abs(a - b) for a, b in zip(y, ref)]
    worst = max(e if math.isfinite(e) else math.inf for e in errs)
    if not worst <= 1e-3 * scale:
        fail(f"{info.name.decode()}: compiled vs reference {worst}")
    lib.cq_session_close(s)
    print(f"ctypes_smoke: session {info.name.decode()} M={m}: "
          f"max |y - ref| {worst:.3g}")


if __name__ == "__main__":
    sys.exit(main())
