#!/usr/bin/env bash
# The GPU half of the proof, for a machine with a CUDA device (CI has none): build from source, run the
# whole test suite (GPU tests included), compute-sanitizer memcheck and racecheck on the GPU test
# executables, `gratingsim validate` on its built-in set, and the convolution benchmark on all four
# problem cases in both precisions.
#   usage: validation/gpu_check.sh OUTDIR [extra bench conv arguments]
# Logs and the benchmark CSV land in OUTDIR; the script exits non-zero if any step fails.
set -uo pipefail
out=${1:?usage: validation/gpu_check.sh OUTDIR}
shift
mkdir -p "$out"
cd "$(dirname "$0")/.."
status=0
step() {  # step NAME COMMAND...: runs, logs to OUTDIR/NAME.log, records failure
  local name=$1; shift
  echo "=== $name: $*"
  if "$@" >"$out/$name.log" 2>&1; then echo "    ok"; else echo "    FAILED (see $name.log)"; tail -30 "$out/$name.log"; status=1; fi
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv >"$out/device.txt" 2>&1
step configure cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRATINGSIM_CUDA=ON
step build cmake --build build-gpu -j16 -- -k 0
[ $status -eq 0 ] || { echo 'build failed: nothing to test'; exit 1; }
step ctest ctest --test-dir build-gpu --output-on-failure --timeout 300
step validate ./build-gpu/app/gratingsim validate
step info ./build-gpu/app/gratingsim info
step bench-conv ./build-gpu/app/gratingsim bench conv --case all --precision both --csv "$out/bench-conv.csv" "$@"
# Sanitizers last (they are slow): each run capped at 5 minutes (a cap that strikes counts as a
# failure), the full Table-1 batches ([full]) left out.
for exe in build-gpu/validation/convolution.gpu_* build-gpu/validation/physics.gpu_*; do
  name=$(basename "$exe")
  step "memcheck-$name" timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 "$exe" "~[full]"
done
for exe in build-gpu/validation/convolution.gpu_*; do  # shared memory lives in the convolution kernels
  name=$(basename "$exe")
  step "racecheck-$name" timeout 300 compute-sanitizer --tool racecheck --error-exitcode 1 "$exe" "~[full]"
done
cat "$out/validate.log" "$out/bench-conv.log"
exit $status
