#!/usr/bin/env python3
"""Side-by-side table of `diffgemma bench` and scripts/bench_reference.py lines from one JSONL file: for each shape
(prefill tokens, denoise context, generate) the engine's number and transformers eager / compiled, with the ratios
(> 1: the engine is faster). The last line of each kind wins. Standard library only.

Usage: python3 scripts/bench_ratios.py $OUT/bench.jsonl [more.jsonl ...] [--engine-label full30]
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", nargs="+")
    ap.add_argument("--engine-label", default="full30")
    args = ap.parse_args()
    rows = {}  # (kind, shape) -> {"engine"|"eager"|"compiled": value}
    lines = [ln for path in args.jsonl for ln in open(path)]
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        if j.get("layers") != 30:
            continue
        if j.get("reference") == "transformers":
            who = j.get("mode")
        elif j.get("label") == args.engine_label:
            who = "engine"
        else:
            continue
        ev = j.get("event")
        if ev == "prefill":
            rows.setdefault(("prefill tok/s", j["tokens"]), {})[who] = j["tok_per_s"]
        elif ev == "denoise":
            rows.setdefault(("denoise ms/step", j["context"]), {})[who] = j["ms_per_step"]
        elif ev == "generate":
            rows.setdefault(("committed tok/s", j.get("prompt_tokens", 1024)), {})[who] = j["committed_tok_per_s"]
    print(f"{'what':<18}{'shape':>7}{'engine':>10}{'eager':>10}{'compiled':>10}{'vs eager':>10}{'vs compiled':>12}")
    for (kind, shape), v in sorted(rows.items()):
        e = v.get("engine")

        def ratio(ref):
            if e is None or ref is None:
                return "-"
            r = ref / e if kind.startswith("denoise") else e / ref  # time: lower is better
            return f"{r:.2f}x"

        fmt = lambda x: "-" if x is None else f"{x:.1f}"
        print(f"{kind:<18}{shape:>7}{fmt(e):>10}{fmt(v.get('eager')):>10}{fmt(v.get('compiled')):>10}"
              f"{ratio(v.get('eager')):>10}{ratio(v.get('compiled')):>12}")


if __name__ == "__main__":
    main()
