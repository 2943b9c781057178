#!/usr/bin/env bash
# session 7, call 6: v18 runs v15's kernels for problems its schedule does not split. The gemm
# v15/v18 tests and the CPU-side gemm tests, memcheck of v18 (every 4th case), then v15 vs v18
# vs cuBLAS interleaved at the shapes v18 does not split (and 4096x14336x4096, which it does)
set -uo pipefail
T0=$SECONDS
source scripts/prebuilt/box.sh
export HK_CACHE_DIR=/tmp/hkc
S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
say() { echo "$* [$((SECONDS-T0))s]" >> $S; }
nvidia-smi --query-gpu=name,uuid,clocks.sm,temperature.gpu --format=csv > $S
timeout 100 $B/tests/cpp/hk_tests --gtest_brief=1 --gtest_filter='gemm/v15*:gemm/v18*:Gemm*:Registry*' > $L/tests.log 2>&1
say "tests rc=$?"; grep -E '^\[  (PASSED|FAILED|SKIPPED)' $L/tests.log | head -20 >> $S
HK_SANITIZE_TOOLS=memcheck HK_SANITIZE_FILTER='gemm/v18*' HK_SANITIZE_STRIDE=4 timeout 60 scripts/sanitize.sh $B $L/san > /dev/null 2>&1
say "memcheck rc=$?"; cat $L/san/summary.txt >> $S 2>/dev/null
timeout --signal=INT --kill-after=10 100 $B/hk bench gemm --variant 'v1[58]*' --shape 2048x2048x2048 --shape 4096x4096x4096 --shape 8192x8192x1024 --shape 4096x14336x4096 --dtype bf16 --budget-ms 100 --json $OUT/bench-gemm.json > $L/bench.md 2> $L/bench.err
say "bench rc=$?"
grep -E "gemm \|" $L/bench.md | awk -F'|' '{print $3,$4,$5,$6,$11}' >> $S
tar czf $OUT/logs.tgz -C /tmp logs 2>/dev/null
