#!/usr/bin/env bash
# Runs ON THE LENT GPU MACHINE, from the repo root, with gpu/ carried (made here by
# scripts/gpu_prepare.sh: megac itself cannot run there). Phases run in the order given:
#   scripts/gpu_check.sh [--dry-run] PHASE... [-- ARGS FOR bench/gpu_vs_pytorch.py]
#   env      what the machine has: GPU, driver, nvcc, cmake, MPI, NCCL, BLAS, GoogleTest, torch
#   build    runtime/ into gpu/build-runtime (+ CUDA unit tests), then every default program of
#            gpu/programs.txt with its own generated CMakeLists.txt into gpu/build-NAME
#   test     megart-cuda-tests; the 2-rank NCCL test only with >= 2 GPUs
#   parity   fp32, CUDA vs CPU program, 10 steps: lm_loss and grad_norm within 1e-4 relative
#   bf16     CUDA program, 50 steps, --bf16 vs fp32: lm_loss within 2% relative per step
#   bench    bench/gpu_vs_pytorch.py (megac vs PyTorch bf16 throughput and MFU)
#   all      env build test parity bf16 (bench takes its own call: it needs minutes)
#   build-program NAME...   builds gpu/NAME (bench/gpu_vs_pytorch.py calls this)
# A device machine stays warm only seconds after a call, so each phase first builds what it
# needs (incremental when it is already there). --dry-run prints the commands and runs none.
# FORCE_CARRIED=1 uses gpu/deps' OpenBLAS and GoogleTest even where the system has them (to test
# the fallbacks); PYTHON (default python3: the GPU image's, with torch) and JOBS (16) also count.
# Results: gpu/results/ (metrics, logs) and, when OUT is set, $OUT/gpu_check-summary.txt,
# $OUT/gpu_check.log and $OUT/gpu_results.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
PYTHON=${PYTHON:-python3} # the GPU image's python3 is the one with torch
JOBS=${JOBS:-16}
RES=gpu/results
DRY=0
PHASES=()
BENCH_ARGS=()

usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    -h|--help) usage 0 ;;
    --) shift; BENCH_ARGS=("$@"); break ;;
    all) PHASES+=(env build test parity bf16) ;;
    env|build|test|parity|bf16|bench) PHASES+=("$1") ;;
    build-program) shift; [ $# -gt 0 ] || usage; PHASES+=(build-program); PROGRAM_ARGS=("$@"); break ;;
    *) echo "error: unknown phase '$1'" >&2; usage ;;
  esac
  shift
