#!/usr/bin/env python3
"""Trains the small DiffusionGemma that diffgemma embeds as its default model (docs/TRAINING.md).

    PYTHONUNBUFFERED=1 python3 scripts/train_tiny.py --data data/chat.jsonl --tokenizer data/tokenizer.json \
        --out OUT/dg-tiny --steps 1110 --stop-step 1034 --minutes 8 --seed 0 \
        --battery tests/fixtures/smoketest/battery.json

Needs torch + transformers 5.17 (DiffusionGemmaForBlockDiffusion) + tokenizers, and a CUDA GPU. The objective:
a block boundary inside an answer splits a conversation into the encoder input (everything before it) and a
canvas (the next canvas_length tokens, padded with <pad> after the stop token); every canvas position is
replaced by a uniformly random id with probability t ~ U(0, 1]; the loss is the cross-entropy of the decoder's
logits against the clean canvas, plus the encoder's next-token loss, plus a small router balance term.
Self-conditioning: a no-grad forward gives logits whose tempered copy is fed back to about half the examples.
Batches hold examples of one encoder length (no padding); fp32 weights, TF32 matmuls, AdamW, cosine schedule.

--steps 0 sizes the run to --minutes after timing the first steps and prints the step count; --steps N (and
--stop-step) repeat a run: same data order, initialisation, noise and learning-rate schedule (GPU kernels may
differ in the last bits). --minutes is also a hard cap. The model is saved (bf16, save_pretrained, shards of at
most --max-shard-size) to --out every --save-every minutes and at the end, with generation_config.json and a copy
of the tokenizer; then it is reloaded from disk and sampled with transformers' generate().
"""
import argparse
import copy
import json
import math
import os
import random
import re
import shutil
import sys
import time
import traceback
import types

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the data helpers below work without torch (for checks on a CPU-only machine)
    torch = F = None

PAD, BOS, EOS, TURN_END, TOOL_RESPONSE = 0, 2, 1, 106, 50
STOPS = (EOS, TURN_END, TOOL_RESPONSE)  # generation_config eos_token_id
SPECIAL_IDS = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<|tool_response>": 50, "<|channel>": 100, "<channel|>": 101,
               "<|turn>": 105, "<turn|>": 106, "\n": 107}
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ---------------------------------------------------------------------------------------------------- data


def load_examples(path, encode, C, vocab, rng, limit=0, extra=0.3):
    """(encoder ids, canvas ids) pairs. Boundaries: the start of every model-written segment and every C tokens
    after it, plus, with probability `extra`, one random offset inside a segment longer than 4 tokens (the
    engine's commit-time trim can commit partial blocks, so a later canvas may start anywhere)."""
    examples, n_conv = [], 0
    with open(path, encoding="utf-8") as f:
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
                if role != "a":
                    raise ValueError(f"{path}:{lineno}: segment role {role!r} is neither 'p' nor 'a'")
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


# ---------------------------------------------------------------------------------------------------- model


def build_model(V, C, seed):
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion
    from make_fixtures import VISION  # the minimal vision tower every checkpoint carries
    text = dict(vocab_size=V, hidden_size=256, intermediate_size=512, moe_intermediate_size=128,
                num_hidden_layers=6,
                layer_types=["sliding_attention", "sliding_attention", "full_attention",
                             "sliding_attention", "sliding_attention", "full_attention"],
                num_attention_heads=4, num_key_value_heads=2, head_dim=64, global_head_dim=128,
                num_global_key_value_heads=1, num_experts=16, top_k_experts=2, sliding_window=32,
                max_position_embeddings=8192, use_bidirectional_attention="vision", final_logit_softcapping=30.0,
                pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS)
    cfg = DiffusionGemmaConfig(text_config=text, vision_config=dict(VISION), canvas_length=C)
    torch.manual_seed(seed)
    return DiffusionGemmaForBlockDiffusion(cfg).float()


