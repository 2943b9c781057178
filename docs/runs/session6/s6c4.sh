#!/usr/bin/env bash
# session 6, call 4 (final code): every memory-bound family's whole ladder at the shapes, bf16 and f32
set -uo pipefail
HK_DEADLINE_S=560 HK_LADDER_SHAPES="16384x8192 4x67108864" HK_LADDER_DTYPES=bf16,f32 HK_BUDGET_MS=30 scripts/gpu-check.sh --prebuilt --only ladders > /tmp/gc.log 2>&1
echo "gpu-check rc=$?" >> $OUT/summary.txt
