#!/usr/bin/env python3
"""Writes the configuration/format-level hostile corpus into test/hostile/module/.

Every file is a *valid* safetensors container (8-byte little-endian header
length, JSON header padded with spaces to a multiple of 8, tensors stored
back to back with no holes) that breaks exactly one rule of the Comfy quant
layer: the `<module>.comfy_quant` JSON (docs/Formats.md §1.1, §3), the tensors a
format needs (§2.2), the legacy `_quantization_metadata` / `scaled_fp8`
layouts (§6), or embeddings / MoE banks / attention preferences (§7).

Each case is built as "a valid module + one mutation". `--valid-dir DIR`
writes the unmutated baselines, which must all be accepted (exit 0): that is
what makes "breaks exactly one rule" checkable.

EXPECTED.txt lists one line per file the tools reject correctly:

    <filename>\\t<module or tensor name as it appears in the message>\\t<rule substring>

`comfyquant-translate --inspect FILE` must exit with status 1 and print on
stderr the file path, the name and the rule substring (all literal, not
regexes). Cases in which the tools are known to misbehave (`tool_bug` set)
are still written, but are left out of EXPECTED.txt; the reason is in the
case table below.

    python3 make_module_corpus.py                 # (re)write module/
    python3 make_module_corpus.py --valid-dir D   # also write the baselines
    python3 make_module_corpus.py --check BIN_DIR # write, then run the tools

Python 3 standard library only. Deterministic: rerunning rewrites identical
bytes.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "module")

DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I8": 1,
              "U8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1}


# --------------------------------------------------------------------------
# Container writer


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def fill(dtype, shape, seed):
    """Deterministic, harmless contents: finite FP8 codes, small ints,
    positive float scales."""
    n = numel(shape)
    if dtype in ("F32", "F16", "BF16", "F64"):
        vals = [0.5 + ((i * 7 + seed) % 5) * 0.25 for i in range(n)]
        if dtype == "F32":
            return struct.pack("<%df" % n, *vals)
        if dtype == "F64":
            return struct.pack("<%dd" % n, *vals)
        if dtype == "F16":
            return struct.pack("<%de" % n, *vals)
        # BF16: upper half of the f32 bits (values above are exact in bf16)
        return b"".join(struct.pack("<f", v)[2:] for v in vals)
    if dtype == "I32":
        return struct.pack("<%di" % n, *[(i + seed) % 7 for i in range(n)])
    if dtype == "F8_E8M0":
        return bytes([127 + (i + seed) % 3 for i in range(n)])
    if dtype == "F8_E4M3":
        # 0x30..0x3F: finite positive values around 0.5..1 (no NaN 0x7F).
        return bytes([0x30 + (i * 5 + seed) % 16 for i in range(n)])
    if dtype == "F8_E5M2":
        return bytes([0x30 + (i * 3 + seed) % 16 for i in range(n)])
    # I8 / U8: any pattern is a valid code.
    return bytes([(i * 37 + seed) & 0xFF for i in range(n)])


class Spec:
    """An ordered list of tensors plus optional __metadata__."""

    def __init__(self):
        self.tensors = []  # [name, dtype, shape, raw]
        self.metadata = None

    def add(self, name, dtype, shape, raw=None):
        if raw is None:
            raw = fill(dtype, shape, len(self.tensors))
        assert len(raw) == numel(shape) * DTYPE_SIZE[dtype], name
        self.tensors.append([name, dtype, list(shape), raw])
        return self

    def text(self, name, text, dtype="U8", shape=None):
        raw = text if isinstance(text, bytes) else text.encode("utf-8")
        if shape is None:
            shape = [len(raw)]
        return self.add(name, dtype, shape, raw)

    def quant(self, module, conf):
        """`module.comfy_quant` with ComfyUI's default json.dumps spacing."""
        return self.text(module + ".comfy_quant", json.dumps(conf))

    def find(self, name):
        for t in self.tensors:
            if t[0] == name:
                return t
        raise KeyError(name)

    def drop(self, name):
        self.tensors.remove(self.find(name))
        return self

    def replace(self, name, dtype=None, shape=None, raw=None):
        t = self.find(name)
        dtype = dtype or t[1]
        shape = t[2] if shape is None else list(shape)
        if raw is None:
            raw = fill(dtype, shape, self.tensors.index(t))
        assert len(raw) == numel(shape) * DTYPE_SIZE[dtype], name
        t[1:] = [dtype, shape, raw]
        return self

    def image(self):
        h = {}
        if self.metadata is not None:
            h["__metadata__"] = self.metadata
        off = 0
        data = b""
        for name, dtype, shape, raw in self.tensors:
            h[name] = {"dtype": dtype, "shape": shape,
                       "data_offsets": [off, off + len(raw)]}
            off += len(raw)
            data += raw
        text = json.dumps(h, separators=(",", ":"))
        text += " " * ((8 - len(text) % 8) % 8)
        header = text.encode("utf-8")
        return struct.pack("<Q", len(header)) + header + data


# --------------------------------------------------------------------------
# Valid baseline modules (docs/Formats.md §2.2)

P = "blocks.0.attn.qkv"          # the module every Linear case uses
MOE = "model.layers.0.mlp.experts"
EMB = "model.embed_tokens"
ATTN = "blocks.0.attn"


