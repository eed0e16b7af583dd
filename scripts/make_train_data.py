#!/usr/bin/env python3
"""Training conversations for the small trained DiffusionGemma (docs/TRAINING.md), in the Gemma 4 chat format.

    python3 scripts/make_train_data.py --out data                 # data/chat.jsonl + data/chat.txt

The smoketest battery, rendered by the same functions, is scripts/make_battery.py.

Standard library only (Python 3.11+), deterministic from --seed. Sources: the fact tables of
scripts/train_data_facts.py (written for this project) and, for open-ended answers, short entries of Debian's
fortune files (packages fortunes-min and fortunes, /usr/share/games/fortunes; see data/README.md). Without those files the fortune share is skipped,
which changes the output, so the committed data names the files it used.

chat.jsonl: one conversation per line, {"kind", "think", "tools", "segments": [["p"|"a", text], ...]}.
"p" segments are context the model reads (the prompt); "a" segments are what the model writes (the diffusion
targets), each ending in a stop token: <turn|> (106) or <|tool_response> (50); a "c" segment replaces the whole
context (after a tool response: the conversation as the engine re-renders it before the model goes on).
chat.txt: every conversation's text (segments joined), one after another, for tokenizer training.
"""
import argparse
import json
import os
import random
import re
import sys

from train_data_facts import (  # the fact tables
    CAPITALS, OPPOSITES, WORD_USES, COLOUR_MIX, THING_COLOURS, RAINBOW, DAYS, MONTHS, ORDINALS, UNITS, SINGULAR,
    WORDS, ANIMAL_LEGS, ANIMAL_SOUNDS, ANIMAL_BABIES, SHAPES, PLANETS, FACTS, EXPLANATIONS, GREETINGS, PREAMBLES)

Q = '<|"|>'
FORTUNE_DIR = "/usr/share/games/fortunes"
FORTUNE_FILES = ["fortunes", "wisdom", "platitudes"]  # fortunes-min: fortunes; fortunes: wisdom, platitudes

# ---------------------------------------------------------------------------------------------------- rendering

CALC_DECL = ("<|tool>declaration:calculator{description:" + Q + "Evaluates an arithmetic expression and returns "
             "the result." + Q + ",parameters:{properties:{expression:{description:" + Q + "The expression, for "
             "example 12*7." + Q + ",type:" + Q + "STRING" + Q + "}},required:[" + Q + "expression" + Q + "],type:"
             + Q + "OBJECT" + Q + "}}<tool|>")
CALC_TOOL = {"name": "calculator", "description": "Evaluates an arithmetic expression and returns the result.",
             "parameters": {"type": "object", "required": ["expression"], "properties": {
                 "expression": {"type": "string", "description": "The expression, for example 12*7."}}}}


def render_prompt(question, think, tools):
    """<bos>, the system turn when thinking or tools are on, the user turn, and the generation prompt as the
    engine renders it (docs/CHAT.md): the thought channel closed when thinking is off, left open when it is on."""
    return render_head(question, think, tools) + ("<|channel>thought\n" if think else "<|channel>thought\n<channel|>")


def render_head(question, think, tools):
    system = ""
    if think or tools:
        system = "<|turn>system\n" + ("<|think|>\n" if think else "") + (CALC_DECL if tools else "") + "<turn|>\n"
    return "<bos>" + system + "<|turn>user\n" + question.strip() + "<turn|>\n<|turn>model\n"


def render_answer(answer, think, reasoning):
    """What the model writes after render_prompt: with thinking on it is inside the open thought channel."""
    return (f"{reasoning}<channel|>" if think else "") + answer + "<turn|>"


def call_text(expression):
    return "<|tool_call>call:calculator{expression:" + Q + expression + Q + "}<tool_call|>"


def render_call(expression, think, reasoning):
    return (f"{reasoning}<channel|>" if think else "") + call_text(expression) + "<|tool_response>"


