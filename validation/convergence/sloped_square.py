#!/usr/bin/env python3
"""Convergence in the harmonics of a sloped square pillar: the tilted normal field against the in-plane one.

An ε = 6 square pillar, 0.3 µm a side at the bottom, 80° sidewalls, 0.3 µm high, in a 0.5 × 0.5 µm cell on glass
(ε = 2.25), λ = 0.55 µm, θ = 30°, φ = 20°; 32 slices, no Richardson; BiCGStab to 1e-10, cpu-fftw, complex128. Two cases
with the same staircase of slices (docs/normal-vector.md §4.2):
  tilted  one layer with the sloped polygon: a lone sloped shape, the field tilted along its walls (step 5);
  steps   the same staircase as 32 one-slice layers of vertical squares (the in-plane nearest-edge field, step 2″).
Prints per M: R00 and T00 in s and p, the energy defect 1 − ΣR − ΣT per polarisation, iterations and wall time.

    validation/convergence/sloped_square.py --gratingsim build-cpu/app/gratingsim --ms 6 10 14 18 22 26 30 40

Needs h5py (and two_tapered_pillars.py beside it).
"""
import argparse
import math
import tempfile

from two_tapered_pillars import run_zeroth  # beside this script

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
                row = run_zeroth(args.gratingsim, case(m, variant), work, f"{variant}{m}")
                print(f"{variant:7s} {m:3d}  {row}", flush=True)


if __name__ == "__main__":
    main()
