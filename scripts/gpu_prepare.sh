#!/usr/bin/env bash
# Runs HERE (megac needs MLIR, which the lent GPU machine lacks): writes into gpu/ everything
# scripts/gpu_check.sh needs there. Carry gpu/ with each device call (it is git-ignored).
#   gpu/programs.txt          one line per program: NAME TARGET SPEC MICRO_BATCH IN_ALL
#   gpu/<NAME>/               `megac compile --no-build` output: main.cpp|main.cu (+ its own
#                             CMakeLists.txt, unused there: gpu/CMakeLists.txt builds them all)
#   gpu/CMakeLists.txt        ONE build of everything (scripts/gpu_check.sh configures it into
#                             build-gpu/ at the repo root): runtime/ added once, one executable per
#                             program (build-gpu/bin/NAME), the CUDA test targets. `all` = the
#                             cpu-*/cuda-* programs + the CUDA tests; the bench-* programs are
#                             built only on demand (gpu_check.sh build-program, the bench).
#                             CUDA architecture: CMAKE_CUDA_ARCHITECTURES if given, else 90.
#   gpu/data/license.*        byte-level dataset of /usr/share/common-licenses (parity, bf16)
#   gpu/reference/*.jsonl     CPU metrics computed here for the parity checks whose CPU side is
#                             too slow to repeat there (the mid-size spec, test/e2e/specs/gpt2-mid.yaml)
#   gpu/deps/*.tar.gz         fallbacks if that machine lacks them: OpenBLAS (OpenMP build) with
#                             cblas.h and libgfortran, and GoogleTest's sources
#   gpu/PREPARED              commit and date it was made from, and sha1 content hashes of
#                             runtime/ (runtime-sha1), of the compiler's sources lib/ include/
#                             dialects/ tools/ examples/ (compiler-sha1) and of the generated
#                             sources (generated-sha1); gpu_check.sh recomputes them there and
#                             warns loudly when the carried tree does not match
#
# The next GPU session (device tool calls; each carries gpu/, <= 64 MiB with the tree):
#   here:  cmake --build build --target megac && scripts/gpu_prepare.sh
#   run(command="scripts/gpu_check.sh all", carry=["gpu"], timeout_s=480)  (env build smoke test parity bf16 memcheck)
#   run(command="scripts/gpu_check.sh env bench", carry=["gpu"], timeout_s=600)
#            (or bench -- --configs 124m, then bench -- --configs 1.3b if one call is too short)
#   then take $OUT/gpu_check-summary.txt, gpu_check.log, gpu_results.tar.gz and gpu_bench.md back
#   from files_at (only what the command wrote under $OUT returns).
set -euo pipefail
cd "$(dirname "$0")/.."
megac=build/bin/megac
[ -x "$megac" ] || { echo "error: $megac not found; build megac first (scripts/build.sh)" >&2; exit 1; }

source scripts/gpu_common.sh # tree_sha1, generated_files

rm -rf gpu
mkdir -p gpu/data gpu/deps
manifest=gpu/programs.txt
echo "# NAME TARGET SPEC MICRO_BATCH IN_ALL (written by scripts/gpu_prepare.sh)" >"$manifest"

compile() { # NAME TARGET SPEC MICRO_BATCH IN_ALL [megac compile flags: --bf16]
  local t0=$SECONDS
  "$megac" compile "$3" --micro-batch-size "$4" --target "$2" "${@:6}" --no-build -o "gpu/$1" >"gpu/$1.log" 2>&1 ||
    { cat "gpu/$1.log" >&2; exit 1; }
  [ -f "gpu/$1/main.cu" ] || [ -f "gpu/$1/main.cpp" ] || { echo "error: no gpu/$1/main.cu or main.cpp" >&2; exit 1; }
  mv "gpu/$1.log" "gpu/$1/megac.log"
  echo "$1 $2 $3 $4 $5" >>"$manifest"
  echo "gpu/$1: $2, $3, micro batch $4 ${*:6} ($((SECONDS - t0)) s, $(du -sk "gpu/$1" | cut -f1) KiB)"
}

# fp32 parity (CUDA vs CPU) and the bf16 check: the example models at micro batch 2, as
# test/e2e/cuda_parity.py compiles them.
for model in gpt2-tiny llama-tiny; do
  compile "cpu-$model" cpu "examples/$model.yaml" 2 yes
  compile "cuda-$model" cuda "examples/$model.yaml" 2 yes
  compile "cuda-bf16-$model" cuda "examples/$model.yaml" 2 yes --bf16 # OUT/train runs as compiled
done
# Dropout 0.1 (hidden and attention): the GPU draws the CPU's masks (megart/dropout.h), so the
# fp32 parity holds with it too.
for model in gpt2-dropout llama-dropout; do
  compile "cpu-$model" cpu "test/e2e/specs/$model.yaml" 2 yes
  compile "cuda-$model" cuda "test/e2e/specs/$model.yaml" 2 yes
done
# The mid-size parity spec (heads of 64, sequence 256, vocabulary 50257): the CUDA side only; its
# CPU side is computed here below and carried.
compile cuda-gpt2-mid cuda test/e2e/specs/gpt2-mid.yaml 2 yes
# Throughput (bench/gpu_vs_pytorch.py), built only when the bench asks. The micro batch is
# compiled in, so the neighbours of the default size (124m: 8, 1.3b: 4) are ready too, in case
# the default does not fit or fits more.
compile bench-tiny-mb2 cuda examples/gpt2-tiny.yaml 2 no --bf16 # a seconds-long smoke run of the bench
for mb in 4 8 16; do compile "bench-124m-mb$mb" cuda examples/gpt2-124m.yaml "$mb" no --bf16; done
for mb in 2 4 8; do compile "bench-1.3b-mb$mb" cuda examples/gpt2-1.3b.yaml "$mb" no --bf16; done

