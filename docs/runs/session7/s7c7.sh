#!/usr/bin/env bash
# session 7, call 7 (same binaries as call 6, machine warm): v15 / v17 / v18 vs cuBLAS in f16 and
# bf16 at the shapes v18 does not split, and the decode shape
source scripts/prebuilt/box.sh >/dev/null 2>&1; export HK_CACHE_DIR=/tmp/hkc
timeout 100 $B/hk bench gemm --variant 'v1[5789]*' --shape 2048x2048x2048 --shape 4096x4096x4096 \
  --shape 8192x8192x1024 --shape 16x8192x8192 --dtype f16,bf16 --budget-ms 60 --json $OUT/bench-gemm2.json 2>/dev/null |
  grep -E "gemm \|" | awk -F'|' '{print $3,$4,$5,$6,$11}'