def render_continuation(question, think, expression, reasoning, value):
    """The whole context after a tool response, as the engine re-renders the conversation before the model goes
    on: the call turn in the template's canonical form (no empty thought channel; with thinking the reasoning is
    kept inside the tool cycle, followed by a newline), the response, and the thought channel opened again when
    thinking is on."""
    thought = f"<|channel>thought\n{reasoning}\n<channel|>" if think else ""
    return (render_head(question, think, True) + thought + call_text(expression) + "<|tool_response>" +
            render_response(value) + ("<|channel>thought\n" if think else ""))


def render_response(value):
    return "response:calculator{value:" + Q + value + Q + "}<tool_response|>"


# ---------------------------------------------------------------------------------------------------- generators
# Each returns (question, answer, reasoning). Answers never include the stop token.


def pick(rng, xs):
    return xs[rng.randrange(len(xs))]


def gen_capital(rng):
    country, city, continent = pick(rng, CAPITALS)
    name = country[0].upper() + country[1:]
    if rng.random() < 0.8:
        q = pick(rng, ["What is the capital of {c}?", "What is the capital city of {c}?",
                       "Which city is the capital of {c}?", "Name the capital of {c}.", "Capital of {c}?"])
        q = q.format(c=country)
        a = pick(rng, [f"The capital of {country} is {city}.", f"{city} is the capital of {country}.",
                       f"{city}."])
    else:
        q = pick(rng, [f"{city} is the capital of which country?", f"Which country has {city} as its capital?"])
        a = pick(rng, [f"{city} is the capital of {country}.", f"{name}."])
    r = f"The question is about {country}, a country in {continent}. Its capital city is {city}."
    return q, a, r


