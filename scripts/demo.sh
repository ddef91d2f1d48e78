#!/usr/bin/env bash
# The README's first command: set-up, build, then the main job on an embedded default.
# Until training lands (issue [2]) the main job is: parse, verify and print a GPT-2 layer and
# a Llama layer in the `tx` dialect.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
for layer in examples/gpt2-layer.mlir examples/llama-layer.mlir; do
  echo "== $layer: parsed and verified; as megac prints it:"
  ./build/bin/megac-opt "$layer"
done
