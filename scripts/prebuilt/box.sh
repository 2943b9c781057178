# Sourced on the GPU machine (bash): unpacks scripts/prebuilt/pack.sh's build/carry into build/ci,
# points the loader at the toolkit and the carried libfmt, and builds the Python extension
# against the prebuilt library in the background (PYEXT_PID; the package is then importable
# with PYTHONPATH=/tmp/hk-pyext/python). Sets B=build/ci.
# xz through tar where the machine has it, else Python's lzma
if command -v xz >/dev/null; then tar xJf build/carry/prebuilt.txz
else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(filter="fully_trusted")' build/carry/prebuilt.txz; fi
B=build/ci
# The binaries' runpath names the directory they were built in; the loader finds the library here.
export LD_LIBRARY_PATH=$PWD/$B/src:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:$PWD/build/carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
( cmake -S scripts/prebuilt/pyext -B /tmp/hk-pyext -G Ninja -DCMAKE_BUILD_TYPE=Release -DREPO="$PWD" \
    -DPREBUILT="$PWD/$B" -DPython_EXECUTABLE="$(command -v python3)" &&
  cmake --build /tmp/hk-pyext -j 8 &&
  for f in "$PWD"/python/hopperkit/*.py; do ln -sf "$f" /tmp/hk-pyext/python/hopperkit/; done ) >/tmp/hk-pyext.log 2>&1 &
PYEXT_PID=$!
