#!/usr/bin/env python3
"""Needle-in-a-haystack prompts for the retrieval model of the long-context issue (standard library only).

A prompt is one user turn: filler sentences of plain words, with planted lines "The code of NAME is DDDDD." — the
needle at a chosen depth (a fraction of the filler) and distractors with other names and codes elsewhere — and the
question "What is the code of NAME?" at the end. The answer repeats the needle line, "The code of NAME is DDDDD.": its
digits then tokenize exactly as in the context (a bare "DDDDD." at the turn's start splits differently), so retrieval
is a copy of the tokens after "NAME is". Uses:

  python3 scripts/needle_data.py train --out data/needle.jsonl --count 20000 --min-words 200 --max-words 12000
      training conversations in data/chat.jsonl's format (scripts/train_tiny.py --data), seeded
  python3 scripts/needle_data.py train --task recall --out data/recall.jsonl --count 60000 --digits 2
      the curriculum's first stage: prompts of code lines alone (2-12 names, most lines two or three times, a
      filler sentence now and then) with the same question and answer: dense copy targets for the next-token loss
  python3 scripts/needle_data.py prompt --words 4000 --depth 0.25 --seed 3
      one prompt's user text on stdout and its answer on stderr (scripts/needle_ladder.py renders the same)
  python3 scripts/needle_data.py --selftest

The filler words, names and digits are common English tokens, so the embedded model's tokenizer (models/dg-tiny)
spells a filler word in one or two ids and a name in one: a prompt of W words is roughly 1.5 W tokens (1,000 words: 1,529-1,587).
"""
import argparse
import json
import random
import re
import sys

FILLER = ("the a of and to in is was it for on with as by at from that this be are have had not but or an they "
          "we you he she his her their our my your one two three day night sun moon sea river hill road town "
          "house door window tree leaf stone rain wind snow light dark warm cold old new small big long short "
          "red green blue white black fish bird cat dog horse cow bread milk tea water fire wood iron gold "
          "walk run sit stand look see hear speak read write sing play work rest sleep wake open close").split()
# The names are one token each in the embedded tokenizer ("The code of NAME is 48." is seven ids), so the id before
# " is" names the line: a lookup needs no name spelled over several ids whose last pieces other names share.
NAMES = ("capital planet country colour letter friend teacher school book game trip project family brother baby duck "
         "frog sheep snake bear chick star rock mountain circle square triangle octagon pentagon hexagon winter summer "
         "sugar salt carbon gravity machine computer rainbow cookie").split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(FILLER) for _ in range(rng.randint(6, 14))]
    return " ".join(words).capitalize() + "."


def code(rng: random.Random, digits: int = 5) -> str:
    """A code of `digits` digits (2: one token of the embedded tokenizer, "▁10" to "▁99"; 5: several)."""
    return f"{rng.randint(10 ** (digits - 1), 10 ** digits - 1)}"


def draw_codes(rng: random.Random, names: list, digits: int) -> dict:
    """A code per name, every value equally likely; 2 digits: distinct within the prompt (90 values for up to 30
    names), so no distractor shares the asked name's code."""
    if digits == 2:
        return dict(zip(names, (str(c) for c in rng.sample(range(10, 100), len(names)))))
    return {n: code(rng, digits) for n in names}


def needle_prompt(rng: random.Random, words: int, depth: float, distractors: int = 4, repeat: float = 0.0,
                  digits: int = 5):
    """(user text, the needle's name, its code): about `words` filler words, the needle after `depth` of them.
    `repeat`: the chance that a planted line appears a second time, somewhere after the first (training only: the
    encoder's next-token loss then has codes it can predict by copying, which teaches the copy the answer needs).
    `digits`: the codes' length (2 makes each code one token, so the answer is a single copied token)."""
    names = rng.sample(NAMES, distractors + 1)
    key, others = names[0], names[1:]
    codes = draw_codes(rng, names, digits)
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


