#!/usr/bin/env bash
# Runs on the GPU machine (device tool; carry .carry/deps and .carry/git_sha): the reproducibility retrain of the
# embedded model (docs/TRAINING.md, run 4's command) on the GPU, and alongside it, on the CPUs at low priority, the
# build and the full-shape quantize timing (scripts/quantize_timing.py: a 4-layer slice quantized to each profile,
# then each pack end to end on the GPU). Brings back at most 8 files: the checkpoint without tokenizer.json (6) and
# logs.tar.gz (train.log, build.txt, quantize.jsonl, bench.jsonl, quantize.txt).
set -u
cd "$(dirname "$0")/.."
mkdir -p "$OUT" /tmp/logs
export PYTHONUNBUFFERED=1 DG_GIT_SHA="$(cat .carry/git_sha 2>/dev/null || echo unknown)"
t0=$SECONDS
stamp() { echo "[$((SECONDS - t0)) s] $*"; }
python3 scripts/train_tiny.py --data data/chat.jsonl.xz --tokenizer data/tokenizer.json --out "$OUT/dg-tiny" \
  --steps 1250 --stop-step 1193 --minutes "${DG_TRAIN_MINUTES:-8.6}" --seed 0 --eval-minutes 0 \
  > /tmp/logs/train.log 2>&1 &
train=$!
{
  nvidia-smi -L
  stamp "configure + build (nice 19, the training runs alongside)"
  cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DDG_DEPS_DIR="$PWD/.carry/deps" -DDG_LINE_EDITING=OFF \
    -DDG_WERROR=OFF > /dev/null && nice -n 19 cmake --build build/gpu -j15 --target diffgemma dg_write_checkpoint 2>&1 \
    | grep -E "error|FAILED"
  stamp "built"
} > /tmp/logs/build.txt 2>&1
if [ -x build/gpu/diffgemma ] && [ -x build/gpu/dg_write_checkpoint ]; then
  stamp "quantize timing" > /tmp/logs/quantize.txt
  nice -n 10 timeout "${DG_QUANTIZE_TIMEOUT:-330}" python3 scripts/quantize_timing.py --cli build/gpu/diffgemma \
    --writer build/gpu/dg_write_checkpoint --dir /tmp/dg-slice --layers 4 \
    --machine "H200 host, 16 cores, the training alongside" --bench-backend cuda \
    --bench-out /tmp/logs/bench.jsonl --out /tmp/logs/quantize.jsonl >> /tmp/logs/quantize.txt 2>&1
  stamp "quantize done: rc $?" >> /tmp/logs/quantize.txt
fi
wait $train
echo "train rc $?" >> /tmp/logs/train.log
rm -f "$OUT/dg-tiny/tokenizer.json"
tar -C /tmp/logs -czf "$OUT/logs.tar.gz" .
tail -n 6 /tmp/logs/build.txt; tail -n 12 /tmp/logs/quantize.txt; grep -v "step [0-9]*/" /tmp/logs/train.log | tail -n 15
ls -la "$OUT/dg-tiny"
