#!/usr/bin/env bash
# Runs on the GPU machine (device tool; carry .carry/deps and .carry/git_sha): builds diffgemma, then Nsight Compute
# over one graphed denoise step of the full-shape random model (every kernel node and its time) for each weight
# format of DG_PROFILE_WEIGHTS (empty: none), one prefill of DG_PROFILE_PREFILL tokens (empty: none), and the
# detailed sections of the kernels matched by DG_PROFILE_DETAIL (empty: none). Results in $OUT: ncu-*.csv (scripts/ncu_table.py turns
# them into the docs/PERFORMANCE.md tables) and detail-*.txt. Only gpu__time_duration is collected per kernel: it
# needs one pass, while metrics that need replays save and restore the device memory (47 GB of weights) for every
# kernel, about 0.5 s each (2026-12-01). DG_PROFILE_SKIP: matching launches to skip before the two detailed ones.
# DG_PREBUILT=/path/of/the/tree/where/they/were/built: binaries carried from scripts/device_pack.sh, no build.
# DG_PROFILE_DETAIL entries are weights:kernel-regex[@context] (context 1024 when not given).
# DG_PROFILE_OPTS: bench options for the step profiles and the detailed runs, comma-separated (e.g. --vocab-act,fp8).
# DG_PROFILE_METRICS: metrics the detailed runs collect besides their sections, comma-separated (e.g.
# dram__bytes_read.sum to compare a kernel's DRAM reads with its bytes).
# DG_PROFILE_SERVE: stream counts (e.g. "8 32"; empty, the default: none) whose batched step `bench --serve` times is
# profiled too (one step of that many canvases, ungraphed as the batched worker runs it; 1,024-token prompts),
# weights DG_PROFILE_SERVE_WEIGHTS (default fp8) with DG_PROFILE_OPTS: ncu-serve-N.csv.
set -u
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
t0=$SECONDS
stamp() { echo "[$((SECONDS - t0)) s] $*"; }
if [ -n "${DG_PREBUILT:-}" ]; then  # binaries from scripts/device_pack.sh: no build here
  . scripts/device_prebuilt.sh
else
  {
    nvidia-smi -L
    stamp "configure + build"
    cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DDG_DEPS_DIR="$PWD/.carry/deps" -DDG_LINE_EDITING=OFF \
      -DDG_WERROR=OFF > /dev/null 2>&1 || { echo "configure failed"; exit 1; }
    cmake --build build/gpu -j"$(nproc)" --target diffgemma ${DG_EXTRA_TARGETS:-} 2>&1 | grep -E "error|FAILED"
    stamp "built"
  } 2>&1 | tee -a "$OUT/build.txt"
  dg=build/gpu/diffgemma
  test -x $dg || { echo "build failed"; exit 1; }
fi
export DG_GIT_SHA="$(cat .carry/git_sha 2>/dev/null || echo unknown)"
ncu="ncu --profile-from-start off --graph-profiling node --cache-control none --clock-control none"
bench="$dg bench --graphs --skip-generate"
metrics=gpu__time_duration.sum
profile_opts=${DG_PROFILE_OPTS:-}
for w in ${DG_PROFILE_WEIGHTS-bf16 fp8 q4}; do
  for c in ${DG_PROFILE_CONTEXT:-1024}; do
    stamp "ncu: denoise step, $w, context $c"
    timeout 120 $ncu --metrics "$metrics" --csv --page raw $bench --weights "$w" --prefill 512 --context "$c" \
      ${profile_opts//,/ } --denoise-steps 1 --profile-range denoise --label "profile-$w-$c" --out "$OUT/bench.jsonl" \
      > "$OUT/ncu-$w-$c.csv" 2> "$OUT/ncu-$w-$c.err" || echo "rc $?"
    python3 scripts/ncu_table.py "$OUT/ncu-$w-$c.csv" --top 30 || tail -n 5 "$OUT/ncu-$w-$c.err"
  done
done
if [ -n "${DG_PROFILE_PREFILL-4096}" ]; then
  stamp "ncu: prefill ${DG_PROFILE_PREFILL:-4096}"
  timeout 120 $ncu --metrics "$metrics" --csv --page raw $bench --prefill "${DG_PROFILE_PREFILL:-4096}" --context 1024 \
    --profile-range prefill --label profile-prefill --out "$OUT/bench.jsonl" > "$OUT/ncu-prefill.csv" \
    2> "$OUT/ncu-prefill.err" || echo "rc $?"
  python3 scripts/ncu_table.py "$OUT/ncu-prefill.csv" --top 12 || tail -n 5 "$OUT/ncu-prefill.err"
fi
for n in ${DG_PROFILE_SERVE:-}; do
  w=${DG_PROFILE_SERVE_WEIGHTS:-fp8}
  stamp "ncu: the batched step of $n streams, $w"
  timeout 200 $ncu --metrics "$metrics" --csv --page raw $dg bench --serve --streams "$n" --steps 16 \
    --prompt-tokens 1024 --serve-tokens 256 --weights "$w" ${profile_opts//,/ } --profile-range serve-step \
    --label "profile-serve-$n-$w" --out "$OUT/bench.jsonl" > "$OUT/ncu-serve-$n.csv" 2> "$OUT/ncu-serve-$n.err" \
    || echo "rc $?"
  python3 scripts/ncu_table.py "$OUT/ncu-serve-$n.csv" --top 30 || tail -n 5 "$OUT/ncu-serve-$n.err"
done
# DG_PROFILE_SOURCE=1: the detailed runs also sample warp stalls per SASS instruction (detail-*-sass.csv, for
# finding the stalling loads and chains of a kernel).
src_sections=""
[ -n "${DG_PROFILE_SOURCE:-}" ] && src_sections="--section SourceCounters --import-source no"
for d in ${DG_PROFILE_DETAIL-bf16:moe_stream_kernel fp8:moe_stream_kernel q4:moe_stream_kernel bf16:flash}; do
  w=${d%%:*} k=${d#*:} ctx=1024
  case $k in *@*) ctx=${k##*@} k=${k%@*} ;; esac
  stamp "ncu detail: $k ($w, context $ctx)"
  rep="/tmp/detail-$w-${k//[^a-zA-Z0-9_]/_}"
  rm -f "$rep.ncu-rep"
  timeout 200 $ncu --kernel-name-base demangled -k "regex:$k" --launch-skip "${DG_PROFILE_SKIP:-0}" --launch-count 2 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    $src_sections ${DG_PROFILE_METRICS:+--metrics "$DG_PROFILE_METRICS"} -o "$rep" $bench --weights "$w" --prefill 512 --context "$ctx" ${profile_opts//,/ } --denoise-steps 1 --profile-range denoise \
    > /dev/null 2>&1 || echo "rc $?"
  ncu -i "$rep.ncu-rep" --page details > "$OUT/detail-$w-${k//[^a-zA-Z0-9_]/_}.txt" 2>&1
  [ -n "$src_sections" ] && ncu -i "$rep.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/detail-$w-${k//[^a-zA-Z0-9_]/_}-sass.csv" 2>&1
  grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occ|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|__" "$OUT/detail-$w-${k//[^a-zA-Z0-9_]/_}.txt" | head -40
done
stamp "done"