# The one build of everything there (see the header).
{
  cat <<'EOF'
# Written by scripts/gpu_prepare.sh: every program of gpu/programs.txt and the runtime in ONE
# build, which scripts/gpu_check.sh configures into build-gpu/ at the repo root (never inside
# gpu/, which each device call replaces):
#   cmake -S gpu -B build-gpu -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build-gpu
# `all`: the cpu-*/cuda-* programs and the CUDA tests; a bench-* program builds on demand
# (cmake --build build-gpu --target NAME). Programs land in build-gpu/bin/NAME.
cmake_minimum_required(VERSION 3.20)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90) # H100 / H200 (sm_90 code + PTX)
endif()
project(megac_gpu LANGUAGES C CXX CUDA)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()
# DT_RPATH instead of RUNPATH: the loader then also finds what the linked libraries need (the
# carried OpenBLAS's libgfortran, beside it) without LD_LIBRARY_PATH.
add_link_options(LINKER:--disable-new-dtags)

get_filename_component(MEGAC_REPO ${CMAKE_CURRENT_SOURCE_DIR} DIRECTORY)
add_subdirectory(${MEGAC_REPO}/runtime megart EXCLUDE_FROM_ALL)
if(NOT TARGET megart-cuda)
  message(FATAL_ERROR "runtime/ configured without its CUDA backend (megart-cuda); see above")
endif()

function(megac_program name source runtime in_all)
  add_executable(${name} ${source})
  target_link_libraries(${name} PRIVATE ${runtime})
  # Generated programs initialise their tables by field name (C++20 designated initializers). For
  # nvcc as a flag, as megac's own build passes it: CMake 3.25's CUDA_STANDARD 20 needs a dialect
  # table for nvcc 13 it does not have ("requires the language dialect CUDA20").
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin CXX_STANDARD 20)
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>)
  if(NOT in_all)
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL TRUE)
  endif()
endfunction()

# The CUDA unit tests, and the 2-rank NCCL test where MPI is there, are part of `all`.
add_custom_target(megac-gpu-tests ALL)
foreach(t megart-cuda-tests megart-cuda-mpi-tests)
  if(TARGET ${t})
    add_dependencies(megac-gpu-tests ${t})
  endif()
endforeach()

EOF
  grep -v '^#' "$manifest" | while read -r name target _ _ in_all; do
    if [ "$target" = cuda ]; then src=main.cu lib=megart-cuda; else src=main.cpp lib=megart; fi
    echo "megac_program($name $name/$src $lib $([ "$in_all" = yes ] && echo ON || echo OFF))"
  done
} >gpu/CMakeLists.txt

# The dataset the e2e tests use.
PYTHONPATH=test/e2e python3 -c 'import sys, e2e_util; e2e_util.make_license_corpus(*sys.argv[1:])' \
  "$megac" gpu/data/license
echo "gpu/data/license: $(stat -c %s gpu/data/license.bin) bytes of tokens"

# Carried CPU references (gpu/reference/parity-NAME-cpu.jsonl): the CPU program trained here with
# the parity flags on the same data, so that the GPU session spends its minutes on the CUDA side.
mkdir -p gpu/reference
mapfile -t parity_flags < <(PYTHONPATH=test/e2e python3 -c 'import e2e_util; print("\n".join(e2e_util.train_flags(10)))')
for model in gpt2-mid; do
  t0=$SECONDS ref=$(mktemp -d)
  "$megac" compile "test/e2e/specs/$model.yaml" --micro-batch-size 2 -o "$ref/prog" >"$ref/compile.log" 2>&1 ||
    { cat "$ref/compile.log" >&2; exit 1; }
  OMP_NUM_THREADS=$(nproc) "$ref/prog/train" "${parity_flags[@]}" --data-path gpu/data/license \
    --metrics-file "gpu/reference/parity-$model-cpu.jsonl" >"$ref/train.log" 2>&1 || { cat "$ref/train.log" >&2; exit 1; }
  rm -rf "$ref"
  echo "gpu/reference/parity-$model-cpu.jsonl: 10 CPU iterations ($((SECONDS - t0)) s)"
done

# Fallbacks: the runtime needs cblas.h + an OpenBLAS, and its tests GoogleTest; the GPU image
# may have neither and nothing can be fetched there. gpu_check.sh uses them only if missing.
# (numpy's bundled scipy_openblas would not do: its symbols are renamed, scipy_cblas_sgemm64_,
# and it ships no cblas.h.)
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

# What gpu/ was made from; gpu_check.sh recomputes the hashes on the carried tree.
mapfile -t generated < <(generated_files)
{
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- lib include dialects tools runtime examples || echo +dirty)," \
    "prepared $(date -u +%Y-%m-%dT%H:%M:%SZ) by scripts/gpu_prepare.sh"
  echo "runtime-sha1 $(tree_sha1 runtime)"
  echo "compiler-sha1 $(tree_sha1 lib include dialects tools examples)"
  echo "generated-sha1 $(tree_sha1 "${generated[@]}")"
} >gpu/PREPARED
cat gpu/PREPARED
echo "gpu/: $(du -sh gpu | cut -f1) in all (a device call carries at most 64 MiB with the tree)"
