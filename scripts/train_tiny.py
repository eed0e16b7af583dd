#!/usr/bin/env python3
"""Trains the small DiffusionGemma that diffgemma embeds as its default model (docs/TRAINING.md).

    PYTHONUNBUFFERED=1 python3 scripts/train_tiny.py --data data/chat.jsonl.xz --tokenizer data/tokenizer.json \
        --out OUT/dg-tiny --minutes 7.5 --seed 0 --battery tests/fixtures/smoketest/battery.json

Needs torch + transformers 5.17 (DiffusionGemmaForBlockDiffusion) + tokenizers, and a CUDA GPU. The objective:
a block boundary inside an answer splits a conversation into the encoder input (everything before it) and a
canvas (the next canvas_length tokens, padded with <pad> after the stop token); every canvas position is
replaced by a uniformly random id with probability t ~ U(0, 1]; the loss is the cross-entropy of the decoder's
logits against the clean canvas, plus the encoder's next-token loss, plus a small router balance term.
Self-conditioning: a no-grad forward gives logits whose tempered copy is fed back to about half the examples
(whole forward passes by default, so the other half skip the extra forward).
Batches hold examples of one encoder length (no padding); fp32 weights, TF32 matmuls, fused AdamW, warm-up then a
cosine learning-rate schedule (or a constant rate: --lr-schedule, for runs continued with --init); a non-finite
gradient skips its step without a host sync (GradScaler at scale 1). --copy-stats logs whether the copy that
retrieval needs has formed (the needle and recall data of scripts/needle_data.py; docs/NEEDLE.md).

--steps 0 sizes the run to --minutes after timing the first steps and prints the step count; --steps N (and
--stop-step) repeat a run: same data order, initialisation, noise and learning-rate schedule (GPU kernels may
differ in the last bits). --minutes is also a hard cap. The model is saved (bf16, save_pretrained, shards of at
most --max-shard-size) to --out every --save-every minutes and at the end, with generation_config.json and a copy
of the tokenizer; then it is reloaded from disk and sampled with transformers' generate() (scripts/tiny_eval.py).
"""
import argparse
import copy
import json
import math
import os
import random
import shutil
import sys
import time
import traceback
import types

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_data import (BOS, EOS, PAD, SPECIAL_IDS, epoch_plan_buckets, epoch_plan_padded, load_examples,  # noqa: E402
                       log, lr_at, make_batch, open_text, pad_examples)

# ---------------------------------------------------------------------------------------------------- model


# Text configs by --arch. tiny: the embedded model (models/dg-tiny). needle: the retrieval model of the long-context
# issue (docs/TRAINING.md), about 5 MB in bf16 so the tree stays small: the same attention head sizes (64 sliding,
# 128 full: the CUDA kernels' tested shapes), half the width, four layers ending in a full one.
ARCHS = {
    "tiny": dict(hidden_size=256, intermediate_size=512, moe_intermediate_size=128, num_hidden_layers=6,
                 layer_types=["sliding_attention", "sliding_attention", "full_attention",
                              "sliding_attention", "sliding_attention", "full_attention"],
                 num_attention_heads=4, num_key_value_heads=2, head_dim=64, global_head_dim=128,
                 num_global_key_value_heads=1, num_experts=16, top_k_experts=2, sliding_window=32),
    "needle": dict(hidden_size=128, intermediate_size=256, moe_intermediate_size=64, num_hidden_layers=4,
                   layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                   num_attention_heads=4, num_key_value_heads=2, head_dim=64, global_head_dim=128,
                   num_global_key_value_heads=1, num_experts=8, top_k_experts=2, sliding_window=32),
}


