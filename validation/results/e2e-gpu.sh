#!/bin/bash
# Issue #15 on the GPU host: the phase breakdown (run summary, solver/phase_seconds) of every configs/
# case on gpu-fused and cpu-fftw (16 OpenMP threads), before and after branch e2e's host set-up work,
# and the after/before result files compared (R, T, Jones to the solver tolerance).
#   before: 66bf2f7 (main + the phase breakdown only; main itself prints no breakdown)
#   after:  this checkout
# Run from the repository root: OUT=/some/dir bash validation/results/e2e-gpu.sh
# Under a 10-minute limit per command, split it: first STEP=build (both builds, kept in build-gpu/ and
# build-e2e-before/), then CASES="configs/a.yaml configs/b.yaml" per call (default every case).
# Logs: $OUT/<case>-<backend>-<before|after>.txt, $OUT/compare.txt; build logs $OUT/build-*.log.
set -uo pipefail
OUT=${OUT:?set OUT}
BEFORE_REF=${BEFORE_REF:-66bf2f7}
LIMIT=${LIMIT:-280}   # seconds per run (problem_case_4 on cpu-fftw takes longer: it is skipped)
export OMP_NUM_THREADS=16
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRATINGSIM_CUDA=ON > "$OUT/build-after.log" 2>&1 &&
  cmake --build build-gpu -j16 >> "$OUT/build-after.log" 2>&1 || { echo "after: build failed"; tail -30 "$OUT/build-after.log"; exit 1; }
BEFORE=$PWD/build-e2e-before
if [ ! -x "$BEFORE/build-gpu/app/gratingsim" ]; then
  git worktree add -f "$BEFORE" "$BEFORE_REF" > "$OUT/build-before.log" 2>&1 &&
    cmake -S "$BEFORE" -B "$BEFORE/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRATINGSIM_CUDA=ON >> "$OUT/build-before.log" 2>&1 &&
    cmake --build "$BEFORE/build-gpu" -j16 >> "$OUT/build-before.log" 2>&1 || { echo "before: build failed"; tail -30 "$OUT/build-before.log"; exit 1; }
fi
[ "${STEP:-}" = build ] && exit 0
declare -A BIN=([before]="$BEFORE/build-gpu/app/gratingsim" [after]="$PWD/build-gpu/app/gratingsim")
"${BIN[after]}" info > "$OUT/info.txt" 2>&1
for config in ${CASES:-configs/*.yaml}; do
  name=$(basename "$config" .yaml)
  for backend in gpu-fused cpu-fftw; do
    [ "$name/$backend" = problem_case_4/cpu-fftw ] && continue
    for version in before after; do   # interleaved: the same machine state for both
      log="$OUT/$name-$backend-$version.txt"
      echo "# ${BIN[$version]} run $config --backend $backend -o $OUT/$name-$backend-$version.h5 --overwrite" > "$log"
      /usr/bin/time -f "time: %e s wall, %U s user, %S s sys" timeout "$LIMIT" "${BIN[$version]}" run "$config" \
        --backend "$backend" -o "$OUT/$name-$backend-$version.h5" --overwrite >> "$log" 2>&1
      echo "$name $backend $version: $(grep -E 'point\(s\) solved in|phases sum to' "$log" | tr '\n' ' ')"
    done
  done
done | tee -a "$OUT/summary.txt"
/usr/bin/python3 - "$OUT" > "$OUT/compare.txt" 2>&1 <<'PY'
import glob, os, sys
import h5py, numpy as np
out = sys.argv[1]
for after in sorted(glob.glob(os.path.join(out, "*-after.h5"))):
    before = after.replace("-after.h5", "-before.h5")
    if not os.path.exists(before):
        continue
    with h5py.File(before) as b, h5py.File(after) as a:
        worst = 0.0
        for key in ["results/R", "results/T", "results/jones_r", "results/jones_t"]:
            x, y = np.nan_to_num(b[key][()]), np.nan_to_num(a[key][()])
            worst = max(worst, float(np.max(np.abs(x - y))) / max(float(np.max(np.abs(x))), 1e-300))
        print(f"{os.path.basename(after)[:-9]}: largest |after - before| / max|before| over R, T, Jones: {worst:.2e}")
PY
cat "$OUT/compare.txt"
