#!/usr/bin/env python3
"""All 30 layers of the full DiffusionGemma 26B-A4B shape: the engine's logits against transformers on the same
synthetic weights and the same input (docs/NUMERICS.md, "Full shape vs transformers").

The engine side runs first, in its own process, and leaves its input and logits in files:
    build/gpu/dg_dump_logits --out /tmp/engine --layers 30 --seed 1 --prompt 1024
(src/model/synthetic.cpp generates the weights on the GPU from the seed; a prompt of LCG ids is prefilled, then two
denoise steps on a fixed canvas: step 1 with zero self-conditioning, step 2 self-conditioned on step 1's logits / T.)
This script then builds transformers' DiffusionGemmaForBlockDiffusion at the same shape, overwrites every text
weight with exactly the engine's values (the generator of src/ops/elementwise/synthetic_uniform.h, rebuilt in torch
on the GPU, in synthetic_weights' order), runs the same prefill and steps in bf16 (eager attention, then sdpa), and
reports per-row logit cosine (min / mean), the argmax agreement and the largest difference, as JSON lines.
Step 2 is run on the engine's own self-conditioning input (its step-1 logits / T in bf16), so it measures the step
and not step 1's difference carried through self-conditioning; the run on transformers' own step-1 logits is reported
too.

    python3 scripts/full_shape_vs_hf.py --engine /tmp/engine --out $OUT/full_shape_vs_hf.jsonl
    python3 scripts/full_shape_vs_hf.py --selftest        # no torch needed: the generator against the C++ goldens
"""
import argparse
import json
import os
import math
import struct
import subprocess
import sys
import time

MASK64 = (1 << 64) - 1
C1, C2, C3 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB

# (seed, index, scale bits, offset bits, f32 value bits, bf16 bits): keep in sync with kGolden in
# tests/ops/synthetic_uniform_test.cpp.
GOLDEN = [
    (7000022, 0, 0x3fb15cac, 0x00000000, 0x3f73bb63, 0x3f74),
    (7000022, 1, 0x3fb15cac, 0x00000000, 0xbf859284, 0xbf86),
    (7000022, 738197503, 0x3fb15cac, 0x00000000, 0xbfa28547, 0xbfa3),
    (7000023, 5, 0x3f050581, 0x3f800000, 0x3f403d11, 0x3f40),
    (7000040, 123456789, 0x3e315cac, 0x3f000000, 0x3f190fbd, 0x3f19),
    (7000051, 507510783, 0x3e850581, 0x00000000, 0xbe2a5a59, 0xbe2a),
    (1, 0, 0x3d05b10f, 0x00000000, 0x3cccfb56, 0x3ccd),
    (18446744073709551615, 4294967297, 0x3f000000, 0x3f800000, 0x3f8f75a6, 0x3f8f),
    (42, 99, 0x40a646e1, 0x00000000, 0xc092f862, 0xc093),
]
# Polynomial hashes (x31) of the f32 and bf16 bits of indices 0..65535, seed 7000023, scale 0.3·√3, offset 1.
CHECKSUM = (7000023, 65536, 6349766367449722920, 8835359783252537510)