def build_model(V, C, seed, arch="tiny", max_positions=8192):
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion
    from make_fixtures import VISION  # the minimal vision tower every checkpoint carries
    text = dict(vocab_size=V, **ARCHS[arch], max_position_embeddings=max_positions,
                use_bidirectional_attention="vision", final_logit_softcapping=30.0,
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


def forward_losses(model, enc, mask, canvas, noisy, t, sc_on, args, store, code_ids=None):
    """Per-example diffusion loss [B] (mean over the canvas, the answer's code weighted by --code-weight) and
    encoder next-token loss [B] (mean over real tokens), the router balance loss, the canvas logits, and with
    --copy-stats the encoder's next-token argmax [B, S-1] (else None). `mask` is the 2D left-padding mask or None.
    `sc_on`: a bool tensor [B] (self-conditioning per example; the no-grad forward runs for all) or a Python bool
    (for the whole pass; False skips the no-grad forward: zero signal, as self_conditioning_mask False gives).
    `code_ids`: copy_tokens' (" is" id, code mask), for --code-weight."""
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
    sc, sc_mask = None, None
    if sc_on is True or (isinstance(sc_on, torch.Tensor) and args.sc_prob > 0):
        with torch.no_grad():
            first = model(**kw).logits
        sc = (first / (0.4 + 0.4 * t)[:, :, None]).to(torch.bfloat16)  # T = 0.8 on a pure-noise canvas
        sc_mask = sc_on if isinstance(sc_on, torch.Tensor) else None
    store.clear()
    out = model(**kw, self_conditioning_logits=sc, self_conditioning_mask=sc_mask)
    ce = F.cross_entropy(out.logits.reshape(-1, V), canvas.reshape(-1), reduction="none").view(B, C)
    if code_ids is not None and args.code_weight != 1.0:  # the answer's code after " is" weighs code_weight
        ce = ce * (1.0 + (args.code_weight - 1.0) * answer_code_at(enc, canvas, *code_ids).float())
    diff = ce.mean(1)
    ar, ar_pred = torch.zeros(B, device=dev), None
    if S > 1 and args.ar_weight > 0:
        h = model.lm_head(out.encoder_last_hidden_state[:, :-1])
        h = cap * torch.tanh(h.float() / cap)
        ce = F.cross_entropy(h.reshape(-1, V), enc[:, 1:].reshape(-1), reduction="none").view(B, S - 1)
        valid = torch.ones_like(ce) if mask is None else (mask[:, :-1] * mask[:, 1:]).to(ce.dtype)
        ar = (ce * valid).sum(1) / valid.sum(1).clamp(min=1)
        if args.copy_stats:
            ar_pred = h.detach().argmax(-1)
    enc_valid = None if mask is None else mask.reshape(-1).bool()
    bal = balance_loss(store, enc_valid) if store else torch.zeros((), device=dev)
    store.clear()
    return diff, ar, bal, out.logits, ar_pred


def copy_tokens(tok, V, dev):
    """For --copy-stats: the id of " is" and a [V] mask of the code tokens (digits, with or without the word mark
    before and a period after: "▁48.", and "▁4" then "3." where the tokenizer splits a code)."""
    ids = tok.encode(" is", add_special_tokens=False).ids
    if len(ids) != 1:
        sys.exit(f"train_tiny: --copy-stats and --code-weight need ' is' to be one token; this tokenizer gives {ids}")
    mask = torch.zeros(V, dtype=torch.bool)
    for s, i in tok.get_vocab(with_added_tokens=False).items():
        digits = s.replace("\u2581", "").rstrip(".")
        mask[i] = digits.isascii() and digits.isdigit()
    if not mask.any():
        sys.exit("train_tiny: --copy-stats and --code-weight: the tokenizer has no digit tokens")
    return ids[0], mask.to(dev)


def answer_code_at(enc, canvas, is_id, is_code):
    """[B, C] bool: the canvas positions holding a code right after " is" (the answer's code)."""
    prev = torch.cat([enc[:, -1:], canvas[:, :-1]], 1)
    return (prev == is_id) & is_code[canvas]


def copy_counts(enc, canvas, noisy, pred, ar_pred, is_id, is_code):
    """--copy-stats of one forward pass as 0-dim tensors (no host sync): right and all predictions of the encoder's
    next token where it is a code after "NAME is" and a line of the same NAME came earlier in the example (the two
    ids before "is" name it; a name keeps its code within a prompt, so only a copy predicts it), then right and all
    of the canvas's predictions of a noised code right after "is" (the answer's code). `pred`: the canvas argmax."""
    B, S = enc.shape
    V, dev = is_code.shape[0], enc.device
    at = answer_code_at(enc, canvas, is_id, is_code) & (noisy != canvas)
    code = ((at & (pred == canvas)).sum(), at.sum())
    if ar_pred is None or S < 4:
        zero = torch.zeros((), dtype=torch.long, device=dev)
        return (zero, zero) + code
    line = torch.zeros_like(enc, dtype=torch.bool)  # "is" at i, a code at i + 1
    line[:, 2:-1] = (enc[:, 2:-1] == is_id) & is_code[enc[:, 3:]]
    rows, cols = torch.arange(B, device=dev)[:, None], torch.arange(S, device=dev)[None]
    key = torch.where(line, (rows * V + enc.roll(2, 1)) * V + enc.roll(1, 1), -1 - rows * S - cols)
    keys, order = torch.sort(key.reshape(-1), stable=True)  # equal keys stay in the order of their positions
    again = torch.zeros(B * S, dtype=torch.bool, device=dev)
    again[order[1:]] = keys[1:] == keys[:-1]
    again = again.view(B, S)[:, :-1]  # the code after "is" at i is predicted at i
    return ((again & (ar_pred == enc[:, 1:])).sum(), again.sum()) + code


def copy_report(sums):
    """The --copy-stats part of a log line and of the history entry (accuracies over the lines since the last);
    zeroes the sums."""
    n_copy, n_code = sums["copy_n"].item(), sums["code_n"].item()
    acc = {"copy_acc": sums["copy"].item() / max(n_copy, 1), "code_acc": sums["code"].item() / max(n_code, 1)}
    for v in sums.values():
        v.zero_()
    return (f" copy-acc {acc['copy_acc']:.3f} of {n_copy} answer-code-acc {acc['code_acc']:.3f} of {n_code}",
            acc)


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
            d_pad, a_pad, _, l_pad, _ = forward_losses(model, enc, mask, canvas, noisy, t, sc_on, args, store)
            worst = 0.0
            for k, i in enumerate(pick):
                one = torch.tensor([examples[i][0]], device=dev)
                d1, a1, _, l1, _ = forward_losses(model, one, None, canvas[k:k + 1], noisy[k:k + 1], t[k:k + 1],
                                                  sc_on[k:k + 1], args, store)
                worst = max(worst, (l1[0] - l_pad[k]).abs().max().item(), (d1[0] - d_pad[k]).abs().item(),
                            (a1[0] - a_pad[k]).abs().item())
        d, a, bal, _, _ = forward_losses(model, enc, mask, canvas, noisy, t, sc_on, args, store)
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


# ---------------------------------------------------------------------------------------------------- training


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True,
                    help="chat.jsonl from scripts/make_train_data.py, or its .xz (data/chat.jsonl.xz)")
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json trained on the same text")
    ap.add_argument("--out", required=True, help="model directory to write")
    ap.add_argument("--minutes", type=float, default=7.5, help="training time budget (wall clock; also a hard cap)")
    ap.add_argument("--steps", type=int, default=0, help="optimizer steps (0: as many as fit --minutes)")
    ap.add_argument("--stop-step", type=int, default=0, help="stop after this step, keeping the --steps schedule")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--canvas", type=int, default=32, help="canvas_length")
    ap.add_argument("--arch", choices=sorted(ARCHS), default="tiny",
                    help="tiny: the embedded model; needle: the small retrieval model (docs/NEEDLE.md)")
    ap.add_argument("--max-positions", type=int, default=8192, help="max_position_embeddings of the config")
    ap.add_argument("--init", help="a model directory this run saved earlier: continue training it (fresh optimizer)")
    ap.add_argument("--pad-to", type=int, default=0,
                    help="round encoder inputs up to a multiple of N tokens with needle filler after the user turn's "
                         "header (long prompts of scattered lengths: the unpadded buckets fill up); 0: off")
    ap.add_argument("--batching", choices=["buckets", "auto", "padded"], default="buckets",
                    help="buckets: one encoder length per forward pass, no padding (verified); padded: left-padded "
                         "mixed lengths (experimental: its start-up check failed on transformers 5.17, "
                         "docs/TRAINING.md); auto: padded only if that check passes")
    ap.add_argument("--batch", type=int, default=256, help="buckets: examples per optimizer step (at least)")
    ap.add_argument("--micro", type=int, default=2048, help="examples per forward pass (at most)")
    ap.add_argument("--micro-tokens", type=int, default=80000, help="tokens per forward pass (about, at most)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--lr-schedule", choices=["cosine", "constant"], default="cosine",
                    help="after the warm-up: cosine to a tenth of --lr at the last step, or --lr throughout (a run "
                         "continued with --init then goes on at the same rate)")
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--ar-weight", type=float, default=1.0, help="weight of the encoder next-token loss")
    ap.add_argument("--code-weight", type=float, default=1.0,
                    help="weight of the canvas's answer code (a code token right after ' is', scripts/needle_data.py's "
                         "answers; noised or not) in the diffusion loss, against 1 for every other canvas position; "
                         "the logged diffusion loss is the weighted mean")
    ap.add_argument("--balance-weight", type=float, default=0.01, help="weight of the router balance loss")
    ap.add_argument("--sc-prob", type=float, default=0.5, help="share of examples trained with self-conditioning")
    ap.add_argument("--sc-per", choices=["pass", "example"], default="pass",
                    help="pass: each forward pass is self-conditioned or not as a whole (the others skip the extra "
                         "no-grad forward); example: per example inside every pass (the first trained model)")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--copy-stats", action="store_true",
                    help="log whether copying forms (scripts/needle_data.py's data): copy-acc, the encoder's "
                         "next-token accuracy on the code of a line whose name came earlier in the prompt, and "
                         "answer-code-acc, the canvas's accuracy on the noised code after 'is' (chance: 1/90)")
    ap.add_argument("--save-every", type=float, default=3.0, help="minutes between checkpoint saves")
    ap.add_argument("--max-shard-size", default="14MB", help="save_pretrained shard size")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N conversations (smoke tests)")
    ap.add_argument("--battery", help="smoketest battery to run with generate() at the end")
    ap.add_argument("--eval-minutes", type=float, default=1.5,
                    help="time allowed for the final generations (0: none)")
    a = ap.parse_args()
    if not a.code_weight > 0:
        ap.error(f"--code-weight must be positive (got {a.code_weight})")
    return a


