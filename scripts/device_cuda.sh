#!/usr/bin/env bash
# Runs on the GPU machine (device tool; carry .carry/deps made by scripts/device_deps.sh): builds with CUDA for
# sm_90a, runs the CUDA tests, then benchmarks the full 26B-A4B shape with random weights. Results: $OUT.
# DG_REFERENCE=eager,compiled adds transformers eager and compiled (static cache + torch.compile, ~3 min to compile)
# on the same shapes and prints the ratios (scripts/bench_ratios.py). Engine and reference do not fit one 10-minute
# command together: DG_REFERENCE_ONLY=1 skips the build, the tests and the engine bench.
set -u
cd "$(dirname "$0")/.."
mkdir -p "$OUT" bench/results
# The tree arrives without .git: the commit comes from .carry/git_sha (git rev-parse --short HEAD > .carry/git_sha).
DG_GIT_SHA="$(cat .carry/git_sha 2>/dev/null || echo unknown)"
export DG_GIT_SHA
{
  nvidia-smi -L
  g++ --version | head -1; cmake --version | head -1; nvcc --version | tail -1
  if [ "${DG_REFERENCE_ONLY:-0}" != 1 ]; then
    cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DDG_DEPS_DIR="$PWD/.carry/deps" -DDG_LINE_EDITING=OFF -DDG_WERROR=OFF > /dev/null \
      || { echo "configure failed"; exit 1; }
    cmake --build build/gpu -j"$(nproc)" 2>&1 | grep -E "error|warning|FAILED" ; test -x build/gpu/diffgemma || exit 1
    timeout 300 build/gpu/tests/dg_cuda_tests --gtest_filter="${DG_TEST_FILTER:-*Cuda*:RmsNorm*}" 2>&1 | grep -v "^\[ RUN\|^\[       OK"
    # The batched load benchmark (DG_SERVE=1; DG_SERVE_ONLY=1 skips the benches below): N concurrent 1k-in / 512-out
    # requests at 16 steps per block through one batched forward per step, N in DG_STREAMS.
    if [ "${DG_SERVE:-0}" = 1 ]; then
      timeout "${DG_SERVE_TIMEOUT:-420}" build/gpu/diffgemma bench --serve --streams "${DG_STREAMS:-1,4,8,16,32}" \
        --steps 16 --prompt-tokens 1024 --serve-tokens 512 --label serve --out "$OUT/bench.jsonl"
      [ "${DG_SERVE_ONLY:-0}" = 1 ] && exit 0
    fi
    [ "${DG_SKIP_BENCH:-0}" = 1 ] && exit 0
    timeout 240 build/gpu/diffgemma bench --layers 2 --prefill 512,4096 --context 1024 --skip-generate --label slice2 \
      --out "$OUT/bench.jsonl"
    timeout 300 build/gpu/diffgemma bench --prefill "${DG_PREFILL:-512,4096,32768}" --context "${DG_CONTEXT:-1024,8192,32768}" \
      --label full30 --out "$OUT/bench.jsonl"
    # Variants on the 4k prefill, the 1k-context denoise step and the 1k/1k generation: DG_VARIANTS="moe=cublas
    # attention=gemm graphs ..." (name=value is --name value; a bare name is a flag).
    for v in ${DG_VARIANTS:-}; do
      if [ "${v#*=}" = "$v" ]; then opt=(--"$v"); else opt=(--"${v%%=*}" "${v#*=}"); fi
      timeout 200 build/gpu/diffgemma bench "${opt[@]}" --prefill 4096 --context 1024 --label "variant-$v" \
        --out "$OUT/bench.jsonl"
    done
    # Quantized experts (synthetic packed weights, the SC MLP q8): DG_WEIGHTS="q4 fp8 nvfp4" runs the 4k prefill,
    # the 1k- and 8k-context denoise steps with their stage breakdown, the 1k/1k generation and the peak memory of each.
    for w in ${DG_WEIGHTS:-}; do
      timeout 200 build/gpu/diffgemma bench --weights "$w" ${DG_WEIGHTS_OPTS:-} --prefill 4096 --context 1024,8192 \
        --label "weights-$w" --out "$OUT/bench.jsonl"
    done
    # `diffgemma quantize` on a 4-layer full-shape checkpoint written here by dg_write_checkpoint (no torch)
    # (DG_QUANTIZE_TIMING=1), extrapolated to 30 layers by bytes; each pack then runs end to end on the GPU.
    if [ "${DG_QUANTIZE_TIMING:-0}" = 1 ]; then
      PYTHONUNBUFFERED=1 timeout 400 python3 scripts/quantize_timing.py --cli build/gpu/diffgemma \
        --writer build/gpu/dg_write_checkpoint --dir /tmp/dg-slice --layers 4 --machine "H200 host" \
        --bench-backend cuda --bench-out "$OUT/bench.jsonl" --out "$OUT/quantize.jsonl"
    fi
  fi
  # The transformers reference on the same shapes, in the same run (DG_REFERENCE=eager|compiled|eager,compiled).
  if [ -n "${DG_REFERENCE:-}" ]; then
    PYTHONUNBUFFERED=1 timeout "${DG_REFERENCE_TIMEOUT:-540}" python3 scripts/bench_reference.py \
      --mode "$DG_REFERENCE" --prefill 512,4096 --context 1024,8192 --compiled-context 1024 \
      --label "reference-$DG_REFERENCE" --out "$OUT/bench.jsonl"
  fi
  # DG_RATIOS_WITH: more JSONL files (e.g. an earlier run's engine lines) for the ratio table.
  [ -f "$OUT/bench.jsonl" ] && python3 scripts/bench_ratios.py "$OUT/bench.jsonl" ${DG_RATIOS_WITH:-}
} 2>&1 | tee "$OUT/log.txt"