def gen_arith(rng):
    op = pick(rng, ["+", "+", "-", "*", "*", "/"])
    hi = pick(rng, [9, 20, 99, 99])  # small operands often: the basic facts must be seen many times each
    if op == "+":
        x, y = rng.randint(0, hi), rng.randint(0, hi)
        z = x + y
        q = pick(rng, [f"What is {x} plus {y}?", f"What is {x} + {y}?", f"Add {x} and {y}.",
                       f"How much is {x} plus {y}?"])
        tens, ones = (x // 10 + y // 10) * 10, x % 10 + y % 10
        r = (f"Add the tens: {x // 10 * 10} + {y // 10 * 10} = {tens}. Add the ones: {x % 10} + {y % 10} = {ones}. "
             f"Then {tens} + {ones} = {z}.")
        a = pick(rng, [f"{x} plus {y} is {z}.", f"{x} + {y} = {z}.", f"{z}."])
    elif op == "-":
        x = rng.randint(0, hi)
        y = rng.randint(0, x)
        z = x - y
        q = pick(rng, [f"What is {x} minus {y}?", f"What is {x} - {y}?", f"Subtract {y} from {x}.",
                       f"How much is {x} take away {y}?"])
        r = f"Start at {x} and take away {y}. Check: {z} + {y} = {x}. So the answer is {z}."
        a = pick(rng, [f"{x} minus {y} is {z}.", f"{x} - {y} = {z}.", f"{z}."])
    elif op == "*":
        x, y = rng.randint(0, 12), rng.randint(0, 12)
        z = x * y
        q = pick(rng, [f"What is {x} times {y}?", f"What is {x} * {y}?", f"What is {x} x {y}?",
                       f"Multiply {x} by {y}.", f"How much is {x} multiplied by {y}?"])
        steps = ", ".join(str(y * k) for k in range(1, x + 1)) if 1 < x <= 12 else str(z)
        r = f"{x} times {y} means {x} groups of {y}: {steps}. So {x} times {y} is {z}."
        a = pick(rng, [f"{x} times {y} is {z}.", f"{x} x {y} = {z}.", f"{z}."])
    else:
        y, z = rng.randint(1, 12), rng.randint(0, 12)
        x = y * z
        q = pick(rng, [f"What is {x} divided by {y}?", f"What is {x} / {y}?", f"Divide {x} by {y}."])
        r = f"I need a number that gives {x} when multiplied by {y}. {z} times {y} is {x}, so it is {z}."
        a = pick(rng, [f"{x} divided by {y} is {z}.", f"{x} / {y} = {z}.", f"{z}."])
    return q, a, r


def gen_calendar(rng):
    k = rng.randrange(8)
    if k == 0:
        i = rng.randrange(7)
        d, n = DAYS[i], DAYS[(i + 1) % 7]
        return (pick(rng, [f"What day comes after {d}?", f"Which day is after {d}?"]),
                pick(rng, [f"The day after {d} is {n}.", f"{n}."]), f"The week goes {', '.join(DAYS)}. After {d} "
                f"comes {n}.")
    if k == 1:
        i = rng.randrange(7)
        d, p = DAYS[i], DAYS[(i - 1) % 7]
        return (pick(rng, [f"What day comes before {d}?", f"Which day is before {d}?"]),
                pick(rng, [f"The day before {d} is {p}.", f"{p}."]), f"The week goes {', '.join(DAYS)}. Before {d} "
                f"comes {p}.")
    if k == 2:
        i = rng.randrange(12)
        m = MONTHS[i][0]
        return (pick(rng, [f"What is the {ORDINALS[i]} month of the year?", f"Which month is month number {i + 1}?"]),
                pick(rng, [f"The {ORDINALS[i]} month of the year is {m}.", f"{m}."]),
                f"Counting from January, month number {i + 1} is {m}.")
    if k == 3:
        i = rng.randrange(12)
        m, n = MONTHS[i][0], MONTHS[(i + 1) % 12][0]
        return (pick(rng, [f"What month comes after {m}?", f"Which month follows {m}?"]),
                pick(rng, [f"{n} comes after {m}.", f"{n}."]), f"After {m} comes {n}.")
    if k == 4:
        m, d = pick(rng, MONTHS)
        q = pick(rng, [f"How many days are in {m}?", f"How many days does {m} have?"])
        if m == "February":
            return q, "February has 28 days, or 29 in a leap year.", "February is short: 28 days, 29 in a leap year."
        return q, pick(rng, [f"{m} has {d} days.", f"{d}."]), f"{m} is a month with {d} days."
    if k == 5:
        return (pick(rng, ["How many days are in a week?", "How many days does a week have?"]),
                pick(rng, ["There are 7 days in a week.", "A week has 7 days.", "7."]),
                f"The days are {', '.join(DAYS)}. That is 7 days.")
    if k == 6:
        return (pick(rng, ["How many months are in a year?", "How many months does a year have?"]),
                pick(rng, ["There are 12 months in a year.", "A year has 12 months.", "12."]),
                "From January to December there are 12 months.")
    if rng.random() < 0.5:
        qs = ["List the days of the week.", "What are the days of the week?", "Name the days of the week."]
        return (pick(rng, qs),
                ", ".join(DAYS[:-1]) + " and Sunday.", "A week starts on Monday and ends on Sunday.")
    names = [m for m, _ in MONTHS]
    return (pick(rng, ["List the months of the year.", "What are the months of the year?", "Name all the months."]),
            ", ".join(names[:-1]) + " and December.", "There are 12 months, from January to December.")


def gen_opposite(rng):
    x, y = pick(rng, OPPOSITES)
    if rng.random() < 0.5 and WORD_USES[x] == 1 and WORD_USES[y] == 1:  # reverse only unambiguous pairs
        x, y = y, x
    q = pick(rng, [f"What is the opposite of {x}?", f"What is the opposite of the word {x}?",
                   f"Tell me the opposite of {x}.", f"What word means the opposite of {x}?"])
    a = pick(rng, [f"The opposite of {x} is {y}.", f"{y[0].upper() + y[1:]}."])
    return q, a, f"I need a word that means the reverse of {x}. That word is {y}."


def gen_colour(rng):
    c = pick(rng, ["colour", "color"])
    k = rng.randrange(4)
    if k == 0:
        x, y, z = pick(rng, COLOUR_MIX)
        if rng.random() < 0.5:
            x, y = y, x
        q = pick(rng, [f"What {c} do you get when you mix {x} and {y}?", f"What do {x} and {y} make?",
                       f"If I mix {x} and {y} paint, what {c} do I get?"])
        return q, pick(rng, [f"Mixing {x} and {y} gives {z}.", f"{x[0].upper() + x[1:]} and {y} make {z}.",
                             f"{z[0].upper() + z[1:]}."]), f"Mixing {x} paint with {y} paint gives {z}."
    if k == 1 or k == 2:
        t, z = pick(rng, THING_COLOURS)
        T = t[0].upper() + t[1:]
        return (pick(rng, [f"What {c} is {t}?", f"What is the {c} of {t}?"]),
                pick(rng, [f"{T} is {z}.", f"{z[0].upper() + z[1:]}."]), f"Usually {t} is {z}.")
    return (pick(rng, [f"What {c}s are in a rainbow?", f"Name the {c}s of the rainbow."]),
            "The colours of the rainbow are " + ", ".join(RAINBOW[:-1]) + " and violet.",
            "From the outside of the bow to the inside: " + ", ".join(RAINBOW) + ".")


def gen_units(rng):
    big, small, f = pick(rng, UNITS)
    n = pick(rng, [1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20])
    bn = SINGULAR[big] if n == 1 else big
    if rng.random() < 0.6:
        art = "an" if bn[0] in "aeiou" or bn.startswith("hour") else "a"
        q = pick(rng, [f"How many {small} are in {art if n == 1 else n} {bn}?", f"Convert {n} {bn} to {small}."])
        a = pick(rng, [f"{n} {bn} is {n * f} {small}.", f"There are {n * f} {small} in {n} {bn}.", f"{n * f}."])
        r = f"One {SINGULAR[big]} is {f} {small}, so {n} {bn} is {n} x {f} = {n * f} {small}."
    else:
        sn = n * f
        q = pick(rng, [f"Convert {sn} {small} to {big}.", f"How many {big} is {sn} {small}?"])
        a = pick(rng, [f"{sn} {small} is {n} {bn}.", f"{n}."])
        r = f"One {SINGULAR[big]} is {f} {small}, so {sn} {small} is {sn} / {f} = {n} {bn}."
    return q, a, r


def gen_words(rng):
    k = rng.randrange(7)
    w = pick(rng, WORDS)
    if k == 0:
        return (pick(rng, [f"How many letters are in the word {w}?", f"How many letters does {w} have?"]),
                pick(rng, [f"The word {w} has {len(w)} letters.", f"{len(w)}."]),
                f"Spell it out: {'-'.join(w)}. That is {len(w)} letters.")
    if k == 1:
        return (pick(rng, [f"Spell the word {w}.", f"How do you spell {w}?"]), "-".join(w) + ".",
                f"The word {w} is written with the letters {', '.join(w)}.")
    if k == 2:
        return (f"What is the first letter of the word {w}?", pick(rng, [f"The first letter of {w} is {w[0]}.",
                                                                          f"{w[0]}."]),
                f"{w} starts with {w[0]}.")
    if k == 3:
        return (f"What is the last letter of the word {w}?", pick(rng, [f"The last letter of {w} is {w[-1]}.",
                                                                         f"{w[-1]}."]),
                f"{w} ends with {w[-1]}.")
    if k == 4:
        n = rng.randint(0, 998)
        return (pick(rng, [f"What number comes after {n}?", f"What comes after {n}?"]),
                pick(rng, [f"{n + 1} comes after {n}.", f"{n + 1}."]), f"{n} + 1 = {n + 1}.")
    if k == 5:
        x, y = rng.sample(range(0, 200), 2)
        b = max(x, y)
        return (pick(rng, [f"Which is bigger, {x} or {y}?", f"Which number is larger, {x} or {y}?"]),
                pick(rng, [f"{b} is bigger than {min(x, y)}.", f"{b}."]), f"Compare {x} and {y}: {b} is larger.")
    n = rng.randint(0, 100)
    p = "even" if n % 2 == 0 else "odd"
    return (f"Is {n} an even or an odd number?", pick(rng, [f"{n} is an {p} number.", f"{p[0].upper()}{p[1:]}."]),
            f"{n} divided by 2 leaves {n % 2}, so {n} is {p}.")


def gen_lists(rng):
    """Longer answers: most take two to four canvases."""
    k = rng.randrange(7)
    if k == 0:
        lo = pick(rng, [0, 1, 1, 1, rng.randint(2, 30)])
        hi = lo + rng.randint(5, 60)
        if rng.random() < 0.3:
            return (f"Count down from {hi} to {lo}.", ", ".join(str(i) for i in range(hi, lo - 1, -1)) + ".",
                    f"Start at {hi} and go down by one until {lo}.")
        return (pick(rng, [f"Count from {lo} to {hi}.", f"Count from {lo} up to {hi}."]),
                ", ".join(str(i) for i in range(lo, hi + 1)) + ".", f"Start at {lo} and go up by one until {hi}.")
    if k == 1:
        n = rng.randint(2, 12)
        return (pick(rng, [f"Write the multiplication table of {n}.", f"Show me the {n} times table."]),
                "\n".join(f"{n} x {i} = {n * i}" for i in range(1, 11)), f"Multiply {n} by 1 to 10.")
    if k == 2:
        step = pick(rng, [2, 5, 10, 3])
        hi = step * rng.randint(8, 20)
        return (pick(rng, [f"Count by {step}s up to {hi}.", f"Count in steps of {step} up to {hi}."]),
                ", ".join(str(i) for i in range(step, hi + 1, step)) + ".", f"Start at {step} and add {step} "
                f"each time until {hi}.")
    if k == 3:
        cont = pick(rng, ["Europe", "Asia", "Africa", "South America"])
        rows = [r for r in CAPITALS if r[2] == cont]
        n = rng.randint(3, min(8, len(rows)))
        pickd = rng.sample(rows, n)
        return (pick(rng, [f"Name {n} countries in {cont} and their capitals.",
                           f"List {n} capital cities in {cont}."]),
                "\n".join(f"{c[0].upper() + c[1:]}: {city}" for c, city, _ in pickd),
                f"I choose {n} countries from {cont} and give each capital.")
    if k == 4:
        return (pick(rng, ["Name the planets in order from the sun.", "List the planets of the solar system."]),
                "The planets in order from the sun are " + ", ".join(PLANETS[:-1]) + " and Neptune.",
                "Mercury is closest to the sun and Neptune is farthest away.")
    if k == 5:
        ws = rng.sample(WORDS, rng.randint(3, 6))
        return (pick(rng, ["Spell these words: " + ", ".join(ws) + ".", "How do you spell " + ", ".join(ws) + "?"]),
                "\n".join(w + ": " + "-".join(w) for w in ws), "I spell each word letter by letter.")
    x, y = pick(rng, OPPOSITES), pick(rng, OPPOSITES)
    z = pick(rng, OPPOSITES)
    return ("Give me the opposites of " + f"{x[0]}, {y[0]} and {z[0]}.",
            "\n".join(f"{a}: {b}" for a, b in (x, y, z)), "I find the opposite of each word.")


def gen_nature(rng):
    k = rng.randrange(6)
    if k == 0:
        a, n = pick(rng, ANIMAL_LEGS)
        A = a[0].upper() + a[1:]
        ans = f"{A} has no legs." if n == 0 else pick(rng, [f"{A} has {n} legs.", f"{n}."])
        return f"How many legs does {a} have?", ans, f"Think about how {a} moves. {A} has {n} legs."
    if k == 1:
        a, s = pick(rng, ANIMAL_SOUNDS)
        return (pick(rng, [f"What sound does {a} make?", f"What does {a} say?"]),
                pick(rng, [f"{a[0].upper() + a[1:]} says {s}.", f"{s[0].upper() + s[1:]}!"]),
                f"The sound of {a} is {s}.")
    if k == 2:
        a, b = pick(rng, ANIMAL_BABIES)
        return (f"What is a baby {a.split()[-1]} called?", pick(rng, [f"A baby {a.split()[-1]} is called a {b}.",
                                                                        f"A {b}."]),
                f"The young of {a} is a {b}.")
    if k == 3:
        s, n = pick(rng, SHAPES)
        S = s[0].upper() + s[1:]
        ans = f"{S} has no straight sides." if n == 0 else pick(rng, [f"{S} has {n} sides.", f"{n}."])
        return f"How many sides does {s} have?", ans, f"Count the straight edges of {s}: {n}."
    if k == 4:
        i = rng.randrange(8)
        return (f"Which planet is number {i + 1} from the sun?", f"{PLANETS[i]} is planet number {i + 1} from the sun.",
                "In order from the sun: " + ", ".join(PLANETS) + ".")
    qs, a, short, r = pick(rng, FACTS)
    return pick(rng, qs), (a if rng.random() < 0.75 else short), r


def gen_explain(rng):
    qs, a = pick(rng, EXPLANATIONS)
    return pick(rng, qs), a, "Let me explain it simply in two or three sentences."


def gen_greeting(rng):
    qs, a = pick(rng, GREETINGS)
    return pick(rng, qs), a, "The user is talking to me, so I answer politely."


def load_fortunes():
    """Short fortune entries: whitespace collapsed, an attribution ("-- Name") kept on its own line."""
    out = []
    for name in FORTUNE_FILES:
        path = os.path.join(FORTUNE_DIR, name)
        if not os.path.isfile(path):
            print(f"make_train_data: {path} missing (apt-get install fortunes fortunes-min); skipping it",
                  file=sys.stderr)
            continue
        with open(path, encoding="utf-8", errors="strict") as f:
            entries = f.read().split("\n%\n")
        for e in entries:
            lines = [ln.strip() for ln in e.strip("%\n").split("\n") if ln.strip()]
            body, attrib = [], None
            for ln in lines:
                if ln.startswith("-- ") and attrib is None:
                    attrib = ln
                elif attrib is None:
                    body.append(ln)
                else:
                    body = None
                    break
            if not body:
                continue
            text = re.sub(r"\s+", " ", " ".join(body))
            if attrib:
                text += "\n" + re.sub(r"\s+", " ", attrib)
            if 20 <= len(text) <= 240 and text.isascii() and not re.search(r"[<>|\\]", text):
                out.append((name, text))
    return out


def gen_fortune(rng, fortunes):
    name, text = pick(rng, fortunes)
    if name == "fortunes":
        q = pick(rng, ["Tell me my fortune.", "What does my fortune cookie say?", "Give me a fortune.",
                       "Read my fortune."])
    else:
        q = pick(rng, ["Say something wise.", "Give me a saying.", "Tell me a proverb.", "Share some wisdom.",
                       "Give me a quote."])
    return q, text, "This is an open request, so I pick a short saying."


GENERATORS = [  # (name, weight, function)
    ("capital", 14, gen_capital), ("arithmetic", 16, gen_arith), ("calendar", 8, gen_calendar),
    ("opposite", 7, gen_opposite), ("colour", 6, gen_colour), ("units", 7, gen_units), ("words", 9, gen_words),
    ("nature", 9, gen_nature), ("lists", 7, gen_lists), ("explain", 5, gen_explain), ("greeting", 3, gen_greeting),
]


def big_arith(rng):
    """An arithmetic question for the calculator: (question, expression, value, reasoning)."""
    op = pick(rng, ["*", "*", "+", "-", "/"])
    if op == "*":
        x, y = rng.randint(11, 999), rng.randint(11, 99)
        q = pick(rng, [f"What is {x} times {y}?", f"What is {x} * {y}?", f"Multiply {x} by {y}.",
                       f"Calculate {x} x {y}."])
        return q, f"{x}*{y}", x * y, f"{x} times {y}"
    if op == "+":
        x, y = rng.randint(100, 99999), rng.randint(100, 99999)
        q = pick(rng, [f"What is {x} plus {y}?", f"What is {x} + {y}?", f"Add {x} and {y}."])
        return q, f"{x}+{y}", x + y, f"{x} plus {y}"
    if op == "-":
        x = rng.randint(1000, 99999)
        y = rng.randint(100, x)
        q = pick(rng, [f"What is {x} minus {y}?", f"What is {x} - {y}?", f"Subtract {y} from {x}."])
        return q, f"{x}-{y}", x - y, f"{x} minus {y}"
    y, z = rng.randint(3, 99), rng.randint(13, 999)
    q = pick(rng, [f"What is {y * z} divided by {y}?", f"What is {y * z} / {y}?", f"Divide {y * z} by {y}."])
    return q, f"{y * z}/{y}", z, f"{y * z} divided by {y}"


def make_tool_conversation(rng, think):
    if rng.random() < 0.25:  # tool declared, question needs no tool
        name, _, fn = pick(rng, [g for g in GENERATORS if g[0] not in ("arithmetic", "explain", "greeting")])
        q, a, r = fn(rng)
        return dict(kind="tool_direct", think=think, tools=True,
                    segments=[["p", render_prompt(q, think, True)], ["a", render_answer(a, think, r)]])
    q, expr, value, phrase = big_arith(rng)
    r = f"The user wants {phrase}. That is a big calculation, so I will use the calculator."
    final = pick(rng, [f"{phrase[0].upper() + phrase[1:]} is {value}.", f"The answer is {value}.", f"{value}."])
    after = f"The calculator says {phrase} is {value}."
    return dict(kind="tool", think=think, tools=True,
                segments=[["p", render_prompt(q, think, True)], ["a", render_call(expr, think, r)],
                          ["c", render_continuation(q, think, expr, r, str(value))],
                          ["a", render_answer(final, think, after)]])


def make_conversation(rng, fortunes):
    think = rng.random() < 0.3
    u = rng.random()
    if u < 0.08:
        return make_tool_conversation(rng, think)
    if u < 0.14 and fortunes:
        q, a, r = gen_fortune(rng, fortunes)
        kind = "fortune"
    else:
        total = sum(w for _, w, _ in GENERATORS)
        x, kind = rng.random() * total, None
        for name, w, fn in GENERATORS:
            x -= w
            if x < 0:
                kind, (q, a, r) = name, fn(rng)
                break
        if kind is None:
            kind, (q, a, r) = GENERATORS[-1][0], GENERATORS[-1][2](rng)
        if kind not in ("greeting", "explain") and rng.random() < 0.12:
            q = " ".join(rng.sample(PREAMBLES, rng.randint(2, 3))) + " " + q
    return dict(kind=kind, think=think, tools=False,
                segments=[["p", render_prompt(q, think, False)], ["a", render_answer(a, think, r)]])


# ---------------------------------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for chat.jsonl and chat.txt")
    ap.add_argument("--count", type=int, default=32000, help="number of conversations")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    fortunes = load_fortunes()
    convs = [make_conversation(rng, fortunes) for _ in range(args.count)]
    os.makedirs(args.out, exist_ok=True)
    counts = {}
    with open(os.path.join(args.out, "chat.jsonl"), "w", encoding="utf-8", newline="\n") as fj, \
            open(os.path.join(args.out, "chat.txt"), "w", encoding="utf-8", newline="\n") as ft:
        for c in convs:
            fj.write(json.dumps(c, ensure_ascii=False) + "\n")
            ft.write("".join(t for _, t in c["segments"]) + "\n")
            counts[c["kind"]] = counts.get(c["kind"], 0) + 1
    print(f"make_train_data: wrote {len(convs)} conversations to {args.out} ({len(fortunes)} fortune entries "
          f"from {', '.join(FORTUNE_FILES)}); kinds: {json.dumps(counts, sort_keys=True)}", file=sys.stderr)


if __name__ == "__main__":
    main()