# ---- f32 arithmetic in pure python (every op on two f32 values, computed in f64 and rounded once, is the correctly
# rounded f32 result for + - * / and sqrt) ----
def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bits_f32(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def bf16_bits(x):
    u = f32_bits(x)
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return ((u >> 16) | 0x40) & 0xFFFF
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def splitmix_u24(seed, i):
    z = (seed * C1 + i * C2) & MASK64
    z = ((z ^ (z >> 30)) * C2) & MASK64
    z = ((z ^ (z >> 27)) * C3) & MASK64
    z ^= z >> 31
    return z >> 40


def synthetic_uniform(seed, i, scale, offset):
    """The C++ synthetic_uniform: f32(f32(scale * t) + offset), t = 2u - 1 exact."""
    t = 2.0 * (splitmix_u24(seed, i) / 16777216.0) - 1.0
    return f32(f32(scale * t) + offset)


SQRT3 = f32(math.sqrt(3.0))


def fmul(a, b):
    return f32(f32(a) * f32(b))


def linear_scale(fan_in):
    return f32(SQRT3 / f32(math.sqrt(f32(float(fan_in)))))


def selftest():
    bad = 0
    if f32_bits(fmul(0.8, SQRT3)) != 0x3fb15cac or f32_bits(linear_scale(2816)) != 0x3d05b10f:
        print("selftest: the f32 scales differ from synthetic.cpp's")
        bad += 1
    for seed, i, sb, ob, vb, hb in GOLDEN:
        v = synthetic_uniform(seed, i, bits_f32(sb), bits_f32(ob))
        if f32_bits(v) != vb or bf16_bits(v) != hb:
            print(f"selftest: seed {seed} index {i}: got {f32_bits(v):#010x}/{bf16_bits(v):#06x}, "
                  f"want {vb:#010x}/{hb:#06x}")
            bad += 1
    seed, n, want_f, want_b = CHECKSUM
    hf = hb = 0
    scale = fmul(0.3, SQRT3)
    for i in range(n):
        v = synthetic_uniform(seed, i, scale, 1.0)
        hf = (hf * 31 + f32_bits(v)) & MASK64
        hb = (hb * 31 + bf16_bits(v)) & MASK64
    if (hf, hb) != (want_f, want_b):
        print(f"selftest: checksum {hf}/{hb}, want {want_f}/{want_b}")
        bad += 1
    print(json.dumps({"event": "selftest", "golden": len(GOLDEN), "checksum_elements": n, "failures": bad}))
    return bad == 0


def plan_selftest(writer, layers=7, seed=1):
    """engine_plan against the C++ synthetic_plan (`dg_write_checkpoint --plan 1`) for the first `layers` layers of
    the 26B-A4B shape: every name, shape, seed, scale and offset equal, in order. No torch needed."""
    out = subprocess.run([writer, "--plan", "1", "--layers", str(layers), "--seed", str(seed), "--out", "unused"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"plan selftest: {writer} failed: {out.stderr}")
        return False
    cpp = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    sliding = [(i + 1) % 6 != 0 for i in range(layers)]
    sliding[-1] = False  # the slice's last layer is full, as the reference forces
    dims = [(256, 8) if s else (512, 2) for s in sliding]
    py = list(engine_plan(seed, sliding, 2816, 2112, 128, 704, 262144, 16, dims))
    bad = 0 if len(cpp) == len(py) else 1
    if bad:
        print(f"plan selftest: {len(cpp)} C++ tensors, {len(py)} python")
    for c, (name, shape, s, scale, offset) in zip(cpp, py):
        got = (c["name"], tuple(c["shape"]), c["seed"], c["scale"], c["offset"])
        if got != (name, shape, s, scale, offset):
            bad += 1
            if bad <= 5:
                print(f"plan selftest: C++ {got} != python {(name, shape, s, scale, offset)}")
    print(json.dumps({"event": "plan_selftest", "tensors": len(cpp), "failures": bad}))
    return bad == 0


# ---- the engine's weights in synthetic_weights' order (src/model/synthetic.cpp) ----
def engine_plan(seed, sliding, hidden, inter, n_experts, expert_ff, vocab, n_heads, dims):
    """Yields (HF name, shape, tensor seed, scale, offset) in the order synthetic_weights draws its seeds.
    dims[l] = (head_dim, n_kv_heads) of layer l."""
    nxt = [seed * 1000003 & MASK64]

    def make(name, shape, scale, offset):
        nxt[0] = (nxt[0] + 1) & MASK64
        return (name, tuple(shape), nxt[0], scale, offset)

    H, I, E, F = hidden, inter, n_experts, expert_ff
    norm = (fmul(0.3, SQRT3), 1.0)
    d = "model.decoder."
    yield make(d + "embed_tokens.weight", (vocab, H), fmul(0.8, SQRT3), 0.0)
    yield make(d + "norm.weight", (H,), *norm)
    yield make(d + "self_conditioning.pre_norm.weight", (H,), *norm)
    yield make(d + "self_conditioning.gate_proj.weight", (I, H), linear_scale(H), 0.0)
    yield make(d + "self_conditioning.up_proj.weight", (I, H), linear_scale(H), 0.0)
    yield make(d + "self_conditioning.down_proj.weight", (H, I), linear_scale(I), 0.0)
    for l, sl in enumerate(sliding):
        D, nkv = dims[l]
        p = f"{d}layers.{l}."
        yield make(p + "self_attn.q_proj.weight", (n_heads * D, H), linear_scale(H), 0.0)
        yield make(p + "self_attn.k_proj.weight", (nkv * D, H), linear_scale(H), 0.0)
        if sl:
            yield make(p + "self_attn.v_proj.weight", (nkv * D, H), linear_scale(H), 0.0)
        yield make(p + "self_attn.o_proj.weight", (H, n_heads * D), linear_scale(n_heads * D), 0.0)
        yield make(p + "self_attn.q_norm.weight", (D,), fmul(0.1, SQRT3), 0.5)
        yield make(p + "self_attn.k_norm.weight", (D,), fmul(0.1, SQRT3), 0.5)
        yield make(p + "mlp.gate_proj.weight", (I, H), linear_scale(H), 0.0)
        yield make(p + "mlp.up_proj.weight", (I, H), linear_scale(H), 0.0)
        yield make(p + "mlp.down_proj.weight", (H, I), linear_scale(I), 0.0)
        yield make(p + "router.proj.weight", (E, H), fmul(3.0, SQRT3), 0.0)
        yield make(p + "router.scale", (H,), *norm)
        yield make(p + "router.per_expert_scale", (E,), 0.5, 1.0)
        yield make(p + "experts.gate_up_proj", (E, 2 * F, H), fmul(0.15, SQRT3), 0.0)
        yield make(p + "experts.down_proj", (E, H, F), fmul(0.15, SQRT3), 0.0)
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2",
                  "pre_feedforward_layernorm_2"):
            yield make(p + n + ".weight", (H,), *norm)


# ---- torch: the same generator, vectorised on the GPU ----
def s64(x):
    """An unsigned 64-bit constant as the int64 with the same bits (torch int64 arithmetic wraps)."""
    x &= MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


def torch_uniform(torch, seed, index, scale, offset):
    """synthetic_uniform at int64 indices `index` (a CUDA tensor): f32 values, bit-exact."""
    lsr = lambda z, k: (z >> k) & ((1 << (64 - k)) - 1)  # logical shift right on int64
    z = index * s64(C2) + s64(seed * C1)
    z = (z ^ lsr(z, 30)) * s64(C2)
    z = (z ^ lsr(z, 27)) * s64(C3)
    z = z ^ lsr(z, 31)
    t = lsr(z, 40).to(torch.float32) / 16777216.0 * 2.0 - 1.0  # exact
    return (t * scale) + offset  # two f32 roundings, as the C++ (no fused multiply-add in eager torch)


def torch_fill(torch, dst, seed, scale, offset, chunk=1 << 26):
    flat = dst.view(-1)
    for a in range(0, flat.numel(), chunk):
        b = min(flat.numel(), a + chunk)
        idx = torch.arange(a, b, device=dst.device, dtype=torch.int64)
        flat[a:b].copy_(torch_uniform(torch, seed, idx, scale, offset).to(dst.dtype))


def torch_selftest(torch):
    bad = 0
    for seed, i, sb, ob, vb, hb in GOLDEN:
        v = torch_uniform(torch, seed, torch.tensor([i], device="cuda"), bits_f32(sb), bits_f32(ob))
        got_f = int(v.view(torch.int32).item()) & 0xFFFFFFFF
        got_b = int(v.to(torch.bfloat16).view(torch.int16).item()) & 0xFFFF
        bad += (got_f, got_b) != (vb, hb)
    seed, n, want_f, want_b = CHECKSUM
    v = torch_uniform(torch, seed, torch.arange(n, device="cuda"), fmul(0.3, SQRT3), 1.0)
    hf = hb = 0
    for x, y in zip(v.view(torch.int32).tolist(), v.to(torch.bfloat16).view(torch.int16).tolist()):
        hf = (hf * 31 + (x & 0xFFFFFFFF)) & MASK64
        hb = (hb * 31 + (y & 0xFFFF)) & MASK64
    bad += (hf, hb) != (want_f, want_b)
    return bad


def emit(out, **row):
    line = json.dumps(row, sort_keys=True)
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


TEXT = None  # the text config build_hf made: read back from here (transformers refuses per-layer globals)


def build_hf(torch, meta):
    global TEXT
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion
    TEXT = text = dict(vocab_size=262144, hidden_size=2816, intermediate_size=2112, num_hidden_layers=meta["layers"],
                num_attention_heads=16, num_key_value_heads=8, head_dim=256, global_head_dim=512,
                num_global_key_value_heads=2, sliding_window=1024, num_experts=128, top_k_experts=8,
                moe_intermediate_size=704, max_position_embeddings=262144, final_logit_softcapping=30.0,
                rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", pad_token_id=0, bos_token_id=2,
                eos_token_id=1, use_bidirectional_attention="vision")
    vision = dict(model_type="gemma4_vision", hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, head_dim=32)
    cfg = DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=meta["canvas"])
    cfg._attn_implementation = "eager"
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = DiffusionGemmaForBlockDiffusion(cfg)
    torch.set_default_dtype(torch.float32)
    model.eval()
    return model, cfg


