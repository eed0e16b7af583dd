#!/usr/bin/env bash
# Runs on the GPU machine (device tool; carry .carry/deps and .carry/git_sha): builds diffgemma and dg_cuda_tests (the
# test files whose code differs in a CUDA build: every GPU test), then
# the parts of DG_PARTS (default: tests bench ask serve smoke), results in $OUT (log.txt, tests.txt, bench.jsonl,
# ask.jsonl, smoke.tgz; the machine returns at most 8 files):
#   tests  the GPU tests of DG_TEST_FILTER, while the embedded model is quantized to each pack of DG_PACKS and the
#          CPU runs their smoketests in both profiles (the oracle's JSON); DG_TEST_TIMEOUT seconds (default 200: the
#          whole *Cuda* suite needs more than 420 on the H200, so run it alone with about 540)
# DG_PREBUILT=/path/of/the/source/tree/where/they/were/built runs binaries carried from the development machine
# instead of building (see below).
#   bench  the full-shape bench for each config of DG_BENCH ("label:options", options comma-separated; graphs on,
#          as ask, chat and serve run)
#   ask    `diffgemma ask` end to end on the full shape with random weights (-m synthetic:26b-a4b:PROFILE) for each
#          "profile:prompt tokens[:options,comma-separated]" of DG_ASK: 1,024 new tokens at 16 steps per block (the contract sampler without
#          its commit-time trim, which random weights would fire on every row), the JSON with its timings
#   serve  bench --serve at DG_STREAMS concurrent requests (1,024-token prompts, 512 new tokens, 16 steps), for each
#          "label:options" of DG_SERVE (default "serve:", the defaults; e.g. "wide:--moe,wide")
#   warmup serve's first request with --warmup off and on (scripts/serve_load.py, one client; below), with the
#          server's op-log (oplog-off.jsonl, oplog-on.jsonl: the worker's timeline of each request, no content)
#   smoke  the CUDA smoketest of each pack in both profiles, --same-as the CPU's JSON
#   topk   bench with --attention-topk off and dyn at DG_TOPK_PREFILL / DG_TOPK_CONTEXTS (long context)
#   needle the needle ladder of models/dg-needle on CUDA, dense and with --attention-topk DG_NEEDLE_TOPK (needle.txt)
#   reference-long  diffgemma (dense) and transformers in eager mode at DG_LONG_PREFILL / DG_LONG_CONTEXTS with
#          DG_REFERENCE_ATTN (default sdpa,eager), each transformers shape in its own process under DG_LONG_TIMEOUT;
#          out-of-memory and timeout results recorded
#   reference  transformers compiled on the bench's shapes (scripts/bench_reference.py), for the side-by-side
# A pack is "name" (quantize --profile name) or "name@OPTIONS" (run options, comma-separated, e.g.
# fp8-a16@--expert-act,bf16 runs the fp8 pack with bf16 activations; fp8-v8@--vocab-act,fp8 with fp8 vocabulary
# products).
set -u
cd "$(dirname "$0")/.."
mkdir -p "$OUT" /tmp/smoke
exec > >(tee "$OUT/log.txt") 2>&1
export DG_GIT_SHA="$(cat .carry/git_sha 2>/dev/null || echo unknown)"
t0=$SECONDS
stamp() { echo "[$((SECONDS - t0)) s] $*"; }
parts=" ${DG_PARTS:-tests bench ask serve smoke} "
has() { [[ "$parts" == *" $1 "* ]]; }
score() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['passed'], '/', j['total'])" "$1" 2>/dev/null; }
if [ -n "${DG_PREBUILT:-}" ]; then
  # Binaries packed on the development machine by scripts/device_pack.sh (carry .carry/prebuilt.tar.xz): no build
  # here. The tests find their fixtures under the source path compiled into them, DG_PREBUILT.
  . scripts/device_prebuilt.sh
  stamp "prebuilt binaries"
else
  stamp "configure + build"
  cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DDG_DEPS_DIR="$PWD/.carry/deps" -DDG_LINE_EDITING=OFF \
    -DDG_WERROR=OFF > /dev/null 2>&1 || { echo "configure failed"; exit 1; }
  cmake --build build/gpu -j"$(nproc)" --target diffgemma dg_cuda_tests 2>&1 | grep -E "error|FAILED" | head -20
  stamp "built"
  test -x build/gpu/diffgemma || { echo "build failed"; exit 1; }
  dg=build/gpu/diffgemma tests_bin=build/gpu/tests/dg_cuda_tests
