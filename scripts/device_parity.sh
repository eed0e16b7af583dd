#!/usr/bin/env bash
# Runs on the GPU machine (device tool; carry .carry/deps made by scripts/device_deps.sh): the CUDA parity checks of
# docs/NUMERICS.md in one ~9-minute command. Builds only the test binary and dg_dump_logits (device_cuda.sh's
# configure line), runs the CUDA trace replay (both fixtures, CPU and CUDA), the full-shape 2-layer slice and the
# synthetic-weight generator tests, then the 30-layer engine logits (dg_dump_logits) and, in a separate process so
# the two never share the GPU, transformers on the same weights (scripts/full_shape_vs_hf.py). Logs: $OUT.
#   DG_PARITY_SKIP_TESTS=1 / DG_PARITY_SKIP_HF=1 leave out one half; DG_PARITY_PROMPT (1024) sets the prompt.
set -u
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export DG_GIT_SHA="$(cat .carry/git_sha 2>/dev/null || echo unknown)"
t0=$SECONDS
stamp() { echo "[$((SECONDS - t0)) s] $*"; }
{
  nvidia-smi -L
  stamp "configure"
  cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DDG_DEPS_DIR="$PWD/.carry/deps" -DDG_LINE_EDITING=OFF \
    -DDG_WERROR=OFF > /dev/null || { echo "configure failed"; exit 1; }
  stamp "build"
  cmake --build build/gpu -j"$(nproc)" --target dg_tests dg_dump_logits 2>&1 | grep -E "error|FAILED"
  test -x build/gpu/tests/dg_tests && test -x build/gpu/dg_dump_logits || { echo "build failed"; exit 1; }
  stamp "built"
} 2>&1 | tee "$OUT/build.txt"
[ -x build/gpu/dg_dump_logits ] || exit 1

if [ "${DG_PARITY_SKIP_TESTS:-0}" != 1 ]; then
  stamp "tests" | tee "$OUT/tests.txt"
  timeout 200 build/gpu/tests/dg_tests \
    --gtest_filter='*TraceReplay*:CudaFullShape*:SyntheticUniform*' 2>&1 | grep -v "^\[ RUN" | tee -a "$OUT/tests.txt"
  stamp "tests done" | tee -a "$OUT/tests.txt"
fi

if [ "${DG_PARITY_SKIP_HF:-0}" != 1 ]; then
  {
    stamp "engine, 30 layers"
    timeout 150 build/gpu/dg_dump_logits --out /tmp/dg_engine --layers 30 --seed 1 \
      --prompt "${DG_PARITY_PROMPT:-1024}" || echo "dg_dump_logits failed: rc $?"
    cp -f /tmp/dg_engine.json "$OUT/engine_input.json" 2>/dev/null  # the ids and settings (the logits stay in /tmp)
    stamp "transformers"
    PYTHONUNBUFFERED=1 timeout 330 python3 scripts/full_shape_vs_hf.py --engine /tmp/dg_engine \
      --out "$OUT/full_shape_vs_hf.jsonl" || echo "full_shape_vs_hf.py: rc $?"
    stamp "done"
  } 2>&1 | tee "$OUT/full_shape.txt"
fi
