#!/usr/bin/env python3
"""Side-by-side table of `diffgemma bench` and scripts/bench_reference.py lines from JSONL files: for each shape
(prefill tokens, denoise context, generate) the engine's number and each transformers variant's, with the ratios
(> 1: the engine is faster). The transformers variants are its modes, eager (sdpa attention) and compiled, and
eager with transformers' own attention ("eager-attn"). A measurement recorded as a failure ("result": "out of
memory", "timeout" or "error") shows as that word. The last line of each kind wins. Standard library only.

Usage: python3 scripts/bench_ratios.py $OUT/bench.jsonl [more.jsonl ...] [--engine-label full30] [--markdown]
       python3 scripts/bench_ratios.py --selftest
"""
import argparse
import json
import sys

KINDS = {"prefill": ("prefill tok/s", "tokens", "tok_per_s"),
         "denoise": ("denoise ms/step", "context", "ms_per_step"),
         "generate": ("committed tok/s", "prompt_tokens", "committed_tok_per_s")}


def variant(j):
    """The transformers column of a reference line: its mode, and -attn for transformers' own attention."""
    mode = j.get("mode", "eager")
    return mode + "-attn" if mode == "eager" and j.get("attn") == "eager" else mode


def collect(lines, engine_label):
    """(kind, shape) -> {column: number or failure word}, and the reference columns in order of appearance."""
    rows, columns = {}, []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        if j.get("layers", 30) != 30 or j.get("event") not in KINDS:
            continue
        if j.get("reference") == "transformers":
            who = variant(j)
            if who not in columns:
                columns.append(who)
        elif j.get("label") == engine_label:
            who = "engine"
        else:
            continue
        name, shape_key, value_key = KINDS[j["event"]]
        shape = j.get(shape_key, 1024 if j["event"] == "generate" else None)
        value = j.get("result") if "result" in j else j.get(value_key)
        if shape is not None and value is not None:
            rows.setdefault((name, shape), {})[who] = value
    return rows, columns


def table(rows, columns):
    """Header and rows of cells (strings)."""
    head = ["what", "shape", "engine"] + columns + [f"vs {c}" for c in columns]
    body = []
    for (kind, shape), v in sorted(rows.items()):
        e = v.get("engine")

        def cell(x):
            return "-" if x is None else x if isinstance(x, str) else f"{x:.1f}"

        def ratio(ref):
            if not isinstance(e, (int, float)) or not isinstance(ref, (int, float)) or e == 0 or ref == 0:
                return "-"
            return f"{(ref / e if kind.startswith('denoise') else e / ref):.2f}x"  # time: lower is better

        body.append([kind, str(shape), cell(e)] + [cell(v.get(c)) for c in columns] +
                    [ratio(v.get(c)) for c in columns])
    return head, body


def render(head, body, markdown):
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(out + ["| " + " | ".join(r) + " |" for r in body])
    widths = [max(len(r[i]) for r in [head] + body) + 2 for i in range(len(head))]
    return "\n".join("".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in [head] + body)


def selftest():
    lines = [json.dumps(x) for x in [
        {"event": "prefill", "label": "long", "layers": 30, "tokens": 32768, "tok_per_s": 40000.0},
        {"event": "prefill", "label": "other", "layers": 30, "tokens": 32768, "tok_per_s": 1.0},
        {"event": "prefill", "reference": "transformers", "mode": "eager", "attn": "sdpa", "layers": 30,
         "tokens": 32768, "tok_per_s": 10000.0},
        {"event": "prefill", "reference": "transformers", "mode": "eager", "attn": "eager", "layers": 30,
         "tokens": 32768, "result": "out of memory", "error": "CUDA out of memory"},
        {"event": "denoise", "label": "long", "layers": 30, "context": 131072, "ms_per_step": 33.0},
        {"event": "denoise", "reference": "transformers", "mode": "eager", "attn": "sdpa", "context": 131072,
         "result": "timeout", "timeout_s": 120},
        {"event": "denoise", "reference": "transformers", "mode": "eager", "attn": "eager", "layers": 30,
         "context": 131072, "ms_per_step": 330.0},
        {"event": "start", "reference": "transformers", "mode": "eager", "what": "prefill", "tokens": 131072},
        {"event": "prefill", "label": "long", "layers": 2, "tokens": 32768, "tok_per_s": 9.0}]]
    rows, columns = collect(lines, "long")
    assert columns == ["eager", "eager-attn"], columns
    assert rows == {("prefill tok/s", 32768): {"engine": 40000.0, "eager": 10000.0, "eager-attn": "out of memory"},
                    ("denoise ms/step", 131072): {"engine": 33.0, "eager": "timeout", "eager-attn": 330.0}}, rows
    head, body = table(rows, columns)
    assert head == ["what", "shape", "engine", "eager", "eager-attn", "vs eager", "vs eager-attn"], head
    assert body[0] == ["denoise ms/step", "131072", "33.0", "timeout", "330.0", "-", "10.00x"], body[0]
    assert body[1] == ["prefill tok/s", "32768", "40000.0", "10000.0", "out of memory", "4.00x", "-"], body[1]
    md = render(head, body, True).splitlines()
    assert md[0].startswith("| what | shape | engine |") and md[1] == "|---|---|---|---|---|---|---|", md[:2]
    assert len(render(head, body, False).splitlines()) == 3
    print("bench_ratios selftest: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", nargs="*")
    ap.add_argument("--engine-label", default="full30")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (for the docs)")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        selftest()
        return
    if not args.jsonl:
        ap.error("name at least one JSONL file")
    lines = [ln for path in args.jsonl for ln in open(path)]
    rows, columns = collect(lines, args.engine_label)
    if not rows:
        sys.exit(f"bench_ratios: no line of label '{args.engine_label}' or of transformers in {', '.join(args.jsonl)}")
    print(render(*table(rows, columns), args.markdown))


if __name__ == "__main__":
    main()