fi
packs="${DG_PACKS-fp8 fp8-a16@--expert-act,bf16 q4}"  # empty: none (the CPU smoketests skipped)
pack_dir() { local n=${1%%@*}; n=${n%-a16}; echo "/tmp/tiny-${n%-v8}"; }  # fp8-a16, fp8-v8: the fp8 pack
pack_opts() { [[ "$1" == *@* ]] && echo "${1#*@}" | tr , ' '; }
if has tests; then
  ( timeout "${DG_TEST_TIMEOUT:-200}" $tests_bin --gtest_filter="${DG_TEST_FILTER:-*Cuda*}" 2>&1 \
      | grep -v "^\[ RUN\|^\[       OK" > "$OUT/tests.txt"; stamp "tests done" >> "$OUT/tests.txt" ) &
  tests=$!
  for p in $packs; do
    d=$(pack_dir "$p")
    [ -d "$d" ] || $dg quantize -m models/dg-tiny -o "$d" --profile "$(basename "$d" | sed s/^tiny-//)" --force -q \
      || echo "quantize $p failed"
    for s in contract reference; do
      timeout 200 $dg smoketest -m "$d" $(pack_opts "$p") --backend cpu --sampler "$s" --json \
        > "/tmp/smoke/cpu-${p%%@*}-$s.json" 2> /dev/null
      echo "smoketest cpu ${p%%@*} $s: rc $? $(score "/tmp/smoke/cpu-${p%%@*}-$s.json")"
    done
  done
  wait $tests
  grep -E "^\[  (FAILED|PASSED) |FAILED  \]|tests done|^  [a-zA-Z0-9]" "$OUT/tests.txt" | cut -c1-200 | head -80
