#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool) with torch + transformers 5.17 + tokenizers: builds the
# transformers reference fixtures, the tokenizer exactness cases and, when its tokenizer exists, the embedded
# default model (random weights, until models/dg-tiny is trained); copies the reference's modeling sources for reading; packs everything into $OUT/result.tgz.
# Needs the Gemma tokenizer carried at .cache/test-data/gemma3/tokenizer.json (scripts/fetch_test_tokenizer.sh).
set -u
export PYTHONUNBUFFERED=1
W="$OUT/w"
mkdir -p "$W/src" "$W/tokenizer"
nvidia-smi -L || true
python3 -c "import torch, transformers, tokenizers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)"
TF="$(python3 -c 'import os, transformers; print(os.path.dirname(transformers.__file__))')"
cp "$TF"/models/diffusion_gemma/*.py "$W/src/" 2>/dev/null
cp "$TF"/masking_utils.py "$TF"/cache_utils.py "$TF"/modeling_rope_utils.py "$TF"/integrations/moe.py "$W/src/" 2>/dev/null

python3 scripts/make_fixtures.py --out "$W/fixtures" 2>&1 | tee "$W/fixtures.log"

extra=()
if [ -f models/dg-tiny/tokenizer.json ]; then
  extra=(--extra-tokenizer models/dg-tiny/tokenizer.json --extra-out "$W/tokenizer/dg_tiny_cases.jsonl")
fi
python3 scripts/make_tokenizer_cases.py --tokenizer .cache/test-data/gemma3/tokenizer.json \
  --out "$W/tokenizer/gemma3_cases.jsonl" "${extra[@]}" 2>&1 | tee "$W/tokenizer.log"

# The random default model only while the embedded model is not a trained one (its model card says so).
if [ -f models/dg-tiny/tokenizer.json ] && ! grep -qx 'trained: true' models/dg-tiny/README.md 2>/dev/null; then
  python3 scripts/make_default_model.py --tokenizer models/dg-tiny/tokenizer.json --out "$W/dg-tiny" 2>&1 \
    | tee "$W/default_model.log"
fi
tar czf "$OUT/result.tgz" -C "$W" .
ls -la "$OUT"
