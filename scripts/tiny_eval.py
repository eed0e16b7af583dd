"""Evaluation of scripts/train_tiny.py: reloads the saved checkpoint and generates with transformers' generate()
(the reference sampler), the three sample prompts and the smoketest battery (scoring as docs/SMOKETEST.md)."""
import json
import re
import time

import torch

from tiny_data import EOS, STOPS, TOOL_RESPONSE, TURN_END, log


def norm_words(s):
    return " " + " ".join(re.sub(r"[^0-9a-z]+", " ", s.lower()).split()) + " "


def has_phrase(text, phrase):
    """Whole-word, case- and punctuation-insensitive containment."""
    return norm_words(phrase) in norm_words(text)


def generate_once(model, ids, seed, max_new):
    """One generate() call; returns (new ids up to the first stop id, the stop id or None, steps per block)."""
    torch.manual_seed(seed)
    firsts = []
    orig = model.forward

    def forward(*a, **kw):
        if kw.get("decoder_input_ids") is not None:
            firsts.append(kw.get("self_conditioning_logits") is None)
        return orig(*a, **kw)

    model.forward = forward
    try:
        with torch.no_grad():
            out = model.generate(torch.tensor([ids], device=model.device), max_new_tokens=max_new,
                                 return_dict_in_generate=True)
    finally:
        del model.forward
    new = out.sequences[0, len(ids):].tolist()
    steps = []
    for first in firsts:
        if first or not steps:
            steps.append(0)
        steps[-1] += 1
    cut = next((i for i, t in enumerate(new) if t in STOPS), len(new))
    return new[:cut], (new[cut] if cut < len(new) else None), steps


def answer_text(tok, ids):
    text = tok.decode(ids, skip_special_tokens=False)
    if "<channel|>" in text:
        text = text.rsplit("<channel|>", 1)[1]
    return re.sub(r"<[|a-z_\"]+>|<[a-z_\"]+\|>", " ", text)


def run_battery(model, tok, battery_path, deadline):
    with open(battery_path, encoding="utf-8") as f:
        bat = json.load(f)
    seed, results = bat.get("seed", 7), []
    for p in bat["prompts"]:
        if time.time() > deadline:
            log("battery: out of time, remaining prompts skipped")
            break
        ids = tok.encode(p["raw"], add_special_tokens=False).ids
        new, stop, steps = generate_once(model, ids, seed, 160)
        note = ""
        if p["kind"] == "tool":
            call_text = tok.decode(new, skip_special_tokens=False)
            want = "call:calculator{expression:<|\"|>" + p["call"]["arguments"]["expression"] + "<|\"|>}"
            call_ok = want in call_text and stop == TOOL_RESPONSE
            note = f"call {'ok' if call_ok else 'WRONG'}: {call_text!r}; "
            ids2 = tok.encode(p["continuation_raw"], add_special_tokens=False).ids  # as the engine re-renders it
            new, stop, steps2 = generate_once(model, ids2, seed, 160)
            steps += steps2
        else:
            call_ok = True
        text = answer_text(tok, new)
        ok = call_ok and stop in (TURN_END, EOS) and bool(text.strip())
        if p.get("accept"):
            ok = ok and any(has_phrase(text, a) for a in p["accept"])
        if p.get("require"):
            ok = ok and all(has_phrase(text, a) for a in p["require"])
        if p.get("min_tokens"):
            ok = ok and len(new) >= p["min_tokens"]
        in_budget = max(steps) <= p["max_steps"]
        results.append(dict(name=p["name"], ok=ok, in_budget=in_budget, steps=steps, tokens=len(new)))
        log(f"battery {p['name']:<18} {'PASS' if ok and in_budget else 'FAIL'} answer={'ok' if ok else 'wrong'} "
            f"steps={steps} (budget {p['max_steps']}) {note}{tok.decode(new, skip_special_tokens=False)!r}")
    n_ok = sum(r["ok"] for r in results)
    n_all = sum(r["ok"] and r["in_budget"] for r in results)
    log(f"battery (transformers generate, reference sampler, seed {seed}): {n_ok}/{len(results)} answers right, "
        f"{n_all}/{len(results)} also within the step budget")
    return results


def evaluate(args, tok, load):
    """Reloads what was written (bf16 weights, computed in fp32) and generates with the reference loop."""
    deadline = time.time() + args.eval_minutes * 60
    m = load(args.out, torch.float32, "cuda", "sdpa", "eager")
    prompts = ["<bos><|turn>user\nWhat is the capital of France?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
               "<bos><|turn>user\nWhat is 7 times 8?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
               "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nWhat is the opposite of hot?<turn|>\n"
               "<|turn>model\n<|channel>thought\n"]
    for p in prompts:
        new, stop, steps = generate_once(m, tok.encode(p, add_special_tokens=False).ids, 0, 96)
        log(f"sample: {p.rsplit('user', 1)[1].split('<turn|>')[0].strip()!r} -> "
            f"{tok.decode(new, skip_special_tokens=False)!r} (stop {stop}, steps per block {steps})")
    return run_battery(m, tok, args.battery, deadline) if args.battery else None
