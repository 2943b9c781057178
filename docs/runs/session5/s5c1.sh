#!/usr/bin/env bash
# session 5, call 1: verify everything landed after c630e88 — tests, sanitizer, python, then the rows the fixes change
set -uo pipefail
T0=$SECONDS
HK_DEADLINE_S=400 HK_SANITIZE_STRIDE=10 scripts/gpu-check.sh --prebuilt --only tests,sanitize,python > /tmp/gc.log 2>&1
echo "gpu-check rc=$? $((SECONDS-T0))s" >> build/gpu-check/summary.txt
B=build/ci
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:$PWD/build/carry/lib
export HK_CACHE_DIR=/tmp/hkc
left=$((540 - (SECONDS-T0)))
timeout --signal=INT --kill-after=20 $left $B/hk bench row_scale_relu weighted_sum rmsnorm outer_add outer_mul_relu --variant 'v02*,v03*,v04*,v06*,v07*' --shape 16384x8192 --shape 4x67108864 --dtype bf16,f32 --budget-ms 60 --json $OUT/bench-fix.json > /dev/null 2> $OUT/bench-fix.err
echo "bench rc=$? $((SECONDS-T0))s" >> build/gpu-check/summary.txt
cp build/gpu-check/summary.txt $OUT/; tar czf $OUT/logs.tgz -C build/gpu-check . ; cp /tmp/gc.log $OUT/