done
[ ${#PHASES[@]} -gt 0 ] || usage
[ -f gpu/programs.txt ] || { echo "error: gpu/programs.txt not found: run scripts/gpu_prepare.sh on the megac machine and carry gpu/" >&2; exit 2; }

NESTED=0 # build-program: called by the bench, whose caller already logs
[ "${PHASES[*]}" = build-program ] && NESTED=1
if [ $DRY = 0 ]; then
  mkdir -p "$RES"
  # Straight into $OUT as well: a call stopped at its time limit still brings the log back.
  LOGS=("$RES/gpu_check.log"); [ -n "${OUT:-}" ] && [ -d "$OUT" ] && LOGS+=("$OUT/gpu_check.log")
  [ $NESTED = 1 ] || exec > >(tee -a "${LOGS[@]}") 2>&1
fi
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

say() { echo "== $*"; }
# run LOG CMD...: the command's output goes to LOG (shown on failure); --dry-run only prints it.
run() {
  local log=$1; shift
  echo "+ $(printf '%q ' "$@")> $log"
  [ $DRY = 1 ] && return 0
  "$@" >"$log" 2>&1 && return 0
  local rc=$?
  echo "   failed (exit $rc); last lines of $log:"; tail -n 25 "$log" | sed 's/^/   | /'
  return $rc
}
SUMMARY=()
FAILED=0
record() { # PHASE STATUS DETAIL
  [ $DRY = 1 ] && set -- "$1" DRY "(dry run: nothing ran)"
  SUMMARY+=("$(printf '%-22s %-5s %s' "$1" "$2" "$3")")
  [ "$2" = FAIL ] && FAILED=1
  say "$1: $2 $3"
}

# --- What this machine has; decides the CMake arguments (and fallbacks from gpu/deps) -------
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release)
GTEST_PREFIX=
NGPU=0
probe() {
  [ -n "${PROBED:-}" ] && return 0
  PROBED=1
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    NGPU=$(nvidia-smi -L | grep -c '^GPU')
    local cap; cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
    # The generated CMakeLists.txt sets no architecture, so CMake would pick nvcc's default (sm_75).
    CUDA_ARCH=${cap:+${cap}-real}
  fi
  CMAKE_ARGS+=("-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-80-real;90}")
  # A CUDA program's project() looks for nvcc on PATH only.
  command -v nvcc >/dev/null || { [ -e /usr/local/cuda/bin/nvcc ] && CMAKE_ARGS+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc); }
  # NCCL: the toolkit's or the system's (find_library wants libnccl.so), else the libnccl.so.2
  # and nccl.h of the system or of the pip wheel PyTorch brings, named explicitly.
  if compgen -G '/usr/local/cuda/lib64/libnccl.so' >/dev/null || compgen -G '/usr/local/cuda/targets/*/lib/libnccl.so' >/dev/null ||
     compgen -G '/usr/lib/*/libnccl.so' >/dev/null; then
    NCCL_FROM=system
  else
    local dirs lib inc
    read -ra dirs <<<"/usr/lib /usr/local/cuda/ $("$PYTHON" -c 'import nvidia; print(*nvidia.__path__)' 2>/dev/null)"
    lib=$(find "${dirs[@]}" -name 'libnccl.so*' 2>/dev/null | head -1)
    inc=$(find /usr/include "${dirs[@]}" -name nccl.h 2>/dev/null | head -1)
    if [ -n "$lib" ] && [ -n "$inc" ]; then
      CMAKE_ARGS+=("-DNCCL_LIBRARY=$lib" "-DNCCL_INCLUDE_DIR=${inc%/*}")
      export LD_LIBRARY_PATH=${lib%/*}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      NCCL_FROM="$lib"
    else
      NCCL_FROM="NOT FOUND (runtime/cuda needs it)"
    fi
  fi
  # BLAS + cblas.h (libmegart's GEMMs on CPU): the system's, else the OpenBLAS in gpu/deps.
  if [ -z "${FORCE_CARRIED:-}" ] && find /usr/include /usr/local/include -maxdepth 3 -name cblas.h 2>/dev/null | grep -q . &&
     ldconfig -p | grep -Eq 'lib(open)?blas\.so '; then
    BLAS_FROM=system
  elif [ -f gpu/deps/openblas.tar.gz ]; then
    local d=$ROOT/gpu/deps/openblas
    [ -f "$d/lib/libopenblas.so.0" ] || { echo "+ tar -xzf gpu/deps/openblas.tar.gz -C $d"; [ $DRY = 1 ] || { mkdir -p "$d" && tar -xzf gpu/deps/openblas.tar.gz -C "$d"; }; }
    CMAKE_ARGS+=(-DBLA_VENDOR=OpenBLAS "-DCMAKE_LIBRARY_PATH=$d/lib" "-DCBLAS_INCLUDE_DIR=$d/include"
                 "-DOPENBLAS_OPENMP_LIBRARY=$d/lib/libopenblas.so.0")
    # The linker and the loader find libgfortran (needed by libopenblas) here too.
    export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    BLAS_FROM="carried gpu/deps/openblas"
  else
    BLAS_FROM="NOT FOUND (libmegart needs cblas.h and a BLAS)"
  fi
  if [ -z "${FORCE_CARRIED:-}" ] && find /usr/lib /usr/lib64 /usr/local/lib -name 'GTestConfig.cmake' -o -name 'libgtest.a' -o -name 'libgtest.so' 2>/dev/null | grep -q .; then
    GTEST_FROM=system
  elif [ -f gpu/deps/googletest.tar.gz ]; then
    GTEST_PREFIX=$ROOT/gpu/deps/gtest
    GTEST_FROM="carried gpu/deps/googletest (built on first use)"
  else
    GTEST_FROM="NOT FOUND (the unit tests will not build)"
  fi
  command -v mpicc >/dev/null || command -v mpirun >/dev/null && MPI_FROM="$(command -v mpirun)" ||
    MPI_FROM="NOT FOUND (libmegart needs MPI)"
  [ $DRY = 1 ] || printf '%s\n' "${CMAKE_ARGS[@]}" >"$RES/cmake-args.txt"
}

phase_env() {
  probe
  say "machine: $(hostname), $(nproc) CPUs, $(uname -r)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,compute_cap --format=csv 2>&1 || echo "nvidia-smi: not usable"
  echo "nvcc: $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | tail -1)"
  echo "cmake: $(cmake --version | head -1)"
  echo "python: $("$PYTHON" -c 'import sys, torch; print(sys.executable, "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())' 2>&1 | tail -1)"
  echo "MPI: $MPI_FROM $(mpirun --version 2>/dev/null | head -1)"
  echo "NCCL: $NCCL_FROM"; echo "BLAS: $BLAS_FROM"; echo "GoogleTest: $GTEST_FROM"
  echo "CMake arguments: ${CMAKE_ARGS[*]}"
  echo "gpu/: $(cat gpu/PREPARED 2>/dev/null || echo 'no gpu/PREPARED')"
  record env PASS "$NGPU GPU(s); NCCL $NCCL_FROM; BLAS $BLAS_FROM; GoogleTest $GTEST_FROM"
}

# --- Builds -------------------------------------------------------------------------------------
build_gtest() {
  [ -z "$GTEST_PREFIX" ] && return 0
  [ -f "$GTEST_PREFIX/.done" ] && return 0
  [ $DRY = 1 ] || { mkdir -p gpu/deps/src && tar -xzf gpu/deps/googletest.tar.gz -C gpu/deps/src; }
  run "$RES/build-gtest.log" cmake -S gpu/deps/src/googletest -B gpu/deps/gtest-build \
      -DCMAKE_BUILD_TYPE=Release "-DCMAKE_INSTALL_PREFIX=$GTEST_PREFIX" &&
    run "$RES/build-gtest-install.log" cmake --build gpu/deps/gtest-build -j "$JOBS" --target install &&
    { [ $DRY = 1 ] || touch "$GTEST_PREFIX/.done"; }
}

RUNTIME_BUILT=
build_runtime() {
  [ -n "$RUNTIME_BUILT" ] && return "$RUNTIME_BUILT"
  probe
  local args=("${CMAKE_ARGS[@]}") t0=$SECONDS targets=(megart-cuda)
  build_gtest || { RUNTIME_BUILT=1; record build-runtime FAIL "GoogleTest build failed"; return 1; }
  [ -n "$GTEST_PREFIX" ] && args+=("-DCMAKE_PREFIX_PATH=$GTEST_PREFIX")
  if run "$RES/build-runtime-configure.log" cmake -S runtime -B gpu/build-runtime "${args[@]}"; then
    # Only the CUDA backend and its tests: the CPU tests run in CI on the megac machine.
    local have; have=$([ $DRY = 1 ] || cmake --build gpu/build-runtime --target help)
    for t in megart-cuda-tests megart-cuda-mpi-tests; do # absent without GoogleTest / mpiexec
      [ $DRY = 1 ] || grep -q "\.\.\. $t\$" <<<"$have" && targets+=("$t")
    done
    if run "$RES/build-runtime.log" cmake --build gpu/build-runtime -j "$JOBS" --target "${targets[@]}"; then
      RUNTIME_BUILT=0
      record build-runtime PASS "${targets[*]} in $((SECONDS - t0)) s"
      return 0
    fi
  fi
  RUNTIME_BUILT=1
  record build-runtime FAIL "see $RES/build-runtime*.log"
  return 1
}

manifest() { grep -v '^#' gpu/programs.txt; } # NAME TARGET SPEC MICRO_BATCH DEFAULT
declare -A PROGRAM_BUILT=()
# build_program NAME: gpu/NAME with its own CMakeLists.txt (which adds runtime/ as a subproject).
build_program() {
  local name=$1 line target
  [ -n "${PROGRAM_BUILT[$name]:-}" ] && return "${PROGRAM_BUILT[$name]}"
  probe
  line=$(manifest | awk -v n="$name" '$1 == n')
  [ -n "$line" ] || { record "build $name" FAIL "not in gpu/programs.txt"; PROGRAM_BUILT[$name]=1; return 1; }
  target=$(echo "$line" | awk '{print $2}')
  local args=("${CMAKE_ARGS[@]}" "-DMEGART_DIR=$ROOT/runtime") t0=$SECONDS
  [ "$target" = cpu ] && args+=(-DMEGART_CUDA=OFF) # nothing of the CUDA backend to configure
  if run "$RES/build-$name-configure.log" cmake -S "gpu/$name" -B "gpu/build-$name" "${args[@]}" &&
     run "$RES/build-$name.log" cmake --build "gpu/build-$name" -j "$JOBS" --target train; then
    PROGRAM_BUILT[$name]=0
    record "build $name" PASS "gpu/build-$name/train ($target) in $((SECONDS - t0)) s"
    return 0
  fi
  PROGRAM_BUILT[$name]=1
  record "build $name" FAIL "see $RES/build-$name*.log"
  return 1
}

phase_build() {
  build_runtime
  local name
  for name in $(manifest | awk '$5 == "yes" {print $1}'); do build_program "$name"; done
}

# --- Checks -------------------------------------------------------------------------------------
phase_test() {
  build_runtime || { record test FAIL "runtime did not build"; return; }
  local bin=gpu/build-runtime/cuda/megart-cuda-tests rc
  if [ $DRY = 0 ] && [ ! -x $bin ]; then
    record test FAIL "$bin was not built (GoogleTest missing?)"
  else
    run "$RES/test-cuda.log" $bin --gtest_brief=1; rc=$?
    case $rc in
      0) record test-cuda PASS "$(grep -E '\[  PASSED  \]' "$RES/test-cuda.log" 2>/dev/null | tail -1)" ;;
      77) record test-cuda SKIP "no usable GPU: $(tail -1 "$RES/test-cuda.log")" ;;
      *) record test-cuda FAIL "exit $rc; see $RES/test-cuda.log" ;;
    esac
  fi
  bin=gpu/build-runtime/cuda/megart-cuda-mpi-tests
  if [ "$NGPU" -lt 2 ] && [ $DRY = 0 ]; then
    record test-nccl-2rank SKIP "$NGPU GPU(s): NCCL needs one GPU per rank"
  elif [ $DRY = 0 ] && [ ! -x $bin ]; then
    record test-nccl-2rank FAIL "$bin was not built"
  elif run "$RES/test-nccl.log" env OMP_NUM_THREADS=1 mpirun --oversubscribe -np 2 $bin; then
    record test-nccl-2rank PASS "2 ranks"
  else
    record test-nccl-2rank FAIL "see $RES/test-nccl.log"
  fi
}

# OUT/train flags of test/e2e/cuda_parity.py (one definition), with --train-iters set to $1.
train_args() {
  "$PYTHON" - "$1" <<'PY'
import sys
sys.path.insert(0, "test/e2e")
import cuda_parity
args = list(cuda_parity.TRAIN)
args[args.index("--train-iters") + 1] = sys.argv[1]
print("\n".join(args))
PY
}
DATA=(--data-path gpu/data/license)
# no_gpu LOG: the CUDA program refused to start because no device is usable (as cuda_parity.py: a skip).
no_gpu() { grep -q "no CUDA device is usable" "$1" 2>/dev/null; }

phase_parity() {
  local model train
  mapfile -t train < <(train_args 10)
  for model in gpt2-tiny llama-tiny; do
    build_program "cpu-$model" && build_program "cuda-$model" || { record "parity $model" FAIL "build failed"; continue; }
    [ $DRY = 1 ] || rm -f "$RES/parity-$model"-*.jsonl # OUT/train may append to an old one
    local t
    for t in cpu cuda; do
      run "$RES/parity-$model-$t.log" "gpu/build-$t-$model/train" "${train[@]}" "${DATA[@]}" \
        --metrics-file "$RES/parity-$model-$t.jsonl" && continue
      if no_gpu "$RES/parity-$model-$t.log"; then record "parity $model" SKIP "no usable GPU"; else
        record "parity $model" FAIL "$t run failed; see $RES/parity-$model-$t.log"; fi
      continue 2
    done
    if run "$RES/parity-$model.txt" "$PYTHON" scripts/gpu_compare.py "$RES/parity-$model-cuda.jsonl" \
         "$RES/parity-$model-cpu.jsonl"; then
      record "parity $model" PASS "$(tail -1 "$RES/parity-$model.txt" 2>/dev/null)"
    else
      record "parity $model" FAIL "$(tail -1 "$RES/parity-$model.txt" 2>/dev/null)"
    fi
  done
}

phase_bf16() {
  local model train
  mapfile -t train < <(train_args 50)
  for model in gpt2-tiny llama-tiny; do
    build_program "cuda-$model" || { record "bf16 $model" FAIL "build failed"; continue; }
    [ $DRY = 1 ] || rm -f "$RES/bf16-$model"-*.jsonl
    local bin=gpu/build-cuda-$model/train
    if [ $DRY = 0 ] && ! "$bin" --help 2>&1 | grep -q -- '--bf16'; then
      record "bf16 $model" SKIP "OUT/train has no --bf16 flag yet"
      continue
    fi
    run "$RES/bf16-$model-fp32.log" "$bin" "${train[@]}" "${DATA[@]}" --metrics-file "$RES/bf16-$model-fp32.jsonl" &&
      run "$RES/bf16-$model-bf16.log" "$bin" "${train[@]}" "${DATA[@]}" --bf16 --metrics-file "$RES/bf16-$model-bf16.jsonl" ||
      { if no_gpu "$RES/bf16-$model-fp32.log"; then record "bf16 $model" SKIP "no usable GPU"; else
          record "bf16 $model" FAIL "a run failed; see $RES/bf16-$model-*.log"; fi; continue; }
    if run "$RES/bf16-$model.txt" "$PYTHON" scripts/gpu_compare.py "$RES/bf16-$model-bf16.jsonl" \
         "$RES/bf16-$model-fp32.jsonl" --steps 50 --keys lm_loss --tolerance 0.02 --names bf16,fp32 \
         --what "bf16 vs fp32 lm_loss"; then
      record "bf16 $model" PASS "$(tail -1 "$RES/bf16-$model.txt" 2>/dev/null)"
    else
      record "bf16 $model" FAIL "$(tail -1 "$RES/bf16-$model.txt" 2>/dev/null)"
    fi
  done
}

phase_bench() {
  probe
  # The bench builds the programs it needs through `gpu_check.sh build-program` and writes its
  # table to $OUT (or gpu/results) itself.
  local cmd=(env PYTHONUNBUFFERED=1 "$PYTHON" bench/gpu_vs_pytorch.py "${BENCH_ARGS[@]}")
  echo "+ ${cmd[*]}"
  [ $DRY = 1 ] && return 0
  if "${cmd[@]}"; then record bench PASS "table in ${OUT:-$RES}/gpu_bench.md"; else record bench FAIL "exit $?"; fi
}

for p in "${PHASES[@]}"; do
  t0=$SECONDS
  say "phase $p"
  case $p in
    env) phase_env ;;
    build) phase_build ;;
    test) phase_test ;;
    parity) phase_parity ;;
    bf16) phase_bf16 ;;
    bench) phase_bench ;;
    build-program) for n in "${PROGRAM_ARGS[@]}"; do build_program "$n"; done ;;
  esac
  say "phase $p took $((SECONDS - t0)) s"
done

echo
say "summary ($(cat gpu/PREPARED 2>/dev/null))"
printf '%s\n' "${SUMMARY[@]}"
if [ $DRY = 0 ]; then
  printf '%s\n' "${SUMMARY[@]}" >"$RES/summary.txt"
  if [ $NESTED = 0 ] && [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    cp "$RES/summary.txt" "$OUT/gpu_check-summary.txt"
    tar -czf "$OUT/gpu_results.tar.gz" --exclude='*.tar.gz' -C gpu results
  fi
fi
exit $FAILED
