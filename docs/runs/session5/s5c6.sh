#!/usr/bin/env bash
# session 5, call 6 (final): every C++ test, the sanitizer sweep (every 10th case), the Python tests, then
# the memory-bound ladders at the shapes and the GEMM v05/v06 rows
set -uo pipefail
T0=$SECONDS
HK_DEADLINE_S=300 HK_SANITIZE_STRIDE=10 scripts/gpu-check.sh --prebuilt --only tests,sanitize,python > /tmp/gc.log 2>&1
echo "gpu-check rc=$? $((SECONDS-T0))s" >> build/gpu-check/summary.txt
B=build/ci
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:$PWD/build/carry/lib
export HK_CACHE_DIR=/tmp/hkc
V='v0[2-7]*'
left=$((420 - (SECONDS-T0)))
timeout --signal=INT --kill-after=15 $left $B/hk bench softmax rmsnorm --variant "$V" --shape 16384x8192 --shape 4x67108864 --dtype bf16,f32 --budget-ms 30 --json $OUT/bench-a.json > /dev/null 2> /tmp/bench-a.err
echo "bench a rc=$? $((SECONDS-T0))s" >> build/gpu-check/summary.txt
left=$((545 - (SECONDS-T0)))
timeout --signal=INT --kill-after=15 $left $B/hk bench weighted_sum outer_add outer_mul_relu row_scale_relu row_sum add_scalar --variant "$V" --shape 16384x8192 --shape 4x67108864 --dtype bf16,f32 --budget-ms 30 --json $OUT/bench-b.json > /dev/null 2> /tmp/bench-b.err
echo "bench b rc=$? $((SECONDS-T0))s" >> build/gpu-check/summary.txt
timeout --signal=INT --kill-after=5 20 $B/hk bench gemm --variant 'v0[56]*' --shape 2048x2048x2048 --dtype bf16 --budget-ms 100 --json $OUT/bench-gemm56.json > /dev/null 2> /tmp/bench-g.err
echo "bench gemm rc=$? $((SECONDS-T0))s" >> build/gpu-check/summary.txt
cp build/gpu-check/summary.txt $OUT/; cp /tmp/bench-*.err build/gpu-check/ 2>/dev/null; tar czf $OUT/logs.tgz -C build/gpu-check .
