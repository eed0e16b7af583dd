"""The model side of scripts/train_tiny.py: the architectures of --arch, the model built and checked, the training
hooks (dense experts, the router's balance statistics), the losses of one forward pass, and the padding check."""
import copy
import types

import torch
import torch.nn.functional as F

from copy_stats import answer_code_at
from tiny_data import BOS, EOS, PAD, log, make_batch


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
