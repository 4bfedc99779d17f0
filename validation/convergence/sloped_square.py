#!/usr/bin/env python3
"""Convergence in the harmonics of a sloped square pillar: the tilted normal field against the in-plane one.

An ε = 6 square pillar, 0.3 µm a side at the bottom, 80° sidewalls, 0.3 µm high, in a 0.5 × 0.5 µm cell on glass
(ε = 2.25), λ = 0.55 µm, θ = 30°, φ = 20°; 32 slices, no Richardson; BiCGStab to 1e-10, cpu-fftw, complex128. Two cases
with the same staircase of slices (docs/normal-vector.md §4.2):
  tilted  one layer with the sloped polygon: a lone sloped shape, the field tilted along its walls (step 5);
  steps   the same staircase as 32 one-slice layers of vertical squares (the in-plane nearest-edge field, step 2″).
Prints per M: R00 and T00 in s and p, the energy defect 1 − ΣR − ΣT per polarisation, iterations and wall time.

    validation/convergence/sloped_square.py --gratingsim build-cpu/app/gratingsim --ms 6 10 14 18 22 26 30 40

Needs h5py.
"""
import argparse
import math
import os
import subprocess
import tempfile
import time

import h5py
import numpy as np

SLICES, HEIGHT, HALF_SIDE, ANGLE = 32, 0.3, 0.15, 80.0


def case(m: int, variant: str) -> str:
    head = f"""units: um
wavelength: 0.55
incidence: {{theta_deg: 30.0, phi_deg: 20.0, polarization: both}}
lattice: {{period_x: 0.5, period_y: 0.5}}
superstrate: air
substrate: glass
materials: {{glass: {{epsilon: [2.25, 0.0]}}, hi: {{epsilon: [6.0, 0.0]}}}}
numerics: {{harmonics: [{m}, {m}], richardson: false, precision: double, backend: cpu-fftw,
           solver: {{method: bicgstab, tolerance: 1e-10, max_iterations: 3000}}}}
output: {{fields: false}}
layers:
"""

    def square(h: float) -> str:
        return f"[[{-h!r}, {-h!r}], [{h!r}, {-h!r}], [{h!r}, {h!r}], [{-h!r}, {h!r}]]"

    if variant == "tilted":
        return head + (f"  - {{name: p, thickness: {HEIGHT}, slices: {SLICES}, shapes: [{{type: polygon, material: hi, "
                       f"vertices: {square(HALF_SIDE)}, sidewall_angle_deg: {ANGLE}}}]}}\n")
    cot = 1 / math.tan(math.radians(ANGLE))  # edges move inward by h·cot α at height h; step k (top first) at its centre
    return head + "".join(
        f"  - {{name: s{k}, thickness: {HEIGHT / SLICES!r}, slices: 1, shapes: [{{type: polygon, material: hi, "
        f"vertices: {square(HALF_SIDE - (HEIGHT - (k + 0.5) * HEIGHT / SLICES) * cot)}}}]}}\n" for k in range(SLICES))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gratingsim", required=True)
    parser.add_argument("--ms", type=int, nargs="+", required=True)
    args = parser.parse_args()
    print("variant  M   R00 s      R00 p      T00 s      T00 p      defect s   defect p   iterations  wall s")
    with tempfile.TemporaryDirectory() as work:
        for m in args.ms:
            for variant in ("tilted", "steps"):
                yaml, h5 = os.path.join(work, f"{variant}{m}.yaml"), os.path.join(work, f"{variant}{m}.h5")
                with open(yaml, "w") as f:
                    f.write(case(m, variant))
                start = time.perf_counter()
                subprocess.run([args.gratingsim, "run", yaml, "-o", h5, "--overwrite", "--quiet"], check=True)
                wall = time.perf_counter() - start
                with h5py.File(h5, "r") as f:
                    orders = [tuple(int(v) for v in o) for o in f["orders"][:]]
                    R = np.asarray(f["results/R"])[0, 0, 0]
                    T = np.asarray(f["results/T"])[0, 0, 0]
                    iterations = int(np.asarray(f["solver/iterations"]).max())
                i0 = orders.index((0, 0))
                defect = [1 - R[k].sum() - T[k].sum() for k in (0, 1)]
                print(f"{variant:7s} {m:3d}  {R[0, i0]:.6f}   {R[1, i0]:.6f}   {T[0, i0]:.6f}   {T[1, i0]:.6f}   "
                      f"{defect[0]:+.1e}   {defect[1]:+.1e}   {iterations:6d}     {wall:6.1f}", flush=True)


if __name__ == "__main__":
    main()
