#!/usr/bin/env bash
# The README's test command: set-up, build, then every test suite (lit, runtime unit tests,
# end-to-end training checks) through ctest. Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
./scripts/build.sh
./scripts/python_env.sh # transformers & co. for the format tests (pinned, over Debian's torch)
cd build
ctest --output-on-failure --timeout 1800
echo "test.sh: all suites passed in $(( $(date +%s) - start ))s"
