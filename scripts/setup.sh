#!/usr/bin/env bash
# Installs every Debian package megac needs. Idempotent: packages already present are skipped.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools  # MLIR/LLVM 22; lit + FileCheck in /usr/lib/llvm-22/bin
  libcli11-dev libfmt-dev                                 # CLI parsing and formatting
  libopenmpi-dev openmpi-bin                              # communicators on CPU
  libopenblas-dev libopenblas0-openmp                     # CPU GEMM (OpenMP build: one thread pool)
  libgtest-dev                                            # runtime unit tests
  python3-torch python3-numpy python3-yaml                          # PyTorch reference tests (run with /usr/bin/python3)
  python3-matplotlib                                      # scripts/plot_run.py: a run as a PNG
  python3-venv python3-pip                                # build/pyenv: pinned PyPI clients (scripts/python_env.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
