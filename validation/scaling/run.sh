#!/bin/bash
# Throughput of a distributed sweep: validation/scaling/run.sh GRATINGSIM OUTDIR [REPEATS] [CASE]
# Runs CASE (default: sweep_200.yaml beside this script) REPEATS times (default 3) as one process on
# GPU 0 and as `mpirun -n 2` (one rank per GPU, each bound to half the cores), alternating, and
# reports per configuration the median and range of the wall time of the whole command and of the
# sweep alone (points per second, from gratingsim's summary), their ratios, and whether every
# file equals the first one-process file bit for bit (h5py; the solve times aside).
set -euo pipefail
gratingsim=$(realpath "$1"); out=$2; repeats=${3:-3}
deadline=$((SECONDS + ${SCALING_BUDGET_S:-100000}))  # no further repeat starts after SCALING_BUDGET_S seconds
case_file=$(realpath "${4:-$(dirname "$0")/sweep_200.yaml}")
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cores=$(nproc)
half=$((cores / 2))

run_one() {  # label, output file, command...
  local label=$1 file=$2; shift 2
  local start end
  start=$(date +%s.%N)
  "$@" run "$case_file" -o "$file" > "$out/$label.log" 2>&1
  end=$(date +%s.%N)
  local sweep rate
  sweep=$(grep -o 'sweep itself [0-9.]* s' "$out/$label.log" | grep -o '[0-9.]*' || echo nan)
  rate=$(grep -o '[0-9.e+]* points/s' "$out/$label.log" | grep -o '^[0-9.e+]*' || echo nan)
  echo "$label $(awk "BEGIN { print $end - $start }") $sweep $rate" >> "$out/times.txt"
}

: > "$out/times.txt"
for i in $(seq 1 "$repeats"); do
  if [ $SECONDS -ge $deadline ]; then repeats=$((i - 1)); echo "time budget spent: $repeats repeat(s)"; break; fi
  CUDA_VISIBLE_DEVICES=0 run_one "one_gpu_$i" "$out/one_gpu_$i.h5" "$gratingsim"
  run_one "two_gpus_$i" "$out/two_gpus_$i.h5" mpirun -n 2 --map-by "slot:PE=$half" --bind-to core "$gratingsim"
done

# Every dataset but the solve times, bit for bit (h5py; without it the files are left uncompared).
python=/usr/bin/python3; [ -x $python ] || python=python3  # Debian's, which has h5py, before any other
$python - "$out" "$repeats" <<'PY' | tee "$out/compare.txt" || true
import sys
try:
    import h5py, numpy as np
except ImportError:
    sys.exit("files not compared: no h5py")
out, repeats = sys.argv[1], int(sys.argv[2])
def datasets(path):
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: found.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return found
reference = datasets(f"{out}/one_gpu_1.h5")
for label in [f"one_gpu_{i}" for i in range(2, repeats + 1)] + [f"two_gpus_{i}" for i in range(1, repeats + 1)]:
    other = datasets(f"{out}/{label}.h5")
    differing = [n for n in reference if n not in ("solver/seconds", "solver/phase_seconds") and
                 (n not in other or np.asarray(reference[n]).tobytes() != np.asarray(other[n]).tobytes())]
    print(f"{label}: " + ("bitwise equal to one_gpu_1 (solve times aside)" if not differing else "DIFFERS in " + ", ".join(differing)))
PY

points=$(grep -o '[0-9]* point(s) solved' "$out/one_gpu_1.log" | grep -o '^[0-9]*')
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
python3 - "$out/times.txt" "$gpu" "$cores" "$points" <<'PY' | tee "$out/summary.txt"
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def stats(prefix, col):
    v = [float(r[col]) for r in rows if r[0].startswith(prefix)]
    return statistics.median(v), min(v), max(v)
print(f"device: {sys.argv[2]}; host cores: {sys.argv[3]}; runs per configuration: {sum(r[0].startswith('one') for r in rows)}")
for name, col, unit in (("wall time of the command", 1, "s"), ("sweep time", 2, "s"), ("sweep throughput", 3, "points/s")):
    a, b = stats("one_gpu", col), stats("two_gpus", col)
    ratio = a[0] / b[0] if unit == "s" else b[0] / a[0]
    print(f"{name:26s} 1 GPU {a[0]:9.3f} [{a[1]:.3f}-{a[2]:.3f}] {unit}   2 GPUs {b[0]:9.3f} [{b[1]:.3f}-{b[2]:.3f}] {unit}   speed-up {ratio:.2f}x")
points = int(sys.argv[4])
wall1, wall2 = stats("one_gpu", 1)[0], stats("two_gpus", 1)[0]
print(f"end-to-end throughput ({points} points): 1 GPU {points / wall1:.2f} points/s, 2 GPUs {points / wall2:.2f} points/s")
PY
