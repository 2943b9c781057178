#!/usr/bin/env bash
# session 7, call 2 (same binaries as call 1): the Python tests against torch, then every
# family's whole ladder (all rungs and peers but gemm) at the shapes, bf16 and f32
set -uo pipefail
T0=$SECONDS
HK_DEADLINE_S=575 HK_BUDGET_MS=30 HK_LADDER_SHAPES="16384x8192 4x67108864" HK_LADDER_DTYPES=bf16,f32 \
  scripts/gpu-check.sh --prebuilt --only python,ladders > /tmp/gc.log 2>&1
echo "gpu-check rc=$? [$((SECONDS-T0))s]" >> $OUT/summary.txt
