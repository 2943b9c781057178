#!/usr/bin/env bash
# Builds the Python extension into a CMake build tree and runs the Python tests against it:
# the package is imported from <build>/python (PYTHONPATH), no install step. GPU tests run when
# torch sees a CUDA device and skip with their reason otherwise. The log and a JUnit XML go to
# OUTDIR; the last line printed is pytest's summary. Installs the Python build and test
# dependencies with pip when they are missing.
# Usage: scripts/python-check.sh OUTDIR [--preset NAME]   (default preset: release, reusing
#        build/release when it exists; CI passes --preset ci)
set -uo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { echo "usage: $0 OUTDIR [--preset NAME]" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd); shift
preset=release
[[ ${1:-} == --preset ]] && { preset=${2:?--preset needs a name}; shift 2; }
py=${PYTHON:-python3}
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH

if ! "$py" -c "import nanobind, numpy, pytest, matplotlib" 2>/dev/null; then
  echo "python-check: installing nanobind numpy pytest matplotlib with pip" >&2
  "$py" -m pip install --quiet --disable-pip-version-check nanobind numpy pytest matplotlib >"$out/pip.log" 2>&1 ||
    { tail -20 "$out/pip.log" >&2; exit 1; }
fi

# The preset's cache is kept (e.g. gpu-check's HK_WERROR=ON); only the Python switch is added.
cmake --preset "$preset" -DHK_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v "$py")" \
  >"$out/python-configure.log" 2>&1 || { tail -30 "$out/python-configure.log"; exit 1; }
cmake --build --preset "$preset" --target hk_python -j "${HK_JOBS:-$(nproc)}" \
  >"$out/python-build.log" 2>&1 || { tail -50 "$out/python-build.log"; exit 1; }

# With pytest-xdist (when installed) each test runs in a worker process: a crash in native code
# fails that test, names it, and the rest still run.
workers=()
"$py" -c "import xdist" 2>/dev/null && workers=(-n "${HK_PYTEST_WORKERS:-4}")
PYTHONPATH="$PWD/build/$preset/python${PYTHONPATH:+:$PYTHONPATH}" \
  "$py" -m pytest tests/python -ra -p no:cacheprovider "${workers[@]}" --junitxml="$out/python-junit.xml" 2>&1 |
  tee "$out/python-tests.log"
exit "${PIPESTATUS[0]}"
