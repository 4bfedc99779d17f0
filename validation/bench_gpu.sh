#!/usr/bin/env bash
# The benchmarks of validation/results/ on a machine with a CUDA device, in stages that each fit a
# 10-minute call (the build stays in build-gpu/ between them):
#   validation/bench_gpu.sh OUTDIR build   configure, build (-j16, sm_90), the timing and CLI tests, and
#                                          compute-sanitizer memcheck of the GPU timing test
#   validation/bench_gpu.sh OUTDIR conv    gratingsim bench conv --case all --precision both --shape both
#   validation/bench_gpu.sh OUTDIR solve   gratingsim bench solve --case all --backend gpu-fused,gpu-cufft
#                                          --precision both (GMRES(40), GMRES(200), BiCGStab)
# Logs, the printed tables and CSVs land in OUTDIR, each table headed by the command, the commit and
# the device; the script exits non-zero if any step fails.
set -uo pipefail
out=${1:?usage: validation/bench_gpu.sh OUTDIR build|conv|solve}
stage=${2:?usage: validation/bench_gpu.sh OUTDIR build|conv|solve}
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/.."
status=0
step() {  # step NAME COMMAND...: runs, logs to OUTDIR/NAME.log, records failure
  local name=$1; shift
  echo "=== $name: $*"
  if "$@" >"$out/$name.log" 2>&1; then echo "    ok"; else echo "    FAILED (see $name.log)"; tail -30 "$out/$name.log"; status=1; fi
}
# What produced a table: the command, the commit (and whether the tree differs from it), the device.
provenance() {
  local commit dirty=""
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo "unknown commit")
  git diff --quiet HEAD 2>/dev/null || dirty=" (working tree differs from it)"
  echo "# $*"
  echo "# commit $commit$dirty, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | head -1)" \
       "(driver, max SM and memory clocks); $(nvcc --version 2>/dev/null | tail -1)"
}
# bench NAME ARGS...: gratingsim ARGS, the table to OUTDIR/NAME.txt under its provenance, CSV to NAME.csv.
bench() {
  local name=$1; shift
  echo "=== $name: gratingsim $*"
  { provenance "gratingsim $*"; ./build-gpu/app/gratingsim "$@" --csv "$out/$name.csv"; } >"$out/$name.txt" 2>&1 ||
    { echo "    FAILED (see $name.txt)"; status=1; }
  tail -40 "$out/$name.txt"
}
case $stage in
  build)
    nvidia-smi >"$out/nvidia-smi.txt" 2>&1
    step configure cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRATINGSIM_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90
    step build cmake --build build-gpu -j16 -- -k 0
    [ $status -eq 0 ] || { echo 'build failed: nothing to test'; exit 1; }
    step ctest ctest --test-dir build-gpu --output-on-failure --timeout 300 \
      -R '^(convolution\.(timing|gpu_timing|autotune|gpu_cufft|gpu_cufft_callbacks|gpu_fused)|app\.cli): '
    step memcheck-gpu_timing timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
      build-gpu/validation/convolution.gpu_timing
    ;;
  conv) bench bench-conv-h100 bench conv --case all --precision both --shape both ;;
  solve) bench bench-solve-h100 bench solve --case all --backend gpu-fused,gpu-cufft --precision both ;;
  *) echo "unknown stage '$stage' (build, conv or solve)"; exit 2 ;;
esac
exit $status
