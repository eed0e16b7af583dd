#!/usr/bin/env bash
# Runs on the GPU machine (device tool; carry .carry/prebuilt.tar.xz and .carry/git_sha from scripts/device_pack.sh,
# DG_PACK_BASE=... for a second build): one call's checks and interleaved A/B benches, results in $OUT (log.txt,
# tests.txt, bench.jsonl, golden file on an H200).
#   golden   `golden --backend cuda` against the card's file; on an H200 also --bless, the file copied to $OUT
#   tests    the GPU tests of DG_AB_TESTS (a gtest filter; empty: none) under DG_AB_TEST_TIMEOUT seconds (default 200)
#   benches  DG_AB_ROUNDS rounds (default 2) of each "label:options" of DG_AB_BENCH (options comma-separated; default
#            "fp8-all:--weights,fp8-all,--vocab-act,fp8"), each round with diffgemma and then with the second build
#            when the tarball has one (label suffix -base; its commit from DG_AB_BASE_SHA), then a line per
#            generation: seconds, committed tok/s, graph instantiations and updates, graph host ms, block ends
# DG_PREBUILT=/path/of/the/tree/where/they/were/built (the binaries are always prebuilt here);
# DG_AB_PARTS: which of "golden tests benches" run (default all); DG_AB_LABEL: the labels' prefix (default ab).
set -u
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
t0=$SECONDS
stamp() { echo "[$((SECONDS - t0)) s] $*"; }
[ -n "${DG_PREBUILT:-}" ] || { echo "device_ab.sh runs prebuilt binaries: set DG_PREBUILT (scripts/device_pack.sh)"; exit 2; }
. scripts/device_prebuilt.sh
nvidia-smi -L
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
tag=h100; [[ $gpu == *H200* ]] && tag=h200
parts=" ${DG_AB_PARTS:-golden tests benches} "
has() { [[ "$parts" == *" $1 "* ]]; }
prefix=${DG_AB_LABEL:-ab}
if has golden; then
  stamp "golden"
  $dg golden -m models/dg-tiny --backend cuda 2>&1 | tail -3
  echo "golden rc ${PIPESTATUS[0]}"
  if [ $tag = h200 ]; then
    $dg golden -m models/dg-tiny --backend cuda --bless 2>&1 | tail -2
    cp tests/fixtures/golden/cuda-nvidia-h200.json "$OUT/"
  fi
fi
if has tests && [ -n "${DG_AB_TESTS:-}" ]; then
  stamp "tests: $DG_AB_TESTS"
  timeout "${DG_AB_TEST_TIMEOUT:-200}" $tests_bin --gtest_filter="$DG_AB_TESTS" 2>&1 \
    | grep -v "^\[ RUN\|^\[       OK" > "$OUT/tests.txt"
  grep -E "^\[  (FAILED|PASSED) |FAILED  \]|Failure" "$OUT/tests.txt" | head -30
fi
if has benches; then
  bench() {  # binary, sha, label, options
    local bin=$1 sha=$2 label=$3 opts=$4
    stamp "bench $label ($opts)"
    DG_GIT_SHA=$sha timeout 150 $bin bench --prefill 4096 --context 1024 ${opts//,/ } --label "$label" \
      --out "$OUT/bench.jsonl" 2>&1 | python3 scripts/bench_brief.py | grep -E "denoise  |generate|prefill  |memory"
  }
  for r in $(seq 1 "${DG_AB_ROUNDS:-2}"); do
    for cfg in ${DG_AB_BENCH:-fp8-all:--weights,fp8-all,--vocab-act,fp8}; do
      [[ $cfg == *:* ]] || { echo "DG_AB_BENCH entry '$cfg' has no ':' (label:options)"; exit 2; }
      bench $dg "$DG_GIT_SHA" "$prefix-$tag-${cfg%%:*}-$r" "${cfg#*:}"
      [ -n "$dg_base" ] && bench $dg_base "${DG_AB_BASE_SHA:-base}" "$prefix-$tag-${cfg%%:*}-base-$r" "${cfg#*:}"
    done
  done
  grep '"generate"' "$OUT/bench.jsonl" | python3 -c "
import json, sys
for l in sys.stdin:
    j = json.loads(l)
    print(j['label'], round(j['seconds'], 4), round(j['committed_tok_per_s'], 1), 'inst', j.get('graph_instantiations'),
          'upd', j.get('graph_updates'), {k: round(v * 1e3, 1) for k, v in j.get('graph_host_s', {}).items()},
          [round(x, 3) for x in j.get('block_ends_s', [])])"
fi
stamp "done"
