#!/usr/bin/env bash
# session 5, call 4: gemm v17's cp.async ring — tests, sanitizer, decode-shape bench
set -uo pipefail
T0=$SECONDS
source scripts/prebuilt/box.sh
export HK_CACHE_DIR=/tmp/hkc
S=$OUT/summary.txt
timeout 100 $B/tests/cpp/hk_tests --gtest_brief=1 --gtest_filter='gemm/v17*:Gemm*' > /tmp/tests.log 2>&1
echo "tests rc=$? $((SECONDS-T0))s" > $S; grep -E '^\[  (PASSED|FAILED|SKIPPED)' /tmp/tests.log | head -30 >> $S
timeout --signal=INT --kill-after=10 60 $B/hk bench gemm --variant 'v1[67]*' --shape 16x8192x8192 --shape 1x4096x4096 --shape 32x8192x8192 --shape 16x14336x4096 --shape 8x28672x4096 --dtype bf16,f16 --budget-ms 60 --json $OUT/bench-v17.json > /dev/null 2> /tmp/bench.err
echo "bench rc=$? $((SECONDS-T0))s" >> $S
grep -a -o '| [a-z_]* | .*' /tmp/bench.err | cut -d'|' -f2-6,10,11 >> $S
HK_SANITIZE_FILTER='gemm/v17*:-*Large*:*1048579*' HK_SANITIZE_TOOLS=memcheck,racecheck,synccheck,initcheck HK_SANITIZE_STRIDE=2 timeout 100 scripts/sanitize.sh $B /tmp/san > /dev/null 2>&1
echo "sanitize rc=$? $((SECONDS-T0))s" >> $S; cat /tmp/san/summary.txt >> $S 2>/dev/null
tar czf $OUT/logs.tgz /tmp/tests.log /tmp/san /tmp/bench.err 2>/dev/null
