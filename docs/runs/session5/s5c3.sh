#!/usr/bin/env bash
# session 5, call 3: softmax v06, gemm v17's double-buffered A, the outer ops' y loads — tests, sanitizer, bench rows
set -uo pipefail
T0=$SECONDS
source scripts/prebuilt/box.sh
export HK_CACHE_DIR=/tmp/hkc
S=$OUT/summary.txt
timeout 150 $B/tests/cpp/hk_tests --gtest_brief=1 --gtest_filter='softmax/*:Softmax*:gemm/v17*:outer_add/*:outer_mul_relu/*:row_scale_relu/*:rmsnorm/v04*:weighted_sum/v02*' > /tmp/tests.log 2>&1
echo "tests rc=$? $((SECONDS-T0))s" > $S; grep -E '^\[  (PASSED|FAILED|SKIPPED)' /tmp/tests.log | head -30 >> $S
HK_SANITIZE_FILTER='softmax/v06*:gemm/v17*:rmsnorm/v04*:weighted_sum/v02*:outer_add/v02*:-*Large*:*1048579*' HK_SANITIZE_TOOLS=memcheck,racecheck,synccheck HK_SANITIZE_STRIDE=2 timeout 120 scripts/sanitize.sh $B /tmp/san > /dev/null 2>&1
echo "sanitize rc=$? $((SECONDS-T0))s" >> $S; cat /tmp/san/summary.txt >> $S 2>/dev/null
{ timeout --signal=INT --kill-after=10 60 $B/hk bench gemm --variant 'v1[67]*' --shape 16x8192x8192 --shape 1x4096x4096 --shape 32x8192x8192 --shape 16x14336x4096 --shape 8x28672x4096 --dtype bf16 --budget-ms 60 --json $OUT/bench-v17.json
  timeout --signal=INT --kill-after=10 80 $B/hk bench softmax --variant 'v0[46]*' --shape 4x67108864 --dtype bf16,f32 --budget-ms 40 --json $OUT/bench-sm.json
  timeout --signal=INT --kill-after=10 70 $B/hk bench outer_add outer_mul_relu --variant 'v02*' --shape 4x67108864 --shape 16384x8192 --dtype bf16,f32 --budget-ms 40 --json $OUT/bench-outer.json
} > /dev/null 2> /tmp/bench.err
echo "bench rc=$? $((SECONDS-T0))s" >> $S
grep -a -o '| [a-z_]* | .*' /tmp/bench.err | cut -d'|' -f2-6,10,11 >> $S
tar czf $OUT/logs.tgz /tmp/tests.log /tmp/san /tmp/bench.err 2>/dev/null
