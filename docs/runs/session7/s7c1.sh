#!/usr/bin/env bash
# session 7, call 1: every C++ test, the sanitizer sweep (4 tools, every 10th case; block_reduce
# without CUB), the gemm stage (the one-run GEMM ladder); then ncu of gemm v18 and cuBLAS at
# 8192x8192x1024 and of outer_add v02 at 4x2^26 f32 with the time left
set -uo pipefail
T0=$SECONDS
HK_DEADLINE_S=470 HK_SANITIZE_STRIDE=10 HK_BUDGET_MS=120 scripts/gpu-check.sh --prebuilt --only tests,sanitize,gemm > /tmp/gc.log 2>&1
echo "gpu-check rc=$? [$((SECONDS-T0))s]" >> $OUT/summary.txt
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:$PWD/build/carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HK_CACHE_DIR=/tmp/hkc
B=build/ci
ncu_run() {  # name, timeout cap, hk profile args...
  local name=$1 cap=$2; shift 2
  local left=$((585 - (SECONDS-T0))); [[ $left -gt $cap ]] && left=$cap
  [[ $left -lt 15 ]] && { echo "ncu $name skipped [$((SECONDS-T0))s]" >> $OUT/summary.txt; return; }
  timeout $left $B/hk profile --ncu "$@" > $OUT/ncu-$name.txt 2>&1
  echo "ncu $name rc=$? [$((SECONDS-T0))s]" >> $OUT/summary.txt
}
ncu_run v18-8192x8192x1024 60 gemm --variant v18_stream_k_tail --shape 8192x8192x1024 --dtype bf16
ncu_run cublas-8192x8192x1024 60 gemm --variant baseline_cublas --shape 8192x8192x1024 --dtype bf16
ncu_run outer-f32 60 outer_add --variant v02_vectorized --shape 4x67108864 --dtype f32
ncu_run v18-4096 45 gemm --variant v18_stream_k_tail --shape 4096x4096x4096 --dtype bf16
ncu_run cublas-4096 45 gemm --variant baseline_cublas --shape 4096x4096x4096 --dtype bf16