def check_ties(model):
    dec, enc = model.model.decoder, model.model.encoder.language_model
    pairs = [(enc.embed_tokens.weight, dec.embed_tokens.weight), (model.lm_head.weight, dec.embed_tokens.weight),
             (enc.layers[0].experts.gate_up_proj, dec.layers[0].experts.gate_up_proj),
             (enc.layers[-1].self_attn.k_proj.weight, dec.layers[-1].self_attn.k_proj.weight)]
    if not all(a.data_ptr() == b.data_ptr() for a, b in pairs):
        model.tie_weights()
    if not all(a.data_ptr() == b.data_ptr() for a, b in pairs):
        raise RuntimeError("encoder, decoder and lm_head weights are not tied; this transformers version does not "
                           "build DiffusionGemma as SPEC.md §1.2 describes")


def dense_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """The experts' output, computed for all experts at once and mixed with the router weights (zero for
    unselected experts). Same function as transformers' per-expert loop, without its host syncs; checked against
    it at start-up."""
    w = torch.zeros(hidden_states.shape[0], self.num_experts, dtype=top_k_weights.dtype, device=hidden_states.device)
    w = w.scatter_add(1, top_k_index, top_k_weights)  # [N, E]
    gate, up = torch.matmul(hidden_states.unsqueeze(0), self.gate_up_proj.transpose(1, 2)).chunk(2, dim=-1)
    y = torch.matmul(self.act_fn(gate) * up, self.down_proj.transpose(1, 2))  # [E, N, H]
    return (y * w.t().unsqueeze(-1).to(y.dtype)).sum(0).to(hidden_states.dtype)


def install_training_hooks(model):
    """Dense experts on every experts module (checked against the reference loop); router outputs recorded for
    the balance loss while gradients are on."""
    experts = [m for m in model.modules() if type(m).__name__ == "DiffusionGemmaTextExperts"]
    routers = [m for m in model.modules() if type(m).__name__ == "DiffusionGemmaTextRouter"]
    if not experts or not routers:
        raise RuntimeError("no DiffusionGemmaTextExperts / DiffusionGemmaTextRouter modules found")
    reference = getattr(type(experts[0]).forward, "__wrapped__", None)
    if reference is not None:  # both on a float64 CPU copy of one experts module
        m0 = copy.deepcopy(experts[0]).to("cpu", torch.float64)
        g = torch.Generator().manual_seed(1)
        x = torch.randn(37, m0.hidden_dim, generator=g, dtype=torch.float64)
        idx = torch.stack([torch.randperm(m0.num_experts, generator=g)[:m0.config.top_k_experts] for _ in range(37)])
        wts = torch.rand(37, idx.shape[1], generator=g, dtype=torch.float64)
        with torch.no_grad():
            ref = reference(m0, x, idx, wts)
            got = dense_experts_forward(m0, x, idx, wts)
        err = (ref - got).abs().max().item() / max(ref.abs().max().item(), 1e-12)
        log(f"dense experts vs transformers' expert loop: max relative difference {err:.2e}")
        if not err < 1e-9:
            raise RuntimeError("the dense experts forward disagrees with transformers' expert loop")
    else:
        log("warning: transformers' expert loop not reachable (no __wrapped__); dense experts unchecked")
    for m in experts:
        m.forward = types.MethodType(dense_experts_forward, m)
    store = []
    encoder_routers = {id(m) for m in model.model.encoder.modules()}

    def hook(mod, inp, out):
        if torch.is_grad_enabled():  # (is encoder, router probabilities [N, E] fp32, chosen experts [N, K])
            store.append((id(mod) in encoder_routers, out[0], out[2]))

    for m in routers:
        m.register_forward_hook(hook)
    return store


def balance_loss(store, enc_valid):
    """Switch-Transformer balance term E * sum_e f_e * P_e, averaged over the recorded router calls; encoder
    padding tokens (enc_valid False) are left out."""
    total = None
    for is_encoder, probs, idx in store:
        if is_encoder and enc_valid is not None:
            probs, idx = probs[enc_valid], idx[enc_valid]
        E = probs.shape[-1]
        f = torch.zeros(E, device=probs.device, dtype=torch.float32)
        f.scatter_add_(0, idx.reshape(-1), torch.ones(idx.numel(), device=probs.device))
        term = E * (f / idx.numel() * probs.float().mean(0)).sum()
        total = term if total is None else total + term
    return total / len(store)


