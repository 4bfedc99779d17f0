#!/bin/bash
# Wavelengths batched (issue #10): configs/default.yaml's 41-wavelength spectrum through physics::solve,
# one wavelength per problem against all 41 in one (SolverOptions::max_wavelengths_per_batch 1 vs 41),
# per backend: validation/scaling/wavelength_batch/run.sh BUILD_DIR OUT_DIR [BACKEND ...]
# Installs BUILD_DIR into OUT_DIR/prefix, builds bench.cpp against it and writes OUT_DIR/times.txt
# (best of 3 per setting, both settings twice, alternating; the results of both must print equal).
set -euo pipefail
build=$(realpath "$1"); out=$(realpath -m "$2"); shift 2
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(gpu-fused gpu-direct gpu-cufft cpu-fftw)
here=$(dirname "$(realpath "$0")")
mkdir -p "$out"
cmake --install "$build" --prefix "$out/prefix" > "$out/install.log"
cmake -S "$here" -B "$out/bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$out/prefix" > "$out/configure.log"
cmake --build "$out/bench" > "$out/build.log"
: > "$out/times.txt"
for backend in "${backends[@]}"; do
  "$out/bench/wavelength_batch" "$backend" 3 2>&1 | tee -a "$out/times.txt"
done
