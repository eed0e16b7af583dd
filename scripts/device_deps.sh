#!/usr/bin/env bash
# Copies the header-only dependencies (and xxhash.h, whose implementation the build then inlines) and googletest's
# sources from this machine's Debian packages into .carry/deps, for building on the GPU machine (which has CUDA,
# CMake and a compiler but not these packages):
#   device run, carry .carry/deps:  cmake ... -DDG_DEPS_DIR=$PWD/.carry/deps -DDG_LINE_EDITING=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
out=.carry/deps
rm -rf "$out" && mkdir -p "$out/include"
cp -r /usr/include/nlohmann /usr/include/CLI /usr/include/fmt /usr/include/xxhash.h "$out/include/"
cp -r /usr/src/googletest "$out/googletest"
du -sh "$out"
