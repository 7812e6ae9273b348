#!/usr/bin/env python3
"""Writes the container-level hostile corpus into test/hostile/container/.

Each hostile file breaks exactly one rule of the safetensors container (or of
a sharded *.safetensors.index.json) and is listed in EXPECTED.txt as

    <filename>\t<substring the error message must contain>

The substring is a literal (not a regex) taken from the rule text that
comfyquant::rt (runtime/src/Safetensors.cpp) produces. Opening any listed
file with Checkpoint::open must fail with exactly that rule (the CLI: exit
status 1). Files under container/shards/ are *valid* helper shards referenced
by the index cases; they are not listed and must open cleanly.

Python 3 standard library only. Deterministic: rerunning rewrites identical
bytes.
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "container")
SHARDS = os.path.join(OUT, "shards")


def le64(n):
    return struct.pack("<Q", n)


def image(header, data=b""):
    """A safetensors file: u64 LE header length, header bytes, data."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    return le64(len(header)) + header + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def hdr(obj):
    return json.dumps(obj, separators=(",", ":"))


def valid_shard(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, bytes)."""
    h = {}
    if metadata:
        h["__metadata__"] = metadata
    off = 0
    data = b""
    for name, dtype, shape, raw in tensors:
        h[name] = entry(dtype, shape, off, off + len(raw))
        off += len(raw)
        data += raw
    text = hdr(h)
    text += " " * ((8 - len(text) % 8) % 8)
    return image(text, data)


U8x4 = ("U8", [4], b"\x01\x02\x03\x04")

# (filename, bytes, expected substring)
CASES = [
    # --- file / prefix level -------------------------------------------------
    ("empty_file.safetensors", b"",
     "file is 0 bytes, shorter than the 8-byte header length"),
    ("truncated_4_bytes.safetensors", b"\x02\x00\x00\x00",
     "file is 4 bytes, shorter than the 8-byte header length"),
    ("header_len_huge.safetensors", le64(1 << 63) + b"{}",
     "exceeds the limit of 104857600 bytes"),
    ("header_len_past_eof.safetensors", le64(64) + b"{}",
     "header length 64 exceeds the file size 10 minus 8"),
    ("header_len_zero.safetensors", le64(0),
     "header is not valid JSON"),
    # --- JSON level ----------------------------------------------------------
    ("header_not_json.safetensors", image("{not json}"),
     "header is not valid JSON"),
    ("header_json_array.safetensors", image("[]"),
     "header JSON is an array, not an object"),
    ("header_invalid_utf8.safetensors",
     image(b'{"w\xff":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
     "header is not valid UTF-8 (byte 0xFF at offset 3)"),
    ("header_leading_bom.safetensors", image(b"\xef\xbb\xbf{}"),
     "header JSON must begin with '{'"),
    ("duplicate_tensor_key.safetensors",
     image('{"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},'
           '"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
     'duplicate key "w" in the header JSON'),
    # --- entry level ---------------------------------------------------------
    ("entry_not_object.safetensors", image('{"w":[1,2]}'),
     "entry is an array, not an object"),
    ("entry_missing_offsets.safetensors",
     image('{"w":{"dtype":"U8","shape":[4]}}', b"\0" * 4),
     'entry lacks "data_offsets"'),
    ("entry_extra_field.safetensors",
     image('{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4],"x":1}}',
           b"\0" * 4),
     'unknown field "x"'),
    ("unknown_dtype.safetensors",
     image(hdr({"w": entry("F4", [4], 0, 2)}), b"\0" * 2),
     'unknown dtype "F4"'),
    ("negative_dim.safetensors",
     image(hdr({"w": entry("U8", [-4], 0, 4)}), b"\0" * 4),
     "shape[0] is -4, not a non-negative integer"),
    ("non_integer_dim.safetensors",
     image('{"w":{"dtype":"U8","shape":[2.5],"data_offsets":[0,2]}}',
           b"\0" * 2),
     "shape[0] is 2.5, not a non-negative integer"),
    ("string_dim.safetensors",
     image('{"w":{"dtype":"U8","shape":["4"],"data_offsets":[0,4]}}',
           b"\0" * 4),
     "shape[0] is a string, not a non-negative integer"),
    ("dim_above_int64.safetensors",
     image(hdr({"w": entry("U8", [1 << 63], 0, 0)})),
     "shape[0] is 9223372036854775808, larger than 2^63-1"),
    ("numel_overflow.safetensors",
     image(hdr({"w": entry("U8", [1 << 40, 1 << 40], 0, 0)})),
     "shape [1099511627776, 1099511627776] has more than 2^63-1 elements"),
    ("nbytes_overflow.safetensors",
     image(hdr({"w": entry("F64", [1 << 62], 0, 0)})),
     "x F64 needs more than 2^64-1 bytes"),
    ("shape_size_mismatch.safetensors",
     image(hdr({"w": entry("F32", [4, 8], 0, 96)}), b"\0" * 96),
     "data_offsets [0, 96) hold 96 bytes but shape [4, 8] x F32 needs 128 "
     "bytes"),
    ("offsets_three_elements.safetensors",
     image('{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4,8]}}',
           b"\0" * 4),
     "data_offsets must be [begin, end] (2 integers)"),
    ("offsets_negative.safetensors",
     image('{"w":{"dtype":"U8","shape":[0],"data_offsets":[-1,-1]}}'),
     "data_offsets[0] is -1, not a non-negative integer"),
    ("offsets_begin_gt_end.safetensors",
     image(hdr({"w": entry("U8", [0], 8, 4)}), b"\0" * 8),
     "data_offsets [8, 4] have begin > end"),
    # --- layout level --------------------------------------------------------
    ("offsets_beyond_data.safetensors",
     image(hdr({"w": entry("U8", [8], 0, 8)}), b"\0" * 4),
     "data_offsets [0, 8) extend past the data section of 4 bytes"),
    ("overlapping_ranges.safetensors",
     image(hdr({"a": entry("U8", [8], 0, 8), "b": entry("U8", [8], 4, 12)}),
           b"\0" * 12),
     "data_offsets [4, 12) overlap tensor 'a' at [0, 8)"),
    ("hole_between_tensors.safetensors",
     image(hdr({"a": entry("U8", [4], 0, 4), "b": entry("U8", [4], 8, 12)}),
           b"\0" * 12),
     "bytes [4, 8) of the data section belong to no tensor (hole"),
    ("trailing_bytes.safetensors",
     image(hdr({"a": entry("U8", [4], 0, 4)}), b"\0" * 6),
     "bytes [4, 6) of the data section belong to no tensor (trailing"),
    # --- __metadata__ --------------------------------------------------------
    ("metadata_not_object.safetensors", image('{"__metadata__":["x"]}'),
     "__metadata__ is an array, not an object"),
    ("metadata_value_not_string.safetensors",
     image('{"__metadata__":{"format":"pt","total_size":123}}'),
     '__metadata__ value for key "total_size" is a number, not a string'),
    # --- sharded index -------------------------------------------------------
    ("missing_shard.safetensors.index.json",
     hdr({"weight_map": {"a.weight": "shards/missing.safetensors"}}).encode(),
     'weight_map shard "shards/missing.safetensors"'),
    ("tensor_missing_from_shard.safetensors.index.json",
     hdr({"weight_map": {"a.weight": "shards/a.safetensors",
                         "ghost.weight": "shards/a.safetensors"}}).encode(),
     'listed in weight_map under shard "shards/a.safetensors" but absent'),
    ("dotdot_path.safetensors.index.json",
     hdr({"weight_map": {"a.weight": "../container/shards/a.safetensors"}})
     .encode(),
     'has a ".." component'),
    ("absolute_path.safetensors.index.json",
     hdr({"weight_map": {"a.weight": "/etc/passwd"}}).encode(),
     "is an absolute path"),
    ("duplicate_across_shards.safetensors.index.json",
     hdr({"weight_map": {"a.weight": "shards/a.safetensors",
                         "b.weight": "shards/b_with_dup.safetensors"}})
     .encode(),
     "present in two shards"),
    ("bad_json.safetensors.index.json",
     b'{"weight_map": {"a.weight": "shards/a.safetensors",}',
     "index JSON is not valid JSON"),
    ("index_is_array.safetensors.index.json",
     b'["shards/a.safetensors"]',
     "index JSON is array, not an object"),
    ("weight_map_not_object.safetensors.index.json",
     b'{"weight_map": ["shards/a.safetensors"]}',
     "weight_map is array, not an object"),
    ("index_duplicate_key.safetensors.index.json",
     b'{"weight_map": {"a.weight": "shards/a.safetensors", '
     b'"a.weight": "shards/b_with_dup.safetensors"}}',
     'duplicate key "a.weight" in index JSON'),
]

# Valid shards referenced by the index cases.
SHARD_FILES = [
    ("a.safetensors", valid_shard([("a.weight",) + U8x4],
                                  {"format": "pt"})),
    ("b_with_dup.safetensors",
     valid_shard([("b.weight", "U8", [2], b"\x05\x06"),
                  ("a.weight",) + U8x4])),
]


def main():
    os.makedirs(SHARDS, exist_ok=True)
    names = set()
    lines = []
    for name, data, expect in CASES:
        assert name not in names, name
        assert "\t" not in expect and "\n" not in expect
        assert len(data) <= 4096, name  # keep the corpus tiny
        names.add(name)
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        lines.append("%s\t%s\n" % (name, expect))
    for name, data in SHARD_FILES:
        with open(os.path.join(SHARDS, name), "wb") as f:
            f.write(data)
    with open(os.path.join(OUT, "EXPECTED.txt"), "w", encoding="utf-8") as f:
        f.writelines(lines)
    print("wrote %d hostile files + %d helper shards to %s"
          % (len(CASES), len(SHARD_FILES), OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
