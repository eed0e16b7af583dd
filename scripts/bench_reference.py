#!/usr/bin/env python3
"""The transformers reference on the shapes `diffgemma bench` measures, for side-by-side reports on the GPU machine.

Builds DiffusionGemmaForBlockDiffusion at the full 26B-A4B shape with random bf16 weights on the GPU (as
../shared/anchors/hf_bench.py does), then measures, in the same JSON-lines form as `diffgemma bench`:
  prefill     encoder forward over P random tokens (tokens/s)
  denoise     one decoder forward + the sampler's statistics at canvas 256 over a cached context of L tokens (ms)
  generate    generate() with a fixed number of steps per block, P in / N out (committed tokens/s)
Modes (one model build serves both, comma-separated: --mode eager,compiled):
  eager     dynamic cache: prefill, denoise and generate as above, for each attention implementation of --attn
            (sdpa, eager: transformers' own, which materialises the scores). A measurement that runs out of GPU
            memory is recorded as such (its event with "result": "out of memory"; another runtime error as "result":
            "error" with its message) and the next one runs; each
            measurement is announced first (event "start"), so one cut off by an outer timeout shows which it was.
  compiled  static cache + torch.compile, through generate(cache_implementation="static") as
            ../shared/anchors/hf_bench.py measures it: denoise ms/step at each --compiled-context, from two timed
            one-block generations of --compiled-steps and --steps denoise steps ((t_long - t_short) / (steps
            difference), so prefill and per-block work cancel). Compilation happens in one warm-up generation
            (about 3 minutes on the H200) and is reported as event "warmup"; --compiled-generate adds the 1k/1k run.

Usage: python3 scripts/bench_reference.py --mode eager,compiled --prefill 512,4096 --context 1024 \
           --compiled-context 1024 --out $OUT/bench.jsonl
       python3 scripts/bench_reference.py --mode eager --attn sdpa,eager --prefill 32768,131072 \
           --context 32768,131072 --skip-generate --out $OUT/bench.jsonl      (long context)
"""
import argparse
import gc
import json
import os
import time

import torch
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion
from transformers.cache_utils import DynamicCache

TEXT = dict(vocab_size=262144, hidden_size=2816, intermediate_size=2112, num_hidden_layers=30,
            num_attention_heads=16, num_key_value_heads=8, head_dim=256, global_head_dim=512,
            num_global_key_value_heads=2, sliding_window=1024, num_experts=128, top_k_experts=8,
            moe_intermediate_size=704, max_position_embeddings=262144, final_logit_softcapping=30.0)
VISION = dict(model_type="gemma4_vision", hidden_size=64, intermediate_size=128, num_hidden_layers=1,
              num_attention_heads=2, num_key_value_heads=2, head_dim=32)


def emit(out, **row):
    row.update(reference="transformers")
    if os.environ.get("DG_GIT_SHA"):  # the device scripts' commit, so a run's lines pair with diffgemma's
        row.update(git_sha=os.environ["DG_GIT_SHA"])
    line = json.dumps(row, sort_keys=True)
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


