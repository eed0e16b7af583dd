#!/usr/bin/env python3
"""Times `diffgemma quantize` on a full-shape checkpoint slice, on the GPU machine (no 50 GB download needed).

Writes a DiffusionGemma checkpoint of the 26B-A4B shapes with `--layers` layers (random bf16 weights, safetensors
via save_pretrained, 5 GB shards as the published checkpoint), then runs `diffgemma quantize` on it for each profile
and reports, as JSON lines: seconds, source bytes, MB/s and the peak RSS of the quantize process. The 30-layer
estimate is given two ways: by source bytes (the slice's MB/s over the full model's bytes) and by layers (the
whole slice's time charged to its layers, an upper bound since the embedding is copied, not encoded).

Usage: python3 scripts/quantize_timing.py --cli build/gpu/diffgemma --dir /tmp/dg-slice --out $OUT/quantize.jsonl
"""
import argparse
import json
import os
import shutil
import subprocess
import time

import torch
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

from bench_reference import TEXT, VISION

FULL_LAYERS = 30


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--dir", default="/tmp/dg-slice")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--profiles", default="q4,fp8,nvfp4")
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    def emit(**row):
        line = json.dumps(row, sort_keys=True)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")

    src = os.path.join(args.dir, "hf")
    shutil.rmtree(args.dir, ignore_errors=True)
    torch.manual_seed(0)
    t0 = time.time()
    cfg = DiffusionGemmaConfig(text_config=dict(TEXT, num_hidden_layers=args.layers), vision_config=dict(VISION),
                               canvas_length=256)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = DiffusionGemmaForBlockDiffusion(cfg)
    # Bytes of the slice's decoder layers (bf16), to extrapolate the source size to 30 layers.
    layer_bytes = sum(p.numel() * 2 for n, p in model.named_parameters() if ".layers." in n and "vision" not in n)
    model.save_pretrained(src, max_shard_size="5GB")
    del model
    torch.cuda.empty_cache()
    src_bytes = dir_bytes(src)
    emit(event="checkpoint", layers=args.layers, bytes=src_bytes, seconds=time.time() - t0)

    full_bytes = src_bytes + (FULL_LAYERS - args.layers) * layer_bytes / args.layers
    for profile in args.profiles.split(","):
        pack = os.path.join(args.dir, "pack-" + profile)
        t = time.time()
        proc = subprocess.Popen([args.cli, "quantize", "-m", src, "-o", pack, "--profile", profile],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.time() - t
        err = proc.stderr.read().decode(errors="replace")[-400:] if status != 0 else ""
        mbps = src_bytes / seconds / 1e6
        emit(event="quantize", profile=profile, layers=args.layers, ok=status == 0, error=err, seconds=seconds,
             source_bytes=src_bytes, pack_bytes=dir_bytes(pack) if status == 0 else 0, mb_per_s=mbps,
             peak_rss_mib=usage.ru_maxrss / 1024.0, cpus=os.cpu_count(), full_source_bytes=full_bytes,
             estimate_30_layers_by_bytes_s=full_bytes / (mbps * 1e6),
             estimate_30_layers_by_layers_s=seconds * FULL_LAYERS / args.layers)
        shutil.rmtree(pack, ignore_errors=True)
    shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
