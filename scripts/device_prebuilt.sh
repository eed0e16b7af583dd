# Sourced by the device scripts (device_speed.sh, device_profile.sh) when DG_PREBUILT is set: unpacks the binaries
# scripts/device_pack.sh made on the development machine (carry .carry/prebuilt.tar.xz), points the loader at their
# libraries and links the source path compiled into the tests (DG_PREBUILT) to this tree, where their fixtures are.
# Sets dg and tests_bin, and dg_base where the tarball holds a second diffgemma (device_pack.sh's DG_PACK_BASE). Sourcing it again is harmless: the unpacking runs once per tarball (its checksum is the
# marker), so binaries and libraries already running (tests started by an earlier script of the same call) are not
# overwritten under them, and a warm machine given a new tarball by a later call unpacks that one.
[ -e .carry/prebuilt.tar.xz ] || { echo "no .carry/prebuilt.tar.xz"; exit 1; }
prebuilt_sum=$(cksum < .carry/prebuilt.tar.xz)
(  # one unpacking at a time: two scripts of one call (two training runs side by side) may source this together
  if command -v flock > /dev/null; then flock 9; fi
  if [ "$(cat /tmp/prebuilt/.unpacked 2>/dev/null)" != "$prebuilt_sum" ]; then
    rm -rf /tmp/prebuilt && mkdir -p build/cuda-ci/tests .carry/lib /tmp/prebuilt
    tar -C /tmp/prebuilt -xJf .carry/prebuilt.tar.xz || { echo "cannot unpack .carry/prebuilt.tar.xz"; exit 1; }
    cp /tmp/prebuilt/diffgemma build/cuda-ci/ || { echo "no diffgemma in .carry/prebuilt.tar.xz"; exit 1; }
    rm -f build/cuda-ci/tests/dg_cuda_tests build/cuda-ci/dg-base  # an earlier tarball's must not run as this one's
    [ -e /tmp/prebuilt/dg-base ] && cp /tmp/prebuilt/dg-base build/cuda-ci/
    [ -e /tmp/prebuilt/dg_cuda_tests ] && cp /tmp/prebuilt/dg_cuda_tests build/cuda-ci/tests/  # DG_PACK_TESTS=0: none
    for probe in /tmp/prebuilt/dg_*probe; do [ -e "$probe" ] && cp "$probe" build/cuda-ci/; done
    echo "$prebuilt_sum" > /tmp/prebuilt/.unpacked
  fi
  # every call: a call's carry replaces .carry, the libraries with it, on a machine that unpacked the tarball before
  mkdir -p .carry/lib && cp /tmp/prebuilt/lib/* .carry/lib/
) 9> /tmp/prebuilt.lock || exit 1
export LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}"
[ -e "$DG_PREBUILT" ] || { mkdir -p "$(dirname "$DG_PREBUILT")" && ln -s "$PWD" "$DG_PREBUILT"; }
dg=build/cuda-ci/diffgemma tests_bin=build/cuda-ci/tests/dg_cuda_tests dg_base=""
[ -e build/cuda-ci/dg-base ] && dg_base=build/cuda-ci/dg-base
# The commit the binaries were packed from, for bench's records (its --git-sha reads DG_GIT_SHA; the binary's own
# stamp is the commit its build directory was configured at).
export DG_GIT_SHA="${DG_GIT_SHA:-$(cat .carry/git_sha 2>/dev/null || echo unknown)}"
$dg --version > /dev/null || { echo "the prebuilt diffgemma does not run here"; exit 1; }
