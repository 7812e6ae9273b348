"""Writes a seeded random checkpoint for the shape sweep (stdlib only).

  make_sweep_checkpoint.py OUT.safetensors OUT.json SEED [PER_CASE [KINDS [TOP]]]

One module per draw: every format x kind (Linear, Embedding, MoE bank) and
each format's variants (scale layouts, ConvRot group sizes, codebooks, NVFP4
pre_quant_scale, W4A4 linear_dtype), PER_CASE draws each (default 2); KINDS is a comma-separated subset of
linear,embedding,moe (default all); TOP the largest N or K (default 130). N and
K are drawn from small odd and even values (1..130) among those the format
allows; padded NVFP4/MXFP8 storage is padded as the format requires. Codes
avoid NaN/Inf encodings; scales are valid. OUT.json lists the modules with
their kind, format, logical N x K, experts and the --shape/--kind overrides
the tools need (padded storage does not state the logical shape).
"""
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402


def roundup(v, m):
    return (v + m - 1) // m * m


def swizzle_offset(r, c, cols):
    ncb = (cols + 3) // 4
    return (((r // 128) * ncb + (c // 4)) * 512 + (r % 32) * 16
            + ((r % 128) // 32) * 4 + (c % 4))


def e4m3(v):
    """Nearest E4M3FN code of a positive value in [2^-6, 448] (RNE)."""
    best, code = None, 0
    for c in range(0x08, 0x7F):  # normal positive codes
        e, m = c >> 3, c & 7
        val = (1 + m / 8.0) * 2.0 ** (e - 7)
        if best is None or abs(val - v) < best:
            best, code = abs(val - v), c
    return code


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def bytes_(self, n):
        return bytes(self.r.getrandbits(8) for _ in range(n))

    def fp8(self, n, fmt):
        out = bytearray(self.bytes_(n))
        for i, x in enumerate(out):
            if fmt == "float8_e4m3fn" and (x & 0x7F) == 0x7F:
                out[i] = x & 0xFE  # NaN -> +-448
            if fmt == "float8_e5m2" and ((x >> 2) & 0x1F) == 0x1F:
                out[i] = x & ~0x40 & 0xFF  # Inf/NaN -> a finite code
        return bytes(out)

    def f32(self, shape, lo, hi):
        n = 1
        for d in shape:
            n *= d
        return ("F32", list(shape),
                struct.pack("<%df" % n, *[self.r.uniform(lo, hi) for _ in range(n)]))

    def scalar(self, v):
        return ("F32", [], struct.pack("<f", v))

    def swizzled(self, rows, cols, gen, dtype):
        R, C = roundup(rows, 128), roundup(cols, 4)
        buf = bytearray(R * C)
        for r in range(rows):
            for c in range(cols):
                buf[swizzle_offset(r, c, cols)] = gen()
        return (dtype, [R, C], bytes(buf))

    def int8(self, n):
        return bytes((self.r.randint(-127, 127) & 0xFF) for _ in range(n))

    def nibbles(self, n, lo, hi, hi_first):
        out = bytearray()
        for _ in range(n // 2):
            a = self.r.randint(lo, hi) & 0xF
            b = self.r.randint(lo, hi) & 0xF
            out.append((a << 4 | b) if hi_first else (a | b << 4))
        return bytes(out)


def stack(parts):
    """[E] single-expert tensors -> one [E, ...] tensor."""
    dtype, shape, _ = parts[0]
    return (dtype, [len(parts)] + shape, b"".join(p[2] for p in parts))


def pick(g, lo, hi, mult=1):
    """A multiple of `mult` in [lo, hi]; the smallest one >= lo when the
    range has none (a format's minimum K above a small --max-dim)."""
    vals = [v for v in range(lo, hi + 1) if v % mult == 0]
    return g.r.choice(vals) if vals else roundup(lo, mult)


def convrot_group(g, K, allow=(4, 16, 64)):
    ok = [v for v in allow if K % v == 0]
    return g.r.choice(ok) if ok else None


def linear_tensors(g, fmt, N, K, opts, E=None):
    """Tensors of one Linear (or one expert when E is given) and cq options."""
    t = {}
    cq = {}
    if fmt in ("float8_e4m3fn", "float8_e5m2"):
        t["weight"] = ("F8_E4M3" if fmt == "float8_e4m3fn" else "F8_E5M2",
                       [N, K], g.fp8(N * K, fmt))
        t["weight_scale"] = g.scalar(g.r.uniform(1e-3, 4e-3) if fmt == "float8_e4m3fn"
                                     else g.r.uniform(1e-5, 4e-5))
        if opts.get("input_scale"):
            t["input_scale"] = g.scalar(g.r.uniform(0.5, 2.0) / (448 if fmt == "float8_e4m3fn" else 57344) * 4)
    elif fmt == "nvfp4":
        Np, Kp = roundup(N, 16), roundup(K, 16)
        raw = bytearray(g.nibbles(Np * Kp, 0, 15, True))
        # Padding rows/columns are zero, as the encoder writes them.
        for r in range(Np):
            for c in range(Kp):
                if r >= N or c >= K:
                    j = r * (Kp // 2) + c // 2
                    raw[j] &= 0x0F if c % 2 == 0 else 0xF0
        t["weight"] = ("U8", [Np, Kp // 2], bytes(raw))
        t["weight_scale"] = g.swizzled(Np, Kp // 16, lambda: e4m3(g.r.uniform(0.5, 8.0)), "F8_E4M3")
        t["weight_scale_2"] = g.scalar(g.r.uniform(1e-3, 4e-3))
        if opts.get("input_scale"):
            t["input_scale"] = g.scalar(g.r.uniform(0.5, 2.0) / 2688.0)
        if opts.get("pqs"):
            t["pre_quant_scale"] = g.f32([K], 0.5, 2.0)
    elif fmt == "mxfp8":
        Np, Kp = roundup(N, 32), roundup(K, 32)
        raw = bytearray(g.fp8(Np * Kp, "float8_e4m3fn"))
        for r in range(Np):
            for c in range(Kp):
                if r >= N or c >= K:
                    raw[r * Kp + c] = 0
        t["weight"] = ("F8_E4M3", [Np, Kp], bytes(raw))
        t["weight_scale"] = g.swizzled(Np, Kp // 32, lambda: g.r.randint(116, 126), "U8")
    elif fmt == "int8_tensorwise":
        t["weight"] = ("I8", [N, K], g.int8(N * K))
        if opts.get("rows") or opts.get("convrot"):
            t["weight_scale"] = g.f32([N, 1], 1e-3, 1e-2)
        else:
            t["weight_scale"] = g.scalar(g.r.uniform(1e-3, 1e-2))
        if opts.get("convrot"):
            cq.update(convrot=True, convrot_groupsize=opts["convrot"])
    elif fmt == "convrot_w4a4":
        t["weight"] = ("I8", [N, K // 2], g.nibbles(N * K, -7, 7, False))
        t["weight_scale"] = g.f32([N], 1e-3, 1e-2)
        cq["convrot_groupsize"] = opts["convrot"]
        if opts.get("linear_dtype"):
            cq["linear_dtype"] = opts["linear_dtype"]
    elif fmt in ("asym_w4a8_int8", "w6a8_int8"):
        G = opts["group"]
        if fmt == "asym_w4a8_int8":
            t["weight"] = ("I8", [N, K // 2], g.nibbles(N * K, 0, 15, False))
        else:
            rows = []
            for _ in range(N):
                codes = [g.r.randint(1, 63) for _ in range(K)]
                low = bytes((codes[2 * j] & 15) | (codes[2 * j + 1] & 15) << 4 for j in range(K // 2))
                high = bytes(sum(((codes[4 * j + i] >> 4) & 3) << (2 * i) for i in range(4))
                             for j in range(K // 4))
                rows.append(low + high)
            t["weight"] = ("I8", [N, 3 * K // 4], b"".join(rows))
        if opts.get("srel_f32"):
            t["weight_s_rel"] = g.f32([N, K // G], 2.0, 12.0)
        else:
            t["weight_s_rel"] = ("F8_E4M3", [N, K // G],
                                 bytes(e4m3(g.r.uniform(2.0, 12.0)) for _ in range(N * K // G)))
        t["weight_s_channel"] = g.f32([N], 1e-3, 1e-2)
        if opts.get("codebook"):
            cb = sorted(g.r.uniform(-1.0, 1.0) for _ in range(16))
            t["weight_codebook"] = ("F32", [16], struct.pack("<16f", *cb))
        cq.update(group_size=G, convrot_groupsize=opts["convrot"])
    if opts.get("bias"):
        t["bias"] = g.f32([N], -1.0, 1.0)
    return t, cq


# (label, format, kind, options drawer, N rule, K rule)
def draw_case(g, label, fmt, kind, top=130):
    """Chooses N, K and options allowed by the format."""
    opts = {}
    N = pick(g, 1, top)
    K = pick(g, 1, top)
    if fmt == "int8_tensorwise":
        opts["rows"] = g.r.random() < 0.5
        if label.endswith("convrot"):
            K = pick(g, 4, top, 4)
            opts["convrot"] = convrot_group(g, K)
    elif fmt == "convrot_w4a4":
        K = g.r.choice([64, 128, 192] if top <= 130 else list(range(64, top + 1, 64))) \
            if top >= 64 else 64
        opts["convrot"] = convrot_group(g, K)
        opts["linear_dtype"] = g.r.choice([None, "int8"])
    elif fmt == "asym_w4a8_int8":
        opts["group"] = g.r.choice([4, 8, 16, 32])
        K = pick(g, 16, top, max(16, opts["group"]))
        opts["convrot"] = convrot_group(g, K)
        opts["codebook"] = g.r.random() < 0.5
        opts["srel_f32"] = g.r.random() < 0.3
    elif fmt == "w6a8_int8":
        opts["group"] = g.r.choice([16, 32])
        K = pick(g, 32, top, 32)
        opts["convrot"] = convrot_group(g, K)
        opts["srel_f32"] = g.r.random() < 0.3
    elif fmt == "nvfp4":
        opts["pqs"] = kind == "linear" and g.r.random() < 0.5
    if fmt in ("float8_e4m3fn", "float8_e5m2", "nvfp4"):
        opts["input_scale"] = kind == "linear" and g.r.random() < 0.5
    opts["bias"] = kind != "embedding" and g.r.random() < 0.5
    return N, K, opts


LINEAR = ["float8_e4m3fn", "float8_e5m2", "nvfp4", "mxfp8", "int8_tensorwise",
          "int8_tensorwise:convrot", "convrot_w4a4", "asym_w4a8_int8", "w6a8_int8"]
EMBEDDING = ["float8_e4m3fn", "float8_e5m2", "int8_tensorwise", "int8_tensorwise:convrot"]
MOE = LINEAR


def main():
    out, out_json, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    per_case = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    kinds = sys.argv[5].split(",") if len(sys.argv) > 5 else ["linear", "embedding", "moe"]
    top = int(sys.argv[6]) if len(sys.argv) > 6 else 130
    g = Gen(seed)
    tensors, modules = {}, []
    cases = ([("linear", f) for f in LINEAR] + [("embedding", f) for f in EMBEDDING]
             + [("moe", f) for f in MOE])
    cases = [c for c in cases if c[0] in kinds]
    def add_module(kind, label, name, N, K, opts, E=None, share=None, fpmm=None):
        """Draws the tensors of one module; `share` (MoE: one scalar for
        every expert) and `fpmm` are drawn unless given."""
        fmt = label.split(":")[0]
        if kind == "moe":
            experts = [linear_tensors(g, fmt, N, K, opts) for _ in range(E)]
            cq = experts[0][1]
            t = {}
            for key in experts[0][0]:
                parts = [e[0][key] for e in experts]
                if key == "weight_codebook":
                    t[key] = parts[0]
                elif parts[0][1] == [] and (g.r.random() < 0.5 if share is None else share) \
                        and key != "weight_scale_2":
                    t[key] = parts[0]  # one scalar shared by every expert
                elif parts[0][1] == []:
                    t[key] = ("F32", [E], b"".join(p[2] for p in parts))
                else:
                    t[key] = stack(parts)
            cq["num_experts"] = E
        else:
            t, cq = linear_tensors(g, fmt, N, K, opts)
            if kind == "embedding" and g.r.random() < 0.3 and "convrot" not in cq \
                    and fmt != "int8_tensorwise":
                del t["weight_scale"]  # absent scale means 1.0
        cq = dict(format=fmt, **cq)
        if kind != "embedding" and (g.r.random() < 0.15 if fpmm is None else fpmm):
            cq["full_precision_matrix_mult"] = True
            opts["fpmm"] = True
        for key in sorted(t):
            tensors["%s.%s" % (name, key)] = t[key]
        raw = json.dumps(cq).encode()
        tensors[name + ".comfy_quant"] = ("U8", [len(raw)], raw)
        modules.append(dict(name=name, kind=kind, format=fmt, n=N, k=K,
                            experts=E or 0, options={k: v for k, v in opts.items() if v}))

    for kind, label in cases:
        fmt = label.split(":")[0]
        for i in range(per_case):
            N, K, opts = draw_case(g, label, fmt, kind, top)
            name = "sweep.%s.%s.%d" % (kind, label.replace(":", "_"), i)
            E = g.r.randint(1, 3) if kind == "moe" else None
            add_module(kind, label, name, N, K, opts, E)

    # Configurations a one-draw-per-case run may never reach, in every draw
    # (after the random cases, whose draws they leave unchanged): every
    # ConvRot group, full-precision GEMMs of rotated weights, a codebook
    # with F32 s_rel, NVFP4 without fpmm, a MoE bank sharing one scalar
    # scale across its experts, integer GEMMs of the shape the AMX
    # kernels take (N a multiple of 16, K of 64), which random N and K
    # rarely are, and the wide CUDA tile's.
    forced = []
    for G in (4, 16, 64):
        forced.append(("int8_tensorwise:convrot", "convrot%d_fpmm" % G,
                       dict(convrot=G), dict(fpmm=True), G))
    forced += [
        ("convrot_w4a4", "fpmm", {}, dict(fpmm=True), 64),
        ("asym_w4a8_int8", "codebook_srel_f32", dict(codebook=True, srel_f32=True), {}, 0),
        ("w6a8_int8", "fpmm", {}, dict(fpmm=True), 0),
        ("nvfp4", "no_fpmm", {}, dict(fpmm=False), 0),
        ("int8_tensorwise", "shared_scalar", dict(rows=False), dict(share=True), 0),
    ]
    for label in ("int8_tensorwise", "convrot_w4a4", "asym_w4a8_int8", "w6a8_int8"):
        forced.append((label, "amx_shape", {}, dict(nmult=16, fpmm=False), 64))
    # The CUDA GEMMs' 128 x 256 tile: operands read as stored (INT8, FP8),
    # K a multiple of 16 bytes, N past one 256-column tile (when TOP
    # allows).
    if top > 256:
        for label in ("int8_tensorwise", "float8_e4m3fn", "float8_e5m2"):
            forced.append((label, "wide_tile", {}, dict(nwide=True, fpmm=False), 16))
    for kind in [k for k in ("linear", "moe") if k in kinds]:
        for label, tag, over, how, kmult in forced:
            fmt = label.split(":")[0]
            if kind == "linear" and how.get("share"):
                continue  # sharing is a bank's
            N, K, opts = draw_case(g, label, fmt, kind, top)
            if kmult:
                K = pick(g, kmult, max(top, kmult), kmult)
            if how.get("nmult"):
                N = pick(g, how["nmult"], max(top, how["nmult"]), how["nmult"])
            if how.get("nwide"):
                N = pick(g, 257, top)
            opts.update(over)
            E = g.r.randint(2, 3) if kind == "moe" else None
            name = "sweep.%s.forced.%s_%s" % (kind, label.replace(":", "_"), tag)
            add_module(kind, label, name, N, K, opts, E, share=how.get("share"),
                       fpmm=how.get("fpmm"))
    st.write(out, tensors)
    with open(out_json, "w") as f:
        json.dump(dict(seed=seed, modules=modules), f, indent=1)


if __name__ == "__main__":
    main()
