#!/usr/bin/env python3
"""Convergence in the harmonics of a cell of two tapered pillars (normal-vector field, docs/normal-vector.md §4.2).

Two ε = 6 truncated cones (radii 0.12 → 0.08 µm at (−0.2, 0) and 0.10 → 0.05 µm at (0.2, 0), bottom → top, 0.3 µm
high) in a 0.8 × 0.4 µm cell on glass (ε = 2.25), λ = 0.55 µm, θ = 30°, φ = 20°; harmonics (M1, M1/2), Richardson
over N + 2N slices, BiCGStab to 1e-10, cpu-fftw, complex128. Prints per M1: R00 and T00 in s and p, and the energy
defect 1 − ΣR − ΣT of each polarisation (lossless: the truncated products' part of the error, §8).
Run it with gratingsim binaries of two trees to compare their fields (validation/results/tilted-two-pillars-cpu.txt).

    validation/convergence/two_tapered_pillars.py --gratingsim build-cpu/app/gratingsim --ms 8 12 16 20 24 --slices 32

Needs h5py.
"""
import argparse
import os
import subprocess
import tempfile
import time

import h5py
import numpy as np


def case(m1: int, slices: int) -> str:
    return f"""description: two tapered pillars (validation/convergence/two_tapered_pillars.py)
units: um
wavelength: 0.55
incidence: {{theta_deg: 30.0, phi_deg: 20.0, polarization: both}}
lattice: {{period_x: 0.8, period_y: 0.4}}
superstrate: air
substrate: glass
materials: {{glass: {{epsilon: [2.25, 0.0]}}, hi: {{epsilon: [6.0, 0.0]}}}}
layers:
  - {{name: pillars, thickness: 0.3, slices: {slices}, shapes: [
       {{type: circle, material: hi, bottom_diameter: 0.24, top_diameter: 0.16, center: [-0.2, 0.0]}},
       {{type: circle, material: hi, bottom_diameter: 0.2, top_diameter: 0.1, center: [0.2, 0.0]}}]}}
numerics: {{harmonics: [{m1}, {m1 // 2}], richardson: true, precision: double, backend: cpu-fftw,
           solver: {{method: bicgstab, tolerance: 1e-10, max_iterations: 3000}}}}
output: {{fields: false}}
"""


def run_zeroth(gratingsim: str, text: str, work: str, name: str) -> str:
    """Runs the case `text` with `gratingsim` in `work` and returns its row: R00 and T00 in s and p, the energy
    defect of each polarisation, the most iterations of a solve and the wall time."""
    yaml, h5 = os.path.join(work, name + ".yaml"), os.path.join(work, name + ".h5")
    with open(yaml, "w") as f:
        f.write(text)
    start = time.perf_counter()
    subprocess.run([gratingsim, "run", yaml, "-o", h5, "--overwrite", "--quiet"], check=True)
    wall = time.perf_counter() - start
    with h5py.File(h5, "r") as f:
        orders = [tuple(int(v) for v in o) for o in f["orders"][:]]
        R = np.asarray(f["results/R"])[0, 0, 0]  # polarisation × order, s first
        T = np.asarray(f["results/T"])[0, 0, 0]
        iterations = int(np.asarray(f["solver/iterations"]).max())
    i0 = orders.index((0, 0))
    defect = [1 - R[k].sum() - T[k].sum() for k in (0, 1)]
    return (f"{R[0, i0]:.6f}   {R[1, i0]:.6f}   {T[0, i0]:.6f}   {T[1, i0]:.6f}   {defect[0]:+.1e}   {defect[1]:+.1e}   "
            f"{iterations:6d}     {wall:6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gratingsim", required=True)
    parser.add_argument("--ms", type=int, nargs="+", required=True, help="M1 values (M2 = M1/2)")
    parser.add_argument("--slices", type=int, default=32)
    args = parser.parse_args()
    print("M1  slices   R00 s      R00 p      T00 s      T00 p      defect s   defect p   iterations  wall s")
    with tempfile.TemporaryDirectory() as work:
        for m in args.ms:
            row = run_zeroth(args.gratingsim, case(m, args.slices), work, f"m{m}")
            print(f"{m:3d} {args.slices:3d}+{2 * args.slices:<3d} {row}", flush=True)


if __name__ == "__main__":
    main()