def fp8(fmt="float8_e4m3fn", N=4, K=8, extra=None):
    s = Spec()
    wdt = "F8_E4M3" if fmt == "float8_e4m3fn" else "F8_E5M2"
    s.add(P + ".weight", wdt, [N, K])
    s.add(P + ".weight_scale", "F32", [])
    s.add(P + ".input_scale", "F32", [])
    s.add(P + ".bias", "F32", [N])
    s.quant(P, dict({"format": fmt}, **(extra or {})))
    return s


def int8(N=4, K=16, convrot=None, scale_shape=None):
    s = Spec()
    s.add(P + ".weight", "I8", [N, K])
    s.add(P + ".weight_scale", "F32", scale_shape if scale_shape is not None
          else [N, 1])
    s.add(P + ".bias", "BF16", [N])
    conf = {"format": "int8_tensorwise"}
    if convrot:
        conf.update({"convrot": True, "convrot_groupsize": convrot})
    s.quant(P, conf)
    return s


def nvfp4(N=16, K=32):
    # storage [Np16, Kp16/2]; block scales swizzled
    # [roundup(Np16,128), roundup(Kp16/16,4)] = [128, 4] here.
    s = Spec()
    s.add(P + ".weight", "U8", [N, K // 2])
    s.add(P + ".weight_scale", "F8_E4M3", [128, 4])
    s.add(P + ".weight_scale_2", "F32", [])
    s.add(P + ".input_scale", "F32", [])
    s.add(P + ".pre_quant_scale", "BF16", [K])
    s.quant(P, {"format": "nvfp4"})
    return s


def mxfp8(N=32, K=64):
    # storage [Np32, Kp32]; E8M0 scales [roundup(Np32,128), roundup(Kp32/32,4)]
    s = Spec()
    s.add(P + ".weight", "F8_E4M3", [N, K])
    s.add(P + ".weight_scale", "U8", [128, 4],
          raw=bytes([127 + i % 3 for i in range(512)]))
    s.quant(P, {"format": "mxfp8"})
    return s


def w4a4(N=4, K=64, conf=None):
    s = Spec()
    s.add(P + ".weight", "I8", [N, K // 2])
    s.add(P + ".weight_scale", "F32", [N])
    s.quant(P, conf if conf is not None else
            {"format": "convrot_w4a4", "convrot_groupsize": 16,
             "linear_dtype": "int8"})
    return s


def w4a8(N=4, K=64, G=16, Gr=16, codebook=True, conf=None):
    s = Spec()
    s.add(P + ".weight", "I8", [N, K // 2])
    s.add(P + ".weight_s_rel", "F8_E4M3", [N, K // G])
    s.add(P + ".weight_s_channel", "F32", [N])
    if codebook:
        levels = [-1.0 + i * (2.0 / 15) for i in range(16)]
        s.add(P + ".weight_codebook", "F32", [16],
              raw=struct.pack("<16f", *levels))
    s.quant(P, conf if conf is not None else
            {"format": "asym_w4a8_int8", "group_size": G, "convrot": True,
             "convrot_groupsize": Gr})
    return s


def w6a8(N=4, K=64, G=16, Gr=16, conf=None):
    s = Spec()
    s.add(P + ".weight", "I8", [N, 3 * K // 4])
    s.add(P + ".weight_s_rel", "F8_E4M3", [N, K // G])
    s.add(P + ".weight_s_channel", "F32", [N])
    s.quant(P, conf if conf is not None else
            {"format": "w6a8_int8", "group_size": G, "convrot_groupsize": Gr})
    return s


def moe_fp8(E=2, N=4, K=8):
    s = Spec()
    s.add(MOE + ".weight", "F8_E4M3", [E, N, K])
    s.add(MOE + ".weight_scale", "F32", [E])
    s.add(MOE + ".bias", "F32", [E, N])
    s.quant(MOE, {"format": "float8_e4m3fn", "num_experts": E})
    return s


def moe_int8_flat(E=2, N=4, K=16):
    # flattened bank (docs/Formats.md §7.2): weight [E*N, K], scale [E*N, 1]
    s = Spec()
    s.add(MOE + ".weight", "I8", [E * N, K])
    s.add(MOE + ".weight_scale", "F32", [E * N, 1])
    s.quant(MOE, {"format": "int8_tensorwise", "num_experts": E})
    return s


def embedding_fp8(V=8, D=4):
    s = Spec()
    s.add(EMB + ".weight", "F8_E4M3", [V, D])
    s.add(EMB + ".weight_scale", "F32", [])
    s.quant(EMB, {"format": "float8_e4m3fn"})
    return s


def with_attention(config_text):
    s = fp8()
    s.text(ATTN + ".comfy_attention.config", config_text)
    return s


def metadata_fp8(meta_text):
    """fp8 layer whose configuration comes from _quantization_metadata."""
    s = Spec()
    s.add(P + ".weight", "F8_E4M3", [4, 8])
    s.add(P + ".weight_scale", "F32", [])
    s.metadata = {"format": "pt", "_quantization_metadata": meta_text}
    return s


def scaled_fp8_legacy():
    s = Spec()
    s.add("scaled_fp8", "F8_E4M3", [])
    s.add(P + ".weight", "F8_E4M3", [4, 8])
    s.add(P + ".scale_weight", "F32", [])
    s.add(P + ".scale_input", "F32", [], raw=struct.pack("<f", 0.5))
    return s


# --------------------------------------------------------------------------
# Mutation helpers


def set_quant(spec, module, conf_text):
    """Replace module.comfy_quant by raw text (bytes or str)."""
    raw = conf_text if isinstance(conf_text, bytes) else conf_text.encode()
    return spec.replace(module + ".comfy_quant", "U8", [len(raw)], raw)


def set_text(spec, name, text):
    raw = text if isinstance(text, bytes) else text.encode()
    return spec.replace(name, "U8", [len(raw)], raw)


def set_conf(spec, module, conf):
    return set_quant(spec, module, json.dumps(conf))


def meta_ok():
    return json.dumps({"format_version": "1.0",
                       "layers": {P: {"format": "float8_e4m3fn"}}})


# Nesting depth of the deep-JSON cases: well past the ~100k levels that an
# 8 MiB stack survives in a recursive serializer, ~400 KB per file.
DEPTH = 2000  # far past the 32-level limit; a recursive dump of it once crashed


def deep(n):
    return "[" * n + "]" * n


# --------------------------------------------------------------------------
# Cases: (filename, baseline, mutation, subject, rule substring, tool_bug)
#
# `subject` is the name that must appear in the message (the module, or the
# tensor for tensor-level rules). `tool_bug` is None when the tools behave,
# else a short description (the case is then left out of EXPECTED.txt).

CQ = P + ".comfy_quant"
CASES = []


def case(name, base, mutate, subject, rule, tool_bug=None):
    CASES.append((name + ".safetensors", base, mutate, subject, rule,
                  tool_bug))


# --- comfy_quant tensor / JSON (docs/Formats.md §1.1, §3) ------------------------
case("cq_not_json", fp8,
     lambda s: set_quant(s, P, '{"format": "float8_e4m3fn"'),
     P, "comfy_quant is not valid JSON")
case("cq_trailing_garbage", fp8,
     lambda s: set_quant(s, P, '{"format": "float8_e4m3fn"} x'),
     P, "comfy_quant is not valid JSON")
case("cq_empty", fp8, lambda s: set_quant(s, P, b""),
     P, "comfy_quant is not valid JSON")
case("cq_invalid_utf8", fp8,
     lambda s: set_quant(s, P, b'{"format": "float8_e4m3fn", "x": "\xff"}'),
     P, "comfy_quant is not valid UTF-8")
case("cq_nul_terminated", fp8,
     lambda s: set_quant(s, P, b'{"format": "float8_e4m3fn"}\x00'),
     P, "comfy_quant contains a NUL byte")
case("cq_nul_garbage", fp8,
     lambda s: set_quant(s, P, b'{"format": "float8_e4m3fn"}\x00{"format": '
                               b'"nvfp4"'),
     P, "comfy_quant contains a NUL byte")
case("cq_format_deep", fp8,
     lambda s: set_quant(s, P, '{"format": %s}' % deep(DEPTH)),
     P, "comfy_quant nests deeper than 32 levels")
case("cq_json_array", fp8, lambda s: set_quant(s, P, '["float8_e4m3fn"]'),
     P, "comfy_quant must be a JSON object, got array")
case("cq_json_string", fp8, lambda s: set_quant(s, P, '"float8_e4m3fn"'),
     P, "comfy_quant must be a JSON object, got string")
case("cq_dtype_i8", fp8,
     lambda s: s.replace(CQ, "I8", None, s.find(CQ)[3]),
     CQ, "comfy_quant must be a rank-1 U8 tensor of UTF-8 JSON, got I8")
case("cq_rank2", fp8,
     lambda s: s.replace(CQ, None, [1, len(s.find(CQ)[3])], s.find(CQ)[3]),
     CQ, "comfy_quant must be a rank-1 U8 tensor of UTF-8 JSON, got U8 of "
         "rank 2")
case("cq_empty_module_prefix", fp8,
     lambda s: s.text(".comfy_quant", json.dumps({"format": "nvfp4"})),
     ".comfy_quant", "comfy_quant key has an empty module prefix")
case("cq_no_format", fp8,
     lambda s: set_conf(s, P, {"full_precision_matrix_mult": True}),
     P, 'comfy_quant has no "format" key')
case("cq_format_misspelled_key", fp8,
     lambda s: set_conf(s, P, {"Format": "float8_e4m3fn"}),
     P, 'comfy_quant has no "format" key')
case("cq_format_number", fp8, lambda s: set_conf(s, P, {"format": 8}),
     P, '"format" must be a string, got 8')
case("cq_format_null", fp8, lambda s: set_conf(s, P, {"format": None}),
     P, '"format" must be a string, got null')
case("cq_format_awq", fp8, lambda s: set_conf(s, P, {"format": "awq_w4a16"}),
     P, "unknown quantization format 'awq_w4a16'")
case("cq_format_fp8", fp8, lambda s: set_conf(s, P, {"format": "fp8"}),
     P, "unknown quantization format 'fp8'")
case("cq_format_wrong_case", fp8,
     lambda s: set_conf(s, P, {"format": "Float8_E4M3FN"}),
     P, "unknown quantization format 'Float8_E4M3FN'")
case("cq_format_svdquant", fp8,
     lambda s: set_conf(s, P, {"format": "svdquant_w4a4"}),
     P, "unknown quantization format 'svdquant_w4a4'")

# --- options (docs/Formats.md §3) ------------------------------------------------
case("convrot_groupsize_string", lambda: int8(convrot=16),
     lambda s: set_conf(s, P, {"format": "int8_tensorwise", "convrot": True,
                               "convrot_groupsize": "16"}),
     P, 'convrot_groupsize must be an integer, got "16"')
case("convrot_groupsize_float", lambda: int8(convrot=16),
     lambda s: set_conf(s, P, {"format": "int8_tensorwise", "convrot": True,
                               "convrot_groupsize": 16.0}),
     P, "convrot_groupsize must be an integer, got 16.0")
case("convrot_groupsize_32", lambda: int8(K=64, convrot=16),
     lambda s: set_conf(s, P, {"format": "int8_tensorwise", "convrot": True,
                               "convrot_groupsize": 32}),
     P, "convrot_groupsize 32 must be a power of 4")
case("convrot_groupsize_1", lambda: w4a4(),
     lambda s: set_conf(s, P, {"format": "convrot_w4a4",
                               "convrot_groupsize": 1}),
     P, "convrot_groupsize 1 must be a power of 4")
case("convrot_groupsize_negative", lambda: w4a4(),
     lambda s: set_conf(s, P, {"format": "convrot_w4a4",
                               "convrot_groupsize": -16}),
     P, "convrot_groupsize -16 must be a power of 4")
case("convrot_groupsize_zero", lambda: w4a4(),
     lambda s: set_conf(s, P, {"format": "convrot_w4a4",
                               "convrot_groupsize": 0}),
     P, "convrot_groupsize 0 must be a power of 4")
case("convrot_groupsize_params_string", lambda: w4a4(),
     lambda s: set_conf(s, P, {"format": "convrot_w4a4",
                               "params": {"convrot_groupsize": "16"}}),
     P, 'convrot_groupsize must be an integer, got "16"')
case("group_size_string", w4a8,
     lambda s: set_conf(s, P, {"format": "asym_w4a8_int8",
                               "group_size": "16", "convrot_groupsize": 16}),
     P, 'group_size must be an integer, got "16"')
case("group_size_params_float", w4a8,
     lambda s: set_conf(s, P, {"format": "asym_w4a8_int8",
                               "convrot_groupsize": 16,
                               "params": {"group_size": 16.5}}),
     P, "group_size must be an integer, got 16.5")
case("linear_dtype_number", w4a4,
     lambda s: set_conf(s, P, {"format": "convrot_w4a4",
                               "convrot_groupsize": 16, "linear_dtype": 8}),
     P, "linear_dtype must be a string, got 8")

# --- required tensors and dtypes (docs/Formats.md §2.2) --------------------------
case("missing_weight", fp8, lambda s: s.drop(P + ".weight"),
     P, "missing required tensor " + P + ".weight")
case("fp8_missing_weight_scale", fp8, lambda s: s.drop(P + ".weight_scale"),
     P, "missing required tensor weight_scale")
case("int8_missing_weight_scale", int8, lambda s: s.drop(P + ".weight_scale"),
     P, "missing required tensor weight_scale")
case("fp8_weight_u8", fp8,
     lambda s: s.replace(P + ".weight", "U8", None, s.find(P + ".weight")[3]),
     P, "weight must be F8_E4M3, got U8 [4, 8]")
case("fp8_e5m2_weight_e4m3", lambda: fp8("float8_e5m2"),
     lambda s: s.replace(P + ".weight", "F8_E4M3"),
     P, "weight must be F8_E5M2, got F8_E4M3")
case("fp8_weight_rank1", fp8,
     lambda s: s.replace(P + ".weight", None, [32]),
     P, "weight must be 2-D [N, K], got F8_E4M3 [32]")
case("fp8_weight_scale_vector", fp8,
     lambda s: s.replace(P + ".weight_scale", None, [4]),
     P, "weight_scale must be a scalar, got F32 [4]")
case("fp8_weight_scale_i32", fp8,
     lambda s: s.replace(P + ".weight_scale", "I32"),
     P, "weight_scale must be F32 or F16 or BF16 or F64, got I32")
case("fp8_input_scale_vector", fp8,
     lambda s: s.replace(P + ".input_scale", None, [8]),
     P, "input_scale must be a scalar, got F32 [8]")
case("fp8_bias_wrong_length", fp8,
     lambda s: s.replace(P + ".bias", None, [5]),
     P, "bias must be [N] = [4], got F32 [5]")

# --- nvfp4 -----------------------------------------------------------------
case("nvfp4_unswizzled_scales", nvfp4,
     lambda s: s.replace(P + ".weight_scale", None, [16, 2]),
     P, "weight_scale must hold the swizzled block scales: 512 entries")
case("nvfp4_scale_f32", nvfp4,
     lambda s: s.replace(P + ".weight_scale", "F32"),
     P, "weight_scale must be F8_E4M3 or U8, got F32 [128, 4]")
case("nvfp4_missing_weight_scale_2", nvfp4,
     lambda s: s.drop(P + ".weight_scale_2"),
     P, "missing required tensor weight_scale_2")
case("nvfp4_weight_scale_2_vector", nvfp4,
     lambda s: s.replace(P + ".weight_scale_2", None, [2]),
     P, "weight_scale_2 must be a scalar, got F32 [2]")
case("nvfp4_rows_not_padded", nvfp4,
     lambda s: s.replace(P + ".weight", None, [15, 16]),
     P, "storage must be padded to 16 in N and K")
case("nvfp4_cols_not_padded", nvfp4,
     lambda s: s.replace(P + ".weight", None, [16, 12]),
     P, "storage must be padded to 16 in N and K")
case("nvfp4_pre_quant_scale_rank2", nvfp4,
     lambda s: s.replace(P + ".pre_quant_scale", None, [1, 32]),
     P, "pre_quant_scale must be [K] = [32], got BF16 [1, 32]")
case("nvfp4_pre_quant_scale_too_long", nvfp4,
     lambda s: s.replace(P + ".pre_quant_scale", None, [48]),
     P, "K from pre_quant_scale")
case("nvfp4_weight_i8", nvfp4,
     lambda s: s.replace(P + ".weight", "I8", None, s.find(P + ".weight")[3]),
     P, "weight must be U8, got I8")

# --- mxfp8 -----------------------------------------------------------------
case("mxfp8_cols_not_padded", mxfp8,
     lambda s: s.replace(P + ".weight", None, [32, 40]),
     P, "storage must be padded to 32 in N and K")
case("mxfp8_unswizzled_scales", mxfp8,
     lambda s: s.replace(P + ".weight_scale", None, [32, 2]),
     P, "weight_scale must hold the swizzled block scales: 512 entries")
case("mxfp8_scale_e4m3", mxfp8,
     lambda s: s.replace(P + ".weight_scale", "F8_E4M3"),
     P, "weight_scale must be F8_E8M0 or U8, got F8_E4M3")
case("mxfp8_e8m0_255", mxfp8,
     lambda s: s.replace(P + ".weight_scale", None, None,
                         b"\xff" + s.find(P + ".weight_scale")[3][1:]),
     P, "is E8M0 255 (NaN)")
case("mxfp8_missing_weight_scale", mxfp8,
     lambda s: s.drop(P + ".weight_scale"),
     P, "missing required tensor weight_scale")

# --- int8_tensorwise -------------------------------------------------------
case("int8_scale_1d_per_row", int8,
     lambda s: s.replace(P + ".weight_scale", None, [4]),
     P, "(a 1-D [N] scale broadcasts along K in ComfyUI's dequant)")
case("int8_scale_n2", int8,
     lambda s: s.replace(P + ".weight_scale", None, [4, 2]),
     P, "weight_scale must be a scalar or per-row [N, 1] = [4, 1]")
case("int8_convrot_scalar_scale", lambda: int8(convrot=16),
     lambda s: s.replace(P + ".weight_scale", None, []),
     P, "ConvRot int8 weight_scale must be per-row [N, 1], got F32 []")
case("int8_convrot_k_not_divisible", lambda: int8(K=64, convrot=64),
     lambda s: s.replace(P + ".weight", None, [4, 48]),
     P, "K = 48 must be divisible by convrot_groupsize 64")
case("int8_bias_wrong_length", int8,
     lambda s: s.replace(P + ".bias", None, [8]),
     P, "bias must be [N] = [4], got BF16 [8]")

# --- convrot_w4a4 ----------------------------------------------------------
case("w4a4_k_not_multiple_of_64", lambda: w4a4(K=64),
     lambda s: s.replace(P + ".weight", None, [4, 16]),
     P, "K = 32 must be divisible by 64")
case("w4a4_default_groupsize_k", w4a4,
     lambda s: set_conf(s, P, {"format": "convrot_w4a4"}),
     P, "K = 64 must be divisible by convrot_groupsize 256")
case("w4a4_scale_n1", w4a4,
     lambda s: s.replace(P + ".weight_scale", None, [4, 1]),
     P, "weight_scale must be [N] = [4], got F32 [4, 1]")
case("w4a4_bad_linear_dtype", w4a4,
     lambda s: set_conf(s, P, {"format": "convrot_w4a4",
                               "convrot_groupsize": 16,
                               "linear_dtype": "fp8"}),
     P, "linear_dtype 'fp8' must be \"int4\" or \"int8\"")

# --- asym_w4a8_int8 --------------------------------------------------------
case("w4a8_weight_not_packed", w4a8,
     lambda s: s.replace(P + ".weight", None, [4, 64]),
     P, "weight_s_rel must be [N, K/G] = [4, 8], got F8_E4M3 [4, 4]")
case("w4a8_group_size_3", w4a8,
     lambda s: set_conf(s, P, {"format": "asym_w4a8_int8", "group_size": 3,
                               "convrot_groupsize": 16}),
     P, "group_size 3 must be >= 4")
case("w4a8_group_size_24", lambda: w4a8(K=96),
     lambda s: set_conf(s, P, {"format": "asym_w4a8_int8", "group_size": 24,
                               "convrot_groupsize": 16}).replace(
         P + ".weight_s_rel", None, [4, 4]),
     P, "group_size 24 must divide 16 or be a multiple of 16")
case("w4a8_k_not_multiple_of_group", lambda: w4a8(K=64, G=16),
     lambda s: set_conf(s, P, {"format": "asym_w4a8_int8", "group_size": 128,
                               "convrot_groupsize": 16}),
     P, "K = 64 must be divisible by group_size 128")
case("w4a8_k_not_multiple_of_16", lambda: w4a8(K=16, G=4, Gr=4),
     lambda s: s.replace(P + ".weight", None, [4, 4]).replace(
         P + ".weight_s_rel", None, [4, 2]),
     P, "K = 8 must be divisible by 16")
case("w4a8_s_rel_wrong_shape", w4a8,
     lambda s: s.replace(P + ".weight_s_rel", None, [4, 2]),
     P, "weight_s_rel must be [N, K/G] = [4, 4], got F8_E4M3 [4, 2]")
case("w4a8_s_rel_transposed", lambda: w4a8(N=8, K=64),
     lambda s: s.replace(P + ".weight_s_rel", None, [4, 8]),
     P, "weight_s_rel must be [N, K/G] = [8, 4], got F8_E4M3 [4, 8]")
case("w4a8_s_channel_missing", w4a8,
     lambda s: s.drop(P + ".weight_s_channel"),
     P, "missing required tensor weight_s_channel")
case("w4a8_s_channel_n1", w4a8,
     lambda s: s.replace(P + ".weight_s_channel", None, [4, 1]),
     P, "weight_s_channel must be [N] = [4], got F32 [4, 1]")
case("w4a8_codebook_15", w4a8,
     lambda s: s.replace(P + ".weight_codebook", None, [15]),
     P, "weight_codebook must be F32 [16], got F32 [15]")
case("w4a8_codebook_f16", w4a8,
     lambda s: s.replace(P + ".weight_codebook", "F16"),
     P, "weight_codebook must be F32, got F16 [16]")
case("w4a8_weight_correction", w4a8,
     lambda s: s.add(P + ".weight_correction", "F32", [4, 4]),
     P, "is not loadable by ComfyUI's 'asym_w4a8_int8' (asymmetric")

# --- w6a8_int8 -------------------------------------------------------------
case("w6a8_codebook", w6a8,
     lambda s: s.add(P + ".weight_codebook", "F32", [16]),
     P, "w6a8_int8 takes no weight_codebook")
case("w6a8_width_not_div3", w6a8,
     lambda s: s.replace(P + ".weight", None, [4, 50]),
     P, "6-bit weight row width 50 bytes must be 3K/4")
case("w6a8_group_size_8", w6a8,
     lambda s: set_conf(s, P, {"format": "w6a8_int8", "group_size": 8,
                               "convrot_groupsize": 16}).replace(
         P + ".weight_s_rel", None, [4, 8]),
     P, "w6a8_int8 group_size 8 must be a multiple of 16")
case("w6a8_k_not_multiple_of_32", lambda: w6a8(K=64),
     lambda s: s.replace(P + ".weight", None, [4, 36]).replace(
         P + ".weight_s_rel", None, [4, 3]),
     P, "w6a8_int8 K = 48 must be divisible by 32")
case("w6a8_weight_correction", w6a8,
     lambda s: s.add(P + ".weight_correction", "F32", [4, 4]),
     P, "is not loadable by ComfyUI's 'w6a8_int8'")

# --- legacy _quantization_metadata (docs/Formats.md §6.1) ------------------------
QM = "__metadata__._quantization_metadata"
case("qm_not_json", lambda: metadata_fp8(meta_ok()),
     lambda s: s.metadata.update({"_quantization_metadata":
                                  '{"format_version": "1.0", "layers": {'}),
     QM, "_quantization_metadata is not valid JSON")
case("qm_not_object", lambda: metadata_fp8(meta_ok()),
     lambda s: s.metadata.update({"_quantization_metadata": '["layers"]'}),
     QM, "must be a JSON object")
case("qm_no_layers", lambda: metadata_fp8(meta_ok()),
     lambda s: s.metadata.update({"_quantization_metadata":
                                  '{"format_version": "1.0"}'}),
     QM, 'needs a "layers" object')
case("qm_layers_array", lambda: metadata_fp8(meta_ok()),
     lambda s: s.metadata.update({"_quantization_metadata": json.dumps(
         {"format_version": "1.0", "layers": [{"format": "float8_e4m3fn"}]})}),
     QM, 'needs a "layers" object')
case("qm_layer_not_object", lambda: metadata_fp8(meta_ok()),
     lambda s: s.metadata.update({"_quantization_metadata": json.dumps(
         {"format_version": "1.0", "layers": {P: "float8_e4m3fn"}})}),
     P, "_quantization_metadata layer entry must be a JSON object")
case("qm_nul_garbage", lambda: metadata_fp8(meta_ok()),
     lambda s: s.metadata.update({"_quantization_metadata":
                                  meta_ok() + "\x00garbage"}),
     QM, "_quantization_metadata contains a NUL byte")
case("qm_layer_not_object_deep", lambda: metadata_fp8(meta_ok()),
     lambda s: s.metadata.update({"_quantization_metadata":
                                  '{"layers": {"%s": %s}}' % (P, deep(DEPTH))}),
     QM, "_quantization_metadata nests deeper than 32 levels")
case("qm_layer_unknown_format", lambda: metadata_fp8(meta_ok()),
     lambda s: s.metadata.update({"_quantization_metadata": json.dumps(
         {"format_version": "1.0", "layers": {P: {"format": "int4"}}})}),
     P, "unknown quantization format 'int4'")
case("qm_layer_no_weight", lambda: metadata_fp8(meta_ok()),
     lambda s: s.metadata.update({"_quantization_metadata": json.dumps(
         {"format_version": "1.0",
          "layers": {P: {"format": "float8_e4m3fn"},
                     "model." + P: {"format": "float8_e4m3fn"}}})}),
     "model." + P, "missing required tensor model." + P + ".weight")

# --- legacy scaled_fp8 (docs/Formats.md §6.2) -----------------------------------
case("scaled_fp8_scale_input_vector", scaled_fp8_legacy,
     lambda s: s.replace(P + ".scale_input", None, [2]),
     P + ".scale_input", "scaled_fp8 scale_input must be a float scalar")
case("scaled_fp8_scale_weight_vector", scaled_fp8_legacy,
     lambda s: s.replace(P + ".scale_weight", None, [4]),
     P, "weight_scale must be a scalar, got F32 [4]")

# --- attention preferences (docs/Formats.md §7.3) -------------------------------
AT = "attention module '" + ATTN + "'"
case("attn_not_json", lambda: with_attention('{"attention": "comfy_kitchen_int8"}'),
     lambda s: set_text(s, ATTN + ".comfy_attention.config", b"{attn"),
     ATTN, "comfy_attention.config is not valid JSON")
case("attn_entry_not_object",
     lambda: with_attention('[{"attention": "comfy_kitchen_int8"}]'),
     lambda s: set_text(s, ATTN + ".comfy_attention.config", b'[{"attention": "comfy_kitchen_int8"}, "sol"]'),
     ATTN, "comfy_attention.config entries must be objects")
case("attn_entry_not_object_deep",
     lambda: with_attention('[{"attention": "comfy_kitchen_int8"}]'),
     lambda s: set_text(s, ATTN + ".comfy_attention.config",
                        '[%s]' % deep(DEPTH)),
     ATTN, "comfy_attention.config nests deeper than 32 levels")
case("attn_scalar", lambda: with_attention('{"attention": "comfy_kitchen_int8"}'),
     lambda s: set_text(s, ATTN + ".comfy_attention.config", b"5"),
     ATTN, "comfy_attention.config must be an object or an array of objects")
case("attn_tau_string",
     lambda: with_attention('{"attention": "comfy_kitchen_sol", "tau": 1.0}'),
     lambda s: set_text(s, ATTN + ".comfy_attention.config", b'{"attention": "comfy_kitchen_sol", "tau": "1"}'),
     ATTN, "comfy_kitchen_sol option tau must be a number")
case("attn_dtype_i8",
     lambda: with_attention('{"attention": "comfy_kitchen_int8"}'),
     lambda s: s.replace(ATTN + ".comfy_attention.config", "I8", None,
                         s.find(ATTN + ".comfy_attention.config")[3]),
     ATTN + ".comfy_attention.config",
     "comfy_attention.config must be a rank-1 U8 tensor")

# --- MoE banks and embeddings (docs/Formats.md §7.1, §7.2) -----------------------
case("moe_scale_expert_count", moe_fp8,
     lambda s: s.replace(MOE + ".weight_scale", None, [3]),
     MOE, "weight_scale must be a scalar or [E] = [2], got F32 [3]")
case("moe_bias_expert_count", moe_fp8,
     lambda s: s.replace(MOE + ".bias", None, [3, 4]),
     MOE, "bias must be [N] per expert = [2, 4], got F32 [3, 4]")
case("moe_3d_int8_flat_scale", lambda: moe_int8_flat(),
     lambda s: s.replace(MOE + ".weight", None, [2, 4, 16]),
     MOE, "weight_scale must be a scalar or")
case("moe_input_scale", moe_fp8,
     lambda s: s.add(MOE + ".input_scale", "F32", []),
     MOE, "input_scale is only valid on Linear modules")
case("moe_flat_rows_not_divisible", moe_int8_flat,
     lambda s: s.replace(MOE + ".weight", None, [9, 16]).replace(
         MOE + ".weight_scale", None, [9, 1]),
     MOE, "flattened bank weight rows 9 are not divisible by num_experts 2")
case("moe_flat_scale_rows", moe_int8_flat,
     lambda s: s.replace(MOE + ".weight_scale", None, [6, 1]),
     MOE, "weight_scale must be a scalar or per-row [E] / [E, N, 1]")
case("embedding_input_scale", embedding_fp8,
     lambda s: s.add(EMB + ".input_scale", "F32", []),
     EMB, "input_scale is only valid on Linear modules")
case("embedding_bias", embedding_fp8,
     lambda s: s.add(EMB + ".bias", "F32", [4]),
     EMB, "bias is not valid on an embedding")
case("embedding_scale_vector", embedding_fp8,
     lambda s: s.replace(EMB + ".weight_scale", None, [8]),
     EMB, "weight_scale must be a scalar, got F32 [8]")


# --------------------------------------------------------------------------


def build(base, mutate=None):
    s = base()
    if mutate is not None:
        r = mutate(s)
        assert r is None or r is s
    return s.image()


def write_all(out_dir, valid_dir=None):
    os.makedirs(out_dir, exist_ok=True)
    names = set()
    for fname, base, mutate, subject, rule, bug in CASES:
        assert fname not in names, fname
        names.add(fname)
        assert "\t" not in subject + rule and "\n" not in subject + rule
        hostile = build(base, mutate)
        assert hostile != build(base), fname + ": mutation changed nothing"
        with open(os.path.join(out_dir, fname), "wb") as f:
            f.write(hostile)
        if valid_dir:
            os.makedirs(valid_dir, exist_ok=True)
            with open(os.path.join(valid_dir, fname), "wb") as f:
                f.write(build(base))
    lines = ["%s\t%s\t%s\n" % (fname, subject, rule)
             for fname, _, _, subject, rule, bug in CASES if bug is None]
    with open(os.path.join(out_dir, "EXPECTED.txt"), "w") as f:
        f.writelines(lines)
    # Stale files from an earlier version of this script.
    for stale in sorted(os.listdir(out_dir)):
        if stale.endswith(".safetensors") and stale not in names:
            os.remove(os.path.join(out_dir, stale))


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check(bin_dir):
    """Runs the tools on every case (and its baseline); returns #failures."""
    translate = os.path.join(bin_dir, "comfyquant-translate")
    run_tool = os.path.join(bin_dir, "comfyquant-run")
    tmp = tempfile.mkdtemp(prefix="cq-module-corpus-")
    failures = 0
    try:
        valid = os.path.join(tmp, "valid")
        write_all(OUT, valid)
        for fname, base, mutate, subject, rule, bug in CASES:
            path = os.path.join(OUT, fname)
            problems = []
            # Baseline must be accepted.
            vp = os.path.join(valid, fname)
            r = subprocess.run([translate, "--inspect", vp],
                               capture_output=True, text=True)
            if r.returncode != 0:
                problems.append("baseline rejected (rc %d): %s"
                                % (r.returncode, r.stderr.strip()))
            before = sha(path)
            results = {}
            for tool, argv in (
                    ("inspect", [translate, "--inspect", path]),
                    ("import", [translate, "--import-checkpoint", path]),
                    ("run", [run_tool, path, "--module",
                             subject if subject in (MOE, EMB, "model." + P)
                             else P,
                             "--dequantize", "-o",
                             os.path.join(tmp, "out.safetensors")])):
                r = subprocess.run(argv, capture_output=True, text=True,
                                   errors="replace")
                results[tool] = r
                if r.returncode != 1:
                    problems.append("%s: rc %d (want 1)" % (tool, r.returncode))
            r = results["inspect"]
            # Subject and rule are looked for with the path removed, so that
            # a file name cannot satisfy them.
            err = r.stderr.replace(path, "<FILE>")
            if path not in r.stderr:
                problems.append("inspect stderr lacks the file path")
            for what, needle in (
                                 ("subject", subject if
                                  subject.startswith("__metadata__")
                                  else "'" + subject + "'"),
                                 ("rule", rule)):
                if needle not in err:
                    problems.append("inspect stderr lacks %s %r" % (what,
                                                                    needle))
            for tool in ("import",):
                if rule not in results[tool].stderr.replace(path, "<FILE>"):
                    problems.append("%s stderr lacks rule" % tool)
            if sha(path) != before:
                problems.append("file changed")
            if os.path.exists(os.path.join(tmp, "out.safetensors")):
                problems.append("comfyquant-run wrote an output")
                os.remove(os.path.join(tmp, "out.safetensors"))
            status = "ok"
            if problems and bug is None:
                status = "FAIL"
                failures += 1
            elif problems:
                status = "known tool bug"
            elif bug is not None:
                status = "FIXED? (marked tool_bug but passes)"
                failures += 1
            print("%-45s %s" % (fname, status))
            for p in problems:
                print("    " + p)
            if problems:
                print("    inspect stderr: " +
                      results["inspect"].stderr.strip()[:400])
    finally:
        shutil.rmtree(tmp)
    print("%d cases, %d listed in EXPECTED.txt, %d failures"
          % (len(CASES), sum(1 for c in CASES if c[5] is None), failures))
    return failures


def main(argv):
    valid_dir = None
    bin_dir = None
    i = 1
    while i < len(argv):
        if argv[i] == "--valid-dir" and i + 1 < len(argv):
            valid_dir = argv[i + 1]
            i += 2
        elif argv[i] == "--check" and i + 1 < len(argv):
            bin_dir = argv[i + 1]
            i += 2
        else:
            sys.stderr.write(__doc__)
            return 2
    if bin_dir:
        return 1 if check(bin_dir) else 0
    write_all(OUT, valid_dir)
    print("wrote %d files to %s" % (len(CASES), OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
