#!/usr/bin/env bash
# Everything gratingsim checks and measures on a machine with a CUDA device (CI has none), in stages
# that each fit a 10-minute device call; the build stays in build-gpu/ between them. Run from anywhere:
#   validation/device.sh OUTDIR STAGE [STAGE ...] [-- EXTRA]
# Stages, in the order given:
#   build      nvidia-smi, configure (CUDA on, sm_90) and build build-gpu/ (-j16)
#   test       ctest on build-gpu/, GPU tests included (TESTS=REGEX: only those, e.g.
#              TESTS='^(convolution\.(timing|gpu_timing)|app\.cli): ')
#   sanitize   compute-sanitizer memcheck on the convolution.gpu_* and physics.gpu_* test executables,
#              racecheck on convolution.gpu_* (shared memory lives in the convolution kernels); each run
#              capped at 5 minutes (a cap that strikes counts as a failure), the full Table-1 batches
#              ([full]) left out
#   validate   gratingsim info, and gratingsim validate on its built-in set
#   conv       gratingsim bench conv --case all --precision both --shape both EXTRA
#   solve      gratingsim bench solve --case all --backend gpu-fused,gpu-cufft --precision both EXTRA
#              (GMRES(40), GMRES(40) with CUDA graphs, GMRES(200), BiCGStab)
#   e2e        gratingsim run of every configs/ case (CASES="configs/a.yaml ...": only those) on gpu-fused
#              and cpu-fftw (16 OpenMP threads; problem_case_4 on cpu-fftw skipped: too slow), each with
#              its phase breakdown (issue #15) and wall time, LIMIT seconds at most (default 280); with
#              BEFORE=DIR, the OUTDIR of an e2e stage of another version (a device call sees only its own
#              working tree, so that version ran in a call of its own), the result files are compared
#              (R, T, Jones, to the solver tolerance)
# COMMIT=HASH names the commit in the tables' provenance where the tree's .git is not its source's (a
# device copy of a working tree).
# EXTRA (after --) goes to the bench stages, e.g. `validation/device.sh OUT build conv -- --repeats 51`.
# Every step logs to OUTDIR/NAME.log; a bench table is headed by the command, the commit and the device,
# its CSV beside it (OUTDIR/NAME.csv). The script goes on past a failed step and exits non-zero if any
# failed (2: a wrong command line).
set -uo pipefail
usage="usage: validation/device.sh OUTDIR build|test|sanitize|validate|conv|solve|e2e ... [-- EXTRA]"
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
out=$1
shift
stages=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do stages+=("$1"); shift; done
[ $# -gt 0 ] && shift  # the --
extra=("$@")
for stage in "${stages[@]}"; do
  case $stage in build | test | sanitize | validate | conv | solve | e2e) ;;
    *) echo "unknown stage '$stage'; $usage" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/.." || exit 1
exe=$PWD/build-gpu/app/gratingsim
status=0

step() {  # step NAME COMMAND...: runs, logs to OUTDIR/NAME.log, records failure
  local name=$1; shift
  echo "=== $name: $*"
  if "$@" >"$out/$name.log" 2>&1; then echo "    ok"; else echo "    FAILED (see $name.log)"; tail -30 "$out/$name.log"; status=1; fi
}

# with_provenance COMMAND...: what produced a table (the command, the commit and whether the tree
# differs from it, the device), then the command's output.
with_provenance() {
  local commit dirty=""
  if [ -n "${COMMIT:-}" ]; then  # a copied tree whose .git is not the source's: the caller names the commit
    commit="$COMMIT (named by the caller)"
  else
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo "unknown commit")
    git diff --quiet HEAD 2>/dev/null || dirty=" (working tree differs from it)"
  fi
  echo "# $*"
  echo "# commit $commit$dirty, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | head -1)" \
       "(driver, max SM and memory clocks); $(nvcc --version 2>/dev/null | tail -1)"
  "$@"
}