def sync():
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="eager", help="eager, compiled or eager,compiled")
    ap.add_argument("--attn", default="sdpa", help="the eager mode's attention implementations: sdpa, eager or both")
    ap.add_argument("--compiled-context", default="1024", help="contexts of the compiled denoise measurement")
    ap.add_argument("--compiled-steps", type=int, default=4, help="the short run of the compiled measurement")
    ap.add_argument("--compiled-generate", action="store_true", help="also the 1k/1k generate, compiled")
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--prefill", default="512,4096")
    ap.add_argument("--context", default="1024")
    ap.add_argument("--denoise-steps", type=int, default=8)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=1024)
    ap.add_argument("--gen-tokens", type=int, default=1024)
    ap.add_argument("--skip-generate", action="store_true")
    ap.add_argument("--out", default="")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    modes = [m for m in args.mode.split(",") if m]
    for m in modes:
        if m not in ("eager", "compiled"):
            ap.error(f"unknown mode '{m}' (eager, compiled)")
    attns = [a for a in args.attn.split(",") if a]
    for a in attns:
        if a not in ("sdpa", "eager"):
            ap.error(f"unknown attention implementation '{a}' (sdpa, eager)")

    torch.manual_seed(0)
    text = dict(TEXT, num_hidden_layers=args.layers)
    cfg = DiffusionGemmaConfig(text_config=text, vision_config=dict(VISION), canvas_length=256)
    cfg._attn_implementation = "sdpa"
    t0 = time.time()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = DiffusionGemmaForBlockDiffusion(cfg)
    model.tie_weights()
    model.eval()
    V = text["vocab_size"]
    common = dict(layers=args.layers, device=torch.cuda.get_device_name(0), torch=torch.__version__)
    emit(args.out, event="loaded", seconds=time.time() - t0, mode=args.mode, label=args.label, **common)
    with torch.no_grad():
        if "eager" in modes:
            for attn in attns:
                set_attention(model, attn)
                label = label_for(args.label, "eager") + ("" if attn == "sdpa" else "-" + attn)
                run_eager(args, model, V, dict(common, mode="eager", attn=attn, label=label))
            set_attention(model, "sdpa")
        if "compiled" in modes:
            run_compiled(args, model, V, dict(common, mode="compiled", label=label_for(args.label, "compiled")))
    emit(args.out, event="memory", peak_gib=peak_gib(), mode=args.mode, label=args.label, **common)


def label_for(label, mode):
    """reference-eager,compiled -> reference-eager / reference-compiled; a label without the mode list is kept."""
    return label.replace("eager,compiled", mode).replace("compiled,eager", mode)


def set_attention(model, impl):
    """The attention implementation of every layer (transformers' set_attn_implementation where it exists)."""
    if hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation(impl)
            return
        except (ValueError, AttributeError, TypeError) as e:
            print(f"set_attn_implementation({impl!r}) failed ({e}); setting the configs instead", flush=True)
    model.config._attn_implementation = impl
    model.config.get_text_config()._attn_implementation = impl


PEAK_BEFORE = [0]  # the run's peak before the last reset of torch's peak statistics (guarded resets it)


def peak_gib():
    """The whole run's peak allocation so far, across guarded()'s resets."""
    return max(PEAK_BEFORE[0], torch.cuda.max_memory_allocated()) / 2**30


def guarded(out, base, event, measure, **keys):
    """Runs measure() -> dict of results and emits `event` with them, or with result "out of memory"; its peak_gib
    values are that measurement's own."""
    emit(out, event="start", what=event, **keys, **base)
    PEAK_BEFORE[0] = max(PEAK_BEFORE[0], torch.cuda.max_memory_allocated())
    torch.cuda.reset_peak_memory_stats()
    try:
        row = measure()
    except torch.cuda.OutOfMemoryError as e:
        row = dict(result="out of memory", error=str(e).split("\n")[0][:200])
    except RuntimeError as e:  # cuBLAS's or a kernel's own allocation, a shape past a kernel's index range
        text = str(e).split("\n")[0][:200]
        oom = "out of memory" in text.lower() or "ALLOC_FAILED" in text
        row = dict(result="out of memory" if oom else "error", error=text)
    gc.collect()
    torch.cuda.empty_cache()
    emit(out, event=event, **keys, **row, **base)


def timed_generate(model, ids, kw):
    sync()
    t = time.time()
    out = model.generate(ids, **kw)
    sync()
    return time.time() - t, out


