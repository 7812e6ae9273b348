"""Writes a checkpoint of integer-format Linear modules whose K is not a
multiple of 64 (the integer micro-kernels' K step), from a fixed-seed LCG
(stdlib only, no torch): K tails for int8_tensorwise (plain and ConvRot),
asym_w4a8_int8 and w6a8_int8 at the smallest K each format's rules allow
past a multiple of 64 (docs/Formats.md: int8 any K; W4A8 K % 16; W6A8
K % 32; convrot_w4a4 needs K % 64 == 0, so it has no tail).

  make_int_checkpoint.py OUT.safetensors [--amx | --amx-float | --planes]

With --amx, the shapes of the AMX tile kernels instead (N % 16 == 0, K a
multiple of 64 bytes of the operand: 64 i8 or 32 bf16): N of one, three and
five 16-row tiles (a 2 x 2 block's N tail), K of one to five steps, with
and without bias and ConvRot; with --amx-float, float8_e4m3fn modules of
such shapes (B decoded to bf16 for AMX-BF16 tiles). With --planes, the
shapes of the one-row nibble-plane kernels (row = i8_planes: steps of two
K vectors): convrot_w4a4 (int4 and int8 activations) at K of less than one
step, one step, a step and a vector, and two steps and a vector of AVX-512;
asym_w4a8_int8 with groups of 32 to 256 (a group spanning both planes of
a step, or not), with and without a codebook.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_util as st  # noqa: E402

state = 0x2545F491


def rand(n):
    """n pseudo-random 32-bit integers (LCG, fixed seed)."""
    global state
    out = []
    for _ in range(n):
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        out.append(state >> 8)
    return out


def conf(**kw):
    raw = json.dumps(kw).encode()
    return ("U8", [len(raw)], raw)


def bf16(values):
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def row_scales(n):
    # Powers of two times small odd numbers: 2^-10 .. 2^-6.
    return [(1 + 2 * (r % 5)) * 2.0 ** -(6 + r % 5) for r in rand(n)]


def e4m3_scales(count):
    # Positive normal E4M3 codes, exponent field 4..9 (2^-3 .. 2^2).
    return bytes(((4 + r % 6) << 3) | (r >> 4) % 8 for r in rand(count))


tensors = {}


def int8(name, n, k, gr=None, bias=False):
    tensors[name + ".weight"] = ("I8", [n, k], bytes((r % 255 - 127) & 0xFF for r in rand(n * k)))
    tensors[name + ".weight_scale"] = ("F32", [n, 1], struct.pack("<%df" % n, *row_scales(n)))
    kw = {"format": "int8_tensorwise"}
    if gr:
        kw.update(convrot=True, convrot_groupsize=gr)
    tensors[name + ".comfy_quant"] = conf(**kw)
    if bias:
        tensors[name + ".bias"] = ("BF16", [n], bf16([(r % 17 - 8) / 16.0 for r in rand(n)]))


def grouped(name, fmt, n, k, g, gr, bias=False, codebook=False):
    if fmt == "asym_w4a8_int8":
        weight = bytes(r & 0xFF for r in rand(n * k // 2))
    else:  # w6a8: K/2 low-nibble bytes, then K/4 bytes of 2-bit high fields per row
        weight = bytes(r & 0xFF for r in rand(n * 3 * k // 4))
    tensors[name + ".weight"] = ("I8", [n, k // 2 if fmt == "asym_w4a8_int8" else 3 * k // 4],
                                 weight)
    tensors[name + ".weight_s_rel"] = ("F8_E4M3", [n, k // g], e4m3_scales(n * k // g))
    tensors[name + ".weight_s_channel"] = ("F32", [n], struct.pack("<%df" % n, *row_scales(n)))
    tensors[name + ".comfy_quant"] = conf(format=fmt, group_size=g, convrot_groupsize=gr)
    if codebook:
        # Ascending levels, not evenly spaced.
        levels = sorted((r % 301 - 150) / 16.0 for r in rand(16))
        tensors[name + ".weight_codebook"] = ("F32", [16], struct.pack("<16f", *levels))
    if bias:
        tensors[name + ".bias"] = ("BF16", [n], bf16([(r % 17 - 8) / 16.0 for r in rand(n)]))


def w4a4(name, n, k, gr, linear_dtype=None, bias=False):
    # Every nibble, -8 included (producers emit -7..7; the format allows -8).
    tensors[name + ".weight"] = ("I8", [n, k // 2], bytes(r & 0xFF for r in rand(n * k // 2)))
    tensors[name + ".weight_scale"] = ("F32", [n], struct.pack("<%df" % n, *row_scales(n)))
    kw = {"format": "convrot_w4a4", "convrot_groupsize": gr}
    if linear_dtype:
        kw["linear_dtype"] = linear_dtype
    tensors[name + ".comfy_quant"] = conf(**kw)
    if bias:
        tensors[name + ".bias"] = ("BF16", [n], bf16([(r % 17 - 8) / 16.0 for r in rand(n)]))


def fp8(name, n, k, bias=False):
    # E4M3 codes of either sign, exponent field 1..14 (no NaN, no subnormal
    # needed), a power-of-two tensor scale.
    tensors[name + ".weight"] = ("F8_E4M3", [n, k], bytes(
        (r >> 7 & 0x80) | ((1 + r % 14) << 3) | (r >> 4) % 8 for r in rand(n * k)))
    tensors[name + ".weight_scale"] = ("F32", [], struct.pack("<f", 2.0 ** -5))
    tensors[name + ".comfy_quant"] = conf(format="float8_e4m3fn")
    if bias:
        tensors[name + ".bias"] = ("BF16", [n], bf16([(r % 17 - 8) / 16.0 for r in rand(n)]))


if "--amx" in sys.argv[2:]:
    int8("amx.int8_48x192", 48, 192)
    int8("amx.int8_80x64", 80, 64, bias=True)
    int8("amx.int8_convrot_16x256", 16, 256, gr=16)
    grouped("amx.w4a8_48x192", "asym_w4a8_int8", 48, 192, 16, 16, bias=True)
    grouped("amx.w6a8_80x256", "w6a8_int8", 80, 256, 32, 16)
    st.write(sys.argv[1], tensors)
    sys.exit(0)
if "--amx-float" in sys.argv[2:]:
    fp8("amx.fp8_48x96", 48, 96)
    fp8("amx.fp8_80x160", 80, 160, bias=True)
    fp8("amx.fp8_16x32", 16, 32)
    st.write(sys.argv[1], tensors)
    sys.exit(0)

if "--planes" in sys.argv[2:]:
    w4a4("planes.w4a4_k64", 48, 64, 64)
    w4a4("planes.w4a4_k128", 40, 128, 16, bias=True)
    w4a4("planes.w4a4_k192", 50, 192, 64)  # N % 4 = 2: a tail of two columns
    w4a4("planes.w4a4_k320", 36, 320, 64, linear_dtype="int8")
    w4a4("planes.w4a4_k512", 20, 512, 256, bias=True)
    grouped("planes.w4a8_g32", "asym_w4a8_int8", 48, 192, 32, 64)
    grouped("planes.w4a8_g64", "asym_w4a8_int8", 40, 320, 64, 64, bias=True)
    grouped("planes.w4a8_g128", "asym_w4a8_int8", 47, 384, 128, 64)
    grouped("planes.w4a8_g256", "asym_w4a8_int8", 24, 512, 256, 256, codebook=True)
    st.write(sys.argv[1], tensors)
    sys.exit(0)

int8("tails.int8_k72", 48, 72)
int8("tails.int8_k136", 32, 136, bias=True)
int8("tails.int8_k200", 40, 200)
int8("tails.int8_convrot_k72", 48, 72, gr=4)
int8("tails.int8_convrot_k144", 32, 144, gr=16, bias=True)
grouped("tails.w4a8_k80", "asym_w4a8_int8", 48, 80, 16, 16)
grouped("tails.w4a8_k144", "asym_w4a8_int8", 32, 144, 16, 16, bias=True)
grouped("tails.w4a8_k208", "asym_w4a8_int8", 48, 208, 16, 16)
grouped("tails.w6a8_k96", "w6a8_int8", 48, 96, 16, 16)
grouped("tails.w6a8_k160", "w6a8_int8", 32, 160, 32, 16, bias=True)
grouped("tails.w6a8_k224", "w6a8_int8", 48, 224, 16, 16)
st.write(sys.argv[1], tensors)