def forward_losses(model, enc, mask, canvas, noisy, t, sc_on, args, store):
    """Per-example diffusion loss [B] (mean over the canvas) and encoder next-token loss [B] (mean over real
    tokens), the router balance loss, and the canvas logits. `mask` is the 2D left-padding mask or None."""
    B, S = enc.shape
    C = canvas.shape[1]
    dev = enc.device
    V = model.config.text_config.vocab_size
    cap = model.config.text_config.final_logit_softcapping or 30.0
    kw = dict(input_ids=enc, position_ids=torch.arange(S, device=dev)[None], decoder_input_ids=noisy,
              decoder_position_ids=torch.arange(S, S + C, device=dev)[None])
    if mask is not None:
        kw["attention_mask"] = mask
        kw["decoder_attention_mask"] = torch.cat([mask, torch.ones(B, C, dtype=mask.dtype, device=dev)], dim=1)
    sc = None
    if args.sc_prob > 0:
        with torch.no_grad():
            first = model(**kw).logits
        sc = (first / (0.4 + 0.4 * t)[:, :, None]).to(torch.bfloat16)  # T = 0.8 on a pure-noise canvas
    store.clear()
    out = model(**kw, self_conditioning_logits=sc, self_conditioning_mask=sc_on if sc is not None else None)
    diff = F.cross_entropy(out.logits.reshape(-1, V), canvas.reshape(-1), reduction="none").view(B, C).mean(1)
    ar = torch.zeros(B, device=dev)
    if S > 1 and args.ar_weight > 0:
        h = model.lm_head(out.encoder_last_hidden_state[:, :-1])
        h = cap * torch.tanh(h.float() / cap)
        ce = F.cross_entropy(h.reshape(-1, V), enc[:, 1:].reshape(-1), reduction="none").view(B, S - 1)
        valid = torch.ones_like(ce) if mask is None else (mask[:, :-1] * mask[:, 1:]).to(ce.dtype)
        ar = (ce * valid).sum(1) / valid.sum(1).clamp(min=1)
    enc_valid = None if mask is None else mask.reshape(-1).bool()
    bal = balance_loss(store, enc_valid) if store else torch.zeros((), device=dev)
    store.clear()
    return diff, ar, bal, out.logits


def check_padding(model, examples, args, store, dev):
    """Left padding must not change anything: per-example losses and logits of a padded batch equal those of each
    example alone (fp32, full-precision matmuls), and a padded backward pass gives finite gradients."""
    by_len = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    pick = [by_len[0], by_len[len(by_len) // 4], by_len[len(by_len) // 2], by_len[-len(by_len) // 10],
            by_len[-1]]
    pick = [i for k, i in enumerate(pick) if len(examples[i][0]) not in {len(examples[j][0]) for j in pick[:k]}]
    if len(pick) < 2:
        return False, "too few distinct encoder lengths to check"
    g = torch.Generator().manual_seed(12345)
    B, C, V = len(pick), len(examples[0][1]), model.config.text_config.vocab_size
    t = (1.0 - torch.rand(B, 1, generator=g)).to(dev)
    noisy = torch.randint(0, V, (B, C), generator=g).to(dev)
    sc_on = torch.tensor([k % 2 == 0 for k in range(B)], device=dev)
    e, m, c = make_batch(examples, pick)
    enc, mask, canvas = torch.tensor(e, device=dev), torch.tensor(m, device=dev), torch.tensor(c, device=dev)
    torch.set_float32_matmul_precision("highest")
    try:
        with torch.no_grad():
            d_pad, a_pad, _, l_pad = forward_losses(model, enc, mask, canvas, noisy, t, sc_on, args, store)
            worst = 0.0
            for k, i in enumerate(pick):
                one = torch.tensor([examples[i][0]], device=dev)
                d1, a1, _, l1 = forward_losses(model, one, None, canvas[k:k + 1], noisy[k:k + 1], t[k:k + 1],
                                               sc_on[k:k + 1], args, store)
                worst = max(worst, (l1[0] - l_pad[k]).abs().max().item(), (d1[0] - d_pad[k]).abs().item(),
                            (a1[0] - a_pad[k]).abs().item())
        d, a, bal, _ = forward_losses(model, enc, mask, canvas, noisy, t, sc_on, args, store)
        (d.mean() + a.mean() + bal).backward()
        finite = all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in model.parameters())
    finally:
        model.zero_grad(set_to_none=True)
        store.clear()
        torch.set_float32_matmul_precision("high")
    lens = [len(examples[i][0]) for i in pick]
    msg = f"encoder lengths {lens}: largest difference padded vs alone {worst:.2e}, gradients finite: {finite}"
    return worst < 1e-3 and finite, msg


