#!/usr/bin/env python3
"""Writes the smoketest battery (tests/fixtures/smoketest/battery.json; schema: docs/SMOKETEST.md).

    python3 scripts/make_battery.py                      # battery.json from calibration.json beside it

The prompts are rendered by scripts/make_train_data.py's functions, so `raw` and `continuation_raw` are exactly
what the model was trained on (and what the engine's chat path renders: tests/unit/smoketest_test.cpp). What
depends on the model lives in calibration.json, written by scripts/calibrate_battery.py: each prompt's step budget
(`max_steps`) and the sampler profiles in which the embedded model is known to get it wrong (`known_fail`).
Standard library only; deterministic.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_train_data import CALC_TOOL, PREAMBLES, render_continuation, render_prompt  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "smoketest")


def prompts():
    """(name, kind, prompt, fields): the battery in the style of the original engine's smoke test."""
    P = []

    def add(name, kind, prompt, accept, think=False, tools=None, **extra):
        P.append((name, kind, prompt, dict(think=think, tools=tools, accept=list(accept), **extra)))

    add("capital_france", "adherence", "What is the capital of France?", ["Paris"])
    add("seven_times_eight", "adherence", "What is 7 times 8?", ["56"])
    add("one_plus_one", "adherence", "What is 1 plus 1?", ["2"])
    add("opposite_of_hot", "adherence", "What is the opposite of hot?", ["cold"])
    add("blue_plus_yellow", "adherence", "What colour do you get when you mix blue and yellow?", ["green"])
    add("days_in_week", "adherence", "How many days are in a week?", ["7", "seven"])
    add("day_after_monday", "adherence", "What day comes after Monday?", ["Tuesday"])
    add("cm_in_metre", "adherence", "How many centimetres are in a metre?", ["100"])
    add("spider_legs", "adherence", "How many legs does a spider have?", ["8", "eight"])
    add("largest_planet", "adherence", "Which planet is the largest?", ["Jupiter"])
    add("water_freeze_c", "adherence", "At what temperature does water freeze in Celsius?", ["0", "zero"])
    add("months_list", "adherence", "List the months of the year.", [], require=["January", "June", "December"])
    add("long_ctx_capital", "adherence", PREAMBLES[0] + " " + PREAMBLES[6] + " " + PREAMBLES[11] +
        " What is the capital of Japan?", ["Tokyo"])
    add("think_capital", "thinking", "What is the capital of Germany?", ["Berlin"], think=True)
    add("think_add", "thinking", "What is 45 plus 38?", ["83"], think=True)
    add("tool_multiply", "tool", "What is 347 times 29?", ["10063"], tools=[CALC_TOOL],
        call={"name": "calculator", "arguments": {"expression": "347*29"}}, tool_response="10063",
        continuation_raw=render_continuation("What is 347 times 29?", False, "347*29", "", "10063"))
    add("count_to_40", "multiblock", "Count from 1 to 40.", [], require=["1", "20", "39", "40"], min_tokens=33)
    add("table_of_7", "multiblock", "Write the multiplication table of 7.", [],
        require=["7 x 1 = 7", "7 x 10 = 70"], min_tokens=33)
    add("sky_blue", "convergence", "Why is the sky blue?", [], min_tokens=33)
    add("fortune", "convergence", "Tell me my fortune.", [])
    add("hello", "convergence", "Hello!", ["hello"])
    return P


def battery(calibration):
    out = []
    for name, kind, prompt, f in prompts():
        if name not in calibration["max_steps"]:
            sys.exit(f"make_battery: calibration has no max_steps for '{name}' (run scripts/calibrate_battery.py)")
        e = dict(name=name, kind=kind, prompt=prompt, think=f.pop("think"))
        tools = f.pop("tools")
        if tools:
            e["tools"] = tools
        e.update(f)
        e["max_steps"] = calibration["max_steps"][name]
        if calibration.get("known_fail", {}).get(name):
            e["known_fail"] = sorted(calibration["known_fail"][name])
        e["raw"] = render_prompt(prompt, e["think"], bool(tools))
        out.append(e)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calibration", default=os.path.join(HERE, "calibration.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "battery.json"))
    args = ap.parse_args()
    with open(args.calibration, encoding="utf-8") as f:
        cal = json.load(f)
    doc = dict(version=1, seed=cal["seed"], sampler="contract", canvas_length=cal["canvas_length"],
               max_new_tokens=160, note="schema: docs/SMOKETEST.md; budgets and known failures: calibration.json",
               prompts=battery(cal))
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"make_battery: wrote {args.out}: {len(doc['prompts'])} prompts", file=sys.stderr)


if __name__ == "__main__":
    main()
