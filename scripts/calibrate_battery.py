#!/usr/bin/env python3
"""Measures the smoketest battery's model-dependent values on a model and rewrites the battery.

    python3 scripts/calibrate_battery.py --model models/dg-tiny [--cli build/cpu/diffgemma]

Runs `diffgemma smoketest --json` once per sampler profile (contract, reference) on the CPU at the battery's
seed, then writes tests/fixtures/smoketest/calibration.json: for each prompt `max_steps` = the most denoising
steps any of its blocks took in either profile, plus 2 (the original engine's rule: budgets are the actuals of
the gate run plus 2), and `known_fail` = the profiles whose answer was wrong or whose block never converged (ran
all the model's max_denoising_steps; otherwise a step budget is never a reason, it is being set). Then scripts/make_battery.py rewrites battery.json and both profiles are run once more: they
must pass (known failures excepted). A prompt whose rendered text differs from the engine's is a bug, never a
known failure: calibration stops. `--also RESULT.json ...` folds in `smoketest --json` results of the same model
from other backends (e.g. the CUDA run on the GPU machine): their steps raise the budgets and their wrong answers
add known failures, so one battery holds on every backend. Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "smoketest")
PROFILES = ("contract", "reference")


def smoketest(cli, model, battery, profile, extra=()):
    cmd = [cli, "smoketest", "-m", model, "--battery", battery, "--sampler", profile, "--json", "-q", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 4):
        sys.exit(f"calibrate_battery: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    return json.loads(r.stdout), r.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory (the embedded model)")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "cpu", "diffgemma"))
    ap.add_argument("--describe", default="", help="what the model is, for calibration.json's `model` field")
    ap.add_argument("--summary", help="also write the final runs' results and sampler statistics (JSON) here")
    ap.add_argument("--also", nargs="*", default=[], help="smoketest --json results of this model on other backends")
    args = ap.parse_args()
    battery = os.path.join(FIXTURES, "battery.json")
    cal_path = os.path.join(FIXTURES, "calibration.json")
    with open(cal_path, encoding="utf-8") as f:
        cal = json.load(f)
    with open(os.path.join(args.model, "config.json"), encoding="utf-8") as f:
        canvas = json.load(f)["canvas_length"]
    with open(os.path.join(args.model, "generation_config.json"), encoding="utf-8") as f:
        cap = json.load(f)["max_denoising_steps"]

    runs = [smoketest(args.cli, args.model, battery, profile)[0] for profile in PROFILES]
    for path in args.also:
        with open(path, encoding="utf-8") as f:
            runs.append(json.load(f))
    steps, known = {}, {}
    for res in runs:
        profile = f"{res['sampler']}" + ("" if res.get("backend", "cpu") == "cpu" else f" ({res['backend']})")
        for p in res["prompts"]:
            bad = [w for w in p["failures"] if not w.startswith("steps:")]
            if any(w.startswith("render:") for w in bad):
                sys.exit(f"calibrate_battery: {p['name']}: {bad} — the battery's text is not what the engine "
                         "renders; fix that first")
            most = max((s for r in p["rounds"] for s in r["steps"]), default=0)
            if most >= cap:  # a block that never converged: a budget at the cap could never fail
                bad.append(f"steps: a block ran all {cap} steps")
            else:
                steps[p["name"]] = max(steps.get(p["name"], 0), most)
            if bad and res["sampler"] not in known.get(p["name"], []):
                known.setdefault(p["name"], []).append(res["sampler"])
            print(f"  {profile:<9} {p['name']:<18} steps {most:>2} {'FAIL ' + '; '.join(bad) if bad else 'ok'}")

    cal.update(model=args.describe or os.path.abspath(args.model), seed=res["seed"], canvas_length=canvas,
               max_steps={k: v + 2 for k, v in steps.items()}, known_fail={k: sorted(v) for k, v in known.items()})
    cal["note"] = ("Written by scripts/calibrate_battery.py: max_steps = the most denoising steps any converged block "
                   "of the prompt took with the model below at the seed, over both sampler profiles and every "
                   "backend run folded in, plus 2; known_fail = the profiles in which that model gets the prompt "
                   "wrong or a block never converges on some backend.")
    with open(cal_path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(cal, f, indent=1)
        f.write("\n")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_battery.py")], check=True)

    ok, summary = True, {}
    for profile in PROFILES:
        res, code = smoketest(args.cli, args.model, battery, profile)
        print(f"calibrate_battery: {profile}: passed {res['passed']}/{res['total']}, known failures "
              f"{res['known_failures']}, unexpected {res['unexpected_failures']}")
        ok = ok and code == 0
        summary[profile] = {k: res[k] for k in ("seed", "passed", "total", "known_failures", "stats")}
    if args.summary:
        with open(args.summary, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    if not ok:
        sys.exit("calibrate_battery: the recalibrated battery does not pass: the runs are not deterministic?")


if __name__ == "__main__":
    main()