def recall_prompt(rng: random.Random, pairs: int, repeat: float = 0.8, filler: float = 0.3, digits: int = 2,
                  repeats: int = 2, spread: bool = False):
    """(user text, the asked name, its code): `pairs` code lines of distinct names in random order, each one
    repeated at random later places up to `repeats` times, each time with probability `repeat` (a repeat's code can
    only be predicted by copying it from the first line: the encoder's next-token loss gets a copy target per
    repeat), a filler sentence before a line with probability `filler`, and the question about one of the names
    last. The lines, question and answer are needle_prompt's; the names and codes are drawn afresh for every
    prompt. `spread`: no line follows a line of its own name (a repeat with no such place is left out) and the asked
    name is not the last line's, so copying the latest code never answers: without it a third of the repeats had
    their earlier line within the sliding window, and the models of runs 5-6 stopped at that copy (docs/NEEDLE.md)."""
    names = rng.sample(NAMES, pairs)
    codes = draw_codes(rng, names, digits)
    order = list(names)
    for name in names:
        for _ in range(repeats):
            if rng.random() < repeat:
                first = order.index(name) + 1
                if not spread:
                    order.insert(rng.randint(first, len(order)), name)
                    continue
                places = [i for i in range(first, len(order) + 1)
                          if order[i - 1] != name and (i == len(order) or order[i] != name)]
                if places:
                    order.insert(rng.choice(places), name)
    parts = []
    for name in order:
        if rng.random() < filler:
            parts.append(sentence(rng))
        parts.append(answer(name, codes[name]))
    key = rng.choice([n for n in names if n != order[-1]] if spread and pairs > 1 else names)
    return " ".join(parts) + f"\nWhat is the code of {key}?", key, codes[key]


def answer(key: str, value: str) -> str:
    """The trained answer: the needle line itself."""
    return f"The code of {key} is {value}."


def render(user: str) -> str:
    """The engine's chat rendering of one user turn without thinking (data/chat.jsonl's prompt segments)."""
    return f"<bos><|turn>user\n{user}<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"


def conversation(kind: str, text: str, key: str, value: str) -> dict:
    """One training conversation in data/chat.jsonl's format: the rendered prompt and the answer line."""
    return {"kind": kind, "think": False, "tools": False,
            "segments": [["p", render(text)], ["a", answer(key, value) + "<turn|>"]]}


def train_conversations(a: argparse.Namespace):
    """The `train` command's conversations, seeded by --seed: needle prompts with lengths spread evenly on a log
    scale (short and long contexts both common) and uniform depths, or recall prompts with uniform pair counts."""
    rng = random.Random(a.seed)
    for _ in range(a.count):
        if a.task == "recall":
            pairs = rng.randint(a.min_pairs, a.max_pairs)
            yield conversation("recall", *recall_prompt(rng, pairs, a.repeat, a.filler, a.digits, a.repeats,
                                                          a.spread))
        else:
            words = int(round(a.min_words * (a.max_words / a.min_words) ** rng.random()))
            yield conversation("needle", *needle_prompt(rng, words, rng.random(), distractors=a.distractors,
                                                        repeat=a.repeat, digits=a.digits))


LINE = re.compile(r"The code of (\w+) is (\d+)\.")


def check_lines(text: str, key: str, value: str) -> list:
    """The invariants every prompt keeps; returns its code lines [(name, code)]. One code per name, distinct
    names with distinct codes (2 digits), the asked name's line in the prompt before the question, which is last."""
    lines = LINE.findall(text)
    codes = dict(lines)
    assert all(codes[n] == c for n, c in lines), "a name with two codes"
    assert codes.get(key) == value and answer(key, value) in text.split("\n")[0], (key, value)
    assert text.endswith(f"\nWhat is the code of {key}?") and text.count("\n") == 1
    if len(value) == 2:
        assert len(set(codes.values())) == len(codes), "two names share a code"
    return lines


def selftest_needle() -> None:
    """Planted lines once (the ladder's) or twice (--repeat 1), the needle after `depth` of the filler, and the
    ladder's prompts unchanged: the text and the draws of --repeat 0."""
    import hashlib
    for words, depth, distractors in ((300, 0.0, 4), (300, 1.0, 6), (2000, 0.5, 4)):
        for repeat in (0.0, 1.0):
            for digits in (2, 5):
                text, key, value = needle_prompt(random.Random(7), words, depth, distractors, repeat, digits)
                lines = check_lines(text, key, value)
                assert len(lines) == (distractors + 1) * (2 if repeat else 1), (words, depth, repeat, len(lines))
                assert len(dict(lines)) == distractors + 1
                if not repeat:
                    assert text.count(answer(key, value)) == 1
                    at = text.index(answer(key, value)) / len(text)
                    assert abs(at - depth) < 0.1, (depth, at)
    # The ladder's prompts with the one-token names (runs 6 on, docs/NEEDLE.md): the text and the draws it took,
    # so a change that adds or reorders draws for --repeat 0 fails here.
    rng = random.Random(3)
    text = needle_prompt(rng, 500, 0.5)
    assert hashlib.sha256(repr(text).encode()).hexdigest()[:16] == "5589834556c7ba53", text
    assert rng.random() == 0.7520523458658146
    text, key, value = needle_prompt(random.Random(5), 300, 0.5, digits=2)
    assert len(value) == 2 and all(len(c) == 2 for _, c in check_lines(text, key, value))


