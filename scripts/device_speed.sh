#!/usr/bin/env bash
# Runs on the GPU machine (device tool; carry .carry/deps and .carry/git_sha): builds diffgemma and dg_tests, then
#   tests  the GPU tests of DG_TEST_FILTER, while the embedded model is quantized to the packs of DG_PACKS and the
#          CPU runs their smoketest in both profiles (the oracle's JSON);
#   bench  the full-shape bench for each config of DG_BENCH ("label:options", options comma-separated), graphs on
#          as ask/chat/serve run them;
#   smoke  the CUDA smoketest of each pack in both profiles, --same-as the CPU's JSON.
# DG_PARTS picks the parts (default: tests bench smoke). In $OUT: log.txt, tests.txt, bench.jsonl and smoke.tgz (the
# smoketest JSON); the machine returns at most 8 files.
set -u
cd "$(dirname "$0")/.."
mkdir -p "$OUT" /tmp/smoke
exec > >(tee "$OUT/log.txt") 2>&1
export DG_GIT_SHA="$(cat .carry/git_sha 2>/dev/null || echo unknown)"
t0=$SECONDS
stamp() { echo "[$((SECONDS - t0)) s] $*"; }
parts=" ${DG_PARTS:-tests bench smoke} "
has() { [[ "$parts" == *" $1 "* ]]; }
score() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['passed'], '/', j['total'])" "$1" 2>/dev/null; }
{
  stamp "configure + build"
  cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DDG_DEPS_DIR="$PWD/.carry/deps" -DDG_LINE_EDITING=OFF \
    -DDG_WERROR=OFF > /dev/null 2>&1 || { echo "configure failed"; exit 1; }
  cmake --build build/gpu -j"$(nproc)" --target diffgemma dg_tests 2>&1 | grep -E "error|FAILED" | head -20
  stamp "built"
}
test -x build/gpu/diffgemma || { echo "build failed"; exit 1; }
dg=build/gpu/diffgemma
packs="${DG_PACKS:-fp8 q4}"
if has tests; then
  ( timeout "${DG_TEST_TIMEOUT:-200}" build/gpu/tests/dg_tests --gtest_filter="${DG_TEST_FILTER:-*Cuda*}" 2>&1 \
      | grep -v "^\[ RUN\|^\[       OK" > "$OUT/tests.txt"; stamp "tests done" >> "$OUT/tests.txt" ) &
  tests=$!
  for p in $packs; do
    $dg quantize -m models/dg-tiny -o "/tmp/tiny-$p" --profile "$p" --force -q || echo "quantize $p failed"
    for s in contract reference; do
      timeout 200 $dg smoketest -m "/tmp/tiny-$p" --backend cpu --sampler "$s" --json > "/tmp/smoke/cpu-$p-$s.json" \
        2> /dev/null; echo "smoketest cpu $p $s: rc $? $(score "/tmp/smoke/cpu-$p-$s.json")"
    done
  done
  wait $tests
  grep -E "^\[  (FAILED|PASSED) |FAILED  \]|tests done|^  [a-zA-Z0-9]" "$OUT/tests.txt" | cut -c1-220 | head -60
fi
if has bench; then
  for cfg in ${DG_BENCH:-bf16: fp8:--weights,fp8 fp8-a16:--weights,fp8,--expert-act,bf16,--skip-generate q4:--weights,q4}; do
    label=${cfg%%:*} opts=${cfg#*:}
    stamp "bench $label ($opts)"
    timeout 200 $dg bench --prefill 4096 --context 1024,8192 ${opts//,/ } --label "speed-$label" \
      --out "$OUT/bench.jsonl" 2>&1 | python3 scripts/bench_brief.py
  done
fi
if has smoke; then
  for p in $packs; do
    for s in contract reference; do
      same=()
      [ -s "/tmp/smoke/cpu-$p-$s.json" ] && same=(--same-as "/tmp/smoke/cpu-$p-$s.json")
      timeout 120 $dg smoketest -m "/tmp/tiny-$p" --backend cuda --sampler "$s" --json "${same[@]}" \
        > "/tmp/smoke/cuda-$p-$s.json" 2> "/tmp/smoke/cuda-$p-$s.err"
      echo "smoketest cuda $p $s: rc $? $(score "/tmp/smoke/cuda-$p-$s.json") $(tail -1 "/tmp/smoke/cuda-$p-$s.err" | cut -c1-150)"
    done
  done
fi
tar -czf "$OUT/smoke.tgz" -C /tmp smoke 2>/dev/null
stamp "done"