def run_compiled(args, model, V, base):
    for L in [int(x) for x in args.compiled_context.split(",") if x]:
        ids = torch.randint(3, V, (1, L), device="cuda")
        kw = dict(max_new_tokens=256, confidence_threshold=1e-30, stability_threshold=1, eos_token_id=[V + 1],
                  cache_implementation="static")
        seconds, _ = timed_generate(model, ids, dict(kw, max_denoising_steps=args.steps))  # compiles
        emit(args.out, event="warmup", context=L, seconds=seconds, **base)
        t_short, _ = timed_generate(model, ids, dict(kw, max_denoising_steps=args.compiled_steps))
        t_long, _ = timed_generate(model, ids, dict(kw, max_denoising_steps=args.steps))
        ms = (t_long - t_short) * 1000 / (args.steps - args.compiled_steps)
        emit(args.out, event="denoise", context=L, canvas=256, ms_per_step=ms, method="generate-static-difference",
             short_steps=args.compiled_steps, long_steps=args.steps, short_s=t_short, long_s=t_long, **base)
    if args.compiled_generate and not args.skip_generate:
        guarded(args.out, base, "generate", lambda: generate_once(args, model, V, base, static=True))


def generate_once(args, model, V, base, static):
    ids = torch.randint(3, V, (1, args.prompt_tokens), device="cuda")
    kw = dict(max_new_tokens=args.gen_tokens, max_denoising_steps=args.steps, confidence_threshold=1e-30,
              stability_threshold=1, eos_token_id=[V + 1])
    if static:
        kw["cache_implementation"] = "static"
    seconds, _ = timed_generate(model, ids, kw)  # warm-up (compiles with the static cache)
    emit(args.out, event="warmup", seconds=seconds, **base)
    total, out = timed_generate(model, ids, kw)
    seq = out.sequences if hasattr(out, "sequences") else out
    new = int(seq.shape[1] - args.prompt_tokens)
    return dict(prompt_tokens=args.prompt_tokens, new_tokens=new, steps_per_block=args.steps, seconds=total,
                committed_tok_per_s=new / total, peak_gib=torch.cuda.max_memory_allocated() / 2**30)


def prefill_once(model, V, P):
    ids = torch.randint(3, V, (1, P), device="cuda")
    for _ in range(2):  # the second one is timed
        cache = DynamicCache(config=model.config.get_text_config(decoder=True))
        sync()
        t = time.time()
        model.model.encoder(input_ids=ids, past_key_values=cache, position_ids=torch.arange(P, device="cuda")[None])
        sync()
        dt = time.time() - t
        del cache
    return dict(seconds=dt, tok_per_s=P / dt, peak_gib=torch.cuda.max_memory_allocated() / 2**30)


def denoise_once(args, model, V, L):
    ids = torch.randint(3, V, (1, L), device="cuda")
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    model.model.encoder(input_ids=ids, past_key_values=cache, position_ids=torch.arange(L, device="cuda")[None])
    canvas = torch.randint(0, V, (1, 256), device="cuda")
    pos = torch.arange(L, L + 256, device="cuda")[None]

    def step(sc):
        logits = model(decoder_input_ids=canvas, past_key_values=cache, decoder_position_ids=pos,
                       self_conditioning_logits=sc).logits
        proc = logits / 0.8
        probs = torch.softmax(proc, dim=-1, dtype=torch.float32)
        torch.distributions.Categorical(logits=proc).entropy()
        torch.argmax(proc, dim=-1)
        del probs
        return proc.to(torch.bfloat16)

    sc = step(None)
    sync()
    t = time.time()
    for _ in range(args.denoise_steps):
        sc = step(sc)
    sync()
    return dict(canvas=256, ms_per_step=(time.time() - t) * 1000 / args.denoise_steps,
                peak_gib=torch.cuda.max_memory_allocated() / 2**30)


def run_eager(args, model, V, base):
    for P in [int(x) for x in args.prefill.split(",") if x]:
        guarded(args.out, base, "prefill", lambda: prefill_once(model, V, P), tokens=P)
    for L in [int(x) for x in args.context.split(",") if x]:
        guarded(args.out, base, "denoise", lambda: denoise_once(args, model, V, L), context=L)
    if not args.skip_generate:
        guarded(args.out, base, "generate", lambda: generate_once(args, model, V, base, static=False))


if __name__ == "__main__":
    main()
