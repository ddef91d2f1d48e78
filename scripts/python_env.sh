#!/usr/bin/env bash
# The tests' Python environment: build/pyenv, a venv made with --system-site-packages over
# Debian's torch, holding the pinned PyPI clients of scripts/requirements-test.txt, and those of
# scripts/requirements-test-nodeps.txt without their dependencies. Idempotent: reinstalls only
# when the requirements changed.
set -euo pipefail
cd "$(dirname "$0")/.."
env_dir=build/pyenv
stamp="$env_dir/.requirements"
requirements=(scripts/requirements-test.txt scripts/requirements-test-nodeps.txt)
if [ -x "$env_dir/bin/python" ] && cmp -s <(cat "${requirements[@]}") "$stamp"; then
  exit 0
fi
rm -rf "$env_dir"
/usr/bin/python3 -m venv --system-site-packages "$env_dir"
"$env_dir/bin/pip" install --quiet --disable-pip-version-check -r scripts/requirements-test.txt
"$env_dir/bin/pip" install --quiet --disable-pip-version-check --no-deps -r scripts/requirements-test-nodeps.txt
# Debian's torch must be the one the venv sees (PyPI's would be GBs of CUDA).
"$env_dir/bin/python" -c "import torch, transformers; assert torch.__file__.startswith('/usr/'), torch.__file__"
cat "${requirements[@]}" > "$stamp"
echo "python_env: $env_dir with $(tr '\n' ' ' < <(grep -hv '^#' "${requirements[@]}"))"
