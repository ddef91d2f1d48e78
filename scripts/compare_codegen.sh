#!/usr/bin/env bash
# Compares the programs two megac binaries generate for the same specs and plans:
# the check that a refactoring of the compiler changed no behaviour. Prints one line
# per (plan, model), "same" or "DIFFERS", and exits 1 if any differs.
#   scripts/compare_codegen.sh OLD_MEGAC NEW_MEGAC [WORKDIR]
set -euo pipefail
old=$1 new=$2 work=${3:-$(mktemp -d)}
mkdir -p "$work"
root=$(cd "$(dirname "$0")/.." && pwd)
plans=(
  ""
  "--tp 2 --sp"
  "--pp 2 --global-batch-size 4"
  "--dp 2 --data-parallel-sharding-strategy optim_grads_params"
  "--dp 4 --data-parallel-sharding-strategy optim_grads_params --data-parallel-shard-degree 2"
  "--dp 2 --lora-rank 4"
  "--bf16 --tp 2 --dp 2"
  "--recompute-granularity selective"
  "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --pp 2 --dp 2 --global-batch-size 8"
  "--tp 2 --pp 2 --dp 2 --overlap-grad-reduce --global-batch-size 8"
  "--pp 2 --dp 2 --data-parallel-sharding-strategy optim_grads --global-batch-size 8"
  "--tp 2 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --distribute-saved-activations"
  "--tp 2 --sp --dp 2 --data-parallel-sharding-strategy optim_grads_params"
  "--dp 2 --qlora --lora-rank 4"
  "layers4 --pp 2 --vpp 2 --global-batch-size 8"
)
status=0
for model in gpt2-tiny llama-tiny; do
  for i in "${!plans[@]}"; do
    spec=$root/examples/$model.yaml plan=${plans[$i]}
    if [[ $plan == layers4* ]]; then  # interleaving needs more layers than the tiny specs have
      spec=$work/$model-4layers.yaml plan=${plan#layers4 }
      sed 's/^num_layers: .*/num_layers: 4/' "$root/examples/$model.yaml" >"$spec"
    fi
    for side in old new; do
      bin=$old; [[ $side == new ]] && bin=$new
      out=$work/$side$i$model
      rm -rf "$out"
      # shellcheck disable=SC2086
      if ! "$bin" compile "$spec" $plan --no-build -o "$out" \
          >"$out.log" 2>&1; then
        echo "$side failed: $model $plan (see $out.log)"
      fi
    done
    src=main.cpp
    a=$(grep -v recompile_command "$work/old$i$model/$src" 2>/dev/null | md5sum || true)
    b=$(grep -v recompile_command "$work/new$i$model/$src" 2>/dev/null | md5sum || true)
    if [[ $a == "$b" && -s $work/new$i$model/$src ]]; then
      echo "same     $model $plan"
    else
      echo "DIFFERS  $model $plan  (diff $work/old$i$model/$src $work/new$i$model/$src)"
      status=1
    fi
  done
done
exit $status
