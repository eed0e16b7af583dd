#!/usr/bin/env bash
# Runs on the GPU machine (device tool; carry .carry/prebuilt.tar.xz and .carry/git_sha from scripts/device_pack.sh,
# DG_PREBUILT=/path/of/the/tree/where/they/were/built): trains the retrieval model of the long-context issue
# (docs/NEEDLE.md) in two stages and runs the needle ladder on it with the carried
# diffgemma on CUDA.
#   stage 1, recall: prompts of code lines alone (needle_data.py train --task recall: 2-12 names, most lines two or
#     three times, the same question and answer), dense in copy targets, at a constant learning rate; then a short
#     ladder on it
#   stage 2, needle: stage 1's model continued (--init) on needle prompts of growing lengths, one training call per
#     entry of DG_STAGE2_WORDS; the last call writes $OUT/dg-needle; then the ladder on it
# Wall time on an H200 with the defaults (run 5, 2026-12-03): stage 1 trained by 171 s (852 steps at 5.9 a second
# in 3 min, plus starting, tokenizing and saving), its ladder 4 s, stage 2's two calls by 377 s (410 and 296 steps),
# the final ladder 9 s: 386 s in all, the data written in the background meanwhile. A training call is cut short
# so that training ends by DG_TRAIN_DEADLINE_S; "[N s]" lines say where time went.
#   DG_TRAIN_MINUTES       training time of both stages (default 6)
#   DG_STAGE1_MINUTES      stage 1's share (default 3; 0 skips stage 1 and its ladder)
#   DG_RECALL_COUNT        stage 1's conversations (default 60000); DG_RECALL_MIN_PAIRS / DG_RECALL_MAX_PAIRS the
#                          fewest / most code lines per prompt (default 2 / 12); DG_RECALL_FILLER the chance of a
#                          filler sentence before a line (default 0.3); DG_RECALL_REPEATS the most repeats of a line
#                          (default 2), each with probability DG_RECALL_REPEAT (default 0.8); DG_RECALL_SPREAD=1
#                          (default) no line right after one of its name and the asked name not the last line's
#                          (needle_data --spread: copying the latest code never answers), 0 as runs 5-6
#   DG_STAGE1_BATCH        stage 1's prompts per step and per forward pass (default 256: short prompts, one pass)
#   DG_STAGE1_PAD_TO       stage 1's train_tiny --pad-to (default 32: ~20 encoder lengths, so a length's bucket fills
#                          a pass; up to 31 filler tokens before the first line)
#   DG_STAGE1_AR_WEIGHT    stage 1's weight of the encoder's next-token loss, where the copy targets are (default 1)
#   DG_STAGE1_LADDER_WORDS the ladder after stage 1 (default 100,300), depths 0,0.5,1
#   DG_STAGE2_WORDS        the longest prompt in filler words of each stage-2 call, in order (default
#                          300,DG_NEEDLE_MAX_WORDS); the rest of DG_TRAIN_MINUTES is shared evenly; empty: no stage 2
#   DG_NEEDLE_COUNT        conversations per stage-2 call (default 25000; needle_data.py train)
#   DG_NEEDLE_MIN_WORDS    the shortest stage-2 prompt in filler words (default 50; lengths spread on a log scale)
#   DG_NEEDLE_MAX_WORDS    the longest (default 1500, ~2.3k tokens: training on the ladder's 18k-token prompts ran at
#                          0.47 steps a second, too few to learn the task in minutes)
#   DG_PAD_TO              stage 2's train_tiny --pad-to (default 128)
#   DG_NEEDLE_REPEAT       needle_data --repeat: the chance a planted line appears twice (default 0.8), so the encoder's
#                          next-token loss (DG_AR_WEIGHT, default 0.5 in stage 2) has codes to copy;
#                          DG_NEEDLE_DISTRACTORS the other planted codes per training prompt (default 6; the ladder's
#                          prompts have 4)
#   DG_NEEDLE_DIGITS       the codes' length (default 2: "▁48." one token, 15 of the 90 codes two; 5: the first
#                          runs' codes, several tokens), in both stages; the ladder is given the same
#   DG_MICRO_TOKENS        train_tiny --micro-tokens (default 120000: the per-pass overhead, not the tokens, bounds
#                          the step rate)
#   DG_LR_SCHEDULE         the last training call's --lr-schedule (default constant; cosine: down to a tenth at its
#                          end); the others run at a constant rate; DG_WARMUP each call's warm-up steps (default 50)
#   DG_NEEDLE_INIT         a model directory the first training call continues (train_tiny --init; carry it),
#                          DG_NEEDLE_SEED the data's seed (default 0; give a continued run other conversations)
#   DG_LADDER_WORDS        the final ladder's lengths (default 1000,4000,12000), depths 0,0.25,0.5,0.75,1
#   DG_TRAIN_DEADLINE_S    the latest end of training in seconds from the start (default 480), leaving the ladder time
#   DG_CODE_WEIGHT         train_tiny --code-weight in both stages: the canvas's answer code against 1 for the other
#                          canvas positions (default 1)
#   DG_TMP                 the folder of the data and intermediate models (default /tmp; give each of two runs side by
#                          side its own, with its own OUT)
# Brings back train.log (every training call, one after the other), ladder.txt (both ladders) and $OUT/dg-needle
# (config.json, generation_config.json, the safetensors; its tokenizer.json, a copy of data/tokenizer.json, is removed
# to keep within the files a device call returns).
set -u
t0=$SECONDS
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 DG_GIT_SHA="$(cat .carry/git_sha 2>/dev/null || echo unknown)"
. scripts/device_prebuilt.sh
set -o pipefail
digits=${DG_NEEDLE_DIGITS:-2} seed=${DG_NEEDLE_SEED:-0} s1=${DG_STAGE1_MINUTES:-3}
max_words=${DG_NEEDLE_MAX_WORDS:-1500} tmp=${DG_TMP:-/tmp}
mkdir -p "$tmp"
stage2=$max_words
[ "$max_words" -gt 300 ] && stage2=300,$max_words
stage2=${DG_STAGE2_WORDS-$stage2}
IFS=, read -r -a lengths <<< "$stage2"
stage1=$(awk -v m="$s1" 'BEGIN { print (m > 0) ? 1 : 0 }')
calls=$(( ${#lengths[@]} + stage1 ))
[ "$calls" -gt 0 ] || { echo "nothing to train: DG_STAGE1_MINUTES is 0 and DG_STAGE2_WORDS empty"; exit 1; }
s2=$(awk -v t="${DG_TRAIN_MINUTES:-6}" -v s="$s1" -v n="${#lengths[@]}" \
  'BEGIN { if (n) printf "%.2f", (t - (s > 0 ? s : 0)) / n }')
if [ "${#lengths[@]}" -gt 0 ] && ! awk -v m="$s2" 'BEGIN { exit !(m >= 0.5) }'; then
  echo "DG_TRAIN_MINUTES leaves $s2 min per stage-2 call (at least 0.5 needed)"; exit 1
fi
: > "$OUT/train.log"
: > "$OUT/ladder.txt"

# All the data at once, in the background (several cores): recall for stage 1, needle per stage-2 call.
declare -A data_pid
if [ "$stage1" = 1 ]; then
  python3 scripts/needle_data.py train --task recall --out "$tmp/recall.jsonl" --count "${DG_RECALL_COUNT:-60000}" \
    --seed "$seed" --digits "$digits" --min-pairs "${DG_RECALL_MIN_PAIRS:-2}" --max-pairs "${DG_RECALL_MAX_PAIRS:-12}" \
    --filler "${DG_RECALL_FILLER:-0.3}" --repeat "${DG_RECALL_REPEAT:-0.8}" --repeats "${DG_RECALL_REPEATS:-2}" \
    $([ "${DG_RECALL_SPREAD:-1}" = 1 ] && echo --spread) > "$tmp/recall.txt" 2>&1 &
  data_pid[recall]=$!
fi
for k in "${!lengths[@]}"; do
  python3 scripts/needle_data.py train --out "$tmp/needle-$k.jsonl" --count "${DG_NEEDLE_COUNT:-25000}" \
    --min-words "$(( ${DG_NEEDLE_MIN_WORDS:-50} < lengths[k] ? ${DG_NEEDLE_MIN_WORDS:-50} : lengths[k] ))" \
    --max-words "${lengths[k]}" --seed "$(( seed + 1 + k ))" --repeat "${DG_NEEDLE_REPEAT:-0.8}" \
    --distractors "${DG_NEEDLE_DISTRACTORS:-6}" --digits "$digits" > "$tmp/needle-$k.txt" 2>&1 &
  data_pid[needle-$k]=$!
done

fit_minutes() {  # the planned minutes, cut so that training ends by DG_TRAIN_DEADLINE_S (~30 s go to starting)
  awk -v m="$1" -v left="$(( ${DG_TRAIN_DEADLINE_S:-480} - (SECONDS - t0) - 30 ))" \
    'BEGIN { l = left / 60; if (l < 0.5) l = 0.5; printf "%.2f", (m < l ? m : l) }'
}

# train NAME DATA OUT MINUTES SEED INIT SCHEDULE [train_tiny options]: one training call, logged to train.log; the
# console gets its set-up lines and its last step lines.
train() {
  local name=$1 data=$2 out=$3 planned=$4 seed=$5 init=$6 schedule=$7 minutes
  shift 7
  wait "${data_pid[$name]}" || { echo "needle_data failed ($name)"; cat "$tmp/$name.txt"; exit 1; }
  minutes=$(fit_minutes "$planned")
  : > "$tmp/$name.log"
  echo "== $name: $(cat "$tmp/$name.txt"); $minutes min (planned $planned), learning rate $schedule" \
    "${init:+from $init}" | tee -a "$OUT/train.log"
  python3 scripts/train_tiny.py --data "$data" --tokenizer data/tokenizer.json --out "$out" --arch needle \
    --max-positions 32768 --minutes "$minutes" --seed "$seed" --eval-minutes 0 ${init:+--init "$init"} \
    --lr-schedule "$schedule" --warmup "${DG_WARMUP:-50}" --copy-stats --log-every 25 \
    --micro-tokens "${DG_MICRO_TOKENS:-120000}" --code-weight "${DG_CODE_WEIGHT:-1}" "$@" 2>&1 | grep -v 'Writing model shards\|Loading weights' \
    | tee -a "$OUT/train.log" "$tmp/$name.log" | grep -v "^\[.*step [0-9]*/\|SUMMARY" \
    || { echo "training failed ($name)"; exit 1; }
  grep "^\[.*step [0-9]*/" "$tmp/$name.log" | tail -2
  echo "[$((SECONDS - t0)) s] $name trained"
}

# ladder MODEL WORDS DEPTHS TITLE: the needle ladder on CUDA, its table on the console, all of it in ladder.txt.
ladder() {
  echo "== $4" >> "$OUT/ladder.txt"
  python3 scripts/needle_ladder.py --diffgemma "$dg" -m "$1" --words "$2" --depths "$3" --digits "$digits" \
    -- --backend cuda 2>&1 | tee -a "$OUT/ladder.txt" | grep -v '^{'
  echo "[$((SECONDS - t0)) s] ladder done ($4)"
}

call=0 init=${DG_NEEDLE_INIT:-}
next_out() {  # the model directory of training call $call: $OUT/dg-needle for the last, else one in $tmp
  if [ "$call" -eq $((calls - 1)) ]; then echo "$OUT/dg-needle"; else echo "$tmp/dg-stage$call"; fi
}
next_schedule() { if [ "$call" -eq $((calls - 1)) ]; then echo "${DG_LR_SCHEDULE:-constant}"; else echo constant; fi; }
if [ "$stage1" = 1 ]; then
  out=$(next_out)
  batch=${DG_STAGE1_BATCH:-256}
  train recall "$tmp/recall.jsonl" "$out" "$s1" 0 "$init" "$(next_schedule)" --batch "$batch" --micro "$batch" \
    --ar-weight "${DG_STAGE1_AR_WEIGHT:-1}" --pad-to "${DG_STAGE1_PAD_TO:-32}"
  ladder "$out" "${DG_STAGE1_LADDER_WORDS:-100,300}" 0,0.5,1 "stage 1 (recall) model"
  call=$((call + 1)) init=$out
fi
for k in "${!lengths[@]}"; do
  out=$(next_out)
  train "needle-$k" "$tmp/needle-$k.jsonl" "$out" "$s2" "$((call))" "$init" "$(next_schedule)" --batch 64 \
    --pad-to "${DG_PAD_TO:-128}" --ar-weight "${DG_AR_WEIGHT:-0.5}"
  call=$((call + 1)) init=$out
done
ladder "$OUT/dg-needle" "${DG_LADDER_WORDS:-1000,4000,12000}" 0,0.25,0.5,0.75,1 "final model ($OUT/dg-needle)"
rm -f "$OUT/dg-needle/tokenizer.json"
echo "[$((SECONDS - t0)) s] done"