def save(model, out, tokenizer_path, shard):
    """bf16 copy -> save_pretrained (config.json, generation_config.json, safetensors) + tokenizer.json."""
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):  # old shards of an earlier save
        if f.startswith("model") and (f.endswith(".safetensors") or f.endswith(".index.json")):
            os.remove(os.path.join(out, f))
    m = copy.deepcopy(model).to(torch.bfloat16)
    m.save_pretrained(out, max_shard_size=shard)
    del m
    shutil.copyfile(tokenizer_path, os.path.join(out, "tokenizer.json"))


# ---------------------------------------------------------------------------------------------------- evaluation


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
            ids2 = ids + new + [TOOL_RESPONSE] + tok.encode(p["response_raw"], add_special_tokens=False).ids
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


# ---------------------------------------------------------------------------------------------------- training


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="chat.jsonl from scripts/make_train_data.py")
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json trained on the same text")
    ap.add_argument("--out", required=True, help="model directory to write")
    ap.add_argument("--minutes", type=float, default=7.0, help="training time budget (wall clock)")
    ap.add_argument("--steps", type=int, default=0, help="optimizer steps (0: as many as fit --minutes)")
    ap.add_argument("--stop-step", type=int, default=0, help="stop after this step, keeping the --steps schedule")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--canvas", type=int, default=32, help="canvas_length")
    ap.add_argument("--batching", choices=["buckets", "auto", "padded"], default="buckets",
                    help="buckets: one encoder length per forward pass, no padding (verified); padded: left-padded "
                         "mixed lengths (experimental: its start-up check failed on transformers 5.17, "
                         "docs/TRAINING.md); auto: padded only if that check passes")
    ap.add_argument("--batch", type=int, default=256, help="buckets: examples per optimizer step (at least)")
    ap.add_argument("--micro", type=int, default=512, help="examples per forward pass (at most)")
    ap.add_argument("--micro-tokens", type=int, default=40000, help="tokens per forward pass (about, at most)")
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--ar-weight", type=float, default=1.0, help="weight of the encoder next-token loss")
    ap.add_argument("--balance-weight", type=float, default=0.01, help="weight of the router balance loss")
    ap.add_argument("--sc-prob", type=float, default=0.5, help="share of examples trained with self-conditioning")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--save-every", type=float, default=2.0, help="minutes between checkpoint saves")
    ap.add_argument("--max-shard-size", default="14MB", help="save_pretrained shard size")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N conversations (smoke tests)")
    ap.add_argument("--battery", help="smoketest battery to run with generate() at the end")
    ap.add_argument("--eval-minutes", type=float, default=2.0, help="time allowed for the final generations")
    args = ap.parse_args()

    if torch is None:
        sys.exit("train_tiny: torch is not installed")
    import tokenizers
    import transformers
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}")
    if transformers.__version__ != "5.17.0":
        log(f"warning: written against transformers 5.17.0, found {transformers.__version__}")
    if not torch.cuda.is_available():
        sys.exit("train_tiny: no CUDA device")
    dev = torch.device("cuda")
    log(f"device: {torch.cuda.get_device_name(0)}")
    torch.set_float32_matmul_precision("high")  # TF32 matmuls; weights and activations stay fp32

    tok = tokenizers.Tokenizer.from_file(args.tokenizer)
    for lit, want in SPECIAL_IDS.items():
        got = tok.token_to_id(lit)
        if got != want:
            sys.exit(f"train_tiny: {args.tokenizer}: {lit!r} has id {got}, expected {want} (not a Gemma 4 layout)")
    n_tok = tok.get_vocab_size(with_added_tokens=True)
    V, C = (n_tok + 63) // 64 * 64, args.canvas
    rng = random.Random(args.seed)
    examples, n_conv = load_examples(args.data, lambda s: tok.encode(s, add_special_tokens=False).ids, C, n_tok,
                                     rng, args.limit)
    lens = sorted(len(e) for e, _ in examples)
    log(f"data: {n_conv} conversations -> {len(examples)} examples; encoder length min {lens[0]} median "
        f"{lens[len(lens) // 2]} max {lens[-1]}; {sum(n > 32 for n in lens)} longer than 32; "
        f"{sum(sum(t != PAD for t in c) for _, c in examples) / len(examples):.1f} non-pad canvas tokens on average")

    model = build_model(V, C, args.seed).to(dev)
    check_ties(model)
    model.train()
    tc = model.config.text_config
    n_params = sum(p.numel() for p in model.parameters())
    n_vision = sum(p.numel() for n, p in model.named_parameters() if "vision" in n)
    log(f"model: vocab {V} (tokenizer {n_tok}), canvas {C}, layers {tc.layer_types}, window {tc.sliding_window}, "
        f"{n_params / 1e6:.2f} M parameters ({n_vision / 1e3:.1f} K in the vision tower); attention "
        f"{model.config._attn_implementation}")
    from make_fixtures import load, set_generation_config
    set_generation_config(model, C)
    model.generation_config.max_new_tokens = 256
    router_store = install_training_hooks(model)

    mode = args.batching
    if mode == "auto":
        try:
            ok, msg = check_padding(model, examples, args, router_store, dev)
        except Exception as e:  # noqa: BLE001 - any failure of the padded path means: do not use it
            ok, msg = False, f"padded forward failed: {e!r}"
        mode = "padded" if ok else "buckets"
        log(f"padding check: {msg} -> {mode} batches")

    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator(device=dev).manual_seed(args.seed)

    total = args.steps or None
    budget = args.minutes * 60.0
    t_start = time.time()
    last_save = t_start
    step, epoch, calib_t, skipped = 0, 0, None, 0
    sums = {k: torch.zeros((), device=dev) for k in ("loss", "diff", "ar", "bal", "acc")}
    n_sum, t_log, stop_reason = 0, time.time(), "steps done"
    history = []
    done = False
    while not done:
        if mode == "padded":
            plan = epoch_plan_padded(examples, rng, C, args.micro, args.micro_tokens)
        else:
            plan = epoch_plan_buckets(examples, rng, C, args.batch, args.micro, args.micro_tokens)
        if epoch == 0:
            log(f"epoch plan ({mode}): {len(plan)} optimizer steps, {sum(len(s) for s in plan)} forward passes")
        replan = False
        for micros in plan:
            if (total is not None and step >= total) or (args.stop_step and step >= args.stop_step):
                done = True
                stop_reason = "steps done" if not args.stop_step or step < args.stop_step else "--stop-step"
                break
            if time.time() - t_start > budget * 1.05 + 10:
                stop_reason = f"time budget reached at step {step} of {total}"
                done = True
                break
            lr = lr_at(step, total, args.lr, args.warmup)
            for g in opt.param_groups:
                g["lr"] = lr
            n_step = sum(len(m) for m in micros)
            for m in micros:
                e, msk, c = make_batch(examples, m)
                enc, canvas = torch.tensor(e, device=dev), torch.tensor(c, device=dev)
                mask = torch.tensor(msk, device=dev) if msk is not None else None
                B = enc.shape[0]
                t = 1.0 - torch.rand(B, 1, device=dev, generator=gen)  # noise level in (0, 1]
                noise = torch.randint(0, V, (B, C), device=dev, generator=gen)
                noisy = torch.where(torch.rand(B, C, device=dev, generator=gen) < t, noise, canvas)
                sc_on = torch.rand(B, device=dev, generator=gen) < args.sc_prob
                diff, ar, bal, logits = forward_losses(model, enc, mask, canvas, noisy, t, sc_on, args, router_store)
                per_ex = diff + args.ar_weight * ar
                loss = per_ex.sum() / n_step + args.balance_weight * bal * (B / n_step)
                loss.backward()
                with torch.no_grad():
                    content = canvas != PAD
                    acc = ((logits.argmax(-1) == canvas) & content).sum() / content.sum().clamp(min=1)
                    for k, v in (("loss", per_ex.sum() + args.balance_weight * bal * B), ("diff", diff.sum()),
                                 ("ar", ar.sum()), ("bal", bal * B), ("acc", acc * B)):
                        sums[k] += v
                n_sum += B
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if not torch.isfinite(gnorm):
                opt.zero_grad(set_to_none=True)
                skipped += 1
                log(f"step {step}: non-finite gradient norm, step skipped ({skipped} so far)")
                if skipped >= 3 and mode == "padded":
                    mode, replan = "buckets", True
                    log("switching to unpadded (bucketed) batches")
                    break
                if skipped >= 10:
                    raise RuntimeError("non-finite gradients in 10 steps; stopping (the last checkpoint is kept)")
                continue
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step == 10:
                torch.cuda.synchronize()
                calib_t = time.time()
            if total is None and step == 60:  # later steps ran ~15% slower than these in the first run
                torch.cuda.synchronize()
                rate = 50 / (time.time() - calib_t)
                total = step + int(rate * (budget - (time.time() - t_start)) * 0.85)
                log(f"timing: {rate:.2f} steps/s -> {total} steps in {args.minutes:g} min "
                    f"(repeat this run with --steps {total} --batching {mode})")
            if step % args.log_every == 0 or step == total:
                vals = {k: (v / max(n_sum, 1)).item() for k, v in sums.items()}
                if not all(math.isfinite(v) for v in vals.values()):
                    raise RuntimeError(f"non-finite loss at step {step}: {vals}")
                dt = time.time() - t_log
                log(f"step {step}/{total or '?'} ep {epoch} lr {lr:.2e} loss {vals['loss']:.4f} diffusion "
                    f"{vals['diff']:.4f} encoder-AR {vals['ar']:.4f} balance {vals['bal']:.3f} canvas-acc "
                    f"{vals['acc']:.3f} gnorm {gnorm.item():.2f} ({n_sum / dt:.0f} ex/s)")
                history.append(dict(step=step, **{k: round(v, 5) for k, v in vals.items()}))
                for v in sums.values():
                    v.zero_()
                n_sum, t_log = 0, time.time()
            if time.time() - last_save > args.save_every * 60:
                save(model, args.out, args.tokenizer, args.max_shard_size)
                last_save = time.time()
                log(f"checkpoint saved to {args.out} at step {step}")
        if not done and not replan:
            epoch += 1
    train_s = time.time() - t_start
    log(f"training stopped ({stop_reason}): {step} steps, {epoch} full epochs, {train_s / 60:.2f} min")
    save(model, args.out, args.tokenizer, args.max_shard_size)
    log(f"saved {args.out}: {sorted(os.listdir(args.out))}")
    del model, opt
    torch.cuda.empty_cache()

    battery = None
    try:
        battery = evaluate(args, tok, load)
    except Exception:  # noqa: BLE001 - the model is saved; report and finish
        traceback.print_exc()
        log("evaluation failed (the model above is saved)")
    summary = dict(steps=step, total_planned=total, epochs=epoch, train_minutes=round(train_s / 60, 2),
                   stop_reason=stop_reason, batching=mode, skipped_steps=skipped, seed=args.seed,
                   examples=len(examples), conversations=n_conv,
                   params=n_params, vocab=V, canvas=C, args=vars(args), last=history[-1] if history else None,
                   battery=battery)
    log("SUMMARY " + json.dumps(summary))


def evaluate(args, tok, load):
    """Reloads what was written (bf16 weights, computed in fp32) and generates with the reference loop."""
    deadline = time.time() + args.eval_minutes * 60
    m = load(args.out, torch.float32, "cuda", "sdpa", "eager")
    prompts = ["<bos><|turn>user\nWhat is the capital of France?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
               "<bos><|turn>user\nWhat is 7 times 8?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
               "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nWhat is the opposite of hot?<turn|>\n"
               "<|turn>model\n"]
    for p in prompts:
        new, stop, steps = generate_once(m, tok.encode(p, add_special_tokens=False).ids, 0, 96)
        log(f"sample: {p.rsplit('user', 1)[1].split('<turn|>')[0].strip()!r} -> "
            f"{tok.decode(new, skip_special_tokens=False)!r} (stop {stop}, steps per block {steps})")
    return run_battery(m, tok, args.battery, deadline) if args.battery else None


if __name__ == "__main__":
    main()
