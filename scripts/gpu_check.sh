#!/usr/bin/env bash
# Runs ON THE LENT GPU MACHINE, from the repo root, with gpu/ carried (made here by
# scripts/gpu_prepare.sh: megac itself cannot run there). Phases run in the order given:
#   scripts/gpu_check.sh [--dry-run] PHASE... [-- ARGS FOR bench/gpu_vs_pytorch.py]
#   env      what the machine has (GPU, driver, nvcc, cmake, ninja, MPI, NCCL, BLAS, GoogleTest,
#            torch), and whether the carried runtime/ and gpu/ match gpu/PREPARED's hashes
#   build    configures gpu/CMakeLists.txt (one build: runtime/ once, every program, the CUDA
#            tests) into build-gpu/ at the repo root and builds `all`: the cpu-*/cuda-* programs
#            and the CUDA unit tests, not the bench-* programs
#   smoke    cuda-gpt2-tiny, 2 iterations with CUDA_LAUNCH_BLOCKING=1 (a first fault at its kernel)
#   test     megart-cuda-tests, each suite in its own process; the 2-rank NCCL test only with >= 2
#            GPUs and MPI
#   parity   fp32, CUDA vs CPU program, 10 steps: lm_loss and grad_norm within 1e-4 relative (the
#            example models, with dropout 0.1: test/e2e/specs/*-dropout.yaml, and the mid-size
#            test/e2e/specs/gpt2-mid.yaml against the CPU metrics carried in gpu/reference)
#   bf16     CUDA program, 50 steps, --bf16 vs fp32: lm_loss within 2% relative per step
#   memcheck compute-sanitizer --tool memcheck over one iteration of cuda-gpt2-tiny
#   bench    bench/gpu_vs_pytorch.py (megac vs PyTorch bf16 throughput and MFU); it builds the
#            bench-* programs it needs through build-program
#   all      env build smoke test parity bf16 memcheck (bench takes its own call: it needs minutes)
#   build-program NAME...   builds build-gpu/bin/NAME (bench/gpu_vs_pytorch.py calls this)
# Each phase builds what it needs first (incremental: a no-op when `build` ran). build-gpu/ is
# kept by a machine that is still warm (about 30 s after a call), never inside gpu/, which
# each call's carry replaces. --dry-run prints the commands and runs none.
#
# The device tool calls for a GPU session (after scripts/gpu_prepare.sh here):
#   run(command="scripts/gpu_check.sh all", carry=["gpu"], timeout_s=480)
#   run(command="scripts/gpu_check.sh env bench", carry=["gpu"], timeout_s=600)
#     (bench -- --configs 124m, then bench -- --configs 1.3b, if one call is too short)
#   what comes back (files_at): gpu_check.log (everything printed), gpu_check-summary.txt,
#   gpu_results.tar.gz (gpu/results: every command's log, metrics, comparisons),
#   gpu_running.log (only when the call was stopped: the output of the command it stopped in),
#   gpu_bench.md and gpu_bench.json (bench).
#
# Time limits: every command runs under `timeout -k 10`: T_BUILD (300 s) per configure or build,
# T_TEST (240 s) for the CUDA unit tests, T_TRAIN (120 s) per training run, and never past
# BUDGET (585 s from the start: a device call's 600 s limit minus a margin), so the script
# always ends on its own and writes its summary. Results are saved to $OUT after every command,
# so a call stopped anyway still returns what ran.
# Environment: FORCE_CARRIED=1 uses gpu/deps' OpenBLAS and GoogleTest even where the system has
# them (to test the fallbacks); PYTHON (default python3: the GPU image's, with torch); JOBS
# (nproc); MEGART_CMAKE_ARGS (extra CMake arguments, e.g. -DMEGART_MPI=OFF); T_BUILD, T_TEST,
# T_TRAIN, BUDGET (seconds).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
PYTHON=${PYTHON:-python3} # the GPU image's python3 is the one with torch
JOBS=${JOBS:-$(nproc)}
T_BUILD=${T_BUILD:-300}
T_TEST=${T_TEST:-240}
T_TRAIN=${T_TRAIN:-120}
BUDGET=${BUDGET:-585}
BUILD=build-gpu      # the one build (git-ignored: /build*/)
DEPS=build-gpu-deps  # the fallbacks of gpu/deps, unpacked and built (kept like build-gpu/)
RES=gpu/results
DRY=0
PHASES=()
BENCH_ARGS=()
PROGRAM_ARGS=()

usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    -h|--help) usage 0 ;;
    --) shift; BENCH_ARGS=("$@"); break ;;
    all) PHASES+=(env build smoke test parity bf16 memcheck) ;;
    env|build|smoke|test|parity|bf16|memcheck|bench) PHASES+=("$1") ;;
    build-program) shift; [ $# -gt 0 ] || usage; PHASES+=(build-program); PROGRAM_ARGS=("$@"); break ;;
    *) echo "error: unknown phase '$1'" >&2; usage ;;
  esac
  shift
done
[ ${#PHASES[@]} -gt 0 ] || usage
for f in gpu/programs.txt gpu/CMakeLists.txt; do
  [ -f "$f" ] || { echo "error: $f not found: run scripts/gpu_prepare.sh on the megac machine and carry gpu/" >&2; exit 2; }
done

NESTED=0 # build-program: called by the bench, whose caller already logs
[ "${PHASES[*]}" = build-program ] && NESTED=1
OUTDIR= # $OUT, where the device tool's files come back from
[ -n "${OUT:-}" ] && [ -d "$OUT" ] && [ $DRY = 0 ] && OUTDIR=$OUT
if [ $DRY = 0 ]; then
  # This call's results only: earlier ones came back under $OUT, and a gpu/results/ of a run on
  # the megac machine would otherwise travel with gpu/ into the tarball.
  [ $NESTED = 1 ] || rm -rf "$RES"
  mkdir -p "$RES"
  # Straight into $OUT as well: a call stopped at its time limit still brings the log back.
  LOGS=("$RES/gpu_check.log"); [ -n "$OUTDIR" ] && LOGS+=("$OUTDIR/gpu_check.log")
  [ $NESTED = 1 ] || exec > >(tee "${LOGS[@]}") 2>&1
fi
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

say() { echo "== $*"; }
SUMMARY=()
FAILED=0
record() { # PHASE STATUS DETAIL
  [ $DRY = 1 ] && set -- "$1" DRY "(dry run: nothing ran)"
  SUMMARY+=("$(printf '%-22s %-5s %s' "$1" "$2" "$3")")
  [ "$2" = FAIL ] && FAILED=1
  say "$1: $2 $3"
}
# The summary so far and gpu/results as a tarball, into $OUT: after every command and phase.
save_results() {
  [ -n "$OUTDIR" ] && [ $NESTED = 0 ] || return 0
  printf '%s\n' "${SUMMARY[@]}" >"$OUTDIR/gpu_check-summary.txt"
  tar -czf "$OUTDIR/gpu_results.tar.gz.part" --exclude='*.tar.gz' -C gpu results 2>/dev/null &&
    mv -f "$OUTDIR/gpu_results.tar.gz.part" "$OUTDIR/gpu_results.tar.gz"
}
# limit SECONDS: SECONDS, or less so that the command ends inside BUDGET.
limit() {
  local left=$((BUDGET - SECONDS - 10))
  echo $(($1 < left ? $1 : left))
}
# run LOG SECONDS CMD...: CMD under `timeout -k 10`, its output into LOG (while it runs, into
# $OUT/gpu_running.log, so that a stopped call shows it), the end shown on failure. --dry-run
# only prints it.
run() {
  local log=$1 want=$2 secs; secs=$(limit "$2"); shift 2
  echo "+ timeout $secs $(printf '%q ' "$@")> $log"
  [ $DRY = 1 ] && return 0
  # The budget spent (timeout 0 would mean no limit at all): not started.
  if [ "$secs" -lt "$want" ] && [ "$secs" -lt 5 ]; then
    echo "   not started: the time budget (BUDGET=$BUDGET s) is spent" | tee "$log"
    return 124
  fi
  local live=$log rc=0
  [ -n "$OUTDIR" ] && live=$OUTDIR/gpu_running.log
  timeout -k 10 "$secs" "$@" >"$live" 2>&1 || rc=$?
  [ "$live" = "$log" ] || { cp "$live" "$log" && rm -f "$live"; }
  save_results
  [ $rc = 0 ] && return 0
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    echo "   TIMED OUT after $secs s (exit $rc); last lines of $log:"
  else
    echo "   failed (exit $rc); last lines of $log:"
  fi
  tail -n 25 "$log" | sed 's/^/   | /'
  return $rc
}
timed_out() { [ "$1" = 124 ] || [ "$1" = 137 ]; }

# --- What gpu/ was made from: gpu_prepare.sh's hashes, recomputed on the carried tree ----------
source scripts/gpu_common.sh # tree_sha1, generated_files: as gpu_prepare.sh computed them
prepared() { sed -n "s/^$1 //p" gpu/PREPARED 2>/dev/null; }
CHECKED_PREPARED=
check_prepared() {
  [ -n "$CHECKED_PREPARED" ] && return 0
  CHECKED_PREPARED=1
  local runtime compiler generated want gen bad=()
  mapfile -t gen < <(generated_files)
  runtime=$(tree_sha1 runtime) compiler=$(tree_sha1 lib include dialects tools examples)
  generated=$(tree_sha1 "${gen[@]}")
  want=$(prepared runtime-sha1)
  if [ -z "$want" ]; then
    bad+=("gpu/PREPARED has no hashes (made by an older gpu_prepare.sh)")
  else
    [ "$runtime" = "$want" ] || bad+=("runtime/ differs from the runtime/ the generated code was made for: the programs may not build or may behave differently")
    [ "$compiler" = "$(prepared compiler-sha1)" ] || bad+=("lib/ include/ dialects/ tools/ examples/ differ from those megac had when it generated gpu/: the generated code is not this tree's megac's")
    [ "$generated" = "$(prepared generated-sha1)" ] || bad+=("gpu/'s generated sources changed after gpu_prepare.sh wrote them")
  fi
  if [ ${#bad[@]} = 0 ]; then
    record prepared PASS "runtime/, compiler sources and gpu/ match gpu/PREPARED"
    return 0
  fi
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  printf '!!! WARNING: %s\n' "${bad[@]}"
  echo "!!! gpu/ was made from: $(head -1 gpu/PREPARED 2>/dev/null)"
  echo "!!! Fix: run scripts/gpu_prepare.sh on the megac machine again, then carry the new gpu/."
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  record prepared WARN "gpu/ does not match the carried tree: ${bad[*]}"
}

# --- What this machine has; decides the CMake arguments (and fallbacks from gpu/deps) -------
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release)
GENERATOR="Unix Makefiles"
GTEST_PREFIX=
NGPU=0
probe() {
  [ -n "${PROBED:-}" ] && return 0
  PROBED=1
  command -v ninja >/dev/null && GENERATOR=Ninja
  CMAKE_ARGS+=(-G "$GENERATOR")
  local cap=
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    NGPU=$(nvidia-smi -L | grep -c '^GPU')
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
  fi
  # The GPU's own architecture (90 on an H100 / H200: sm_90 code + PTX); without a GPU,
  # gpu/CMakeLists.txt's default, 90.
  [ -n "$cap" ] && CMAKE_ARGS+=("-DCMAKE_CUDA_ARCHITECTURES=$cap")
  # project(... CUDA) looks for nvcc on PATH only.
  command -v nvcc >/dev/null || { [ -e /usr/local/cuda/bin/nvcc ] && CMAKE_ARGS+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc); }
  # NCCL: the toolkit's or the system's (find_library wants libnccl.so), else the libnccl.so.2
  # and nccl.h of the system or of the pip wheel PyTorch brings, named explicitly.
  if compgen -G '/usr/local/cuda/lib64/libnccl.so' >/dev/null || compgen -G '/usr/local/cuda/targets/*/lib/libnccl.so' >/dev/null ||
     compgen -G '/usr/lib/*/libnccl.so' >/dev/null; then
    NCCL_FROM=system
  else
    local dirs lib inc
    read -ra dirs <<<"/usr/lib /usr/local/cuda/ $("$PYTHON" -c 'import nvidia; print(*nvidia.__path__)' 2>/dev/null)"
    lib=$(find "${dirs[@]}" -name 'libnccl.so*' 2>/dev/null | sort | head -n 1)
    inc=$(find /usr/include "${dirs[@]}" -name nccl.h 2>/dev/null | sort | head -n 1)
    if [ -n "$lib" ] && [ -n "$inc" ]; then
      CMAKE_ARGS+=("-DNCCL_LIBRARY=$lib" "-DNCCL_INCLUDE_DIR=${inc%/*}")
      export LD_LIBRARY_PATH=${lib%/*}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      NCCL_FROM="$lib"
    else
      NCCL_FROM="NOT FOUND (runtime/cuda needs it)"
    fi
  fi
  # BLAS + cblas.h (libmegart's GEMMs on CPU): the system's OpenBLAS, else the one in gpu/deps.
  # (grep >/dev/null, not grep -q: -q exits at the first match and, under pipefail, the
  # producer's SIGPIPE would make the test fail.)
  if [ -z "${FORCE_CARRIED:-}" ] &&
     find /usr/include /usr/local/include -maxdepth 3 -name cblas.h 2>/dev/null | grep . >/dev/null &&
     ldconfig -p 2>/dev/null | grep -E 'lib(open)?blas\.so ' >/dev/null; then
    BLAS_FROM=system
  elif [ -f gpu/deps/openblas.tar.gz ]; then
    local d=$ROOT/$DEPS/openblas
    if [ ! -f "$d/lib/libopenblas.so.0" ]; then
      echo "+ tar -xzf gpu/deps/openblas.tar.gz -C $d"
      [ $DRY = 1 ] || { mkdir -p "$d" && tar -xzf gpu/deps/openblas.tar.gz -C "$d"; }
    fi
    CMAKE_ARGS+=(-DBLA_VENDOR=OpenBLAS "-DCMAKE_LIBRARY_PATH=$d/lib" "-DCBLAS_INCLUDE_DIR=$d/include"
                 "-DOPENBLAS_OPENMP_LIBRARY=$d/lib/libopenblas.so.0")
    # The linker finds libgfortran (needed by libopenblas) here too; the programs find it by
    # their rpath (gpu/CMakeLists.txt links with DT_RPATH).
    export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    BLAS_FROM="carried gpu/deps/openblas.tar.gz (in $DEPS/openblas)"
  else
    BLAS_FROM="NOT FOUND (libmegart needs cblas.h and a BLAS)"
  fi
  if [ -z "${FORCE_CARRIED:-}" ] && find /usr/lib /usr/lib64 /usr/local/lib \
       \( -name GTestConfig.cmake -o -name libgtest.a -o -name libgtest.so \) 2>/dev/null | grep . >/dev/null; then
    GTEST_FROM=system
  elif [ -f gpu/deps/googletest.tar.gz ]; then
    GTEST_PREFIX=$ROOT/$DEPS/gtest
    CMAKE_ARGS+=("-DCMAKE_PREFIX_PATH=$GTEST_PREFIX")
    GTEST_FROM="carried gpu/deps/googletest.tar.gz (built into $DEPS/gtest on first use)"
  else
    GTEST_FROM="NOT FOUND (the CUDA unit tests will not build)"
  fi
  if command -v mpirun >/dev/null; then
    MPI_FROM="mpirun at $(command -v mpirun)"
  elif command -v mpicc >/dev/null; then
    MPI_FROM="mpicc at $(command -v mpicc), no mpirun"
  else
    MPI_FROM="none: the runtime builds without MPI (one process; no 2-rank NCCL test)"
  fi
  # Extra arguments from the caller, e.g. -DMEGART_MPI=OFF.
  local extra=()
  read -ra extra <<<"${MEGART_CMAKE_ARGS:-}"
  CMAKE_ARGS+=("${extra[@]}")
  [ $DRY = 1 ] || printf '%s\n' "${CMAKE_ARGS[@]}" >"$RES/cmake-args.txt"
}

phase_env() {
  probe
  say "machine: $(hostname), $(nproc) CPUs, $(uname -r)"
  { command -v nvidia-smi >/dev/null &&
      nvidia-smi --query-gpu=index,name,memory.total,driver_version,compute_cap --format=csv 2>&1; } ||
    echo "nvidia-smi: not usable"
  echo "nvcc: $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | tail -n 1)"
  echo "cmake: $(cmake --version | head -n 1); generator $GENERATOR $(ninja --version 2>/dev/null)"
  echo "python: $("$PYTHON" -c 'import sys, torch; print(sys.executable, "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())' 2>&1 | tail -n 1)"
  echo "MPI: $MPI_FROM $(mpirun --version 2>/dev/null | head -n 1)"
  echo "NCCL: $NCCL_FROM"; echo "BLAS: $BLAS_FROM"; echo "GoogleTest: $GTEST_FROM"
  echo "CMake arguments: ${CMAKE_ARGS[*]}"
  echo "gpu/: $(head -n 1 gpu/PREPARED 2>/dev/null || echo 'no gpu/PREPARED')"
  echo "build-gpu/: $([ -f $BUILD/CMakeCache.txt ] && echo 'configured (kept from an earlier call)' || echo 'not there yet')"
  record env PASS "$NGPU GPU(s); NCCL $NCCL_FROM; BLAS $BLAS_FROM; GoogleTest $GTEST_FROM; MPI $MPI_FROM"
  check_prepared
}

# --- Builds -------------------------------------------------------------------------------------
build_gtest() {
  [ -z "$GTEST_PREFIX" ] && return 0
  [ -f "$GTEST_PREFIX/.done" ] && return 0
  [ $DRY = 1 ] || { rm -rf "$DEPS/src" && mkdir -p "$DEPS/src" && tar -xzf gpu/deps/googletest.tar.gz -C "$DEPS/src"; }
  run "$RES/build-gtest-configure.log" "$T_BUILD" cmake -S "$DEPS/src/googletest" -B "$DEPS/gtest-build" \
      -G "$GENERATOR" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_INSTALL_PREFIX=$GTEST_PREFIX" &&
    run "$RES/build-gtest.log" "$T_BUILD" cmake --build "$DEPS/gtest-build" -j "$JOBS" --target install &&
    { [ $DRY = 1 ] || touch "$GTEST_PREFIX/.done"; }
}

CONFIGURED=
configure() {
  [ -n "$CONFIGURED" ] && return "$CONFIGURED"
  probe
  check_prepared
  CONFIGURED=1
  build_gtest || { record configure FAIL "GoogleTest (gpu/deps) did not build; see $RES/build-gtest*.log"; return 1; }
  # A build-gpu/ configured for another checkout path or generator cannot be reused.
  if [ -f $BUILD/CMakeCache.txt ]; then
    local home gen
    home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' $BUILD/CMakeCache.txt)
    gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' $BUILD/CMakeCache.txt)
    if [ "$home" != "$ROOT/gpu" ] || [ "$gen" != "$GENERATOR" ]; then
      echo "+ rm -rf $BUILD (configured for $home with $gen)"
      [ $DRY = 1 ] || rm -rf $BUILD
    fi
  fi
  local t0=$SECONDS rc=0
  run "$RES/configure.log" "$T_BUILD" cmake -S gpu -B $BUILD "${CMAKE_ARGS[@]}" || rc=$?
  if [ $rc = 0 ]; then
    CONFIGURED=0
    record configure PASS "$BUILD in $((SECONDS - t0)) s; $(grep -o 'megart: [^:]*MPI[^:]*' "$RES/configure.log" 2>/dev/null | head -n 1)"
  elif timed_out $rc; then
    record configure FAIL "timed out (T_BUILD=$T_BUILD s); see $RES/configure.log"
  else
    record configure FAIL "exit $rc; see $RES/configure.log"
  fi
  return $CONFIGURED
}

# has_target NAME: whether the configured build has that target (parses `--target help`, whose
# lines are "NAME: phony" with Ninja and "... NAME" with Makefiles).
has_target() {
  [ $DRY = 1 ] && return 0
  cmake --build $BUILD --target help 2>/dev/null | grep -E "^(\.\.\. )?$1(:| |\$)" >/dev/null
}

manifest() { grep -v '^#' gpu/programs.txt; } # NAME TARGET SPEC MICRO_BATCH IN_ALL
declare -A PROGRAM_BUILT=()

# Keep going past a failure, so that one broken source does not hide the state of the rest.
keep_going() { if [ "$GENERATOR" = Ninja ]; then echo -k0; else echo -k; fi; }

phase_build() {
  configure || return 1
  local t0=$SECONDS rc=0 name failed=() built=()
  run "$RES/build.log" "$T_BUILD" cmake --build $BUILD -j "$JOBS" -- "$(keep_going)" || rc=$?
  if [ $DRY = 1 ]; then
    for name in $(manifest | awk '$5 == "yes" {print $1}'); do PROGRAM_BUILT[$name]=0; done
    record build DRY ""
    return 0
  fi
  # Which programs of `all` failed: Ninja names each failed output ("FAILED: ... NAME.dir/...").
  for name in $(manifest | awk '$5 == "yes" {print $1}'); do
    if [ -x "$BUILD/bin/$name" ] && ! grep -E "^FAILED: .*(CMakeFiles/$name\.dir/|bin/$name( |\$))" "$RES/build.log" >/dev/null; then
      built+=("$name"); [ $rc = 0 ] && PROGRAM_BUILT[$name]=0
    else
      failed+=("$name"); PROGRAM_BUILT[$name]=1
    fi
  done
  local tests=megart-cuda-tests
  has_target megart-cuda-tests || tests+=" NOT CONFIGURED (GoogleTest missing?)"
  if [ $rc = 0 ]; then
    record build PASS "${#built[@]} programs + $tests in $((SECONDS - t0)) s"
  elif timed_out $rc; then
    record build FAIL "timed out after $((SECONDS - t0)) s (T_BUILD=$T_BUILD); built: ${built[*]:-none}; see $RES/build.log"
  else
    record build FAIL "exit $rc; failed: ${failed[*]:-none of the programs (the runtime or its tests?)}; see $RES/build.log"
  fi
  return $rc
}

# build_target LABEL TARGET...: builds the targets (and what they need) in the one build.
build_target() {
  local label=$1; shift
  configure || return 1
  run "$RES/build-$label.log" "$T_BUILD" cmake --build $BUILD -j "$JOBS" --target "$@"
}

# build_program NAME: build-gpu/bin/NAME (a no-op when `build` made it).
build_program() {
  local name=$1 t0=$SECONDS
  [ -n "${PROGRAM_BUILT[$name]:-}" ] && return "${PROGRAM_BUILT[$name]}"
  if ! manifest | awk -v n="$name" '$1 == n {found = 1} END {exit !found}'; then
    record "build $name" FAIL "not in gpu/programs.txt"; PROGRAM_BUILT[$name]=1; return 1
  fi
  if build_target "$name" "$name"; then
    PROGRAM_BUILT[$name]=0
    record "build $name" PASS "$BUILD/bin/$name in $((SECONDS - t0)) s"
    return 0
  fi
  PROGRAM_BUILT[$name]=1
  record "build $name" FAIL "see $RES/build-$name.log"
  return 1
}

# --- Checks -------------------------------------------------------------------------------------
# run_suites BIN LABEL: each GoogleTest suite of BIN in its own process, so that a sticky CUDA
# fault (which poisons the context for the rest of a process) ends one suite, not all of them.
# Exit 77 is a suite's "no usable GPU". One summary line; a log per suite in $RES.
run_suites() {
  local bin=$1 label=$2 suite rc passed=0 skipped=0 failed=()
  if [ $DRY = 1 ]; then
    echo "+ $bin --gtest_list_tests, then each suite S alone: $bin --gtest_filter='S.*' --gtest_brief=1"
    record "$label" DRY
    return
  fi
  local suites=()
  mapfile -t suites < <("$bin" --gtest_list_tests 2>/dev/null | grep -E '^[^ #].*\.$' | sed 's/\.$//')
  if [ ${#suites[@]} -eq 0 ]; then # no GPU (the tests' main says so before listing), or no list: one run
    rc=0
    run "$RES/$label.log" "$T_TEST" "$bin" --gtest_brief=1 || rc=$?
    case $rc in
      0) record "$label" PASS "$(grep -E '\[  PASSED  \]' "$RES/$label.log" 2>/dev/null | tail -n 1) (one process)" ;;
      77) no_usable_gpu "$label" "$(tail -n 1 "$RES/$label.log")" ;;
      *) record "$label" FAIL "exit $rc and no suites listed; see $RES/$label.log" ;;
    esac
    return
  fi
  for suite in "${suites[@]}"; do
    rc=0
    run "$RES/$label-${suite//\//_}.log" "$T_TEST" "$bin" --gtest_filter="$suite.*" --gtest_brief=1 || rc=$?
    case $rc in
      0) passed=$((passed + 1)) ;;
      77) skipped=$((skipped + 1)) ;;
      *) failed+=("$suite (exit $rc)") ;;
    esac
  done
  if [ ${#failed[@]} -gt 0 ]; then
    record "$label" FAIL "${#failed[@]} of ${#suites[@]} suites failed: ${failed[*]}; logs $RES/$label-*.log"
  elif [ $passed -eq 0 ]; then
    no_usable_gpu "$label" "$(tail -n 1 "$RES/$label-${suites[0]//\//_}.log")"
  else
    record "$label" PASS "$passed suites passed, $skipped skipped (one process each)"
  fi
}

phase_test() {
  configure || { record test FAIL "the build did not configure"; return; }
  local bin=$BUILD/megart/cuda/megart-cuda-tests rc=0
  if ! has_target megart-cuda-tests; then
    record test-cuda FAIL "megart-cuda-tests is not configured (GoogleTest missing? see $RES/configure.log)"
  elif ! build_target megart-cuda-tests megart-cuda-tests; then
    record test-cuda FAIL "megart-cuda-tests did not build; see $RES/build-megart-cuda-tests.log"
  else
    run_suites "$bin" test-cuda
  fi
  bin=$BUILD/megart/cuda/megart-cuda-mpi-tests
  if [ "$NGPU" -lt 2 ] && [ $DRY = 0 ]; then
    record test-nccl-2rank SKIP "$NGPU GPU(s): NCCL needs one GPU per rank"
  elif ! has_target megart-cuda-mpi-tests || ! command -v mpirun >/dev/null; then
    record test-nccl-2rank SKIP "no MPI here (runtime built without it)"
  elif ! build_target megart-cuda-mpi-tests megart-cuda-mpi-tests; then
    record test-nccl-2rank FAIL "megart-cuda-mpi-tests did not build"
  elif run "$RES/test-nccl.log" "$T_TEST" env OMP_NUM_THREADS=1 mpirun --oversubscribe -np 2 $bin; then
    record test-nccl-2rank PASS "2 ranks"
  else
    record test-nccl-2rank FAIL "see $RES/test-nccl.log"
  fi
}

# OUT/train flags of the e2e tests (test/e2e/e2e_util.py, one definition), with --train-iters $1.
train_args() {
  "$PYTHON" - "$1" <<'PY'
import sys
sys.path.insert(0, "test/e2e")
import e2e_util
print("\n".join(e2e_util.train_flags(sys.argv[1])))
PY
}
DATA=(--data-path gpu/data/license)
# no_gpu LOG: the CUDA program refused to start because no device is usable (as cuda_parity.py: a skip).
no_gpu() { grep -q "no CUDA device is usable" "$1" 2>/dev/null; }
# why_failed LOG RC: "timed out ..." or "see LOG".
why_failed() { if timed_out "$2"; then echo "timed out (T_TRAIN=$T_TRAIN s); see $1"; else echo "exit $2; see $1"; fi; }

# A training run of check LABEL failed with RC: SKIP when there is no usable GPU, else FAIL.
record_run_failure() { # LABEL LOG RC WHAT
  if no_gpu "$2"; then no_usable_gpu "$1" "$(grep -o 'no CUDA device is usable here: [^;]*' "$2" | head -n 1)"
  else record "$1" FAIL "$4 run: $(why_failed "$2" "$3")"; fi
}
# no_usable_gpu LABEL DETAIL: CUDA found no device. A SKIP where nvidia-smi lists none either (no
# GPU here); a FAIL where it lists some: a driver that does not match the CUDA runtime (or a GPU
# CUDA cannot use) must not read as "all skipped" on the one session that has a GPU.
no_usable_gpu() {
  probe # NGPU
  if [ "$NGPU" -gt 0 ]; then
    record "$1" FAIL "nvidia-smi lists $NGPU GPU(s) but CUDA finds no usable device ($2): driver / CUDA runtime mismatch?"
  else
    record "$1" SKIP "no usable GPU${2:+: $2}"
  fi
}

# Compares two metrics files with scripts/gpu_compare.py ARGS into TXT; records LABEL with its verdict.
record_comparison() { # LABEL TXT ARGS...
  local label=$1 txt=$2 verdict=FAIL
  shift 2
  run "$txt" 60 "$PYTHON" scripts/gpu_compare.py "$@" && verdict=PASS
  record "$label" "$verdict" "$(tail -n 1 "$txt" 2>/dev/null)"
}

# smoke: the first CUDA program, 2 iterations, every launch synchronous (CUDA_LAUNCH_BLOCKING=1):
# a first fault is reported at the kernel that made it, before anything else runs.
phase_smoke() {
  local rc=0 train
  mapfile -t train < <(train_args 2)
  build_program cuda-gpt2-tiny || { record smoke FAIL "build failed"; return; }
  run "$RES/smoke.log" "$T_TRAIN" env CUDA_LAUNCH_BLOCKING=1 "$BUILD/bin/cuda-gpt2-tiny" "${train[@]}" "${DATA[@]}" \
    --metrics-file "$RES/smoke.jsonl" || rc=$?
  if [ $rc = 0 ]; then record smoke PASS "cuda-gpt2-tiny, 2 iterations with CUDA_LAUNCH_BLOCKING=1"
  else record_run_failure smoke "$RES/smoke.log" $rc "CUDA_LAUNCH_BLOCKING=1"; fi
}

# memcheck: compute-sanitizer's memcheck over one iteration of the first CUDA program: no
# out-of-bounds or misaligned access, no use of freed device memory.
phase_memcheck() {
  local rc=0 train sanitizer
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [ $DRY = 0 ] && [ ! -x "$sanitizer" ]; then
    record memcheck SKIP "no compute-sanitizer (PATH, /usr/local/cuda/bin)"
    return
  fi
  mapfile -t train < <(train_args 1)
  build_program cuda-gpt2-tiny || { record memcheck FAIL "build failed"; return; }
  run "$RES/memcheck.log" "$T_TRAIN" "$sanitizer" --tool memcheck --error-exitcode 3 "$BUILD/bin/cuda-gpt2-tiny" \
    "${train[@]}" "${DATA[@]}" --metrics-file "$RES/memcheck.jsonl" || rc=$?
  if [ $rc = 0 ]; then record memcheck PASS "$(grep -E 'ERROR SUMMARY' "$RES/memcheck.log" 2>/dev/null | tail -n 1)"
  elif [ $rc = 3 ]; then record memcheck FAIL "$(grep -E 'ERROR SUMMARY' "$RES/memcheck.log" | tail -n 1); see $RES/memcheck.log"
  else record_run_failure memcheck "$RES/memcheck.log" $rc "compute-sanitizer"; fi
}

phase_parity() {
  local model train t rc sides cpu
  mapfile -t train < <(train_args 10)
  for model in gpt2-tiny llama-tiny gpt2-dropout llama-dropout gpt2-mid; do
    # A CPU side carried from the megac machine (gpu/reference, gpu_prepare.sh) is not rerun here.
    cpu=gpu/reference/parity-$model-cpu.jsonl sides="cpu cuda"
    [ -f "$cpu" ] && sides=cuda || cpu=$RES/parity-$model-cpu.jsonl
    { [ "$sides" = cuda ] || build_program "cpu-$model"; } && build_program "cuda-$model" ||
      { record "parity $model" FAIL "build failed"; continue; }
    [ $DRY = 1 ] || rm -f "$RES/parity-$model"-*.jsonl # OUT/train may append to an old one
    for t in $sides; do
      rc=0
      run "$RES/parity-$model-$t.log" "$T_TRAIN" "$BUILD/bin/$t-$model" "${train[@]}" "${DATA[@]}" \
        --metrics-file "$RES/parity-$model-$t.jsonl" || rc=$?
      [ $rc = 0 ] && continue
      record_run_failure "parity $model" "$RES/parity-$model-$t.log" $rc $t
      continue 2
    done
    record_comparison "parity $model" "$RES/parity-$model.txt" "$RES/parity-$model-cuda.jsonl" "$cpu"
  done
}

phase_bf16() {
  local model train bin p rc
  mapfile -t train < <(train_args 50)
  for model in gpt2-tiny llama-tiny; do
    build_program "cuda-$model" && build_program "cuda-bf16-$model" ||
      { record "bf16 $model" FAIL "build failed"; continue; }
    [ $DRY = 1 ] || rm -f "$RES/bf16-$model"-*.jsonl
    for p in fp32 bf16; do
      # cuda-bf16-*: compiled with megac compile --bf16, it runs in bf16 without a flag.
      rc=0 bin=$BUILD/bin/cuda-$model
      [ $p = bf16 ] && bin=$BUILD/bin/cuda-bf16-$model
      run "$RES/bf16-$model-$p.log" "$T_TRAIN" "$bin" "${train[@]}" "${DATA[@]}" \
        --metrics-file "$RES/bf16-$model-$p.jsonl" || rc=$?
      [ $rc = 0 ] && continue
      record_run_failure "bf16 $model" "$RES/bf16-$model-$p.log" $rc $p
      continue 2
    done
    record_comparison "bf16 $model" "$RES/bf16-$model.txt" "$RES/bf16-$model-bf16.jsonl" \
      "$RES/bf16-$model-fp32.jsonl" --steps 50 --keys lm_loss --tolerance 0.02 --names bf16,fp32 \
      --what "bf16 vs fp32 lm_loss"
  done
}

phase_bench() {
  configure || { record bench FAIL "the build did not configure"; return; }
  # The bench builds the programs it needs through `gpu_check.sh build-program` and writes its
  # table to $OUT (or gpu/results) itself, after every config; its output streams into this log.
  local secs rc=0; secs=$(limit 100000)
  local cmd=(timeout -k 10 "$secs" env PYTHONUNBUFFERED=1 "BUDGET=$secs" "$PYTHON" bench/gpu_vs_pytorch.py "${BENCH_ARGS[@]}")
  echo "+ ${cmd[*]}"
  [ $DRY = 1 ] && return 0
  "${cmd[@]}" || rc=$?
  if [ $rc = 0 ]; then record bench PASS "table in ${OUTDIR:-$RES}/gpu_bench.md"
  elif timed_out $rc; then record bench FAIL "timed out after $secs s (the configs done are in gpu_bench.md)"
  else record bench FAIL "exit $rc"; fi
}

for p in "${PHASES[@]}"; do
  t0=$SECONDS
  say "phase $p"
  case $p in
    env) phase_env ;;
    build) phase_build ;;
    smoke) phase_smoke ;;
    test) phase_test ;;
    memcheck) phase_memcheck ;;
    parity) phase_parity ;;
    bf16) phase_bf16 ;;
    bench) phase_bench ;;
    build-program) for n in "${PROGRAM_ARGS[@]}"; do build_program "$n"; done ;;
  esac
  say "phase $p took $((SECONDS - t0)) s"
  [ $DRY = 1 ] || save_results
done

echo
say "summary ($(head -n 1 gpu/PREPARED 2>/dev/null); $SECONDS s)"
printf '%s\n' "${SUMMARY[@]}"
if [ $DRY = 0 ]; then
  printf '%s\n' "${SUMMARY[@]}" >"$RES/summary.txt"
  save_results
fi
exit $FAILED
