#!/usr/bin/env bash
# Makes a trained checkpoint the embedded default model (models/dg-tiny) and regenerates everything in the tree that
# depends on that model, then tells what to run. Needs build/cpu/diffgemma (cmake --build --preset cpu --target
# diffgemma) and python3; no torch.
#
#   scripts/switch_default_model.sh DIR [--cases dg_tiny_cases.jsonl] [--log train.log]
#
# DIR: the checkpoint train_tiny.py wrote (config.json, generation_config.json, safetensors shards + index;
# tokenizer.json, or data/tokenizer.json is used). --cases: the Hugging Face tokenizer cases for its tokenizer
# (scripts/make_tokenizer_cases.py, on a machine with `tokenizers`); without it the stale file is removed and
# TokenizerDefault.MatchesHuggingFaceCases skips. --log: the training log, for the model card.
# What it regenerates (TRAIN_READY.md explains each): models/dg-tiny/*, models/dg-tiny/README.md (the model card,
# with the `trained: true` marker that turns on CI's smoketest step), tests/fixtures/tokenizer/dg_tiny_cases.jsonl,
# tests/fixtures/chat/golden.jsonl (ids re-tokenized), tests/fixtures/smoketest/{calibration,battery}.json.
set -euo pipefail
cd "$(dirname "$0")/.."
cli=build/cpu/diffgemma
die() { echo "switch_default_model: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: scripts/switch_default_model.sh DIR [--cases FILE] [--log FILE]"
src=$1
shift
cases="" log=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cases) cases=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
[ -x "$cli" ] || die "$cli not built (cmake --preset cpu && cmake --build --preset cpu --target diffgemma)"
for f in config.json generation_config.json; do [ -f "$src/$f" ] || die "$src/$f missing"; done
ls "$src"/*.safetensors > /dev/null 2>&1 || die "no safetensors in $src"
tok="$src/tokenizer.json"
[ -f "$tok" ] || tok=data/tokenizer.json
cmp -s "$tok" data/tokenizer.json || echo "switch_default_model: warning: $tok differs from data/tokenizer.json" >&2
[ -z "$cases" ] || [ -f "$cases" ] || die "$cases missing"
[ -z "$log" ] || [ -f "$log" ] || die "$log missing"

echo "== models/dg-tiny <- $src"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$src"/config.json "$src"/generation_config.json "$src"/*.safetensors "$tmp/"
[ ! -f "$src/model.safetensors.index.json" ] || cp "$src/model.safetensors.index.json" "$tmp/"
cp "$tok" "$tmp/tokenizer.json"
bytes=$(cat "$tmp"/*.safetensors | wc -c)
[ "$bytes" -le 41943040 ] || die "the weights are $bytes bytes, over the 40 MiB the embedded model may take"
"$cli" info -m "$tmp" --json > "$tmp.info.json" || die "diffgemma cannot load $src"
rm -rf models/dg-tiny
mkdir -p models/dg-tiny
cp "$tmp"/* models/dg-tiny/

echo "== tokenizer cases"
if [ -n "$cases" ]; then
  cp "$cases" tests/fixtures/tokenizer/dg_tiny_cases.jsonl
else
  rm -f tests/fixtures/tokenizer/dg_tiny_cases.jsonl
  echo "no --cases: removed tests/fixtures/tokenizer/dg_tiny_cases.jsonl (regenerate it with" \
       "scripts/make_tokenizer_cases.py --tokenizer models/dg-tiny/tokenizer.json where tokenizers is installed)"
fi

echo "== chat goldens (ids of the same template text, new tokenizer)"
python3 tests/fixtures/chat/make_goldens.py --retokenize --cli "$cli" --model models/dg-tiny

echo "== battery calibration (both sampler profiles, CPU)"
python3 scripts/calibrate_battery.py --model models/dg-tiny --cli "$cli" --summary "$tmp.battery.json" \
  --describe "models/dg-tiny, switched in from $src"

echo "== model card"
python3 scripts/model_card.py --model models/dg-tiny --info "$tmp.info.json" --battery "$tmp.battery.json" \
  ${log:+--log "$log"}
rm -f "$tmp.info.json" "$tmp.battery.json"

cat <<'EOF'
== done. Next:
  cmake --build --preset cpu && ctest --preset cpu     # every test against the new model
  review: git status; git diff --stat; models/dg-tiny/README.md; tests/fixtures/smoketest/calibration.json
  docs: README.md (the embedded model section), docs/TRAINING.md (the model's numbers), docs/SMOKETEST.md
  GPU machine: ctest on the cuda preset (tests/model/cuda_parity_test.cpp runs models/dg-tiny; its tolerances
  were measured on the random model) and `diffgemma smoketest --backend cuda --same-as CPU.json` per profile.
EOF
