#!/usr/bin/env bash
# session 7, call 4 (commit fdee2b9: the outer ops load the next item's x before storing this
# one's rows): the broadcast families' GPU tests, the four sanitizers over them (every 4th case),
# and their ladders at the shapes, bf16 and f32
set -uo pipefail
T0=$SECONDS
source scripts/prebuilt/box.sh
export HK_CACHE_DIR=/tmp/hkc
S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
say() { echo "$* [$((SECONDS-T0))s]" >> $S; }
nvidia-smi --query-gpu=name,uuid,clocks.sm,temperature.gpu --format=csv > $S
F='outer_add/*:outer_mul_relu/*:row_scale_relu/*:add_scalar/*:Broadcast*:Ticket*'
timeout 120 $B/tests/cpp/hk_tests --gtest_brief=1 --gtest_filter="$F" > $L/tests.log 2>&1
say "tests rc=$?"; grep -E '^\[  (PASSED|FAILED|SKIPPED)' $L/tests.log | head -20 >> $S
HK_SANITIZE_FILTER="outer_add/*:outer_mul_relu/*:row_scale_relu/*:add_scalar/*:-*Large*:*1048579*" HK_SANITIZE_STRIDE=4 \
  timeout 200 scripts/sanitize.sh $B $L/san > /dev/null 2>&1
say "sanitize rc=$?"; cat $L/san/summary.txt >> $S 2>/dev/null
timeout --signal=INT --kill-after=10 240 $B/hk bench outer_add outer_mul_relu row_scale_relu --shape 16384x8192 --shape 4x67108864 --dtype bf16,f32 --budget-ms 30 --json $OUT/bench-broadcast.json > $L/bench.md 2> $L/bench.err
say "bench rc=$?"
grep -E "v0[23]" $L/bench.md | awk -F'|' '{print $2,$3,$4,$5,$9,$11}' >> $S
tar czf $OUT/logs.tgz -C /tmp logs 2>/dev/null
