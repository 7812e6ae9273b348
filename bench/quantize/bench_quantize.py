"""Quantizer benchmark: comfyquant-quantize against its peers, in one run.

  bench_quantize.py --bin build/bin [--gb 2] [--layers 4] [--threads T]
                    [--out bench/results.md]

Run with the fixtures venv's python (torch + comfy-kitchen, pinned in
test/fixtures/requirements.txt), which scripts/bench --quantize does.

Peers, on the same synthetic BF16 source (3072 x 3072 linears, names no
policy knows, so the generic policy selects every one):
  * streaming: read the source and write the same bytes to a new file, with
    fsync (what any converter must at least do; the physical limit here);
  * kitchen eager: comfy-kitchen's layout quantize (the one ComfyUI's
    tooling calls) on the CPU with torch at the same thread count, on the
    first --layers layers, against ours on a checkpoint of those layers.
Also: ours with --max-memory 256M on the whole (multi-GB) source, its
reported peak working memory and sampled RssAnon; --optimizer mse against
none. Writes a "Quantize" section into --out (replacing an earlier one).
"""
import argparse
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--gb", type=float, default=2.0)
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--threads", type=int, default=os.cpu_count())
ap.add_argument("--out", default="bench/results.md")
ap.add_argument("--workdir", default=None)
args = ap.parse_args()

N = K = 3072
layer_bytes = N * K * 2
work = args.workdir or tempfile.mkdtemp(prefix="cq-bench-quantize-")
os.makedirs(work, exist_ok=True)


def write_source(path, count):
    names = ["blocks.%03d.proj.weight" % i for i in range(count)]
    header, off = {}, 0
    for n in names:
        header[n] = {"dtype": "BF16", "shape": [N, K], "data_offsets": [off, off + layer_bytes]}
        off += layer_bytes
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode())
        for _ in names:
            w = (rng.standard_normal((N, K), dtype=np.float32) * 0.02)
            f.write((w.view(np.uint32) >> 16).astype(np.uint16).tobytes())
    return names


def ours(src, out, fmt, *extra):
    rep = out + ".json"
    t = time.perf_counter()
    subprocess.run([os.path.join(args.bin, "comfyquant-quantize"), src, "--format", fmt, "-o",
                    out, "--overwrite", "--quiet", "--threads", str(args.threads), "--report",
                    rep] + list(extra), check=True, capture_output=True)
    dt = time.perf_counter() - t
    r = json.load(open(rep))
    os.remove(rep)
    return dt, r


def streaming(src, dst):
    t = time.perf_counter()
    with open(src, "rb") as i, open(dst, "wb") as o:
        while True:
            b = i.read(64 << 20)
            if not b:
                break
            o.write(b)
        o.flush()
        os.fsync(o.fileno())
    return time.perf_counter() - t


