#!/usr/bin/env bash
# The peers benchmark of issue #9 on a GPU machine: builds gratingsim from source (CUDA, Release; the
# application target only), then runs validation/peers/bench_peers.py (gratingsim on the GPU, fmmax
# through jax on the same GPU) so that the whole script ends within TOTAL seconds.
#   usage: validation/peers/run_on_device.sh OUTDIR [TOTAL_SECONDS (default 450)] [bench_peers.py options]
# fmmax must be importable (on the lent machine: the carried wheels installed first, see the command in
# validation/peers/README.md). Writes into OUTDIR: device.txt (GPU, driver, jax, fmmax, build time),
# build.log, bench.log (every run as it happens), results.csv, summary.txt, error_vs_time.png.
set -uo pipefail
out=${1:?usage: run_on_device.sh OUTDIR [TOTAL_SECONDS] [bench_peers.py options]}
total=${2:-450}
shift $(( $# < 2 ? $# : 2 ))
start=$SECONDS
cd "$(dirname "$0")/../.."
mkdir -p "$out"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  nproc
  git log -1 --format='commit %H %s' 2>/dev/null
  python3 -c "import jax, fmmax; print('jax', jax.__version__, jax.devices(), 'fmmax', fmmax.__version__)"
} >"$out/device.txt" 2>&1
if ! { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRATINGSIM_CUDA=ON &&
       cmake --build build-gpu -j16 --target gratingsim; } >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  exit 1
fi
echo "build: $((SECONDS - start)) s" | tee -a "$out/device.txt"
# compute_references.py limits jax, OpenMP and BLAS to 2 threads where these are unset (for the shared
# build machine); here the host's cores are free.
export XLA_FLAGS="${XLA_FLAGS:-}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-$(nproc)}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-$(nproc)}"
# What is left, less a margin for the last runs that start before their budget ends, shared among
# 3 cases, each 1 share for gratingsim and 2 for fmmax (bench_peers.py's default: each new count costs
# fmmax a compilation); at least 10 s a share.
per=$(( (total - (SECONDS - start) - 60) / 9 ))
(( per < 10 )) && per=10
echo "budget per case: gratingsim $per s, fmmax $((2 * per)) s" | tee -a "$out/device.txt"
PYTHONUNBUFFERED=1 python3 validation/peers/bench_peers.py --gratingsim build-gpu/app/gratingsim --out "$out" \
  --max-time "$per" "$@" 2>&1 | tee "$out/bench.log"
status=${PIPESTATUS[0]}
echo "total: $((SECONDS - start)) s" | tee -a "$out/device.txt"
exit "$status"
