#!/usr/bin/env bash
# Runs on the GPU machine (device tool; carry .carry/prebuilt.tar.xz and .carry/git_sha from scripts/device_pack.sh,
# DG_PREBUILT=/path/of/the/tree/where/they/were/built): trains the retrieval model of the long-context issue
# (docs/TRAINING.md, "The retrieval model") and runs the needle ladder on it with the carried diffgemma on CUDA.
#   DG_NEEDLE_COUNT      training conversations (default 50000; needle_data.py train, seed 0)
#   DG_NEEDLE_MIN_WORDS  the shortest training prompt in filler words (default 50)
#   DG_NEEDLE_MAX_WORDS  the longest training prompt in filler words (default 3000, ~4.5k tokens: training on the
#                        ladder's 18k-token prompts ran at 0.47 steps a second, too few to learn the task in minutes)
#   DG_PAD_TO            train_tiny --pad-to (default 128)
#   DG_NEEDLE_REPEAT     needle_data --repeat: the chance a planted line appears twice (default 0.8), so the encoder's
#                        next-token loss (DG_AR_WEIGHT, default 0.5) has codes to copy; DG_NEEDLE_DISTRACTORS the other
#                        planted codes per training prompt (default 6; the ladder's prompts have 4)
#   DG_NEEDLE_DIGITS     the codes' length (default 2: one token each, so the answer is one copied token; 5: the
#                        first runs' codes, several tokens); the ladder is given the same
#   DG_MICRO_TOKENS      train_tiny --micro-tokens (default 120000: a step of 64 prompts of at most 3,000 words in
#                        one or two forward passes; the per-pass overhead, not the tokens, bounds the step rate)
#   DG_NEEDLE_INIT       a model directory to continue training (train_tiny --init; carry it), DG_NEEDLE_SEED the
#                        data's seed (default 0; give a continued run other conversations)
#   DG_TRAIN_MINUTES     training time (default 6.5)
#   DG_LADDER_WORDS      the ladder's lengths (default 1000,4000,12000), depths 0,0.25,0.5,0.75,1
# Brings back train.log, ladder.txt and $OUT/dg-needle (config.json, generation_config.json, the safetensors; its
# tokenizer.json, a copy of data/tokenizer.json, is removed to keep within the files a device call returns).
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 DG_GIT_SHA="$(cat .carry/git_sha 2>/dev/null || echo unknown)"
. scripts/device_prebuilt.sh
t0=$SECONDS
python3 scripts/needle_data.py train --out /tmp/needle.jsonl --count "${DG_NEEDLE_COUNT:-50000}" \
  --min-words "${DG_NEEDLE_MIN_WORDS:-50}" --max-words "${DG_NEEDLE_MAX_WORDS:-3000}" --seed "${DG_NEEDLE_SEED:-0}" \
  --repeat "${DG_NEEDLE_REPEAT:-0.8}" --distractors "${DG_NEEDLE_DISTRACTORS:-6}" --digits "${DG_NEEDLE_DIGITS:-2}" || { echo "needle_data failed"; exit 1; }
echo "[$((SECONDS - t0)) s] data: $(wc -l < /tmp/needle.jsonl) conversations"
set -o pipefail
python3 scripts/train_tiny.py --data /tmp/needle.jsonl --tokenizer data/tokenizer.json --out "$OUT/dg-needle" \
  --arch needle --max-positions 32768 --minutes "${DG_TRAIN_MINUTES:-6.5}" --seed 0 --eval-minutes 0 ${DG_NEEDLE_INIT:+--init "$DG_NEEDLE_INIT"} \
  --batch 64 --micro-tokens "${DG_MICRO_TOKENS:-120000}" --pad-to "${DG_PAD_TO:-128}" --ar-weight "${DG_AR_WEIGHT:-0.5}" 2>&1 | grep -v 'Writing model shards\|Loading weights' | tee "$OUT/train.log" \
  | grep -v "^\[.*step [0-9]*/" || { echo "training failed"; exit 1; }
echo "[$((SECONDS - t0)) s] trained"
python3 scripts/needle_ladder.py --diffgemma "$dg" -m "$OUT/dg-needle" --words "${DG_LADDER_WORDS:-1000,4000,12000}" \
  --depths 0,0.25,0.5,0.75,1 --digits "${DG_NEEDLE_DIGITS:-2}" -- --backend cuda 2>&1 | tee "$OUT/ladder.txt" | grep -v '^{'
rm -f "$OUT/dg-needle/tokenizer.json"
echo "[$((SECONDS - t0)) s] done"
