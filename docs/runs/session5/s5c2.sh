#!/usr/bin/env bash
# session 5, call 2: the few-long-rows changes at 4x2^26 (+ their tests), then the GEMM ladder stage
set -uo pipefail
T0=$SECONDS
source scripts/prebuilt/box.sh
export HK_CACHE_DIR=/tmp/hkc
timeout 90 $B/tests/cpp/hk_tests --gtest_brief=1 --gtest_filter='rmsnorm/v04*:weighted_sum/v02*:outer_add/*:outer_mul_relu/*:row_scale_relu/v02*' > /tmp/tests-fix.log 2>&1
echo "tests rc=$? $((SECONDS-T0))s" > $OUT/pre.txt; grep -E '^\[  (PASSED|FAILED|SKIPPED)' /tmp/tests-fix.log | head -30 >> $OUT/pre.txt
timeout --signal=INT --kill-after=15 100 $B/hk bench rmsnorm weighted_sum outer_add --variant 'v04*,v02*' --shape 4x67108864 --dtype bf16,f32 --budget-ms 40 --json $OUT/bench-fix.json > /dev/null 2> $OUT/bench-fix.err
echo "bench rc=$? $((SECONDS-T0))s" >> $OUT/pre.txt
HK_DEADLINE_S=$((560 - (SECONDS-T0))) HK_BUDGET_MS=120 scripts/gpu-check.sh --prebuilt --only gemm > /tmp/gc.log 2>&1
echo "gemm rc=$? $((SECONDS-T0))s" >> $OUT/pre.txt
