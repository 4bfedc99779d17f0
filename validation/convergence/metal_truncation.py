#!/usr/bin/env python3
"""The thin metal's error against the fmmax reference per harmonic count, with the slicing converged.

validation/peers' metal_1d (ε = −20 + 1.5i lines, 400 of 800 nm, 80 nm high, on glass, λ = 1 µm, θ = 15°, s and
p) solved by `gratingsim run` with the sweep preconditioner at M harmonics and N + 2N slices with Richardson;
prints, per (M, N), the largest |error| over R00, T00, ΣR, ΣT of both polarisations against
validation/peers/references.txt (fmmax 1.7.1 at M = 640), which quantity it is, and the signed errors of p's
R00 and ΣT. Issue #9 asks for 1e-3 at M ≤ 15; the study separates the slicing's error (N) from the
harmonics' (M).

    validation/convergence/metal_truncation.py --gratingsim build-cpu/app/gratingsim --ms 10 15 20 --slices 16 32 64
"""
import argparse
import itertools
import os
import subprocess
import tempfile
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CASE = """description: validation/peers metal_1d (metal_truncation.py)
units: um
wavelength: 1.0
incidence: {{theta_deg: 15.0, phi_deg: 0.0, polarization: both}}
lattice: {{period_x: 0.8}}
superstrate: air
substrate: sub
materials: {{sub: {{epsilon: [2.25, 0.0]}}, shape: {{epsilon: [-20.0, 1.5]}}}}
layers:
  - {{name: pattern, thickness: 0.08, slices: {slices}, shapes: [{{type: line, material: shape, width: 0.4}}]}}
numerics: {{harmonics: [{m}, 0], richardson: true, precision: double, backend: {backend},
           solver: {{method: gmres, restart: 100, tolerance: 1e-06, max_iterations: 3000, preconditioner: sweep}}}}
output: {{fields: false}}
"""


def reference() -> dict:
    out = {}
    with open(os.path.join(HERE, "..", "peers", "references.txt")) as f:
        for line in f:
            if line.startswith("metal_1d "):
                _, pol, quantity, value = line.split()
                out[(pol, quantity)] = float(value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gratingsim", required=True)
    ap.add_argument("--ms", type=int, nargs="+", required=True)
    ap.add_argument("--slices", type=int, nargs="+", required=True, help="N of the N + 2N Richardson pair")
    ap.add_argument("--backend", default="cpu-fftw")
    a = ap.parse_args()
    ref = reference()
    with tempfile.TemporaryDirectory() as work:
        for m, n in itertools.product(a.ms, a.slices):
            stem = os.path.join(work, f"m{m}_s{n}")
            with open(stem + ".yaml", "w") as f:
                f.write(CASE.format(m=m, slices=n, backend=a.backend))
            start = time.perf_counter()
            subprocess.run([a.gratingsim, "run", stem + ".yaml", "-o", stem + ".h5", "--overwrite", "--quiet"], check=True)
            wall = time.perf_counter() - start
            with h5py.File(stem + ".h5") as f:
                orders = [tuple(int(v) for v in o) for o in f["orders"][:]]
                R, T = np.asarray(f["results/R"])[0, 0, 0], np.asarray(f["results/T"])[0, 0, 0]
            i0 = orders.index((0, 0))
            err = {}
            for k, pol in enumerate(("s", "p")):
                values = {"R00": R[k, i0], "T00": T[k, i0], "sumR": R[k].sum(), "sumT": T[k].sum()}
                for quantity, value in values.items():
                    err[(pol, quantity)] = float(value) - ref[(pol, quantity)]
            worst = max(err, key=lambda key: abs(err[key]))
            print(f"M = {m:3d}  slices {n:3d} + {2 * n:<3d}  max |error| {abs(err[worst]):.2e} ({worst[0]} {worst[1]})"
                  f"  p R00 {err[('p', 'R00')]:+.2e}  p sumT {err[('p', 'sumT')]:+.2e}  {wall:.1f} s", flush=True)


if __name__ == "__main__":
    main()
