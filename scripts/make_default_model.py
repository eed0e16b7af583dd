#!/usr/bin/env python3
"""A small DiffusionGemma with RANDOM weights, saved by transformers' save_pretrained so the layout is exactly the
real checkpoint's. It was the embedded default model until a trained one replaced it (docs/TRAINING.md);
scripts/device_fixtures.sh still makes it when models/dg-tiny is not a trained model. Its output is noise.

Usage (GPU machine or any machine with torch + transformers 5.17):
  python3 scripts/make_default_model.py --tokenizer models/dg-tiny/tokenizer.json --out models/dg-tiny
"""
import argparse
import json
import os
import sys

import torch
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import randomise, set_generation_config  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json whose vocabulary the model uses")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    with open(args.tokenizer) as f:
        tok = json.load(f)
    vocab = max([*tok["model"]["vocab"].values(), *(t["id"] for t in tok["added_tokens"])]) + 1
    vocab = (vocab + 63) // 64 * 64
    text = dict(vocab_size=vocab, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
                num_hidden_layers=4,
                layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
                num_attention_heads=4, num_key_value_heads=2, head_dim=32, global_head_dim=64,
                num_global_key_value_heads=1, num_experts=8, top_k_experts=2, sliding_window=128,
                max_position_embeddings=32768, use_bidirectional_attention="vision", final_logit_softcapping=30.0,
                pad_token_id=0, bos_token_id=2, eos_token_id=1)
    from make_fixtures import VISION as vision  # noqa: E402 - the minimal vision tower
    cfg = DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=64)
    torch.manual_seed(args.seed)
    model = DiffusionGemmaForBlockDiffusion(cfg).float().eval()
    randomise(model, args.seed)
    set_generation_config(model, 64)
    model.generation_config.max_new_tokens = 256
    model.to(torch.bfloat16).save_pretrained(args.out)
    print(f"wrote {args.out}: vocab {vocab}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters")


if __name__ == "__main__":
    main()
