#!/usr/bin/env bash
# The README's test command: set-up, build, then the test suites (lit, runtime unit tests,
# end-to-end training checks, the runtime under the sanitizers) through ctest. Exits non-zero if
# anything fails. Two tiers (docs/testing.md):
#   ./scripts/test.sh          what CI runs: every suite but those labelled `full`; under 30 min
#                              on a fresh clone with 2 cores, build included
#   ./scripts/test.sh --full   everything: adds the compiler under the sanitizers and the long
#                              fuzz runs (run before an issue is resolved)
# Extra arguments go to ctest (e.g. -R e2e-plans). Prints each phase's time and the 15 slowest
# tests at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=(-LE full)
if [ "${1:-}" = "--full" ]; then
  tier=()
  shift
fi
start=$(date +%s)
phase_start=$start
phases=()
phase_done() {
  local now
  now=$(date +%s)
  phases+=("$1 $((now - phase_start)) s")
  phase_start=$now
}

./scripts/setup.sh
# The pinned Python clients download while the compiler builds (the one is network, the other CPU).
pyenv_log=$(mktemp)
./scripts/python_env.sh >"$pyenv_log" 2>&1 &
pyenv_pid=$!
./scripts/build.sh
if ! wait "$pyenv_pid"; then
  cat "$pyenv_log" >&2
  echo "test.sh: scripts/python_env.sh failed" >&2
  exit 1
fi
cat "$pyenv_log"
rm -f "$pyenv_log"
phase_done "set-up and build"

# Tests run two at a time per core pair: most of them wait on one process at a time (a compile,
# a one-rank run, a Python reference). One OpenMP thread per process keeps them off each other's
# cores; Open MPI's ob1 messaging starts mpirun in 0.1 s instead of UCX's 0.3 s (some 600 launches).
jobs=$(nproc) # before OMP_NUM_THREADS=1, which nproc obeys
export OMP_NUM_THREADS=1 OMPI_MCA_pml=ob1
log=$(mktemp)
cd build
status=0
ctest --output-on-failure --timeout 1800 -j "$jobs" "${tier[@]}" "$@" | tee "$log" || status=$?
cd ..
phase_done "tests"

echo "test.sh: the 15 slowest tests:"
grep -E ' Test +#[0-9]+: ' "$log" | sed -E 's/^.*Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/' |
  sort -rn | head -15 | awk '{printf "  %8.1f s  %s\n", $1, $2}'
rm -f "$log"
printf 'test.sh: %s\n' "${phases[@]}"
if [ "$status" -ne 0 ]; then
  echo "test.sh: FAILED after $(($(date +%s) - start))s" >&2
  exit "$status"
fi
echo "test.sh: all suites passed in $(($(date +%s) - start))s"
