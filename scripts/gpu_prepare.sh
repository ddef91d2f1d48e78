#!/usr/bin/env bash
# Runs HERE (megac needs MLIR, which the lent GPU machine lacks): writes into gpu/ everything
# scripts/gpu_check.sh needs there. Carry gpu/ with each device call (it is git-ignored).
#   gpu/programs.txt          one line per program: NAME TARGET SPEC MICRO_BATCH BUILT_BY_DEFAULT
#   gpu/<NAME>/               `megac compile --no-build` output: main.cpp|main.cu + CMakeLists.txt
#   gpu/data/license.*        byte-level dataset of /usr/share/common-licenses (parity, bf16)
#   gpu/deps/*.tar.gz         fallbacks if that machine lacks them: OpenBLAS (OpenMP build) with
#                             cblas.h and libgfortran, and GoogleTest's sources
#   gpu/PREPARED              commit and date it was made from
set -euo pipefail
cd "$(dirname "$0")/.."
megac=build/bin/megac
[ -x "$megac" ] || { echo "error: $megac not found; build megac first (scripts/build.sh)" >&2; exit 1; }

rm -rf gpu
mkdir -p gpu/data gpu/deps
manifest=gpu/programs.txt
echo "# NAME TARGET SPEC MICRO_BATCH BUILT_BY_DEFAULT (written by scripts/gpu_prepare.sh)" >"$manifest"

compile() { # NAME TARGET SPEC MICRO_BATCH DEFAULT
  local t0=$SECONDS
  "$megac" compile "$3" --micro-batch-size "$4" --target "$2" --no-build -o "gpu/$1" >"gpu/$1.log" 2>&1 ||
    { cat "gpu/$1.log" >&2; exit 1; }
  [ -f "gpu/$1/CMakeLists.txt" ] || { echo "error: no gpu/$1/CMakeLists.txt" >&2; exit 1; }
  mv "gpu/$1.log" "gpu/$1/megac.log"
  echo "$1 $2 $3 $4 $5" >>"$manifest"
  echo "gpu/$1: $2, $3, micro batch $4 ($((SECONDS - t0)) s, $(du -sk "gpu/$1" | cut -f1) KiB)"
}

# fp32 parity (CUDA vs CPU) and the bf16 check: the example models at micro batch 2, as
# test/e2e/cuda_parity.py compiles them.
for model in gpt2-tiny llama-tiny; do
  compile "cpu-$model" cpu "examples/$model.yaml" 2 yes
  compile "cuda-$model" cuda "examples/$model.yaml" 2 yes
done
# Throughput (bench/gpu_vs_pytorch.py). The micro batch is compiled in, so the neighbours of the
# default size are ready too, in case the default does not fit or fits more (built on demand).
compile bench-tiny-mb2 cuda examples/gpt2-tiny.yaml 2 no  # a seconds-long smoke run of the bench
for mb in 4 8 16; do compile "bench-124m-mb$mb" cuda examples/gpt2-124m.yaml "$mb" "$([ $mb = 8 ] && echo yes || echo no)"; done
for mb in 2 4 8; do compile "bench-1.3b-mb$mb" cuda examples/gpt2-1.3b.yaml "$mb" "$([ $mb = 4 ] && echo yes || echo no)"; done

# The dataset, as test/e2e/e2e_util.make_license_corpus makes it.
inputs=()
for f in /usr/share/common-licenses/*; do
  [ -f "$f" ] && [ ! -L "$f" ] && inputs+=(--input "$f")
done
"$megac" data --split-paragraphs --output-prefix gpu/data/license "${inputs[@]}" >/dev/null
echo "gpu/data/license: $(stat -c %s gpu/data/license.bin) bytes of tokens"

# Fallbacks: the runtime needs cblas.h + an OpenBLAS, and its tests GoogleTest; the GPU image
# may have neither and nothing can be fetched there. gpu_check.sh uses them only if missing.
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0
cblas=/usr/include/x86_64-linux-gnu/openblas-pthread
if [ -e "$openblas" ] && [ -f "$cblas/cblas.h" ]; then
  d=$(mktemp -d)
  mkdir -p "$d/lib" "$d/include"
  cp -L "$openblas" "$d/lib/libopenblas.so.0"
  ln -s libopenblas.so.0 "$d/lib/libopenblas.so" # what FindBLAS looks for
  # libopenblas needs these; Ubuntu's CUDA images may lack libgfortran.
  cp -L /lib/x86_64-linux-gnu/libgfortran.so.5 /lib/x86_64-linux-gnu/libquadmath.so.0 "$d/lib/"
  cp "$cblas/cblas.h" "$cblas/openblas_config.h" "$d/include/"
  tar -C "$d" -czf gpu/deps/openblas.tar.gz lib include
  rm -rf "$d"
else
  echo "warning: Debian's OpenMP OpenBLAS not found here; gpu/ carries no BLAS fallback" >&2
fi
if [ -f /usr/src/googletest/CMakeLists.txt ]; then
  tar -C /usr/src -czf gpu/deps/googletest.tar.gz googletest
else
  echo "warning: /usr/src/googletest not found; gpu/ carries no GoogleTest fallback" >&2
fi

echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- lib include tools runtime || echo +dirty)," \
  "prepared $(date -u +%Y-%m-%dT%H:%M:%SZ) by scripts/gpu_prepare.sh" >gpu/PREPARED
echo "gpu/: $(du -sh gpu | cut -f1) in all (a device call carries at most 64 MiB with the tree)"
