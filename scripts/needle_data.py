#!/usr/bin/env python3
"""Needle-in-a-haystack prompts for the retrieval model of the long-context issue (standard library only).

A prompt is one user turn: filler sentences of plain words, with planted lines "The code of NAME is DDDDD." — the
needle at a chosen depth (a fraction of the filler) and distractors with other names and codes elsewhere — and the
question "What is the code of NAME?" at the end. The answer repeats the needle line, "The code of NAME is DDDDD.": its
digits then tokenize exactly as in the context (a bare "DDDDD." at the turn's start splits differently), so retrieval
is a copy of the tokens after "NAME is". Two uses:

  python3 scripts/needle_data.py train --out data/needle.jsonl --count 20000 --min-words 200 --max-words 12000
      training conversations in data/chat.jsonl's format (scripts/train_tiny.py --data), seeded
  python3 scripts/needle_data.py prompt --words 4000 --depth 0.25 --seed 3
      one prompt's user text on stdout and its answer on stderr (scripts/needle_ladder.py renders the same)
  python3 scripts/needle_data.py --selftest

The filler words, names and digits are common English tokens, so the embedded model's tokenizer (models/dg-tiny)
spells a word in one or two ids: a prompt of W words is roughly 1.5 W tokens (1,000 words: 1,529-1,587).
"""
import argparse
import json
import random
import sys

FILLER = ("the a of and to in is was it for on with as by at from that this be are have had not but or an they "
          "we you he she his her their our my your one two three day night sun moon sea river hill road town "
          "house door window tree leaf stone rain wind snow light dark warm cold old new small big long short "
          "red green blue white black fish bird cat dog horse cow bread milk tea water fire wood iron gold "
          "walk run sit stand look see hear speak read write sing play work rest sleep wake open close").split()
NAMES = ("amber basil cedar delta ember fable garnet harbor indigo juniper kestrel lumen meadow nectar onyx pepper "
         "quartz raven saffron tundra umber violet willow xenon yarrow zephyr anchor beacon cobalt dune").split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(FILLER) for _ in range(rng.randint(6, 14))]
    return " ".join(words).capitalize() + "."


def code(rng: random.Random, digits: int = 5) -> str:
    """A code of `digits` digits (2: one token of the embedded tokenizer, "▁10" to "▁99"; 5: several)."""
    return f"{rng.randint(10 ** (digits - 1), 10 ** digits - 1)}"


def needle_prompt(rng: random.Random, words: int, depth: float, distractors: int = 4, repeat: float = 0.0,
                  digits: int = 5):
    """(user text, the needle's name, its code): about `words` filler words, the needle after `depth` of them.
    `repeat`: the chance that a planted line appears a second time, somewhere after the first (training only: the
    encoder's next-token loss then has codes it can predict by copying, which teaches the copy the answer needs).
    `digits`: the codes' length (2 makes each code one token, so the answer is a single copied token)."""
    names = rng.sample(NAMES, distractors + 1)
    key, others = names[0], names[1:]
    if digits == 2:  # distinct codes, so no distractor shares the needle's (90 values for up to 30 names)
        codes = dict(zip(names, (str(c) for c in rng.sample(range(10, 100), len(names)))))
    else:
        codes = {n: code(rng, digits) for n in names}
    lines, count = [], 0
    while count < words:
        s = sentence(rng)
        lines.append(s)
        count += len(s.split())
    slots = len(lines)
    plant = [(min(slots, int(round(depth * slots))), key)]
    plant += [(rng.randint(0, slots), n) for n in others]
    if repeat > 0:  # (no draws otherwise: the ladder's prompts stay as they were)
        plant += [(rng.randint(at, slots), name) for at, name in list(plant) if rng.random() < repeat]
    for at, name in sorted(plant, key=lambda p: -p[0]):  # from the back, so earlier indices stay valid
        lines.insert(at, f"The code of {name} is {codes[name]}.")
    text = " ".join(lines) + f"\nWhat is the code of {key}?"
    return text, key, codes[key]


def answer(key: str, value: str) -> str:
    """The trained answer: the needle line itself."""
    return f"The code of {key} is {value}."


def render(user: str) -> str:
    """The engine's chat rendering of one user turn without thinking (data/chat.jsonl's prompt segments)."""
    return f"<bos><|turn>user\n{user}<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"


