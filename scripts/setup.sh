#!/usr/bin/env bash
# Installs the Debian packages hopperkit builds against, where they are missing (no-op when all
# are present, as on a machine without package access that has them preinstalled). Needs the CUDA 13 toolkit.
set -euo pipefail
need=()
[[ -f /usr/include/CLI/CLI.hpp ]] || need+=(libcli11-dev)
[[ -f /usr/include/fmt/format.h ]] || need+=(libfmt-dev)
[[ -f /usr/include/nlohmann/json.hpp ]] || need+=(nlohmann-json3-dev)
[[ -f /usr/include/gtest/gtest.h ]] || need+=(libgtest-dev)
command -v ninja >/dev/null || need+=(ninja-build)
command -v cmake >/dev/null || need+=(cmake)
if ((${#need[@]})); then
  echo "setup: installing ${need[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null || { echo "setup: nvcc (CUDA 13 toolkit) not found" >&2; exit 1; }