fi
if has bench; then
  for cfg in ${DG_BENCH:-bf16: fp8:--weights,fp8 q4:--weights,q4}; do
    [[ $cfg == *:* ]] || { echo "DG_BENCH entry '$cfg' has no ':' (label:options)"; exit 2; }
    label=${cfg%%:*} opts=${cfg#*:}
    stamp "bench $label ($opts)"
    timeout 150 $dg bench --prefill 4096 --context "${DG_CONTEXTS:-1024,8192}" ${opts//,/ } --label "speed-$label" \
      --out "$OUT/bench.jsonl" 2>&1 | python3 scripts/bench_brief.py
  done
fi
if has ask; then
  for a in ${DG_ASK:-bf16:1024 fp8:1024 q4:1024 bf16:4096 fp8:4096}; do
    prof=${a%%:*} rest=${a#*:}
    n=${rest%%:*} opts=""
    [[ $rest == *:* ]] && opts=${rest#*:}
    ids=$(python3 -c "import sys; n=int(sys.argv[1]); print(','.join(str(3 + (i * 7919 + 17) % 262000) for i in range(n)))" "$n")
    stamp "ask synthetic:26b-a4b:$prof, $n prompt tokens $opts"
    timeout 120 $dg ask -m "synthetic:26b-a4b:$prof" --backend cuda --prompt-ids "$ids" --max-new-tokens 1024 \
      --steps 16 --commit-trim-tau 0 ${opts//,/ } --json -q > /tmp/ask.json 2> /tmp/ask.err || { echo "ask failed: $(tail -2 /tmp/ask.err)"; continue; }
    python3 - "$prof" "$n" "$DG_GIT_SHA" "${opts//,/ }" <<'EOF' | tee -a "$OUT/ask.jsonl"
import json, sys
j = json.load(open("/tmp/ask.json"))
n = len(j["tokens"])
print(json.dumps({"event": "ask", "weights": sys.argv[1], "prompt_tokens": int(sys.argv[2]), "git_sha": sys.argv[3],
                  "new_tokens": n, "forwards": j["forwards"], "seconds": j["seconds"],
                  "committed_tok_per_s": n / j["seconds"], "first_block_s": j["first_block_seconds"],
                  "prompt_s": j["timing"]["prompt_seconds"], "first_block_step_ends_s": j["first_block_step_ends_seconds"],
                  "graphs": j["graphs"], "options": sys.argv[4], "device": "NVIDIA H200", "path": "diffgemma ask --backend cuda --steps 16 --commit-trim-tau 0 (contract sampler, graphs, device decisions)"}))
EOF
  done
fi
if has serve; then
  for cfg in ${DG_SERVE:-serve:}; do
    [[ $cfg == *:* ]] || { echo "DG_SERVE entry '$cfg' has no ':' (label:options)"; exit 2; }
    label=${cfg%%:*} opts=${cfg#*:}
    stamp "serve ${DG_STREAMS:-8,32} $label ($opts)"
    timeout 200 $dg bench --serve --streams "${DG_STREAMS:-8,32}" --steps 16 --prompt-tokens 1024 --serve-tokens 512 \
      ${opts//,/ } --label "speed-$label" --out "$OUT/bench.jsonl" 2>&1 | grep -E '"serve"|error' | cut -c1-300
  done
fi
if has topk; then
  # Top-k attention against dense at long context (docs/ATTENTION.md, "Top-k attention"): prefill and denoise step.
  for t in off dyn; do
    stamp "bench topk $t, prefill ${DG_TOPK_PREFILL:-65536}, contexts ${DG_TOPK_CONTEXTS:-65536,131072}"
    timeout 200 $dg bench --prefill "${DG_TOPK_PREFILL:-65536}" --context "${DG_TOPK_CONTEXTS:-65536,131072}" \
      --skip-generate --attention-topk "$t" --label "topk-$t" --out "$OUT/bench.jsonl" 2>&1 | python3 scripts/bench_brief.py
  done
fi
if has needle; then
  # The retrieval model's needle ladder on CUDA (docs/NEEDLE.md), every cell required, dense and with top-k
  # attention (DG_NEEDLE_TOPK, default dyn): needle.txt
  for t in off ${DG_NEEDLE_TOPK-dyn}; do
    stamp "needle ladder, attention-topk $t"
    echo "== attention-topk $t" >> "$OUT/needle.txt"
    timeout 200 python3 scripts/needle_ladder.py --diffgemma "$dg" -m models/dg-needle --digits 2 \
      --words 1000,4000,12000 --depths 0,0.25,0.5,0.75,1 --require-all -- --backend cuda \
      --attention-topk "$t" >> "$OUT/needle.txt" 2>&1
    echo "exit status $?" >> "$OUT/needle.txt"
  done
fi
if has reference; then
  # transformers on the same shapes in the same run (static cache + torch.compile; about 3 minutes of compilation)
  stamp "transformers compiled"
  PYTHONUNBUFFERED=1 timeout "${DG_REFERENCE_TIMEOUT:-400}" python3 scripts/bench_reference.py --mode compiled \
    --prefill 4096 --context 1024 --compiled-context 1024 --label reference-compiled --out "$OUT/bench.jsonl" 2>&1 \
    | grep -E '"event"|Error|error' | cut -c1-300
fi
if has reference-long; then
  # The long-context issue's side by side: diffgemma (dense attention, bf16, graphs) and then transformers in eager
  # mode (DG_REFERENCE_ATTN: sdpa and transformers' own attention) on the same shapes, DG_LONG_PREFILL prompt
  # lengths and DG_LONG_CONTEXTS cached contexts. Each transformers measurement is a process of its own under
  # DG_LONG_TIMEOUT seconds (default 120), so a slow one cannot starve the rest: one that runs out of memory is
  # recorded by bench_reference.py ("result": "out of memory"), one cut off by the timeout by the line below
  # ("result": "timeout").
  lp="${DG_LONG_PREFILL:-32768,131072}" lc="${DG_LONG_CONTEXTS:-32768,131072}" lt="${DG_LONG_TIMEOUT:-120}"
  stamp "diffgemma at long context: prefill $lp, contexts $lc"
  timeout 300 $dg bench --prefill "$lp" --context "$lc" --skip-generate --label long-dense-ref \
    --out "$OUT/bench.jsonl" 2>&1 | python3 scripts/bench_brief.py
  for attn in $(echo "${DG_REFERENCE_ATTN:-sdpa,eager}" | tr , ' '); do
    label=reference-long$([ "$attn" = sdpa ] || echo "-$attn")
    for what in $(echo "$lp" | tr , '\n' | sed 's/^/prefill:/') $(echo "$lc" | tr , '\n' | sed 's/^/denoise:/'); do
      kind=${what%%:*} n=${what#*:}
      stamp "transformers $attn $kind $n"
      if [ "$kind" = prefill ]; then shape=(--prefill "$n" --context ""); else shape=(--prefill "" --context "$n"); fi
      PYTHONUNBUFFERED=1 timeout "$lt" python3 scripts/bench_reference.py --mode eager --attn "$attn" "${shape[@]}" \
        --skip-generate --label reference-long --out "$OUT/bench.jsonl" 2>&1 | grep -E '"event"|Error' | cut -c1-300
      [ "${PIPESTATUS[0]}" = 124 ] && python3 -c "import json, sys; k, n, a, t, lab, sha = sys.argv[1:]
print(json.dumps(dict(event=k, result='timeout', timeout_s=int(t), attn=a, mode='eager', label=lab, git_sha=sha,
                      reference='transformers', **{'tokens' if k == 'prefill' else 'context': int(n)})))" \
        "$kind" "$n" "$attn" "$lt" "$label" "$DG_GIT_SHA" | tee -a "$OUT/bench.jsonl"
    done
  done
  python3 scripts/bench_ratios.py "$OUT/bench.jsonl" --engine-label long-dense-ref --markdown
fi
if has warmup; then
  # The first request's cost on `diffgemma serve` with and without --warmup: the full shape (DG_WARMUP_WEIGHTS,
  # default fp8; DG_WARMUP_OPTS, serve options comma-separated, e.g. --vocab-act,fp8) with the marker tokenizer (carry
  # .carry/marker-tokenizer.json.xz, scripts/make_marker_tokenizer.py), one client at a time, DG_WARMUP_PROMPT-token
  # prompts (default 1,024; the issue's first-block target is at 4,096), a one-block answer (256 tokens) at 16 steps,
  # the samplers of DG_WARMUP_SAMPLERS (default reference: every step runs on random weights); per server and sampler
  # two requests in turn, the first and a later one; DG_WARMUP_MODES: the --warmup settings (default "off on").
  tok=/tmp/marker-tokenizer.json
  [ -s $tok ] || xz -dc .carry/marker-tokenizer.json.xz > $tok || echo "no .carry/marker-tokenizer.json.xz"
  for w in ${DG_WARMUP_MODES:-off on}; do
    stamp "serve --warmup $w (synthetic:26b-a4b:${DG_WARMUP_WEIGHTS:-fp8})"
    wp=${DG_WARMUP_PROMPT:-1024}
    $dg serve -m "synthetic:26b-a4b:${DG_WARMUP_WEIGHTS:-fp8}" --backend cuda --tokenizer $tok \
      --ctx $((wp + 1024)) $(echo "${DG_WARMUP_OPTS:-}" | tr , ' ') --port 8093 --warmup $w \
      --log-dir /tmp/oplog-$w --log-without-content > /tmp/serve-$w.log 2>&1 &
    pid=$!
    for i in $(seq 180); do grep -qs "listening on" /tmp/serve-$w.log && break; sleep 1; done
    grep -E "warming|listening|error" /tmp/serve-$w.log | cut -c1-200
    for s in ${DG_WARMUP_SAMPLERS:-reference}; do
      for r in first later; do
        timeout 120 python3 scripts/serve_load.py --port 8093 --streams 1 --prompt-tokens $wp --max-tokens 256 \
          --steps 16 --sampler $s --label "warmup-$w-$s-$r-${wp}${DG_WARMUP_OPTS:+-$DG_WARMUP_OPTS}" \
          | tee -a "$OUT/warmup.jsonl"
      done
    done
    kill $pid; wait $pid 2>/dev/null
    cat /tmp/oplog-$w/ops-*.jsonl > "$OUT/oplog-$w.jsonl" 2>/dev/null  # the worker's timeline ("t" of each record)
  done
fi
if has smoke; then
  for p in $packs; do
    for s in contract reference; do
      n=${p%%@*} same=()
      [ -s "/tmp/smoke/cpu-$n-$s.json" ] && same=(--same-as "/tmp/smoke/cpu-$n-$s.json")
      timeout 120 $dg smoketest -m "$(pack_dir "$p")" $(pack_opts "$p") --backend cuda --sampler "$s" --json \
        "${same[@]}" > "/tmp/smoke/cuda-$n-$s.json" 2> "/tmp/smoke/cuda-$n-$s.err"
      echo "smoketest cuda $n $s: rc $? $(score "/tmp/smoke/cuda-$n-$s.json") $(tail -1 "/tmp/smoke/cuda-$n-$s.err" | cut -c1-150)"
    done
  done
  tar -czf "$OUT/smoke.tgz" -C /tmp smoke 2>/dev/null
fi
stamp "done"
