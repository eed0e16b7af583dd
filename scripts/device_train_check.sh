#!/usr/bin/env bash
# Runs on the GPU machine (carry .carry/deps and .carry/git_sha): trains the embedded model (docs/TRAINING.md's
# recipe, DG_TRAIN_MINUTES of training) while the CUDA build runs on the CPU, then runs the CUDA tests and the
# smoketest battery on the GPU with the new model in both sampler profiles. Brings back 8 files: train.log, the
# tokenizer cases, and the checkpoint without tokenizer.json (a copy of data/tokenizer.json).
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 DG_GIT_SHA="$(cat .carry/git_sha 2>/dev/null || echo unknown)"
( cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DDG_DEPS_DIR="$PWD/.carry/deps" -DDG_LINE_EDITING=OFF -DDG_WERROR=OFF \
    > /tmp/configure.log 2>&1 && nice -n 19 cmake --build build/gpu -j8 > /tmp/build.log 2>&1 ) &
build=$!
python3 scripts/make_tokenizer_cases.py --tokenizer data/tokenizer.json --out "$OUT/dg_tiny_cases.jsonl" 2>&1 | tail -n 3
python3 scripts/train_tiny.py --data data/chat.jsonl.xz --tokenizer data/tokenizer.json --out "$OUT/dg-tiny" \
  --minutes "${DG_TRAIN_MINUTES:-6}" --seed 0 --battery tests/fixtures/smoketest/battery.json --eval-minutes 0.8 2>&1 \
  | grep -v 'Writing model shards\|Loading weights' | tee "$OUT/train.log" | grep -v "^\[.*step [0-9]*/"
wait $build || { echo "build failed"; grep -E "error|FAILED" /tmp/build.log | head -20; exit 1; }
echo "== CUDA tests"
timeout 120 build/gpu/tests/dg_cuda_tests --gtest_filter='*Cuda*:MoeStream*' 2>&1 | grep -E "FAILED|PASSED|Failure|logits step 1|argmax agreement|pipeline" | head -40
echo "== smoketest on CUDA"
cp data/tokenizer.json "$OUT/dg-tiny/tokenizer.json"
for p in contract reference; do
  timeout 90 build/gpu/diffgemma smoketest -m "$OUT/dg-tiny" --backend cuda --sampler "$p" 2>&1 | tail -n 30
done
rm -f "$OUT/dg-tiny/tokenizer.json"