def selftest_recall() -> None:
    """Recall prompts: every line once (--repeat 0) or 1 + --repeats times (--repeat 1), only code lines without filler,
    and no shortcut: over many prompts the asked code, the asked name and the asked line's place are spread evenly
    and a name's code changes from prompt to prompt."""
    rng = random.Random(11)
    for pairs, repeats in ((1, 1), (2, 2), (9, 1), (9, 3), (len(NAMES), 2)):
        for repeat in (0.0, 1.0):
            for filler in (0.0, 0.5):
                text, key, value = recall_prompt(rng, pairs, repeat, filler, repeats=repeats)
                lines = check_lines(text, key, value)
                assert len(dict(lines)) == pairs and len(lines) == pairs * (1 + repeat * repeats), (pairs, repeat)
                if filler == 0.0:
                    body = text.split("\n")[0]
                    assert body == " ".join(answer(n, c) for n, c in lines), body
    asked_code, asked_name, asked_rank, first = {}, {}, [0] * 8, set()
    n = 9000
    for _ in range(n):
        text, key, value = recall_prompt(rng, rng.randint(2, 12))
        asked_code[value] = asked_code.get(value, 0) + 1
        asked_name[key] = asked_name.get(key, 0) + 1
        first |= {c for name, c in LINE.findall(text) if name == NAMES[0]}
        text, key, value = recall_prompt(rng, 8)
        asked_rank[list(dict(LINE.findall(text))).index(key)] += 1  # among the names in order of first appearance
    assert all(0.8 < k / (n / 8) < 1.2 for k in asked_rank), asked_rank
    assert sorted(asked_code) == [str(c) for c in range(10, 100)], sorted(asked_code)
    assert all(0.55 < k / (n / 90) < 1.5 for k in asked_code.values()), sorted(asked_code.values())
    assert len(asked_name) == len(NAMES) and all(0.7 < k / (n / len(NAMES)) < 1.3 for k in asked_name.values())
    assert len(first) > 80, len(first)


def selftest_spread() -> None:
    """--spread: no line right after one of its own name, never the last line's name asked, the codes and asked
    names still spread evenly, and most lines still repeated."""
    rng = random.Random(13)
    asked_code, asked_name, lines_n, repeats_n = {}, {}, 0, 0
    n = 9000
    for _ in range(n):
        text, key, value = recall_prompt(rng, rng.randint(2, 12), spread=True)
        lines = check_lines(text, key, value)
        names = [name for name, _ in lines]
        assert all(a != b for a, b in zip(names, names[1:])), names
        assert names[-1] != key, (names, key)
        asked_code[value] = asked_code.get(value, 0) + 1
        asked_name[key] = asked_name.get(key, 0) + 1
        lines_n += len(set(names))
        repeats_n += len(names) - len(set(names))
    assert sorted(asked_code) == [str(c) for c in range(10, 100)], sorted(asked_code)
    assert all(0.55 < k / (n / 90) < 1.5 for k in asked_code.values()), sorted(asked_code.values())
    assert len(asked_name) == len(NAMES) and all(0.7 < k / (n / len(NAMES)) < 1.3 for k in asked_name.values())
    assert repeats_n > 1.3 * lines_n, (repeats_n, lines_n)  # 1.6 a line without the rule (2 x 0.8)
    text, key, value = recall_prompt(random.Random(1), 1, repeat=1.0, spread=True)
    assert len(check_lines(text, key, value)) == 1  # one name: every repeat would follow its own line


