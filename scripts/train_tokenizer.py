#!/usr/bin/env python3
"""Trains a small byte-fallback BPE tokenizer with the Gemma pipeline and writes an HF tokenizer.json.

    python3 scripts/train_tokenizer.py --vocab 4096 --out models/dg-tiny/tokenizer.json \
        /usr/share/common-licenses/*

Standard library only (Python 3.11+). Deterministic: the same inputs give a byte-identical file (pair
ties are broken by the lexicographically smallest pair). Layout (docs/TOKENIZER.md):
  ids 0..255    reserved added tokens at their Gemma 4 ids (<pad> <eos> <bos> <unk> <mask>, tool / turn /
                channel markers: special) plus "\\n" (107) and "\\n\\n" (108) and <unusedN> (not special)
  ids 256..511  byte-fallback tokens <0x00>..<0xFF>
  then          every character seen in the training words (by count, then code point), "▁" included
  then          one token per merge, until --vocab ids
Training sees what the model sees: the text without newlines (the "\\n" added tokens take them), spaces
replaced by "▁", cut before every "▁" so that merges stay inside words.
"""

import argparse
import heapq
import json
import os
import re
import sys
from collections import Counter

SPACE = "\u2581"  # ▁
SPECIAL = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 4: "<mask>", 46: "<|tool>", 47: "<tool|>",
           48: "<|tool_call>", 49: "<tool_call|>", 50: "<|tool_response>", 51: "<tool_response|>", 52: '<|"|>',
           98: "<|think|>", 100: "<|channel>", 101: "<channel|>", 105: "<|turn>", 106: "<turn|>"}
PLAIN_ADDED = {107: "\n", 108: "\n\n"}
N_RESERVED = 256


def reserved_tokens():
    """(id, content, special) for ids 0..255."""
    out, unused = [], 0
    for i in range(N_RESERVED):
        if i in SPECIAL:
            out.append((i, SPECIAL[i], True))
        elif i in PLAIN_ADDED:
            out.append((i, PLAIN_ADDED[i], False))
        else:
            out.append((i, f"<unused{unused}>", False))
            unused += 1
    return out


def read_corpus(paths):
    """Texts of the given files, each real file once, in sorted path order."""
    seen, texts = set(), []
    for path in sorted(paths):
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        with open(real, "rb") as f:
            data = f.read()
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            print(f"train_tokenizer: skipping {path}: not UTF-8", file=sys.stderr)
    return texts


def cut_added(text):
    """The text with every added-token literal replaced by a newline: the encoder cuts those out before BPE,
    so BPE never sees them (or merges across them)."""
    literals = sorted((c for _, c, _ in reserved_tokens() if "\n" not in c), key=len, reverse=True)
    return re.sub("|".join(re.escape(c) for c in literals), "\n", text)


def training_words(texts, split_added=False):
    """Counts of the chunks BPE will see: newline-free runs, spaces as ▁, cut before each ▁."""
    words = Counter()
    for text in texts:
        if split_added:
            text = cut_added(text)
        for line in text.replace("\r", "").split("\n"):
            normalized = line.replace(" ", SPACE)
            start = 0
            for i, ch in enumerate(normalized):
                if ch == SPACE and i > start:
                    words[normalized[start:i]] += 1
                    start = i
            if start < len(normalized):
                words[normalized[start:]] += 1
    return words


def train(words, n_free):
    """Learns up to n_free new tokens; returns the character list and the merges."""
    char_counts = Counter()
    for word, count in words.items():
        for ch in word:
            char_counts[ch] += count
    chars = sorted(char_counts, key=lambda c: (-char_counts[c], c))[:n_free]
    known = set(chars)
    # Words as lists of symbols; characters without a token never merge (they fall back to bytes).
    items = [([c if c in known else None for c in w], n) for w, n in sorted(words.items())]
    pair_count = Counter()
    where = {}
    for idx, (syms, n) in enumerate(items):
        for pair in zip(syms, syms[1:]):
            if None not in pair:
                pair_count[pair] += n
                where.setdefault(pair, set()).add(idx)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges, tokens, done = [], set(chars), set()
    budget = n_free - len(chars)
    while heap and budget > 0:
        neg, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -neg or pair in done:
            continue  # stale entry, or a pair made again by later merges (each pair is merged once)
        if -neg < 2:
            break
        a, b = pair
        merged = a + b
        merges.append(pair)
        done.add(pair)
        if merged not in tokens:
            tokens.add(merged)
            budget -= 1
        changed = Counter()
        for idx in sorted(where.pop(pair, ())):
            syms, n = items[idx]
            for p in zip(syms, syms[1:]):
                if None not in p:
                    changed[p] -= n
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(merged)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            items[idx] = (out, n)
            for p in zip(out, out[1:]):
                if None not in p:
                    changed[p] += n
                    where.setdefault(p, set()).add(idx)
        del pair_count[pair]
        for p, delta in sorted(changed.items()):
            if p == pair or delta == 0:
                continue
            pair_count[p] += delta
            if pair_count[p] <= 0:
                del pair_count[p]
            else:
                heapq.heappush(heap, (-pair_count[p], p))
    return chars, merges


def build_json(chars, merges):
    vocab, added = {}, []
    for i, content, special in reserved_tokens():
        vocab[content] = i
        added.append({"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": special})
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in chars:
        if c not in vocab:
            vocab[c] = len(vocab)
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    bos = {"SpecialToken": {"id": "<bos>", "type_id": 0}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                          "invert": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<bos>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
        ]},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": vocab, "merges": [[a, b] for a, b in merges],
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="UTF-8 text files")
    ap.add_argument("--vocab", type=int, default=4096, help="total ids, reserved and byte tokens included")
    ap.add_argument("--out", required=True, help="tokenizer.json to write")
    ap.add_argument("--split-added", action="store_true",
                    help="cut the training text at added-token literals (<|turn>, <bos>, ...), as encoding does")
    args = ap.parse_args()
    n_free = args.vocab - N_RESERVED - 256
    if n_free < 1:
        ap.error(f"--vocab must exceed {N_RESERVED + 256}")
    words = training_words(read_corpus(args.inputs), args.split_added)
    if not words:
        sys.exit("train_tokenizer: no text in the inputs")
    chars, merges = train(words, n_free)
    tok = build_json(chars, merges)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"train_tokenizer: wrote {args.out}: {len(tok['model']['vocab'])} ids, {len(merges)} merges, "
          f"{len(chars)} characters, from {sum(words.values())} words", file=sys.stderr)


if __name__ == "__main__":
    main()