# bench NAME ARGS...: step NAME of `gratingsim bench ARGS EXTRA`, its CSV to OUTDIR/NAME.csv; prints the table.
bench() {
  local name=$1; shift
  step "$name" with_provenance "$exe" bench "$@" --csv "$out/$name.csv" ${extra[@]+"${extra[@]}"}
  tail -40 "$out/$name.log"
}

# e2e_run CONFIG BACKEND: `gratingsim run` of one case with its summary (the phase breakdown) and times.
e2e_run() {
  local name
  name=$(basename "$1" .yaml)
  echo "# gratingsim run $1 --backend $2 -o $out/e2e/$name-$2.h5 --overwrite"
  /usr/bin/time -f "time: %e s wall, %U s user, %S s sys" timeout "${LIMIT:-280}" "$exe" run "$1" --backend "$2" \
    -o "$out/e2e/$name-$2.h5" --overwrite
}

# e2e_compare BEFORE_DIR: the largest difference of R, T and Jones between this OUTDIR's result files and
# the same-named ones of BEFORE_DIR, relative to the largest magnitude.
e2e_compare() {
  /usr/bin/python3 - "$1/e2e" "$out/e2e" <<'PY'
import glob, os, sys
import h5py, numpy as np
before_dir, after_dir = sys.argv[1], sys.argv[2]
for after in sorted(glob.glob(os.path.join(after_dir, "*.h5"))):
    before = os.path.join(before_dir, os.path.basename(after))
    if not os.path.exists(before):
        print(f"{os.path.basename(after)}: not in {before_dir}")
        continue
    with h5py.File(before) as b, h5py.File(after) as a:
        worst = 0.0
        for key in ["results/R", "results/T", "results/jones_r", "results/jones_t"]:
            x, y = np.nan_to_num(b[key][()]), np.nan_to_num(a[key][()])
            worst = max(worst, float(np.max(np.abs(x - y))) / max(float(np.max(np.abs(x))), 1e-300))
        print(f"{os.path.basename(after)[:-3]}: largest |after - before| / max|before| over R, T, Jones: {worst:.2e}")
PY
}

for stage in "${stages[@]}"; do
  case $stage in
    build)
      nvidia-smi >"$out/nvidia-smi.txt" 2>&1
      step configure cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRATINGSIM_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90
      step build cmake --build build-gpu -j16 -- -k 0
      [ $status -eq 0 ] || { echo 'build failed: nothing to test'; exit 1; }
      ;;
    test) step ctest ctest --test-dir build-gpu --output-on-failure --timeout 300 ${TESTS:+-R "$TESTS"} ;;
    sanitize)
      for test_exe in build-gpu/validation/convolution.gpu_* build-gpu/validation/physics.gpu_*; do
        step "memcheck-$(basename "$test_exe")" timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
          "$test_exe" "~[full]"
      done
      for test_exe in build-gpu/validation/convolution.gpu_*; do
        step "racecheck-$(basename "$test_exe")" timeout 300 compute-sanitizer --tool racecheck --error-exitcode 1 \
          "$test_exe" "~[full]"
      done
      ;;
    validate)
      step info "$exe" info
      step validate "$exe" validate
      cat "$out/validate.log"
      ;;
    conv) bench bench-conv conv --case all --precision both --shape both ;;
    solve) bench bench-solve solve --case all --backend gpu-fused,gpu-cufft --precision both ;;
    e2e)
      mkdir -p "$out/e2e"
      export OMP_NUM_THREADS=16
      for config in ${CASES:-configs/*.yaml}; do
        for backend in gpu-fused cpu-fftw; do
          [ "$(basename "$config" .yaml)/$backend" = problem_case_4/cpu-fftw ] && continue
          step "e2e-$(basename "$config" .yaml)-$backend" e2e_run "$config" "$backend"
          grep -hE 'point\(s\) solved in|phases sum to|^time:' "$out/e2e-$(basename "$config" .yaml)-$backend.log"
        done
      done
      if [ -n "${BEFORE:-}" ]; then
        step e2e-compare e2e_compare "$BEFORE"
        cat "$out/e2e-compare.log"
      fi
      ;;
  esac
done
exit $status