def selftest_train() -> None:
    """The `train` command's JSONL for both tasks: the prompt rendered, the answer the asked name's line."""
    for task, extra in (("needle", ["--min-words", "20", "--max-words", "400"]), ("recall", [])):
        a = parse_args(["train", "--task", task, "--out", "-", "--count", "40", "--digits", "2"] + extra)
        head, tail = render("\0").split("\0")
        for conv in train_conversations(a):
            (p, prompt), (r, reply) = conv["segments"]
            assert (p, r, conv["kind"]) == ("p", "a", task) and prompt.startswith(head) and prompt.endswith(tail)
            assert reply.endswith("<turn|>")
            key, value = LINE.fullmatch(reply[:-len("<turn|>")]).groups()
            check_lines(prompt[len(head):-len(tail)], key, value)


def selftest() -> int:
    selftest_needle()
    selftest_recall()
    selftest_spread()
    selftest_train()
    print("needle_data selftest: ok")
    return 0


def parse_args(argv: list) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="training conversations (JSONL, data/chat.jsonl's format)")
    t.add_argument("--task", choices=("needle", "recall"), default="needle",
                   help="needle: filler with planted code lines (the ladder's prompts); recall: code lines alone")
    t.add_argument("--out", required=True)
    t.add_argument("--count", type=int, default=20000)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--min-words", type=int, default=200, help="needle: the shortest prompt's filler words")
    t.add_argument("--max-words", type=int, default=12000, help="needle: the longest prompt's filler words")
    t.add_argument("--distractors", type=int, default=4, help="needle: other planted names and codes per prompt")
    t.add_argument("--min-pairs", type=int, default=2, help="recall: the fewest code lines (names) per prompt")
    t.add_argument("--max-pairs", type=int, default=12, help="recall: the most code lines (names) per prompt")
    t.add_argument("--repeats", type=int, default=2,
                   help="recall: the most repeats of a line, each one with probability --repeat")
    t.add_argument("--filler", type=float, default=0.3, help="recall: the chance of a filler sentence before a line")
    t.add_argument("--spread", action="store_true",
                   help="recall: no line right after a line of its name, the asked name not the last line's")
    t.add_argument("--repeat", type=float,
                   help="chance that a planted line appears twice in a training prompt (default: 0 for needle, "
                        "as the ladder's; 0.8 for recall)")
    t.add_argument("--digits", type=int, default=5, choices=(2, 5),
                   help="the codes' length in digits (2: one token each; the ladder must be given the same)")
    p = sub.add_parser("prompt", help="one prompt's user text (stdout) and answer (stderr)")
    p.add_argument("--words", type=int, required=True)
    p.add_argument("--depth", type=float, required=True, help="where the needle sits: 0 (start) to 1 (end)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--digits", type=int, default=5, choices=(2, 5), help="the codes' length in digits")
    a = ap.parse_args(argv)
    if a.cmd == "prompt" and (not 0.0 <= a.depth <= 1.0 or a.words < 1):
        ap.error("--depth must be within [0, 1] and --words positive")
    if a.cmd == "train":
        if a.repeat is None:
            a.repeat = 0.8 if a.task == "recall" else 0.0
        if a.min_words < 1 or a.max_words < a.min_words or a.count < 1 or not 0.0 <= a.repeat <= 1.0 \
                or not 0 <= a.distractors < len(NAMES) or not 1 <= a.min_pairs <= a.max_pairs <= len(NAMES) \
                or not 0.0 <= a.filler <= 1.0 or a.repeats < 0:
            ap.error(f"need 1 <= --min-words <= --max-words, a positive --count, --repeat and --filler within "
                     f"[0, 1], --distractors within [0, {len(NAMES) - 1}], 1 <= --min-pairs <= --max-pairs <= "
                     f"{len(NAMES)} and --repeats >= 0")
    return a


def main() -> int:
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    a = parse_args(sys.argv[1:])
    if a.cmd == "prompt":
        text, key, value = needle_prompt(random.Random(a.seed), a.words, a.depth, digits=a.digits)
        print(text)
        print(answer(key, value), file=sys.stderr)
        return 0
    with open(a.out, "w", encoding="utf-8") as f:
        for conv in train_conversations(a):
            f.write(json.dumps(conv) + "\n")
    what = (f"{a.min_pairs}-{a.max_pairs} code lines each" if a.task == "recall"
            else f"{a.min_words}-{a.max_words} filler words each")
    print(f"{a.out}: {a.count} {a.task} conversations, {what}, {a.digits}-digit codes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
