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

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_data import (PAD, SPECIAL_IDS, epoch_plan_buckets, epoch_plan_padded, load_examples, log,  # noqa: E402
                       lr_at, make_batch, open_text, pad_examples)
from copy_stats import copy_counts, copy_report, copy_tokens  # noqa: E402
from tiny_model import (ARCHS, build_model, check_padding, check_ties, forward_losses,  # noqa: E402
                        install_training_hooks)


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
