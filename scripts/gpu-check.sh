#!/usr/bin/env bash
# The whole check for a machine with a Hopper GPU: build with every core, run every GPU test, the
# sanitizer sweep, the Python tests (when the package exists), `hk bench` and the family ladders,
# then print a short summary. Working logs go to build/gpu-check/; at the end DIR receives
# summary.txt, the bench JSON (bench-<stage>.json, block-<size>.json and train-small.json, the input of
# scripts/results-tables.py), microbench.json, logs.tgz (every log) and all-results.tgz (all of
# these in one archive).
#
# Usage: scripts/gpu-check.sh [--out DIR] [--quick] [--no-sanitize] [--prebuilt] [--only STAGES]
#   --out DIR       where the summary, the bench JSON and the logs go (default: $OUT when set,
#                   else they stay in build/gpu-check/ only)
#   --quick         tests + the main job only (no sanitizer, ladders, profile, microbench)
#   --no-sanitize   everything but the sanitizer sweep
#   --prebuilt      no build here: use the binaries scripts/prebuilt/pack.sh packed on another
#                   machine into build/carry/ (copied here with the working tree) and compile only
#                   the Python extension against them (scripts/prebuilt/box.sh): ~20 s instead of
#                   a ~90 s build on a fresh 16-core machine
#   --only STAGES   comma-separated subset of: tests,sanitize,python,bench,ladders,gemm,attention,lowp,torch,block,profile,microbench
#                   (the build always runs; it is incremental; `--only build` builds and stops).
#                   Where one command has a time limit, split the check: tests,python take ~9
#                   minutes on an H200 (prebuilt; the Python suite 7.5 of them, H200, 2026-12-05);
#                   sanitize on its own (beside them, racecheck and initcheck did not finish in 9
#                   minutes); bench,ladders ~9 with HK_BUDGET_MS=150; then gemm,profile,microbench.
#   HK_BUDGET_MS    timing budget per row of the ladder and gemm stages (default 400)
#   HK_LADDER_SHAPES, HK_LADDER_DTYPES  the ladders stage at these shapes / dtypes only, e.g.
#                   HK_LADDER_SHAPES="16384x8192 4x67108864" HK_LADDER_DTYPES=bf16,f32 HK_BUDGET_MS=30
#   HK_DEADLINE_S   seconds after which no stage starts and a running one is stopped (a stopped
#                   stage has 30 s more to write its output), so a check under a time limit still
#                   returns its logs and summary. Default: none, or 550 when $OUT is set.
#
# Publishing the numbers: cp DIR/bench-*.json docs/results/ && scripts/results-tables.py
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=$PWD/build/gpu-check
rm -rf "$LOGS"; mkdir -p "$LOGS"
stages=tests,sanitize,python,bench,ladders,gemm,attention,lowp,torch,block,profile,microbench
prebuilt=0
out=${OUT:-}
deadline_default=$([[ -n ${OUT:-} ]] && echo 550 || echo 0)
while (($#)); do
  case $1 in
    --out) out=${2:?--out needs a directory}; shift ;;
    --quick) stages=tests,python,bench ;;
    --no-sanitize) stages=${stages/sanitize,/} ;;
    --prebuilt) prebuilt=1 ;;
    --only) stages=$2; shift ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
