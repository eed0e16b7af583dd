#!/usr/bin/env python3
"""A 262,144-id tokenizer with the Gemma 4 chat markers, for serving the synthetic full shape.

`diffgemma serve -m synthetic:26b-a4b:PROFILE` needs a tokenizer of the model's vocabulary that holds the chat
markers (<|turn>, <|channel>, <|tool_call>, ...; src/chat/chat_tokens.cpp), and the real DiffusionGemma tokenizer
cannot be downloaded here. This takes the Gemma 3 tokenizer that `scripts/setup.sh --test-data` fetches (the same
262,144 ids, <bos> 2, <eos> 1) and renames its first unused added tokens (<unused0>, ...) to the markers, in the
added-token list and in the BPE vocabulary alike, marked special, and drops the ids past the model's vocabulary
(Gemma 3's image token, 262,144). Text and ids are otherwise Gemma 3's: good for load runs on random weights
(scripts/serve_load.py), not for a real checkpoint.

  python3 scripts/make_marker_tokenizer.py .cache/test-data/gemma3/tokenizer.json /tmp/marker-tokenizer.json
"""
import argparse
import json
import sys

MARKERS = ["<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|think|>", "<|tool>", "<tool|>", "<|tool_call>",
           "<tool_call|>", "<|tool_response>", "<tool_response|>", '<|"|>']


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", help="the Gemma 3 tokenizer.json (.cache/test-data/gemma3/tokenizer.json)")
    ap.add_argument("out", help="where to write the tokenizer with the markers")
    ap.add_argument("--vocab", type=int, default=262144, help="the model's vocabulary: ids from it up are dropped")
    a = ap.parse_args()
    with open(a.source, encoding="utf-8") as f:
        tok = json.load(f)
    vocab = tok.get("model", {}).get("vocab")
    if not isinstance(vocab, dict):
        sys.exit(f"{a.source}: not a BPE tokenizer.json with a vocabulary object")
    added = {t["content"]: t for t in tok.get("added_tokens", [])}
    for m in MARKERS:
        if m in added:
            sys.exit(f"{a.source} already has {m}")
    for i, marker in enumerate(MARKERS):
        name = f"<unused{i}>"
        if name not in added or vocab.get(name) != added[name]["id"]:
            sys.exit(f"{a.source}: no added token {name} in its vocabulary to rename")
        entry = added[name]
        del vocab[name]
        vocab[marker] = entry["id"]
        entry["content"] = marker
        entry["special"] = True
    tok["added_tokens"] = [t for t in tok["added_tokens"] if t["id"] < a.vocab]
    for piece in [p for p, i in vocab.items() if i >= a.vocab]:
        del vocab[piece]
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    print(f"{a.out}: {len(vocab)} ids, markers at {[added_id(tok, m) for m in MARKERS]}")
    return 0


def added_id(tok: dict, content: str) -> int:
    return next(t["id"] for t in tok["added_tokens"] if t["content"] == content)


if __name__ == "__main__":
    sys.exit(main())