def selftest() -> int:
    """The prompts' invariants: planted lines once (the ladder's) or twice (--repeat 1), the answer a copy of the
    needle's line, the needle after `depth` of the filler, and no random draws added for --repeat 0."""
    import re
    for words, depth, distractors in ((300, 0.0, 4), (300, 1.0, 6), (2000, 0.5, 4)):
        for repeat in (0.0, 1.0):
            text, key, value = needle_prompt(random.Random(7), words, depth, distractors, repeat)
            lines = re.findall(r"The code of (\w+) is (\d+)\.", text)
            want = (distractors + 1) * (2 if repeat else 1)
            assert len(lines) == want, (words, depth, repeat, len(lines), want)
            assert len({n for n, _ in lines}) == distractors + 1
            assert answer(key, value) in text and text.endswith(f"What is the code of {key}?")
            if not repeat:
                at = text.index(answer(key, value)) / len(text)
                assert abs(at - depth) < 0.1, (depth, at)
    # The ladder's prompts as they were when its results were recorded (docs/TRAINING.md): the text and the draws
    # it took, so a change that adds or reorders draws for --repeat 0 fails here.
    import hashlib
    rng = random.Random(3)
    text = needle_prompt(rng, 500, 0.5)
    assert hashlib.sha256(repr(text).encode()).hexdigest()[:16] == "5ef9bb5657710430", text
    assert rng.random() == 0.7520523458658146
    text, key, value = needle_prompt(random.Random(5), 300, 0.5, digits=2)
    assert len(value) == 2 and answer(key, value) in text
    planted = re.findall(r"The code of (\w+) is (\d+)\.", text)
    assert all(len(c) == 2 for _, c in planted) and len({c for _, c in planted}) == len(planted)
    print("needle_data selftest: ok")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="training conversations (JSONL, data/chat.jsonl's format)")
    t.add_argument("--out", required=True)
    t.add_argument("--count", type=int, default=20000)
    t.add_argument("--min-words", type=int, default=200)
    t.add_argument("--max-words", type=int, default=12000)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--distractors", type=int, default=4, help="other planted names and codes per prompt")
    t.add_argument("--repeat", type=float, default=0.0,
                   help="chance that a planted line appears twice in a training prompt (0: never, as the ladder's)")
    t.add_argument("--digits", type=int, default=5, choices=(2, 5),
                   help="the codes' length in digits (2: one token each; the ladder must be given the same)")
    p = sub.add_parser("prompt", help="one prompt's user text (stdout) and answer (stderr)")
    p.add_argument("--words", type=int, required=True)
    p.add_argument("--depth", type=float, required=True, help="where the needle sits: 0 (start) to 1 (end)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--digits", type=int, default=5, choices=(2, 5), help="the codes' length in digits")
    a = ap.parse_args()
    if a.cmd == "prompt":
        if not 0.0 <= a.depth <= 1.0 or a.words < 1:
            ap.error("--depth must be within [0, 1] and --words positive")
        text, key, value = needle_prompt(random.Random(a.seed), a.words, a.depth, digits=a.digits)
        print(text)
        print(answer(key, value), file=sys.stderr)
        return 0
    if a.min_words < 1 or a.max_words < a.min_words or a.count < 1 or not 0.0 <= a.repeat <= 1.0 \
            or not 0 <= a.distractors < len(NAMES):
        ap.error(f"need 1 <= --min-words <= --max-words, a positive --count, --repeat within [0, 1] and "
                 f"--distractors within [0, {len(NAMES) - 1}]")
    rng = random.Random(a.seed)
    with open(a.out, "w", encoding="utf-8") as f:
        for _ in range(a.count):
            # Lengths spread evenly on a log scale, so short and long contexts are both common.
            words = int(round(a.min_words * (a.max_words / a.min_words) ** rng.random()))
            text, key, value = needle_prompt(rng, words, rng.random(), distractors=a.distractors, repeat=a.repeat,
                                             digits=a.digits)
            conv = {"kind": "needle", "think": False, "tools": False,
                    "segments": [["p", render(text)], ["a", answer(key, value) + "<turn|>"]]}
            f.write(json.dumps(conv) + "\n")
    print(f"{a.out}: {a.count} conversations, {a.min_words}-{a.max_words} filler words each, {a.digits}-digit codes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
