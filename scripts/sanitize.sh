#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck, initcheck and synccheck over every registered variant on
# small shapes (the registry test sweep, minus shapes with more than ~2^21 elements and the
# >2^31 test). Usage: scripts/sanitize.sh BUILD_DIR [LOG_DIR]
#   HK_SANITIZE_TOOLS   tools to run (default memcheck,racecheck,initcheck,synccheck)
#   HK_SANITIZE_FILTER  gtest filter (default: every registry case but the large shapes); gtest
#                       patterns know * and ? only: 'attention/v0[57]*' matches nothing, write
#                       'attention/v05*:attention/v07*'
#   HK_SANITIZE_STRIDE  run every Nth test problem of each variant (default 1: all); every
#                       variant keeps its first, so a stride still covers every kernel
#   HK_SANITIZE_JOBS    gtest shards per tool (default 4); all tools and shards run at once
# Where a command has a time limit, split the sweep by tool or by family
# (e.g. HK_SANITIZE_FILTER='gemm/*') or use a stride.
set -uo pipefail
build=${1:?usage: scripts/sanitize.sh BUILD_DIR [LOG_DIR]}
logs=${2:-$build/sanitize}
mkdir -p "$logs"
bin="$build/tests/cpp/hk_tests"
# Small shapes only: the variant sweep, without the large problems, the past-2^31 test and the
# CUDA-graph replays (the same kernels again).
filter=${HK_SANITIZE_FILTER:-'*/*:-*Large*:*1048579*:graph/*'}
status=0
# The stride is applied where the tests are registered (HK_TEST_STRIDE, tests/cpp/test_main.cpp):
# a filter naming the cases outgrew the 128 KiB one argument may hold.
export HK_TEST_STRIDE=${HK_SANITIZE_STRIDE:-1}
# Every run writes its logs afresh (a rerun with fewer shards would otherwise read stale ones).
rm -f "$logs"/*.log "$logs/summary.txt"
# The cuBLAS peers (gemm/baseline_cublas, gemm/baseline_cublaslt, weighted_sum/baseline_cublas)
# run NVIDIA's kernels, not ours: initcheck does not see cuBLAS's own kernels write the workspace
# that its split-K reduction (and baseline_cublas's epilogue) then read (H200, 2026-11-29: 634k
# "uninitialized" reads, later 639 in cublasLt::splitKreduce_kernel, on cases whose every output
# matched the fp64 reference), and racecheck reports shared-memory hazards inside cuBLAS's nvjet
# split-K kernels (2 reports, 120 hazards). Both tools skip them; memcheck and synccheck run them.
# gemm_fp8/v04_aligned_pack hands its copies to cuBLASLt, and racecheck reports the same kind of
# hazards inside Lt's FP8 kernel (nvjet_sm90_qqsss_128x128_128x6_1x1_h_bz_coopA_algo2_ovscale_TNT:
# 2 reports, 936 hazards, H200, CUDA 13.0, 2026-12-03, on cases whose outputs matched the fp64
# reference): racecheck skips that rung too. Its own kernel (the copy) uses no shared memory, and
# the wgmma rungs it may hand a copy to are checked as rungs of their own. (Leaving the nvjet
# kernels out by name, --kernel-name-exclude kns=nvjet, made racecheck fail with "The Sanitizer
# failed to handle a hardware exception" in the same cases.)
peer_filter=$filter
# gtest: "POSITIVE:-NEGATIVE"; a filter that is only negative starts with '-'
if [[ $filter == *:-* || $filter == -* ]]; then peer_filter+=':*/baseline_cublas*'; else peer_filter+=':-*/baseline_cublas*'; fi
# initcheck does not see TMA's bulk tensor stores (cp.async.bulk.tensor shared -> global) as
# writes: gemm/v19_aligned_pack copies a C that the TMA-store epilogue wrote into its scratch back
# to the caller, and initcheck flagged every element read (88,779 reads in 36 cases, H200,
# CUDA 13.0, 2026-12-02) of outputs that matched the fp64 reference in every case. initcheck skips
# that rung; memcheck, racecheck and synccheck run it.
# conv2d/v05_im2col_gemm's GEMM goes through v19 whenever its patch matrix rows are not 16-byte
# multiples (the same copies: 600 reads reported, H200, 2026-12-05), and initcheck skips it
# too. conv2d/baseline_cudnn's graph-API engines read their workspace in cuDNN's own
# nhwcToNchwKernel after cuDNN's kernels wrote it (200 reads reported, on cases that matched the fp64
# reference): NVIDIA's kernels, as the cuBLAS peers, so initcheck skips it as well.
init_filter=$peer_filter:*/v19_aligned_pack*:conv2d/v05_im2col_gemm*:conv2d/baseline_cudnn*
# gemm/v19_aligned_pack does the same since its copies go back through the gemm dispatch, which
# sends products with fewer output tiles than v18 has clusters (every sanitizer shape) to cuBLAS
# or cuBLASLt: its own kernels are the copies (no shared memory), and v17 / v18, the other routes
# it may take, are checked as rungs of their own.
race_filter=$peer_filter:gemm_fp8/v04_aligned_pack*:gemm/v19_aligned_pack*
IFS=, read -ra tools <<<"${HK_SANITIZE_TOOLS:-memcheck,racecheck,initcheck,synccheck}"
# Every tool runs at once, each split into HK_SANITIZE_JOBS gtest shards: the instrumented
# processes are bound by host work, so 4 tools x 4 shards on a 16-core machine take about a
# quarter of the sequential time, sharing the one GPU.
jobs=${HK_SANITIZE_JOBS:-4}
pids=()
for tool in "${tools[@]}"; do
  extra=()
  [[ $tool == memcheck ]] && extra=(--leak-check full)
  tool_filter=$filter
  [[ $tool == racecheck ]] && tool_filter=$race_filter
  [[ $tool == initcheck ]] && tool_filter=$init_filter
  # initcheck: cudaMallocAsync pools report false positives on reuse; the harness poisons every
  # output, so uninitialised reads of *outputs* are impossible and inputs are always uploaded.
  for ((shard = 0; shard < jobs; shard++)); do
    # each shard in a session of its own, so stopping it stops the instrumented test process too
    GTEST_TOTAL_SHARDS=$jobs GTEST_SHARD_INDEX=$shard setsid \
      compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 86 --print-limit 200 \
      "$bin" --gtest_filter="$tool_filter" --gtest_brief=1 >"$logs/$tool.$shard.log" 2>&1 &
    pids+=("$tool:$shard:$!")
  done
