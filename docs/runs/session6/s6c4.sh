#!/usr/bin/env bash
# session 6, call 4 (final code): every C++ test; memcheck and synccheck over every 10th case (after the
# v05/v06 partial-chunk and block_reduce fixes; racecheck/initcheck passed all 233 cases in call 3); then
# the memory-bound rungs (v02-v07 + baselines) at the shapes, bf16 and f32, until the time runs out
set -uo pipefail
T0=$SECONDS
source scripts/prebuilt/box.sh
export HK_CACHE_DIR=/tmp/hkc
S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
say() { echo "$* [$((SECONDS-T0))s]" >> $S; }
nvidia-smi --query-gpu=name,uuid,clocks.sm,temperature.gpu --format=csv > $S
timeout 150 $B/tests/cpp/hk_tests --gtest_brief=1 > $L/tests.log 2>&1
say "tests rc=$?"; grep -E '^\[  (PASSED|FAILED|SKIPPED)' $L/tests.log | head -20 >> $S
HK_SANITIZE_TOOLS=memcheck,synccheck HK_SANITIZE_STRIDE=10 timeout 230 scripts/sanitize.sh $B $L/san > /dev/null 2>&1
say "sanitize rc=$?"; cat $L/san/summary.txt >> $S 2>/dev/null
left=$((575 - (SECONDS-T0)))
timeout --signal=INT --kill-after=10 $left $B/hk bench softmax rmsnorm weighted_sum outer_add outer_mul_relu row_scale_relu row_sum add_scalar gelu --variant 'v0[2-7]*' --shape 16384x8192 --shape 4x67108864 --dtype bf16,f32 --budget-ms 30 --json $OUT/bench-ladders.json > /dev/null 2> $L/bench.err
say "ladders rc=$?"
tar czf $OUT/logs.tgz -C /tmp logs 2>/dev/null
