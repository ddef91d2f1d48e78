#!/usr/bin/env bash
# megac, megac-opt and the runtime under AddressSanitizer + UndefinedBehaviorSanitizer (any report
# is fatal): the runtime's unit tests, its MPI tests on 2 ranks, the reader fuzzer, one small e2e
# plan (GPT-2 tp 2 x sp on 2 ranks compiled by megac, trained, saved, resumed), the catalogue of
# bad inputs and the compiler fuzzer, both with sanitized megac, megac-opt and OUT/train.
# One sanitized build in build/asan (incremental): the sanitized megac links the programs it
# compiles against the sanitized runtime, with the same flags, so the runtime is built once.
# Run by ctest as sanitizers.
set -euo pipefail
cd "$(dirname "$0")/.."
asan=build/asan
jobs=$(nproc) # before OMP_NUM_THREADS=1, which nproc obeys
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
started=$(date +%s)
phase() { echo "sanitizers: $* (at $(( $(date +%s) - started )) s)"; }

# Release at -O1 with line tables only (-g1) keeps the build short; LLVM's libraries are not
# instrumented, megac's and the runtime's code is. The CPU runtime only: the CUDA backend's host
# code is not what these runs exercise.
phase "building megac, megac-opt and the runtime"
cmake -S . -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" -DMEGART_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$asan" -j "$jobs" --target megac megac-opt megart-tests megart-mpi-tests megart-fuzz-readers >/dev/null
megac=$asan/bin/megac

phase "runtime unit tests"
"$asan/runtime/megart-tests" --gtest_brief=1
phase "reader fuzzer"
"$asan/runtime/megart-fuzz-readers" 2000
# Open MPI's own allocations are not ours to fix: leak checking stays on for the single-process
# runs above and off under mpirun.
phase "MPI tests on 2 ranks"
ASAN_OPTIONS=abort_on_error=1:detect_leaks=0 mpirun --oversubscribe -np 2 \
  -x ASAN_OPTIONS -x UBSAN_OPTIONS -x OMP_NUM_THREADS "$asan/runtime/megart-mpi-tests" --gtest_brief=1

phase "GPT-2 tp 2 + sp in bf16 (16-bit activations and collectives) on 2 ranks, saved and resumed"
work=$asan/e2e
rm -rf "$work" && mkdir -p "$work"
"$megac" data --input /usr/share/common-licenses/GPL-3 --split-paragraphs --output-prefix "$work/corpus" >/dev/null
"$megac" compile examples/gpt2-tiny.yaml --tp 2 --sp --bf16 --micro-batch-size 2 -o "$work/prog" >/dev/null
train=(mpirun --oversubscribe -np 2 -x ASAN_OPTIONS=abort_on_error=1:detect_leaks=0 -x UBSAN_OPTIONS
       -x OMP_NUM_THREADS "$work/prog/train" --data-path "$work/corpus" --global-batch-size 4
       --lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 1 --train-iters 4 --save "$work/ckpt")
"${train[@]}" --exit-interval 2 | tail -2
"${train[@]}" --load "$work/ckpt" --bf16 | tail -1

tools=(--megac "$megac" --megac-opt "$asan/bin/megac-opt")
phase "the catalogue of bad inputs"
/usr/bin/python3 test/e2e/bad_inputs.py --sanitize "${tools[@]}" --spec examples/gpt2-tiny.yaml \
  --workdir "$asan/bad-inputs" | tail -2
phase "the compiler fuzzer"
/usr/bin/python3 test/fuzz/fuzz_compiler.py "${tools[@]}" --rounds 500 | tail -1
phase "no report"