def engine_inv_freq(torch, config, layer_type, half):
    """src/io/model_config.cpp's ModelConfig::rope_inv_freq for a table of `half` = head_dim / 2 entries: the
    first R = floor(partial_rotary_factor * head_dim / 2) are 1 / theta^(2i / head_dim) in f32 (all of them for
    the default type), the rest 0, divided by `factor` for proportional RoPE."""
    rp = dict(getattr(config, "rope_parameters", {}) or {}).get(layer_type, {}) or {}
    full = layer_type == "full_attention"
    theta = float(rp.get("rope_theta", 1e6 if full else 1e4))
    kind = rp.get("rope_type", "proportional" if full else "default")
    D = 2 * half
    partial = float(rp.get("partial_rotary_factor", 1.0 if rp else 0.25))  # the engine's parse_rope defaults
    R = int(math.floor(partial * D / 2)) if kind == "proportional" else half
    inv = torch.zeros(half, dtype=torch.float32)
    i = torch.arange(0, min(R, half), dtype=torch.float32)
    inv[: i.numel()] = 1.0 / torch.pow(torch.tensor(theta, dtype=torch.float32), (2.0 * i) / float(D))
    if kind == "proportional" and float(rp.get("factor", 1.0)) != 1.0:
        inv /= float(rp["factor"])
    return inv


