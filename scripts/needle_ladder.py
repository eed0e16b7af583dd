#!/usr/bin/env python3
"""The needle ladder: retrieval exact-match per (context length, depth) cell through `diffgemma ask`.

Each cell renders a needle prompt (scripts/needle_data.py: filler words, the needle "The code of NAME is DDDDD." at
the cell's depth, distractor codes elsewhere, the question last) and runs `diffgemma ask -m MODEL --json` on it;
the cell passes when the answer's first number is the needle's code. Prints a table (lengths down, depths across)
and one JSON line per cell and a summary; the exit status is 1 when a cell at --require-length (default: none), or
with --require-all any cell, misses, so CI can hold a trained model to its ladder, and 2 when `ask` itself failed on a
cell (an error is not a miss).

  python3 scripts/needle_ladder.py --diffgemma build/cpu/diffgemma -m models/dg-needle \\
      --words 1000,4000,12000 --depths 0,0.25,0.5,0.75,1 --require-length 12000
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from needle_data import needle_prompt  # noqa: E402


def run_cell(a: argparse.Namespace, words: int, depth: float, seed: int, tmp: str) -> dict:
    text, key, value = needle_prompt(random.Random(seed), words, depth, digits=a.digits)
    path = os.path.join(tmp, f"needle-{words}-{depth}.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    cmd = [a.diffgemma, "ask", "-m", a.model, "--prompt-file", path, "--json", "-q", "--max-new-tokens",
           str(a.max_new_tokens), "--seed", str(seed)] + a.extra
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    cell = {"event": "needle_cell", "words": words, "depth": depth, "seed": seed, "key": key, "code": value,
            "seconds": time.monotonic() - t0, "pass": False}
    if p.returncode != 0:
        cell["error"] = (p.stderr or p.stdout).strip()[-300:]
        return cell
    j = json.loads(p.stdout)
    answer = j.get("text", "")
    digits = re.search(r"\d+", answer)
    cell.update({"prompt_tokens": j.get("prompt_tokens"), "answer": answer[:80],
                 "pass": digits is not None and digits.group(0) == value})
    return cell


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--diffgemma", default="build/cpu/diffgemma", help="the CLI binary")
    ap.add_argument("-m", "--model", required=True, help="the model directory (ask -m)")
    ap.add_argument("--words", default="500,2000", help="filler words per prompt, comma-separated (~1.5 tokens each)")
    ap.add_argument("--depths", default="0,0.5,1", help="needle depths in [0, 1], comma-separated")
    ap.add_argument("--seed", type=int, default=1, help="the first cell's seed (cells count up from it)")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--digits", type=int, default=5, choices=(2, 5),
                    help="the codes' length in digits (the model's training data's: needle_data.py train --digits)")
    ap.add_argument("--require-length", type=int, default=0, help="exit 1 if a cell of this many words fails")
    ap.add_argument("--require-all", action="store_true", help="exit 1 if any cell fails")
    ap.add_argument("extra", nargs="*", help="more ask options after --, e.g. -- --backend cuda")
    a = ap.parse_args()
    lengths = [int(w) for w in a.words.split(",")]
    depths = [float(d) for d in a.depths.split(",")]
    if any(w < 1 for w in lengths) or any(not 0.0 <= d <= 1.0 for d in depths):
        ap.error("--words must be positive and --depths within [0, 1]")
    if a.require_length and a.require_length not in lengths:
        ap.error("--require-length must be one of --words")
    cells = []
    with tempfile.TemporaryDirectory() as tmp:
        seed = a.seed
        for w in lengths:
            for d in depths:
                cell = run_cell(a, w, d, seed, tmp)
                seed += 1
                cells.append(cell)
                print(json.dumps(cell), flush=True)
    print(f"\n{'words':>8} {'tokens':>8} " + " ".join(f"{d:>6}" for d in depths))
    for w in lengths:
        row = [c for c in cells if c["words"] == w]
        tokens = max((c.get("prompt_tokens") or 0) for c in row)
        print(f"{w:>8} {tokens:>8} " + " ".join(f"{'pass' if c['pass'] else ('ERROR' if 'error' in c else 'miss'):>6}"
                                              for c in row))
    passed = sum(c["pass"] for c in cells)
    required = [c for c in cells if a.require_all or c["words"] == a.require_length]
    summary = {"event": "needle_ladder", "model": a.model, "cells": len(cells), "passed": passed,
               "required_length": "all" if a.require_all else a.require_length,
               "required_passed": sum(c["pass"] for c in required), "required_cells": len(required)}
    print(json.dumps(summary))
    if any("error" in c for c in cells):
        return 2
    return 1 if any(not c["pass"] for c in required) else 0


if __name__ == "__main__":
    sys.exit(main())
