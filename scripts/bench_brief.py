#!/usr/bin/env python3
"""Reads `diffgemma bench` JSON lines on stdin and prints one short line per result (prefill, denoise step with its
largest stages, generation, memory); other lines pass through."""
import json
import sys

for line in sys.stdin:
    try:
        j = json.loads(line)
    except ValueError:
        print(line.rstrip()[:200])
        continue
    e = j.get("event")
    if e == "prefill":
        print(f"  prefill {j['tokens']}: {j['tok_per_s']:.0f} tok/s")
    elif e == "denoise":
        top = sorted(j["stages_ms"].items(), key=lambda kv: -kv[1])[:6]
        print(f"  step @{j['context']}: {j['ms_per_step']:.2f} ms  " + " ".join(f"{k} {v:.2f}" for k, v in top))
    elif e == "generate":
        print(f"  generate: {j['committed_tok_per_s']:.0f} tok/s, first block {j['time_to_first_block_s']:.3f} s")
    elif e == "memory":
        print(f"  peak {j['peak_gib']:.1f} GiB")
    sys.stdout.flush()
