#!/usr/bin/env bash
# Packs this machine's `ci` build for a GPU machine, so the GPU machine spends no time building
# (a fresh H200 machine with 16 cores takes ~90 s to build the library). Writes
# build/carry/prebuilt.txz (hk, hk_tests, libhopperkit.so, the generated version header; xz: 30 MB
# where gzip made 60) and
# build/carry/lib/ (the libfmt this build linked). Copy build/carry/ to the GPU machine with the
# working tree and run `scripts/gpu-check.sh --prebuilt` there (or `source scripts/prebuilt/box.sh`).
# The binaries are built on Debian 12 (gcc 12, glibc 2.36) and run on newer distributions.
# Usage: scripts/prebuilt/pack.sh   (configures and builds the ci preset first: the configure
#        step stamps the current commit into hk_version.hpp)
set -euo pipefail
cd "$(dirname "$0")/../.."
b=build/ci
cmake --preset ci >/dev/null
cmake --build --preset ci -j "${HK_JOBS:-2}" >/dev/null
for f in $b/hk $b/tests/cpp/hk_tests $b/src/libhopperkit.so $b/generated/hk_version.hpp; do
  [[ -f $f ]] || { echo "pack.sh: $f is missing: build the ci preset first" >&2; exit 1; }
done
mkdir -p build/carry/lib
cp -L "$(ldd $b/src/libhopperkit.so | awk '/libfmt/ {print $3}')" build/carry/lib/
rm -f build/carry/prebuilt.tgz
XZ_OPT='-6 -T2' tar cJf build/carry/prebuilt.txz $b/hk $b/tests/cpp/hk_tests $b/src/libhopperkit.so $b/generated/hk_version.hpp
echo "build/carry: $(du -sh build/carry | cut -f1) ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', uncommitted changes'))"
