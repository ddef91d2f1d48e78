#!/usr/bin/env bash
# The README's first command: set-up and build, then the main job on a built-in default:
# compile the tiny GPT-2 in examples/ with a parallel plan (tensor parallel 2 with sequence
# parallelism) and train it on CPU on 2 MPI ranks, on the license texts every Debian machine has
# in /usr/share/common-licenses (read at run time, nothing downloaded), showing the loss fall.
# Writes out/demo/{metrics.jsonl,run.png} and the IR after every pass in out/demo/ir/.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
out=out/demo
mkdir -p "$out"
rm -rf "$out/ckpt" # a new run each time

inputs=()
for f in /usr/share/common-licenses/*; do
  [ -f "$f" ] && [ ! -L "$f" ] && inputs+=(--input "$f")
done
./build/bin/megac data "${inputs[@]}" --split-paragraphs --output-prefix "$out/corpus"
./build/bin/megac compile examples/gpt2-tiny.yaml --tp 2 --sp --micro-batch-size 8 -o "$out/gpt2" \
  --dump-ir "$out/ir" --rank-layout
# Open MPI refuses root unless told; 2 ranks x 1 thread on the 2 cores a CI machine has.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
OMP_NUM_THREADS=1 mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS \
  "$out/gpt2/train" --data-path "$out/corpus" --train-iters 300 --global-batch-size 16 \
  --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 20 --weight-decay 0.1 \
  --clip-grad 1.0 --log-interval 25 --split 95,5 --eval-interval 100 --eval-iters 4 \
  --metrics-file "$out/metrics.jsonl" --save "$out/ckpt"
/usr/bin/python3 scripts/plot_run.py "$out/metrics.jsonl" "$out/run.png"
python3 - "$out/metrics.jsonl" <<'PY'
import json, sys
m = [json.loads(line) for line in open(sys.argv[1])]
first, last = m[0]["lm_loss"], sum(x["lm_loss"] for x in m[-10:]) / 10
valid = [(x["iteration"], x["valid_lm_loss"]) for x in m if "valid_lm_loss" in x]
print(f"demo: lm loss {first:.3f} at iteration 1 -> {last:.3f} (mean of the last 10 of {len(m)}); validation loss "
      + ", ".join(f"{v:.3f} at {i}" for i, v in valid))
PY
# The trained model continues a text (its spec compiled for one rank, the data's byte tokenizer).
echo "demo: the model's continuation of \"This License\" (greedy):"
./build/bin/megac generate "$out/ckpt" --prompt "This License" --max-new-tokens 20 --top-k 1
echo "demo: IR after each pass in $out/ir/, generated C++ in $out/gpt2/main.cpp, train and validation loss, lr, gradient norm and tokens/s in $out/run.png"
