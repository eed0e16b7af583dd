"""Data helpers of scripts/train_tiny.py (standard library only, so they also run on a machine without torch):
conversations -> (encoder ids, canvas ids) examples, the per-epoch batch plans, the learning-rate schedule."""
import json
import lzma
import math
import time

PAD, BOS, EOS, TURN_END, TOOL_RESPONSE = 0, 2, 1, 106, 50
STOPS = (EOS, TURN_END, TOOL_RESPONSE)  # generation_config eos_token_id
SPECIAL_IDS = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<|tool_response>": 50, "<|channel>": 100, "<channel|>": 101,
               "<|turn>": 105, "<turn|>": 106, "\n": 107}
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ---------------------------------------------------------------------------------------------------- data


def open_text(path):
    """A UTF-8 text file for reading; one ending in .xz is decompressed on the fly (data/chat.jsonl.xz)."""
    if str(path).endswith(".xz"):
        return lzma.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def load_examples(path, encode, C, vocab, rng, limit=0, extra=0.3):
    """(encoder ids, canvas ids) pairs. Boundaries: the start of every model-written segment and every C tokens
    after it, plus, with probability `extra`, one random offset inside a segment longer than 4 tokens (the
    engine's commit-time trim can commit partial blocks, so a later canvas may start anywhere)."""
    examples, n_conv = [], 0
    with open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if limit and n_conv >= limit:
                break
            conv = json.loads(line)
            n_conv += 1
            ctx = []
            for role, text in conv["segments"]:
                ids = encode(text)
                if any(i < 0 or i >= vocab for i in ids):
                    raise ValueError(f"{path}:{lineno}: token id outside the vocabulary ({vocab})")
                if role == "p":
                    ctx += ids
                    continue
                if role == "c":  # the context as the engine re-renders it (after a tool response)
                    if not ids or ids[0] != BOS:
                        raise ValueError(f"{path}:{lineno}: a 'c' segment must start with <bos>")
                    ctx = list(ids)
                    continue
                if role != "a":
                    raise ValueError(f"{path}:{lineno}: segment role {role!r} is not 'p', 'c' or 'a'")
                if not ctx or ctx[0] != BOS:
                    raise ValueError(f"{path}:{lineno}: the conversation does not start with <bos>")
                if not ids or ids[-1] not in STOPS or any(i in STOPS for i in ids[:-1]):
                    raise ValueError(f"{path}:{lineno}: an answer segment must end with its only stop token")
                bounds = list(range(0, len(ids), C))
                if len(ids) > 4 and rng.random() < extra:
                    k = rng.randrange(1, len(ids))
                    if k % C:
                        bounds.append(k)
                for k in bounds:
                    canvas = ids[k:k + C]
                    examples.append((ctx + ids[:k], canvas + [PAD] * (C - len(canvas))))
                ctx += ids
    return examples, n_conv


def pad_examples(examples, multiple, prefix_ids, filler_ids):
    """Rounds each encoder input up to a multiple of `multiple` tokens by inserting the first ids of `filler_ids`
    right after `prefix_ids` (the user turn's header), so long prompts of many lengths share a few lengths and the
    unpadded buckets hold many examples each (a needle prompt then has a little more filler before its first
    sentence). Examples that do not start with `prefix_ids` stay as they are. Returns (examples, padded count)."""
    at, out, padded = len(prefix_ids), [], 0
    for enc, canvas in examples:
        need = -len(enc) % multiple
        if need and enc[:at] == prefix_ids:
            if need > len(filler_ids):
                raise ValueError(f"pad_examples: {need} filler ids needed, {len(filler_ids)} given")
            enc = enc[:at] + filler_ids[:need] + enc[at:]
            padded += 1
        out.append((enc, canvas))
    return out, padded


