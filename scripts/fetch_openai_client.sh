#!/usr/bin/env bash
# Fetches the official `openai` npm client used by the server's client tests (tests/server/openai_client.sh):
# `npm pack` of a pinned version (no dependencies), checked against its sha256, extracted to
# .cache/test-data/node_modules/openai (not committed). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
version="5.23.2"
out=".cache/test-data/node_modules/openai"
expected_sha="$(cat scripts/openai_client.sha256)"  # of the npm tarball (immutable per version)

if [ -f "$out/package.json" ] && grep -q "\"version\": \"$version\"" "$out/package.json"; then
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_openai_client.sh: npm is required (scripts/setup.sh --test-data installs it)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "openai@$version" >/dev/null)
actual_sha="$(sha256sum "$work"/*.tgz | cut -d' ' -f1)"
if [ "$actual_sha" != "$expected_sha" ]; then
  echo "fetch_openai_client.sh: npm tarball has sha256 $actual_sha, expected $expected_sha" >&2
  exit 1
fi
(cd "$work" && tar xzf ./*.tgz)
rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$work/package" "$out"
echo "fetch_openai_client.sh: wrote $out" >&2