def batch_encoder(tok, path, limit):
    """encode(text) for load_examples, answered from one encode_batch over the file's segments (on all cores; the
    ids of tok.encode)."""
    texts = []
    with open_text(path) as f:
        for n, line in enumerate(f):
            if limit and n >= limit:
                break
            texts += [text for _, text in json.loads(line)["segments"]]
    unique = list(dict.fromkeys(texts))
    ids = {t: e.ids for t, e in zip(unique, tok.encode_batch(unique, add_special_tokens=False))}
    return lambda s: ids[s] if s in ids else tok.encode(s, add_special_tokens=False).ids


def to_device(rows, dev):
    """A list of equal-length int lists -> a long tensor on `dev`, copied from pinned memory without a host sync."""
    return torch.tensor(rows, dtype=torch.long).pin_memory().to(dev, non_blocking=True)


def main():
    args = parse_args()
    import tokenizers
    import transformers
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
    sc_rng = random.Random(args.seed + 1)  # per-pass self-conditioning coin (a host draw: no device sync)
    examples, n_conv = load_examples(args.data, batch_encoder(tok, args.data, args.limit), C, n_tok, rng, args.limit)
    if args.pad_to > 0:
        from needle_data import sentence
        frng = random.Random(args.seed + 2)
        filler = tok.encode(" ".join(sentence(frng) for _ in range(args.pad_to // 4 + 8)) + " ",
                            add_special_tokens=False).ids
        prefix = tok.encode("<bos><|turn>user\n", add_special_tokens=False).ids
        examples, n_pad = pad_examples(examples, args.pad_to, prefix, filler)
        log(f"padding: {n_pad} of {len(examples)} encoder inputs rounded up to a multiple of {args.pad_to} tokens")
    lens = sorted(len(e) for e, _ in examples)
    log(f"data: {n_conv} conversations -> {len(examples)} examples; encoder length min {lens[0]} median "
        f"{lens[len(lens) // 2]} max {lens[-1]}; {sum(n > 32 for n in lens)} longer than 32; "
        f"{sum(sum(t != PAD for t in c) for _, c in examples) / len(examples):.1f} non-pad canvas tokens on average")

    if args.init:  # continue from a saved model (its config wins over --arch/--canvas/--max-positions)
        from transformers import DiffusionGemmaForBlockDiffusion
        torch.manual_seed(args.seed)
        model = DiffusionGemmaForBlockDiffusion.from_pretrained(args.init, dtype=torch.float32).to(dev)
        if model.config.canvas_length != C or model.config.text_config.vocab_size != V:
            sys.exit(f"train_tiny: --init {args.init} has canvas {model.config.canvas_length} and vocab "
                     f"{model.config.text_config.vocab_size}; this run wants {C} and {V}")
        log(f"initialised from {args.init}")
    else:
        model = build_model(V, C, args.seed, args.arch, args.max_positions).to(dev)
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
    copy_ids = copy_tokens(tok, V, dev) if args.copy_stats or args.code_weight != 1.0 else None

    mode = args.batching
    if mode == "auto":
        try:
            ok, msg = check_padding(model, examples, args, router_store, dev)
        except Exception as e:  # noqa: BLE001 - any failure of the padded path means: do not use it
            ok, msg = False, f"padded forward failed: {e!r}"
        mode = "padded" if ok else "buckets"
        log(f"padding check: {msg} -> {mode} batches")

    params = list(model.parameters())
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            fused=True)
    # Scale 1 (exact in fp32), never grown: the scaler only detects non-finite gradients on the device and makes
    # the fused optimizer skip that step, so no step waits for the GPU. Each skip halves the scale (still exact).
    scaler = torch.amp.GradScaler("cuda", init_scale=1.0, growth_interval=2 ** 30)
    gen = torch.Generator(device=dev).manual_seed(args.seed)

    total = args.steps or None
    budget = args.minutes * 60.0
    t_start = time.time()
    last_save = t_start
    step, epoch, calib_t, skipped = 0, 0, None, 0
    sums = {k: torch.zeros((), device=dev) for k in ("loss", "diff", "ar", "bal", "acc")}
    copy_sums = {k: torch.zeros((), dtype=torch.long, device=dev) for k in ("copy", "copy_n", "code", "code_n")}
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
            if time.time() - t_start > budget:
                stop_reason = f"time budget reached at step {step} of {total}"
                done = True
                break
            lr = lr_at(step, total if args.lr_schedule == "cosine" else None, args.lr, args.warmup)
            for g in opt.param_groups:
                g["lr"] = lr
            n_step = sum(len(m) for m in micros)
            for m in micros:
                e, msk, c = make_batch(examples, m)
                enc, canvas = to_device(e, dev), to_device(c, dev)
                mask = to_device(msk, dev) if msk is not None else None
                B = enc.shape[0]
                t = 1.0 - torch.rand(B, 1, device=dev, generator=gen)  # noise level in (0, 1]
                noise = torch.randint(0, V, (B, C), device=dev, generator=gen)
                noisy = torch.where(torch.rand(B, C, device=dev, generator=gen) < t, noise, canvas)
                if args.sc_per == "pass":
                    sc_on = sc_rng.random() < args.sc_prob
                else:
                    sc_on = torch.rand(B, device=dev, generator=gen) < args.sc_prob
                diff, ar, bal, logits, ar_pred = forward_losses(model, enc, mask, canvas, noisy, t, sc_on, args,
                                                                router_store, copy_ids)
                per_ex = diff + args.ar_weight * ar
                loss = per_ex.sum() / n_step + args.balance_weight * bal * (B / n_step)
                scaler.scale(loss).backward()
                with torch.no_grad():
                    content, pred = canvas != PAD, logits.argmax(-1)
                    acc = ((pred == canvas) & content).sum() / content.sum().clamp(min=1)
                    if args.copy_stats:
                        for k, v in zip(copy_sums, copy_counts(enc, canvas, noisy, pred, ar_pred, *copy_ids)):
                            copy_sums[k] += v
                    for k, v in (("loss", per_ex.sum() + args.balance_weight * bal * B), ("diff", diff.sum()),
                                 ("ar", ar.sum()), ("bal", bal * B), ("acc", acc * B)):
                        sums[k] += v
                n_sum += B
            scaler.unscale_(opt)
            gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
            scaler.step(opt)  # skipped on the device when a gradient is not finite
            scaler.update()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step == 10:
                torch.cuda.synchronize()
                calib_t = time.time()
            if total is None and step == 60:  # later steps ran ~15% slower than these in the first run
                torch.cuda.synchronize()
                rate = 50 / (time.time() - calib_t)
                total = step + int(rate * (budget - (time.time() - t_start)) * 0.8)
                log(f"timing: {rate:.2f} steps/s -> {total} steps in {args.minutes:g} min "
                    f"(repeat this run with --steps {total} --batching {mode})")
            if step % args.log_every == 0 or step == total:
                vals = {k: (v / max(n_sum, 1)).item() for k, v in sums.items()}
                if not all(math.isfinite(v) for v in vals.values()):
                    raise RuntimeError(f"non-finite loss at step {step}: {vals}")
                now_skipped = round(-math.log2(scaler.get_scale()))
                if now_skipped > skipped:
                    log(f"step {step}: {now_skipped - skipped} step(s) skipped for non-finite gradients "
                        f"({now_skipped} so far)")
                    skipped = now_skipped
                dt = time.time() - t_log
                copy_text, copy_acc = copy_report(copy_sums) if args.copy_stats else ("", {})
                log(f"step {step}/{total or '?'} ep {epoch} lr {lr:.2e} loss {vals['loss']:.4f} diffusion "
                    f"{vals['diff']:.4f} encoder-AR {vals['ar']:.4f} balance {vals['bal']:.3f} canvas-acc "
                    f"{vals['acc']:.3f}{copy_text} gnorm {gnorm.item():.2f} ({n_sum / dt:.0f} ex/s"
                    + (f", peak {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB)" if step == args.log_every
                       else ")"))
                history.append(dict(step=step, **{k: round(v, 5) for k, v in {**vals, **copy_acc}.items()}))
                for v in sums.values():
                    v.zero_()
                n_sum, t_log = 0, time.time()
                if skipped >= 10:
                    raise RuntimeError("non-finite gradients in 10 steps; stopping (the last checkpoint is kept)")
                if skipped >= 3 and mode == "padded":
                    mode, replan = "buckets", True
                    log("switching to unpadded (bucketed) batches")
                    break
            if time.time() - last_save > args.save_every * 60:
                save(model, args.out, args.tokenizer, args.max_shard_size)
                last_save = time.time()
                log(f"checkpoint saved to {args.out} at step {step}")
        if not done and not replan:
            epoch += 1
    train_s = time.time() - t_start
    skipped = round(-math.log2(scaler.get_scale()))
    log(f"training stopped ({stop_reason}): {step} steps, {epoch} full epochs, {train_s / 60:.2f} min")
    save(model, args.out, args.tokenizer, args.max_shard_size)
    log(f"saved {args.out}: {sorted(os.listdir(args.out))}")
    del model, opt
    torch.cuda.empty_cache()

    battery = None
    if args.eval_minutes <= 0:
        log("evaluation skipped (--eval-minutes 0)")
    else:
        try:
            from tiny_eval import evaluate
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


if __name__ == "__main__":
    main()