def drop(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


count = max(args.layers, int(args.gb * (1 << 30) / layer_bytes))
big = os.path.join(work, "big.safetensors")
small = os.path.join(work, "small.safetensors")
print("writing sources (%d + %d layers of %dx%d BF16)" % (count, args.layers, N, K), file=sys.stderr)
write_source(big, count)
write_source(small, args.layers)

import torch  # noqa: E402
import comfy_kitchen as ck  # noqa: E402
from comfy_kitchen import tensor as ckt  # noqa: E402

torch.set_num_threads(args.threads)
formats = [
    ("int8", "per-row int8", lambda w: ckt.TensorWiseINT8Layout.quantize(w, per_channel=True)),
    ("int8-tensor", "per-tensor int8", lambda w: ckt.TensorWiseINT8Layout.quantize(w)),
    ("int8-convrot", "int8 + ConvRot 256", lambda w: ckt.TensorWiseINT8Layout.quantize(w, per_channel=True, convrot=True)),
    ("fp8-e4m3", "float8_e4m3fn", lambda w: ckt.TensorCoreFP8Layout.quantize(w)),
    ("nvfp4", "nvfp4", lambda w: ckt.TensorCoreNVFP4Layout.quantize(w)),
    ("mxfp8", "mxfp8", lambda w: ckt.TensorCoreMXFP8Layout.quantize(w)),
    ("w4a4", "convrot_w4a4", lambda w: ckt.TensorCoreConvRotW4A4Layout.quantize(w, convrot_groupsize=256)),
    ("w4a8", "asym_w4a8_int8", lambda w: ckt.AsymW4A8Int8Layout.quantize(w)),
    ("w6a8", "w6a8_int8", lambda w: ckt.AsymW4A8Int8Layout.quantize(w, bits=6)),
]
weights = [torch.from_numpy(
    np.fromfile(small, dtype=np.uint16, count=N * K, offset=8 + struct.unpack("<Q", open(small, "rb").read(8))[0] + i * layer_bytes)
    .astype(np.int32).__lshift__(16).view(np.float32).reshape(N, K)).to(torch.bfloat16)
    for i in range(args.layers)]

from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402


def kitchen_end_to_end(fn, out):
    """What a Python quantizer does per file: read each layer, quantize it
    with kitchen, write the state dict, fsync."""
    t = time.perf_counter()
    tensors = {}
    with safe_open(small, "pt") as f:
        for name in f.keys():
            qdata, params = fn(f.get_tensor(name))
            prefix = name[:-len(".weight")]
            tensors[prefix + ".weight"] = qdata.contiguous()
            for key in ("scale", "block_scale", "s_channel", "codebook"):
                v = getattr(params, key, None)
                if isinstance(v, torch.Tensor):
                    tensors[prefix + "." + key] = v.contiguous()
    save_file(tensors, out)
    with open(out, "rb+") as fh:
        os.fsync(fh.fileno())
    return time.perf_counter() - t


rows = []
stream_small = streaming(small, os.path.join(work, "copy.safetensors"))
drop(os.path.join(work, "copy.safetensors"))
for cli, label, fn in formats:
    with ck.use_backend("eager"):
        t = time.perf_counter()
        for w in weights:
            fn(w)
        kt = time.perf_counter() - t
        ke = kitchen_end_to_end(fn, os.path.join(work, "k.safetensors"))
    drop(os.path.join(work, "k.safetensors"))
    ot, rep = ours(small, os.path.join(work, "q.safetensors"), cli)
    drop(os.path.join(work, "q.safetensors"))
    rows.append((cli, label, ot, rep["encode_seconds"], kt, ke, stream_small))
    print("%-13s ours %.3f s  kitchen eager %.3f s (%.1fx), with file I/O %.3f s (%.1fx)  streaming %.3f s" % (
        cli, ot, kt, kt / ot, ke, ke / ot, stream_small), file=sys.stderr)

stream_big = streaming(big, os.path.join(work, "copy.safetensors"))
drop(os.path.join(work, "copy.safetensors"))
big_rows = []
for cli in ("int8", "int8-tensor", "fp8-e4m3"):
    ot, rep = ours(big, os.path.join(work, "qb.safetensors"), cli, "--max-memory", "256M")
    drop(os.path.join(work, "qb.safetensors"))
    big_rows.append((cli, ot, rep["peak_working_bytes"], rep["peak_rss_anon_bytes"]))
    print("%s on %.2f GB with --max-memory 256M: %.2f s (streaming %.2f s), peak %.1f MB" % (
        cli, os.path.getsize(big) / 1e9, ot, stream_big, rep["peak_working_bytes"] / 1e6), file=sys.stderr)

mse_rows = []
for cli in ("int8", "fp8-e4m3", "w4a4"):
    tn, _ = ours(small, os.path.join(work, "m.safetensors"), cli)
    tm, _ = ours(small, os.path.join(work, "m.safetensors"), cli, "--optimizer", "mse")
    drop(os.path.join(work, "m.safetensors"))
    mse_rows.append((cli, tn, tm))

cpu = platform.processor() or ""
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
md = ["## Quantize (comfyquant-quantize)", "",
      "`scripts/bench --quantize` on %s, %d threads, torch %s, comfy-kitchen %s. Source: BF16 "
      "linears %dx%d. Ratios are peer time / our time (higher is better for us)." % (
          cpu, args.threads, torch.__version__, __import__("importlib.metadata").metadata.version("comfy-kitchen"), N, K), "",
      "Per format, %d layers (%.0f MB). Ours is the whole job (read the file, encode, write, "
      "fsync). Kitchen eager is its layout quantize alone on tensors already in memory, and "
      "again with the file I/O a Python quantizer adds (safetensors read, save_file, fsync). "
      "Streaming reads and writes the same source bytes (the physical limit here). "
      "Targets: >= 10x kitchen eager; FP8/INT8 >= 0.5x streaming." % (args.layers, args.layers * layer_bytes / 1e6), "",
      "`ours encode s` is the part of ours spent reading source rows and computing codes "
      "(the report's `encode_seconds`), the like of kitchen eager's time.", "",
      "| --format | kitchen layout | ours s | ours encode s | kitchen eager s | vs eager (whole job) | vs eager (encode) | kitchen + I/O s | vs kitchen + I/O | streaming s | vs streaming |",
      "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
for cli, label, ot, oe, kt, ke, st in rows:
    md.append("| %s | %s | %.3f | %.3f | %.3f | %.1fx | %.1fx | %.3f | %.1fx | %.3f | %.2fx |" % (
        cli, label, ot, oe, kt, kt / ot, kt / max(oe, 1e-9), ke, ke / ot, st, st / ot))
md += ["", "Whole source %.2f GB with `--max-memory 256M` (target: within budget; FP8/INT8 >= 0.5x streaming):" % (os.path.getsize(big) / 1e9), "",
       "| --format | ours s | streaming s | vs streaming | peak working MB | RssAnon peak MB |", "|---|--:|--:|--:|--:|--:|"]
for cli, ot, pw, ra in big_rows:
    md.append("| %s | %.2f | %.2f | %.2fx | %.1f | %.1f |" % (cli, ot, stream_big, stream_big / ot, pw / 1e6, ra / 1e6))
md += ["", "`--optimizer mse` (default 6 steps, weight objective) against `none` (target: within 10x):", "",
       "| --format | none s | mse s | mse / none |", "|---|--:|--:|--:|"]
for cli, tn, tm in mse_rows:
    md.append("| %s | %.3f | %.3f | %.1fx |" % (cli, tn, tm, tm / tn))
section = "\n".join(md) + "\n"
text = open(args.out).read() if os.path.exists(args.out) else ""
start = text.find("## Quantize (comfyquant-quantize)")
if start >= 0:
    end = text.find("\n## ", start + 1)
    text = text[:start] + section + (text[end + 1:] if end >= 0 else "")
else:
    text = text.rstrip("\n") + "\n\n" + section
open(args.out, "w").write(text)
drop(big)
drop(small)
print(section)