def rope_buffers_f32(torch, model):
    """Recomputes the text RoPE inverse frequencies with float32 as the default dtype (the model was built with
    bf16 as the default; the engine and the f32 fixtures use f32 frequencies). Returns notes."""
    notes = []
    if os.environ.get("DG_HF_OWN_ROPE") == "1":
        return ["RoPE: transformers' own buffers (DG_HF_OWN_ROPE=1)"]
    for name, m in model.named_modules():
        if not type(m).__name__.endswith("TextRotaryEmbedding"):
            continue
        for lt, fn in m.rope_init_fns.items():
            kw = {"layer_type": lt}
            if lt == "full_attention" and m.rope_type[lt] == "proportional":
                kw["head_dim_key"] = "global_head_dim"
            old = getattr(m, f"{lt}_inv_freq")
            try:
                inv, _ = fn(m.config, **kw)
                if tuple(inv.shape) != tuple(old.shape):
                    raise ValueError(f"{tuple(inv.shape)} frequencies for a {tuple(old.shape)} table")
            except Exception as e:  # noqa: BLE001 - reported; the engine's formula replaces it
                inv = engine_inv_freq(torch, m.config, lt, old.numel())
                notes.append(f"{name}.{lt}: transformers' rebuild failed ({type(e).__name__}: {e}); "
                             "the engine's f32 formula instead")
            inv = inv.to(device=old.device, dtype=torch.float32)
            if old.dtype != torch.float32 or not torch.equal(old.float(), inv):
                notes.append(f"{name}.{lt}_inv_freq: {old.dtype} -> float32")
            m.register_buffer(f"{lt}_inv_freq", inv, persistent=False)
            m.register_buffer(f"{lt}_original_inv_freq", inv.clone(), persistent=False)
    return notes


