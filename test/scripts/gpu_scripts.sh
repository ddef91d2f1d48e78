#!/usr/bin/env bash
# [21] The GPU session's scripts, here (no GPU): scripts/gpu_prepare.sh writes gpu/ (the programs,
# the data, the carried CPU references), gpu/'s one build configures with this machine's CMake and
# builds cuda-gpt2-tiny, and scripts/gpu_check.sh smoke reads "no usable CUDA device" as a SKIP
# where nvidia-smi lists no GPU and as a FAIL where a (fake) nvidia-smi lists one: a driver that
# does not match the CUDA runtime must not read as all skipped.
#   gpu_scripts.sh SOURCE_DIR BUILD_DIR WORK_DIR
# Runs in a copy of what the scripts read, so that the source tree's gpu/ and build-gpu/ (a GPU
# session's) are left alone. Exit 77 (ctest: skipped) without nvcc.
set -euo pipefail
src=$1 build=$2 work=$3
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "SKIP: no nvcc (PATH, /usr/local/cuda/bin)"; exit 77; }
rm -rf "$work"
mkdir -p "$work/repo/test" "$work/repo/build/bin" "$work/fake"
cp -r "$src"/{scripts,runtime,examples,lib,include,dialects,tools} "$work/repo/"
cp -r "$src/test/e2e" "$src/test/reference" "$work/repo/test/"
ln -s "$build/bin/megac" "$work/repo/build/bin/megac"
cd "$work/repo"
fail() { echo "FAIL: $*"; exit 1; }

scripts/gpu_prepare.sh >"$work/prepare.log" 2>&1 || { tail -20 "$work/prepare.log"; fail "gpu_prepare.sh"; }
for f in gpu/PREPARED gpu/programs.txt gpu/CMakeLists.txt gpu/cuda-gpt2-tiny/main.cu gpu/reference/parity-gpt2-mid-cpu.jsonl; do
  [ -s "$f" ] || fail "gpu_prepare.sh wrote no $f"
done
echo "ok   gpu_prepare.sh: $(grep -c . gpu/programs.txt) lines in gpu/programs.txt, $(wc -l <gpu/reference/parity-gpt2-mid-cpu.jsonl) carried CPU iterations of gpt2-mid"

# A machine whose nvidia-smi lists a GPU that CUDA cannot use (here: no driver at all).
cat >"$work/fake/nvidia-smi" <<'SMI'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-fake)" ;;
  *compute_cap*--format=csv,noheader*) echo "9.0" ;;
  *) printf 'index, name, memory.total [MiB], driver_version, compute_cap\n0, NVIDIA H200, 143771 MiB, 999.99, 9.0\n' ;;
esac
SMI
chmod +x "$work/fake/nvidia-smi"
rc=0
PATH=$work/fake:$PATH JOBS=2 scripts/gpu_check.sh smoke >"$work/check-fake.log" 2>&1 || rc=$?
grep -E "configure +PASS" gpu/results/summary.txt >/dev/null || { tail -30 "$work/check-fake.log"; fail "gpu/ did not configure"; }
line=$(grep -E '^smoke ' gpu/results/summary.txt || true)
echo "$line" | grep -E "^smoke +FAIL +nvidia-smi lists 1 GPU\(s\) but CUDA finds no usable device" >/dev/null && [ $rc = 1 ] ||
  { tail -30 "$work/check-fake.log"; fail "with a fake nvidia-smi listing a GPU: '$line' (exit $rc), expected a FAIL"; }
echo "ok   a fake nvidia-smi listing an H200, CUDA finding none: $line (exit $rc)"

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "this machine's nvidia-smi lists a GPU: the SKIP case is not checked here"
  exit 0
fi
rc=0
JOBS=2 scripts/gpu_check.sh smoke >"$work/check.log" 2>&1 || rc=$?
line=$(grep -E '^smoke ' gpu/results/summary.txt || true)
echo "$line" | grep -E "^smoke +SKIP +no usable GPU" >/dev/null && [ $rc = 0 ] ||
  { tail -30 "$work/check.log"; fail "without a GPU: '$line' (exit $rc), expected a SKIP"; }
echo "ok   no nvidia-smi GPU, CUDA finding none: $line (exit $rc)"
