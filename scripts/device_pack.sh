#!/usr/bin/env bash
# Packs the cuda-ci preset's diffgemma and dg_cuda_tests (stripped) with the shared libraries they need beyond glibc,
# libstdc++ and CUDA into .carry/prebuilt.tar.xz (about 8 MB with xz -9e; -6 made 11 MB, which with the tracked
# tree and the marker tokenizer passed the 64 MiB a device call accepts), so a device run can skip its build:
#   scripts/device_pack.sh && device run with carry [".carry/prebuilt.tar.xz", ".carry/git_sha"] and
#   DG_PREBUILT=$PWD scripts/device_speed.sh
# DG_PACK_TESTS=0 leaves dg_cuda_tests out (about 4 MB less, for calls that run diffgemma alone).
# DG_PACK_BASE=/path/to/another/diffgemma adds that binary as dg-base (device_prebuilt.sh sets dg_base to it), for an
# A/B of two builds in one call: xz keeps a second, near-identical diffgemma in about 1.4 MB (12-08: 9.1 -> 10.5 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
b=build/cuda-ci
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" .carry
strip -o "$stage/diffgemma" "$b/diffgemma"
bins=("$b/diffgemma")
if [ "${DG_PACK_TESTS:-1}" != 0 ]; then
  strip -o "$stage/dg_cuda_tests" "$b/tests/dg_cuda_tests"
  bins+=("$b/tests/dg_cuda_tests")
fi
if [ -n "${DG_PACK_BASE:-}" ]; then
  strip -o "$stage/dg-base" "$DG_PACK_BASE"
fi
for probe in dg_gemm_probe dg_gemm_lt_probe dg_gemm_fp8_probe dg_read_probe; do  # diagnosis tools, when built
  [ -x "$b/$probe" ] && strip -o "$stage/$probe" "$b/$probe"
done
ldd "${bins[@]}" | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcudart|libcublas|libcublasLt)\.so' |
  xargs -r cp -L -t "$stage/lib"
tar -C "$stage" -cf - . | xz -T2 -9e > .carry/prebuilt.tar.xz
git describe --always --dirty --exclude='*' > .carry/git_sha  # -dirty: built from uncommitted changes
echo ".carry/prebuilt.tar.xz: $(du -h .carry/prebuilt.tar.xz | cut -f1) ($(cat .carry/git_sha))"