def load_engine_weights(torch, model, cfg, meta):
    """Overwrites every text weight of the HF model with the engine's synthetic values; returns notes."""
    tc = cfg.get_text_config()
    sliding = [t == "sliding_attention" for t in tc.layer_types]
    if sliding != meta["sliding"]:
        raise SystemExit(f"layer types differ: transformers {sliding}, engine {meta['sliding']}")
    t = TEXT
    dims = [(t["head_dim"], t["num_key_value_heads"]) if s else (t["global_head_dim"], t["num_global_key_value_heads"])
            for s in sliding]
    params = dict(model.named_parameters(remove_duplicate=False))
    params.update(dict(model.named_buffers(remove_duplicate=False)))
    done, notes = set(), []
    for name, shape, seed, scale, offset in engine_plan(meta["seed"], sliding, t["hidden_size"], t["intermediate_size"],
                                                        t["num_experts"], t["moe_intermediate_size"], t["vocab_size"],
                                                        t["num_attention_heads"], dims):
        targets = [name]
        enc = name.replace("model.decoder.", "model.encoder.language_model.", 1)
        if enc in params:
            targets.append(enc)  # the encoder's copy of the decoder's weights (the engine keeps one)
        for t in targets:
            p = params.get(t)
            if p is None:
                raise SystemExit(f"transformers has no parameter '{t}' (shape {shape}) for the engine's weight")
            with torch.no_grad():
                if tuple(p.shape) == shape:
                    torch_fill(torch, p.data, seed, scale, offset)
                elif len(shape) == 3 and tuple(p.shape) == (shape[0], shape[2], shape[1]):
                    tmp = torch.empty(shape, dtype=p.dtype, device=p.device)
                    torch_fill(torch, tmp, seed, scale, offset)
                    p.data.copy_(tmp.transpose(1, 2))
                    notes.append(f"{t}: transposed")
                else:
                    raise SystemExit(f"'{t}' has shape {tuple(p.shape)}, the engine's is {shape}")
            done.add(t)
    for name, p in params.items():
        if name.endswith("layer_scalar"):
            with torch.no_grad():
                p.data.fill_(1.0)  # synthetic_weights leaves both scalars at 1
            done.add(name)
    emb = params["model.decoder.embed_tokens.weight"]
    for name in ("lm_head.weight", "model.encoder.language_model.embed_tokens.weight"):
        p = params.get(name)
        if p is not None and name not in done:
            if p.data_ptr() != emb.data_ptr():
                with torch.no_grad():
                    p.data.copy_(emb.data)
                notes.append(f"{name}: copied from the decoder embedding")
            done.add(name)
    skip = ("model.encoder.vision_tower.", "model.encoder.embed_vision.")
    left = [n for n, p in model.named_parameters() if n not in done and not n.startswith(skip)]
    if left:
        raise SystemExit(f"{len(left)} text parameters of transformers are not set from the engine: {left[:8]}")
    return notes


def row_report(torch, eng, ref):
    """Per-row cosine (f64), argmax agreement and the largest difference of [canvas, vocab] logits."""
    a, b = eng.double(), ref.double()
    cos = torch.nn.functional.cosine_similarity(a, b, dim=-1)
    agree = (a.argmax(-1) == b.argmax(-1)).double().mean().item()
    return dict(row_cosine_min=cos.min().item(), row_cosine_mean=cos.mean().item(),
                row_cosine_median=cos.median().item(), argmax_agreement=agree,
                max_abs=(a - b).abs().max().item(), finite=bool(torch.isfinite(b).all().item()))