def epoch_plan_buckets(examples, rng, C, batch, micro, micro_tokens):
    """Optimizer steps for one epoch without padding: each micro-batch holds examples of ONE encoder length (at
    most `micro` examples and about `micro_tokens` tokens); micro-batches are accumulated until a step holds at
    least `batch` examples."""
    buckets = {}
    for i, (enc, _) in enumerate(examples):
        buckets.setdefault(len(enc), []).append(i)
    micros = []
    for n in sorted(buckets):
        idx = buckets[n]
        rng.shuffle(idx)
        size = max(1, min(micro, micro_tokens // (n + C)))
        micros += [idx[j:j + size] for j in range(0, len(idx), size)]
    rng.shuffle(micros)
    steps, cur, count = [], [], 0
    for m in micros:
        cur.append(m)
        count += len(m)
        if count >= batch:
            steps.append(cur)
            cur, count = [], 0
    if cur:
        steps.append(cur)
    return steps


def epoch_plan_padded(examples, rng, C, micro, micro_tokens):
    """Optimizer steps for one epoch with left padding: examples sorted by encoder length (random order within a
    length), cut into micro-batches of at most `micro` examples and about `micro_tokens` padded tokens, shuffled;
    one micro-batch per step."""
    order = list(range(len(examples)))
    rng.shuffle(order)
    order.sort(key=lambda i: len(examples[i][0]))
    micros, cur = [], []
    for i in order:
        n = len(examples[i][0])  # the longest so far: the list is sorted
        if cur and (len(cur) >= micro or (len(cur) + 1) * (n + C) > micro_tokens):
            micros.append(cur)
            cur = []
        cur.append(i)
    if cur:
        micros.append(cur)
    rng.shuffle(micros)
    return [[m] for m in micros]


def make_batch(examples, idx):
    """Left-padded encoder ids, the 2D attention mask (None when every row has the same length), canvases."""
    encs = [examples[i][0] for i in idx]
    S = max(len(e) for e in encs)
    enc = [[PAD] * (S - len(e)) + e for e in encs]
    mask = None if all(len(e) == S for e in encs) else [[0] * (S - len(e)) + [1] * len(e) for e in encs]
    return enc, mask, [examples[i][1] for i in idx]


def lr_at(step, total, peak, warmup, floor=0.1):
    """Linear warm-up over `warmup` steps, then cosine from peak to floor*peak at `total` (unknown = no decay)."""
    w = min(1.0, (step + 1) / warmup)
    if not total or total <= warmup:
        return peak * w
    p = min(1.0, max(0.0, (step - warmup) / (total - warmup)))
    return peak * w * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


def _selftest():
    """pad_examples on a handful of cases (run by CTest: scripts.tiny_data_selftest)."""
    ex = [([2, 5, 6, 7, 8, 9], [0]), ([2, 5, 1], [0]), ([3, 1, 1, 1], [0]), ([2, 5, 6, 7], [0])]
    out, n = pad_examples(ex, 4, [2, 5], [100, 101, 102, 103])
    assert n == 2, n
    assert out[0][0] == [2, 5, 100, 101, 6, 7, 8, 9], out[0]  # 6 -> 8: two filler ids after the header
    assert out[1][0] == [2, 5, 100, 1], out[1]                # 3 -> 4
    assert out[2][0] == [3, 1, 1, 1] and out[3][0] == [2, 5, 6, 7]  # no header / already a multiple: unchanged
    assert all(len(e) % 4 == 0 for e, _ in out[1:])
    try:
        pad_examples([([2, 5, 1], [0])], 8, [2, 5], [100])
        raise AssertionError("too little filler was accepted")
    except ValueError:
        pass
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:  # open_text: the same lines from a file and from its .xz
        text = '{"segments": [["p", "caf\u00e9"]]}\n{"segments": []}\n'
        with open(os.path.join(tmp, "a.jsonl"), "w", encoding="utf-8") as f:
            f.write(text)
        with lzma.open(os.path.join(tmp, "a.jsonl.xz"), "wt", encoding="utf-8") as f:
            f.write(text)
        for name in ("a.jsonl", "a.jsonl.xz"):
            with open_text(os.path.join(tmp, name)) as f:
                assert f.read() == text, name
    print("tiny_data selftest: ok")


if __name__ == "__main__":
    _selftest()