done
# Stopped (a deadline's INT, a TERM): stop the shards too (background jobs of a script ignore
# INT), then summarise what they wrote. A shard is its process group: compute-sanitizer's target
# process outlived a TERM sent to compute-sanitizer alone and kept the GPU busy for whatever ran
# next (benchmarks after a stopped sweep showed 65% spread).
stop_shards() {
  for entry in "${pids[@]}"; do kill -TERM -- "-${entry##*:}" 2>/dev/null; done
  for _ in $(seq 20); do
    alive=0
    for entry in "${pids[@]}"; do kill -0 -- "-${entry##*:}" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.5
  done
  for entry in "${pids[@]}"; do kill -KILL -- "-${entry##*:}" 2>/dev/null; done
  status=1
}
trap stop_shards INT TERM
declare -A rcs
for entry in "${pids[@]}"; do
  IFS=: read -r tool shard pid <<<"$entry"
  wait "$pid"; rc=$?
  [[ $rc -ne 0 ]] && rcs[$tool]=$rc
done
for tool in "${tools[@]}"; do
  cat "$logs/$tool".*.log >"$logs/$tool.log"
  rc=${rcs[$tool]:-0}
  errors=$(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/$tool".*.log | grep -oE "SUMMARY: [0-9]+" |
    awk '{n += $2} END {print n + 0}')
  passed=$(grep -hE "^\[  PASSED  \] [0-9]+" "$logs/$tool".*.log | awk '{n += $4} END {print n + 0}')
  failed=$(grep -hE "^\[  FAILED  \] [0-9]+ tests?," "$logs/$tool".*.log | awk '{n += $4} END {print n + 0}')
  summaries=$(grep -hcE "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/$tool".*.log | awk '{n += $1} END {print n + 0}')
  printf '%-10s rc=%-3s %s errors/hazards in %s of %s shard summaries; %s tests passed, %s failed\n' \
    "$tool" "$rc" "$errors" "$summaries" "$jobs" "$passed" "$failed" | tee -a "$logs/summary.txt"
  # where the (printed) errors are: the kernel or allocation site of each, counted
  grep -A1 -E "^========= (Invalid|Uninitialized|Leaked|Race|Barrier|Warning|Error)" "$logs/$tool.log" |
    grep -oE "^=========     at [^(]+|^=========     Saved host backtrace up to driver entry point at allocation" |
    sed 's/^=========     //' | sort | uniq -c | sort -rn | head -8 | sed 's/^/             /' | tee -a "$logs/summary.txt"
  [[ $rc -ne 0 ]] && status=1
done
exit $status