def run_hf(args):
    import torch
    from transformers.cache_utils import DynamicCache
    t0 = time.time()
    meta = json.load(open(args.engine + ".json"))
    C, V, T = meta["canvas"], meta["vocab"], meta["temperature"]
    if torch_selftest(torch):
        emit(args.out, event="torch_selftest", failures=1)
        return 1
    model, cfg = build_hf(torch, meta)
    notes = load_engine_weights(torch, model, cfg, meta) + rope_buffers_f32(torch, model)
    import transformers
    emit(args.out, event="loaded", seconds=time.time() - t0, layers=meta["layers"], notes=notes,
         transformers=transformers.__version__, torch=torch.__version__, engine=meta)
    eng1 = torch.from_file(args.engine + ".step1.f32", dtype=torch.float32, size=C * V).view(C, V).cuda()
    eng2 = torch.from_file(args.engine + ".step2.f32", dtype=torch.float32, size=C * V).view(C, V).cuda()
    sc_engine = (eng1 / T).to(torch.bfloat16)[None]  # the engine's step-2 input: bf16(raw / T) (row_stats)
    ids = torch.tensor(meta["prompt_ids"], device="cuda")[None]
    canvas = torch.tensor(meta["canvas_ids"], device="cuda")[None]
    P = ids.shape[1]
    pos = torch.arange(P, P + C, device="cuda")[None]
    ok = True
    rows, floors = {}, {}
    refs = {}  # attention implementation -> (step 1, step 2) logits: transformers against itself is the floor
    for attn in [a for a in args.attn.split(",") if a]:
        try:
            model.set_attn_implementation(attn)
        except Exception as e:  # noqa: BLE001 - reported, the other implementations still run
            if attn != "eager":  # the model was built with eager attention
                emit(args.out, event="skipped", attn=attn, why=f"{type(e).__name__}: {e}")
                continue
        used = getattr(model.config.get_text_config(), "_attn_implementation", None)
        with torch.no_grad():
            cache = DynamicCache(config=model.config.get_text_config(decoder=True))
            model.model.encoder(input_ids=ids, past_key_values=cache, position_ids=torch.arange(P, device="cuda")[None])

            def step(sc):
                return model(decoder_input_ids=canvas, past_key_values=cache, decoder_position_ids=pos,
                             self_conditioning_logits=sc).logits[0].float()

            ref1 = step(None)
            ref2 = step(sc_engine)
            ref2_own = step((ref1 / T).to(torch.bfloat16)[None])
        refs[attn] = (ref1, ref2)
        for name, eng, ref, bound in (("step1", eng1, ref1, True), ("step2", eng2, ref2, True),
                                      ("step2_own_sc", eng2, ref2_own, False)):
            r = row_report(torch, eng, ref)
            emit(args.out, event="compare", attn=attn, attn_config=used, step=name, asserted=bound, **r)
            if bound:
                rows.setdefault(name, {})[attn] = r
    names = list(refs)
    for i, a in enumerate(names):  # transformers' implementations against each other
        for b in names[i + 1:]:
            for k, name in enumerate(("step1", "step2")):
                r = row_report(torch, refs[a][k], refs[b][k])
                emit(args.out, event="compare", attn=f"{a}_vs_{b}", step=name, asserted=False, **r)
                floor = floors.setdefault(name, dict(row_cosine_mean=1.0, argmax_agreement=1.0))
                floor["row_cosine_mean"] = min(floor["row_cosine_mean"], r["row_cosine_mean"])
                floor["argmax_agreement"] = min(floor["argmax_agreement"], r["argmax_agreement"])
    # The bound: the provisional one, or transformers' own spread less a margin where that spread is wider (a deep
    # random model amplifies rounding: eager and sdpa disagree with each other there).
    for name, per_attn in rows.items():
        fl = floors.get(name, dict(row_cosine_mean=1.0, argmax_agreement=1.0))
        need_cos = min(args.min_mean_cosine, fl["row_cosine_mean"] - args.floor_margin)
        need_arg = min(args.min_argmax, fl["argmax_agreement"] - args.floor_margin)
        for attn, r in per_attn.items():
            passed = r["finite"] and r["row_cosine_mean"] >= need_cos and r["argmax_agreement"] >= need_arg
            ok &= passed
            emit(args.out, event="verdict", attn=attn, step=name, passed=passed, need_mean_cosine=need_cos,
                 need_argmax=need_arg, row_cosine_mean=r["row_cosine_mean"], argmax_agreement=r["argmax_agreement"])
    emit(args.out, event="done", seconds=time.time() - t0, peak_gib=torch.cuda.max_memory_allocated() / 2**30,
         provisional_bounds=dict(min_mean_cosine=args.min_mean_cosine, min_argmax=args.min_argmax), passed=ok)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--selftest", action="store_true", help="check the generator against the C++ goldens and exit")
    ap.add_argument("--plan-selftest", default="", metavar="WRITER",
                    help="check engine_plan against `WRITER --plan 1` (the dg_write_checkpoint binary) and exit")
    ap.add_argument("--engine", default="/tmp/engine", help="prefix of dg_dump_logits' files")
    ap.add_argument("--attn", default="eager,sdpa", help="attention implementations to run, in order")
    ap.add_argument("--out", default="")
    ap.add_argument("--min-mean-cosine", type=float, default=0.99, help="provisional bound, step 1 and step 2")
    ap.add_argument("--min-argmax", type=float, default=0.9, help="provisional bound on argmax agreement")
    ap.add_argument("--floor-margin", type=float, default=0.05,
                    help="where transformers' eager and sdpa disagree more than the bounds allow, the engine must be "
                         "within this of their agreement instead")
    args = ap.parse_args()
    if not selftest():
        return 1
    if args.plan_selftest:
        return 0 if plan_selftest(args.plan_selftest) else 1
    if args.selftest:
        return 0
    return run_hf(args)


if __name__ == "__main__":
    t0 = time.time()
    rc = main()
    print(json.dumps({"event": "exit", "rc": rc, "seconds": round(time.time() - t0, 1)}), flush=True)
    sys.exit(rc)
