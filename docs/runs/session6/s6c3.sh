#!/usr/bin/env bash
# session 6, call 3 (final code): every C++ test, the sanitizer sweep (every 10th case), the Python tests, the gemm stage
set -uo pipefail
HK_DEADLINE_S=560 HK_SANITIZE_STRIDE=10 HK_BUDGET_MS=120 scripts/gpu-check.sh --prebuilt --only tests,sanitize,python,gemm > /tmp/gc.log 2>&1
echo "gpu-check rc=$?" >> $OUT/summary.txt
