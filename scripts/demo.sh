#!/usr/bin/env bash
# The README's first command: set-up and build, then the demo (scripts/demo_run.sh): a GPT-2
# trained at tp 2 + sp on 2 CPU ranks on /usr/share/common-licenses, its loss curve in
# out/demo/run.png, and its continuation of "This License", checked for license words.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
exec ./scripts/demo_run.sh build/bin/megac out/demo
