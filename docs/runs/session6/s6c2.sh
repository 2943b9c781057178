#!/usr/bin/env bash
# session 6, call 2: gemm v18 (stream-K) + broadcast tickets + v17 plan: tests, sanitizer, benches
set -uo pipefail
T0=$SECONDS
tar xzf build/carry/prebuilt.tgz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:$PWD/build/carry/lib
export HK_CACHE_DIR=/tmp/hkc
B=build/ci; S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
say() { echo "$* [$((SECONDS-T0))s]" >> $S; }
nvidia-smi --query-gpu=name,uuid,clocks.sm,temperature.gpu,power.draw --format=csv > $S
timeout 200 $B/tests/cpp/hk_tests --gtest_brief=1 --gtest_filter='gemm/v1[5-8]*:gemm/baseline*:Gemm*:outer_add/*:outer_mul_relu/*:row_scale_relu/*' > $L/tests.log 2>&1
say "tests rc=$?"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED' $L/tests.log | head -30 >> $S
timeout --signal=INT --kill-after=10 100 $B/hk bench gemm --variant 'v1[58]*' --dtype bf16,f16 --budget-ms 120 --json $L/bench-gemm.json > /dev/null 2> $L/bench-gemm.err
say "gemm v15/v18 rc=$?"; grep -a -o '| gemm | .*' $L/bench-gemm.err | cut -d'|' -f3-6,11 >> $S
timeout --signal=INT --kill-after=10 100 $B/hk bench outer_add outer_mul_relu row_scale_relu --variant 'v0[23]*' --shape 16384x8192 --shape 4x67108864 --dtype bf16,f32 --budget-ms 30 --json $L/bench-bcast.json > /dev/null 2> $L/bench-bcast.err
say "bcast rc=$?"; grep -a -o '| [a-z_]* | v0.*' $L/bench-bcast.err | cut -d'|' -f2-5,9 >> $S
timeout --signal=INT --kill-after=10 40 $B/hk bench gemm --variant 'v1[67]*' --shape 16x8192x8192 --shape 1x4096x4096 --shape 32x8192x8192 --shape 16x14336x4096 --shape 8x28672x4096 --dtype bf16 --budget-ms 40 --json $L/bench-v17.json > /dev/null 2> $L/bench-v17.err
say "v17 rc=$?"; grep -a -o '| gemm | .*' $L/bench-v17.err | cut -d'|' -f3-6,11 >> $S
HK_SANITIZE_FILTER='gemm/v18*:outer_add/v02*:outer_mul_relu/v02*:row_scale_relu/v02*:-*Large*' HK_SANITIZE_TOOLS=memcheck,racecheck,synccheck,initcheck HK_SANITIZE_STRIDE=2 timeout 150 scripts/sanitize.sh $B /tmp/san > $L/san.out 2>&1
say "sanitize rc=$?"; cat /tmp/san/summary.txt >> $S 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp logs san 2>/dev/null
cp $L/*.json $OUT/ 2>/dev/null
