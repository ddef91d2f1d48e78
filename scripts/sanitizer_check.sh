#!/usr/bin/env bash
# megac, megac-opt and the runtime under AddressSanitizer + UndefinedBehaviorSanitizer (any report
# is fatal): the runtime's unit tests, its MPI tests on 2 ranks, the reader fuzzer, one small e2e
# plan (GPT-2 tp 2 x sp on 2 ranks compiled by megac, trained, saved, resumed), the catalogue of
# bad inputs and the compiler fuzzer, both with sanitized megac, megac-opt and OUT/train.
# Builds into build/asan (incremental). Run by ctest as sanitizers; needs build/bin/megac.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
asan=build/asan
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The CPU runtime only (the CUDA backend's host code is not what these runs exercise).
cmake -S runtime -B "$asan/runtime" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMEGART_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$asan/runtime" -j "$(nproc)" >/dev/null

echo "sanitizers: runtime unit tests"
"$asan/runtime/megart-tests" --gtest_brief=1
echo "sanitizers: reader fuzzer"
"$asan/runtime/megart-fuzz-readers" 2000
# Open MPI's own allocations are not ours to fix: leak checking stays on for the single-process
# runs above and off under mpirun.
echo "sanitizers: MPI tests on 2 ranks"
ASAN_OPTIONS=abort_on_error=1:detect_leaks=0 mpirun --oversubscribe -np 2 \
  -x ASAN_OPTIONS -x UBSAN_OPTIONS -x OMP_NUM_THREADS "$asan/runtime/megart-mpi-tests" --gtest_brief=1

echo "sanitizers: GPT-2 tp 2 + sp in bf16 (16-bit activations and collectives) on 2 ranks, saved and resumed"
work=$asan/e2e
rm -rf "$work" && mkdir -p "$work"
build/bin/megac data --input /usr/share/common-licenses/GPL-3 --split-paragraphs --output-prefix "$work/corpus" >/dev/null
build/bin/megac compile examples/gpt2-tiny.yaml --tp 2 --sp --bf16 --micro-batch-size 2 -o "$work/prog" --no-build >/dev/null
cmake -S "$work/prog" -B "$work/prog/build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMEGART_DIR="$root/runtime" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$work/prog/build" -j "$(nproc)" >/dev/null
train=(mpirun --oversubscribe -np 2 -x ASAN_OPTIONS=abort_on_error=1:detect_leaks=0 -x UBSAN_OPTIONS
       -x OMP_NUM_THREADS "$work/prog/build/train" --data-path "$work/corpus" --global-batch-size 4
       --lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 1 --train-iters 4 --save "$work/ckpt")
"${train[@]}" --exit-interval 2 | tail -2
"${train[@]}" --load "$work/ckpt" --bf16 | tail -1
echo "sanitizers: megac and megac-opt"
# Release at -O1 with line tables only (-g1) to keep the build short; LLVM's libraries are not
# instrumented, megac's own code is.
cmake -S . -B "$asan/compiler" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$asan/compiler" -j "$(nproc)" --target megac megac-opt >/dev/null
tools=(--megac "$asan/compiler/bin/megac" --megac-opt "$asan/compiler/bin/megac-opt")
echo "sanitizers: the catalogue of bad inputs"
/usr/bin/python3 test/e2e/bad_inputs.py --sanitize "${tools[@]}" --spec examples/gpt2-tiny.yaml \
  --workdir "$asan/bad-inputs" | tail -2
echo "sanitizers: the compiler fuzzer"
/usr/bin/python3 test/fuzz/fuzz_compiler.py "${tools[@]}" --rounds 500 | tail -1
echo "sanitizers: no report"
