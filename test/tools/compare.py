"""Element-wise comparison shared by the lit drivers (stdlib only).

Every driver that compares floating-point results goes through `compare` or
`compare_exact`, so that:
  * shapes and element counts are checked before any value (no silent
    truncation by zip);
  * a NaN or an infinity on one side fails unless the other side holds the
    same value (NaN vs NaN only when the caller says the format expects NaN
    there);
  * the bound per element is `ulps * ulp_T(want) + c * 2^-24 * S`, with
    (ulps, c) taken from tolerances.json for the check, format and dtype
    (see docs/Testing.md): ulps counts roundings to the output dtype T, c
    covers f32 summation-order differences relative to S = sum |terms|.
    (0, 0) means bit-identical.
Mutations for the drivers' own tests (`--mutate`): nan, scale (x1.03),
truncate (drop the last element).
"""
import json
import math
import os
import struct

_TOLERANCES = None
F32_UNIT = 2.0 ** -24


def decode(dtype, raw):
    """Raw little-endian bytes of dtype F32, BF16 or F16 as Python floats."""
    if dtype == "F32":
        if len(raw) % 4:
            raise ValueError("F32 data of %d bytes" % len(raw))
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if dtype in ("BF16", "F16"):
        if len(raw) % 2:
            raise ValueError("%s data of %d bytes" % (dtype, len(raw)))
        halves = struct.unpack("<%dH" % (len(raw) // 2), raw)
        if dtype == "BF16":
            return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
        return list(struct.unpack("<%de" % len(halves), raw))
    raise ValueError("not a float dtype: %s" % dtype)


def encode(dtype, values):
    """The inverse of decode (BF16 by truncation: callers pass bf16 values
    or accept truncation)."""
    if dtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "F16":
        return struct.pack("<%de" % len(values), *values)
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def ulp(dtype, v):
    """Spacing of `dtype` values at |v| (the subnormal spacing near zero)."""
    mant, emin = {"F32": (23, -126), "BF16": (7, -126), "F16": (10, -14)}[dtype]
    if v == 0 or not math.isfinite(v):
        return 2.0 ** (emin - mant)
    return 2.0 ** (max(math.frexp(abs(v))[1] - 1, emin) - mant)


def tolerance(check, fmt, dtype, has_bias=False, kind="linear"):
    """(ulps, c) for `check` ("vs_kitchen", "compiled_vs_reference"), the
    comfy_quant format, the output dtype (F32, BF16, F16), whether the
    module has a bias and its kind ("DTYPE+bias" / "DTYPE+embedding" entries
    first, then "DTYPE")."""
    global _TOLERANCES
    if _TOLERANCES is None:
        with open(os.path.join(os.path.dirname(__file__), "tolerances.json")) as f:
            _TOLERANCES = json.load(f)
    table = _TOLERANCES[check]
    entry = table[fmt] if fmt in table else table["*"]
    key = dtype + ("+bias" if has_bias else "+embedding" if kind == "embedding" else "")
    ulps, c = entry.get(key, entry[dtype])
    return float(ulps), float(c)


class Result:
    def __init__(self):
        self.bad = 0          # elements outside the bound
        self.worst = 0.0      # max err / bound over finite pairs with bound > 0
        self.first = None     # description of the first bad element
        self.count = 0

    @property
    def ok(self):
        return self.bad == 0

    def fail(self, i, a, b, why):
        self.bad += 1
        if self.first is None:
            self.first = "element %d: got %r, want %r (%s)" % (i, a, b, why)

    def summary(self):
        if self.ok:
            return "worst %.2f of bound" % self.worst
        return "%d of %d elements out of bound (worst %.2f): %s" % (
            self.bad, self.count, self.worst, self.first)


def shape_mismatch(got_shape, want_shape, got, want):
    """A message when shapes or element counts differ, else None."""
    if list(got_shape) != list(want_shape):
        return "shape %s != expected %s" % (list(got_shape), list(want_shape))
    n = 1
    for d in want_shape:
        n *= d
    if len(got) != n or len(want) != n:
        return "%d / %d elements for shape %s (%d)" % (len(got), len(want), list(want_shape), n)
    return None


def compare(got, want, dtype, ulps=0.0, c=0.0, s_abs=None, nan_ok=None, bias=None):
    """Element-wise |got - want| <= ulps*U + c*2^-24*s_abs[i], U the larger
    dtype spacing at want and at want - bias[i] (kitchen rounds before it
    adds a bias).

    `nan_ok(i)` says where the format expects NaN (both sides must be NaN
    there); elsewhere any NaN fails. Infinities must match exactly. The
    lists must have equal lengths (check shapes first with shape_mismatch).
    """
    r = Result()
    r.count = len(want)
    if len(got) != len(want):
        r.fail(min(len(got), len(want)), None, None,
               "%d elements, expected %d" % (len(got), len(want)))
        return r
    for i, (a, b) in enumerate(zip(got, want)):
        an, bn = math.isnan(a), math.isnan(b)
        if an or bn:
            if not (an and bn and nan_ok is not None and nan_ok(i)):
                r.fail(i, a, b, "NaN")
            continue
        if math.isinf(a) or math.isinf(b):
            if a != b:
                r.fail(i, a, b, "infinity")
            continue
        s = s_abs[i] if s_abs is not None else 0.0
        if not math.isfinite(s):
            r.fail(i, a, b, "S is not finite")
            continue
        u = ulp(dtype, b)
        if bias is not None:
            u = max(u, ulp(dtype, b - bias[i]))
        bound = ulps * u + c * F32_UNIT * s
        err = abs(a - b)
        if bound > 0:
            r.worst = max(r.worst, err / bound)
        if err > bound:
            r.fail(i, a, b, "|diff| %.3g > %.3g" % (err, bound))
    return r


def compare_exact(got_raw, want_raw, elem_size):
    """Bit-identical byte strings; reports the first differing element."""
    r = Result()
    r.count = len(want_raw) // elem_size
    if len(got_raw) != len(want_raw):
        r.fail(0, len(got_raw), len(want_raw), "byte counts differ")
        return r
    if got_raw != want_raw:
        for i in range(0, len(want_raw), elem_size):
            if got_raw[i:i + elem_size] != want_raw[i:i + elem_size]:
                r.fail(i // elem_size, got_raw[i:i + elem_size].hex(),
                       want_raw[i:i + elem_size].hex(), "bits differ")
    return r


def toward_zero(dtype, v):
    """v one unit of `dtype` (F32, BF16, F16) closer to zero; zeros and
    non-finite values unchanged."""
    if v == 0 or not math.isfinite(v):
        return v
    if dtype == "F16":
        bits = struct.unpack("<H", struct.pack("<e", v))[0]
        return struct.unpack("<e", struct.pack("<H", bits - 1))[0]
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    step = 0x10000 if dtype == "BF16" else 1
    return struct.unpack("<f", struct.pack("<I", bits - step))[0]


def mutate(kind, dtype, shape, raw):
    """A doctored copy of an output, for the drivers' expected-failure tests:
    nan (every third element NaN), scale (x1.03), scale10 (x1.10), scale005
    (x1.005: how far the bounds see a small systematic error), ulpdown (every
    finite nonzero element one unit of its dtype toward zero: what a store
    that truncates instead of rounding does to the elements whose rounding
    went up, applied to all of them), truncate (last row gone)."""
    if not kind:
        return shape, raw
    vals = decode(dtype, raw)
    if kind == "nan":
        vals = [math.nan if i % 3 == 1 else v for i, v in enumerate(vals)]
    elif kind in ("scale", "scale10", "scale005"):
        vals = [v * {"scale": 1.03, "scale10": 1.10, "scale005": 1.005}[kind]
                for v in vals]
        if dtype == "BF16":  # round to nearest bf16, not truncate
            vals = [struct.unpack("<f", struct.pack("<I", (struct.unpack(
                "<I", struct.pack("<f", v))[0] + 0x8000) & 0xFFFF0000))[0] for v in vals]
    elif kind == "ulpdown":
        vals = [toward_zero(dtype, v) for v in vals]
    elif kind == "truncate":
        row = len(vals) // shape[0] if shape and shape[0] else 1
        shape = [shape[0] - 1] + list(shape[1:]) if shape else shape
        vals = vals[:len(vals) - row]
    else:
        raise ValueError("unknown mutation %r (nan, scale, scale10, scale005, "
                         "ulpdown, truncate)" % kind)
    return shape, encode(dtype, vals)