want() { [[ ,$stages, == *,$1,* ]]; }
for stage in ${stages//,/ }; do
  [[ ,build,tests,sanitize,python,bench,ladders,gemm,attention,lowp,torch,block,profile,microbench, == *,$stage,* ]] ||
    { echo "gpu-check: unknown stage '$stage'" >&2; exit 2; }
done
export HK_CACHE_DIR="$LOGS/cache"
if [[ -n $out ]]; then
  mkdir -p "$out" || { echo "gpu-check: cannot create $out" >&2; exit 2; }
  out=$(cd "$out" && pwd)
fi
finish() {
  if [[ -n $out ]]; then
    local results=($(cd "$LOGS" && ls bench-*.json block-*.json train-*.json microbench.json 2>/dev/null))
    cp "$LOGS/summary.txt" "$out/" 2>/dev/null
    ((${#results[@]})) && (cd "$LOGS" && cp "${results[@]}" "$out/")
    tar -czf "$out/logs.tgz" -C "$LOGS" . 2>/dev/null
    # what this run wrote, in one archive, for a transfer that takes a few files only
    (cd "$out" && tar -czf all-results.tgz summary.txt logs.tgz "${results[@]}") 2>/dev/null
  fi
}
trap finish EXIT
summary="$LOGS/summary.txt"; : >"$summary"
say() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
deadline=${HK_DEADLINE_S:-$deadline_default}
# run CMD... under the deadline: skipped (rc 125) when under 20 s remain, else `timeout`ed
budget() {
  if [[ $deadline -eq 0 ]]; then "$@"; return; fi
  local left=$(( deadline - ($(date +%s) - t0) ))
  if [[ $left -lt 20 ]]; then echo "gpu-check: deadline reached, skipped: $*" >&2; return 125; fi
  # INT first: hk bench finishes its row and writes its JSON (a large problem's first row
  # spends seconds of host time on inputs and the fp64 reference), then KILL 30 s later.
  timeout --signal=INT --kill-after=30 "$left" "$@"
}

# The command line as a user would type it (hk on PATH, the JSON beside it).
show() {
  local a words=()
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./,=:@+-]+$ ]]; then words+=("$a"); else words+=("'$a'"); fi
  done
  echo "${words[*]}"
}
# bench NAME ARGS...: `hk bench ARGS --json bench-NAME.json`; the JSON also records the command
# and the NVIDIA driver version, which scripts/results-tables.py prints above each table.
bench() {
  local name=$1; shift
  local json="$LOGS/bench-$name.json"
  budget "$build/hk" bench "$@" --json "$json" >"$LOGS/bench-$name.md" 2>"$LOGS/bench-$name.err"
  local rc=$?
  if [[ -f $json ]]; then
    python3 - "$json" "$(show hk bench "$@" --json "bench-$name.json")" "$driver" <<'PY' || true
import json, sys
path, command, driver = sys.argv[1:4]
with open(path) as f:
    j = json.load(f)
j["command"] = command
if driver:
    j["driver"] = driver
with open(path, "w") as f:
    json.dump(j, f, indent=2)
    f.write("\n")
PY
  fi
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv >"$LOGS/nvidia-smi.txt" 2>&1
say "gpu: $(tail -1 "$LOGS/nvidia-smi.txt")"
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)

# 1. build (release preset, all cores), or the carried prebuilt binaries
if [[ $prebuilt -eq 1 ]]; then
  [[ -f build/carry/prebuilt.txz ]] || { say "build: --prebuilt but build/carry/prebuilt.txz is missing (scripts/prebuilt/pack.sh)"; exit 1; }
  source scripts/prebuilt/box.sh  # sets B=build/ci and PYEXT_PID
  build=$B
  pyp=/tmp/hk-pyext/python  # where box.sh builds the Python package
  "$build/hk" list >/dev/null 2>&1 || { say "build: the prebuilt hk does not run here"; "$build/hk" list; exit 1; }
  say "build: prebuilt ($(python3 -c 'import sys, tarfile; print(len(tarfile.open(sys.argv[1]).getnames()))' build/carry/prebuilt.txz) files from build/carry), Python extension building"
else
  build=build/release
  pyp=$build/python  # where scripts/python-check.sh builds the Python package
  cmake --preset release -DHK_WERROR=ON >"$LOGS/configure.log" 2>&1 &&
    cmake --build --preset release -j "$(nproc)" >"$LOGS/build.log" 2>&1
  rc=$?
  say "build: rc=$rc ($(( $(date +%s) - t0 ))s), warnings: $(grep -c -i 'warning' "$LOGS/build.log")"
  [[ $rc -ne 0 ]] && { tail -50 "$LOGS/build.log"; exit 1; }
  grep -E "spill|stack frame|lmem" "$LOGS/build.log" | sort -u >"$LOGS/ptxas-notes.txt"
fi

# The prebuilt Python extension builds in the background (scripts/prebuilt/box.sh): the stages
# that import it wait for it once.
pyext_ready() {
  [[ $prebuilt -eq 1 && -z ${pyext_waited:-} ]] || return 0
  pyext_waited=1
  wait "$PYEXT_PID" || say "python: the extension did not build: $(tail -3 /tmp/hk-pyext.log)"
}

# 2. every GPU test, in HK_TEST_SHARDS gtest shards at once (the fp64 references are host work:
# 8 shards on a 16-core machine take about a fifth of one process's time, sharing the one GPU),
# beside one process for the past-2^31-element tests (up to ~35 GB of device memory each: one
# at a time)
if want tests; then
shards=${HK_TEST_SHARDS:-8}
pids=()
for ((i = 0; i < shards; i++)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i budget "$build/tests/cpp/hk_tests" --gtest_filter='-*Large.*' \
    --gtest_output="json:$LOGS/tests-$i.json" >"$LOGS/tests-$i.log" 2>&1 &
  pids+=($!)
done
budget "$build/tests/cpp/hk_tests" --gtest_filter='*Large.*' --gtest_output="json:$LOGS/tests-large.json" \
  >"$LOGS/tests-large.log" 2>&1 &
pids+=($!)
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
cat "$LOGS"/tests-*.log >"$LOGS/tests.log"
passed=$(grep -hE "^\[  PASSED  \] [0-9]+" "$LOGS/tests.log" | awk '{n += $4} END {print n + 0}')
failed=$(grep -hE "^\[  FAILED  \] [0-9]+ tests?," "$LOGS/tests.log" | awk '{n += $4} END {print n + 0}')
skipped=$(grep -hE "^\[  SKIPPED \] [0-9]+" "$LOGS/tests.log" | awk '{n += $4} END {print n + 0}')
say "tests: rc=$rc, $passed passed, $failed failed, $skipped skipped in $shards shards and the large tests"
grep -E "^\[  FAILED  \] [a-zA-Z]" "$LOGS/tests.log" | sort -u | head -20 | tee -a "$summary"
grep -B1 -A3 "Failure" "$LOGS/tests.log" | head -60 >"$LOGS/failures.txt"
fi

# 3. sanitizer sweep, in the background: its slowest shard sets its length (~5 minutes on an
# H200 with a stride of 3), and the Python tests use the cores its other shards leave
if want sanitize; then
  # every 3rd case of each variant by default (every variant keeps its first case)
  ( HK_SANITIZE_STRIDE=${HK_SANITIZE_STRIDE:-3} budget scripts/sanitize.sh "$build" "$LOGS/sanitize" >/dev/null 2>&1
    echo $? >"$LOGS/sanitize.rc" ) &
  sanitize_pid=$!
fi

# 4. Python tests against torch (when the package is built)
if want python && [[ -f tests/python/conftest.py ]]; then
  if [[ $prebuilt -eq 1 ]]; then
    pyext_ready
    workers=()
    python3 -c "import xdist" 2>/dev/null && workers=(-n "${HK_PYTEST_WORKERS:-14}")
    PYTHONPATH=$pyp budget python3 -m pytest tests/python -ra -p no:cacheprovider \
      "${workers[@]}" --junitxml="$LOGS/python-junit.xml" >"$LOGS/python.log" 2>&1
  else
    budget scripts/python-check.sh "$LOGS" >"$LOGS/python.log" 2>&1
  fi
  say "python: rc=$? $(tail -1 "$LOGS/python.log")"
fi
if want sanitize; then
  wait "$sanitize_pid"
  say "sanitize: rc=$(cat "$LOGS/sanitize.rc" 2>/dev/null || echo '?')"
  sed 's/^/  /' "$LOGS/sanitize/summary.txt" | tee -a "$summary"
fi

# 5. the main job, then the family ladders, on a quiet GPU: any compute process still on it (a
# test or sanitizer process that outlived its stage) is named in the summary, since it would
# share the GPU with every timed row
busy=$(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>/dev/null)
[[ -n $busy ]] && say "WARNING: processes on the GPU before the benchmarks (timings will be shared): ${busy//$'\n'/; }"
budget "$build/hk" info >"$LOGS/info.txt" 2>&1
sed -n '/measured ceilings/,$p' "$LOGS/info.txt" | tee -a "$summary"
if want bench; then
  bench quick
  say "hk bench (quick suite): rc=$?"
fi
if want ladders; then
  # every memory-bound family's whole ladder, one JSON (the GEMM-like families and attention have
  # stages of their own: their shapes are spelled differently); HK_LADDER_SHAPES (space-separated)
  # and HK_LADDER_DTYPES narrow it (16384x8192 and 4x67108864 in bf16 and f32: ~250 s on an H200)
  ladder_args=()
  for shape in ${HK_LADDER_SHAPES:-}; do ladder_args+=(--shape "$shape"); done
  [[ -n ${HK_LADDER_DTYPES:-} ]] && ladder_args+=(--dtype "$HK_LADDER_DTYPES")
  bench ladders $("$build/hk" list --names | grep -v -x -E 'gemm|gemm_fp8|gemm_w4a16|attention|conv2d|conv2d_single') \
    "${ladder_args[@]}" --budget-ms "${HK_BUDGET_MS:-400}"
  say "hk bench (the memory-bound families): rc=$?"
fi
if want gemm; then
  # gemm: the tensor-core rungs on every bench shape in bf16, the production rungs (v18, v17; v15
  # beside v18) in f16 too; the CUDA-core rungs (seconds per run at 16384^3) at 2048^3 only
  bench gemm gemm --variant 'baseline_cublaslt,v0[789]*,v1*' --dtype bf16 --budget-ms "${HK_BUDGET_MS:-400}"
  say "hk bench gemm (tensor-core rungs, bf16): rc=$?"
  # operands TMA cannot describe as given: x W^T with K = 4095 and K = 1001 (v19 packs them)
  bench gemm-unaligned gemm --variant 'v19*' --shape 4096x4096x4095 --shape 4096x4096x1001 --dtype bf16,f16 \
    --budget-ms "${HK_BUDGET_MS:-400}"
  say "hk bench gemm (v19 on K = 4095 and 1001): rc=$?"
  bench gemm-f16 gemm --variant 'v1[578]*' --dtype f16 --budget-ms "${HK_BUDGET_MS:-400}"
  say "hk bench gemm (v15, v17, v18, f16): rc=$?"
  bench gemm-cudacore gemm --variant 'v0[1-6]*' --shape 2048x2048x2048 --dtype bf16 --budget-ms 300
  say "hk bench gemm (v01-v06: CUDA-core and mma.sync rungs, 2048^3): rc=$?"
fi
if want attention; then
  # the tensor-core rungs at FlashAttention's benchmark shapes (16k tokens, H x D = 2048),
  # forward and backward, bf16; the materialised baseline runs beside them
  bench attention attention --variant 'v0[3-7]*' --budget-ms "${HK_BUDGET_MS:-400}"
  say "hk bench attention: rc=$?"
  # head dims that are not 64 or 128 (a 2560-wide model's 80, 96): v05 / v07 on zero-padded tiles
  bench attention-dims attention --variant 'public,v0[3458]*' --shape 1024x80 --shape 1024x80x1 --shape 2048x96x1 \
    --budget-ms "${HK_BUDGET_MS:-400}"
  say "hk bench attention (D = 80, 96): rc=$?"
fi
if want lowp; then
  # FP8 and int4 GEMM and the convolutions at their bench shapes, each rung beside its baseline
  bench lowp gemm_fp8 gemm_w4a16 conv2d conv2d_single --budget-ms "${HK_BUDGET_MS:-400}"
  say "hk bench gemm_fp8 gemm_w4a16 conv2d conv2d_single: rc=$?"
fi
if want torch; then
  # every public torch op against eager PyTorch and torch.compile (python -m hopperkit.bench)
  pyext_ready
  PYTHONPATH=$pyp budget python3 -m hopperkit.bench --json "$LOGS/bench-torch.json" --samples "${HK_TORCH_SAMPLES:-20}" \
    >"$LOGS/bench-torch.md" 2>"$LOGS/bench-torch.err"
  say "python -m hopperkit.bench: rc=$?"
fi
if want block; then
  # the decoder block at the benchmarking lecture's five sizes, hopperkit against the same block
  # in PyTorch (eager, torch.compile where the goals name it, CUDA graphs, naive attention), the
  # 2.7B with the profiler's kernel tables (python -m hopperkit.block_bench); then the small LM
  # trained 200 steps against the PyTorch model's seed spread (python -m hopperkit.train_check)
  pyext_ready
  for size in 2.7b xl large medium small; do
    extra=(--no-profile --no-compile)
    [[ $size == 2.7b ]] && extra=()
    [[ $size == xl ]] && extra=(--no-profile)
    PYTHONPATH=$pyp budget python3 -m hopperkit.block_bench --size $size --seq 1024 --batch 4 --models block \
      --samples 8 "${extra[@]}" --json "$LOGS/block-${size/./p}.json" >"$LOGS/block-${size/./p}.md" 2>&1
    say "python -m hopperkit.block_bench --size $size: rc=$?"
  done
  PYTHONPATH=$pyp budget python3 -m hopperkit.train_check --ours-seeds 3 --json "$LOGS/train-small.json" \
    >"$LOGS/train-small.md" 2>&1
  say "python -m hopperkit.train_check (small LM, 200 steps): rc=$?"
fi
# 6. profiling: the CUPTI table, the unfused-vs-fused comparison, one ncu run
if want profile; then
  { budget "$build/hk" profile gelu && budget "$build/hk" profile compare gelu; } >"$LOGS/profile.txt" 2>&1
  say "hk profile gelu + compare: rc=$?"
  grep -A12 -E "^hk profile compare|kernels/op" "$LOGS/profile.txt" | head -14 | tee -a "$summary"
  budget timeout 240 "$build/hk" profile --ncu gelu --variant v03_vectorized --problem '*bf16*' >"$LOGS/ncu.txt" 2>&1
  say "hk profile --ncu gelu v03_vectorized: rc=$?"
  grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|^  [a-z_]+.*kernel" "$LOGS/ncu.txt" | head -12 | tee -a "$summary"
fi
# 7. hardware experiments (when built)
if want microbench && "$build/hk" microbench --list >/dev/null 2>&1; then
  budget timeout 300 "$build/hk" microbench --json "$LOGS/microbench.json" >"$LOGS/microbench.md" 2>&1
  say "hk microbench: rc=$?"
fi
say "total: $(( $(date +%s) - t0 ))s"
echo
for f in "$LOGS"/bench-*.md; do echo "== $(basename "$f")"; grep -E "^\| |^Geometric|^hk bench" "$f"; done
echo
cat "$summary"
# The exit status: 1 when a stage (or a sanitizer tool) did not finish with rc=0, a deadline's
# stop included.
! grep -qE "rc=([1-9]|\?)" "$summary"
