#!/usr/bin/env python3
"""Convergence in the harmonics of tapered pillars with the tilted normal field against the in-plane one.

The structure of configs/problem_case_*.yaml (Si3N4 truncated cones, Ø 240 nm at the bottom, 160 nm at the
top, 300 nm high, pitch 400 nm, on SiO2) at 633 nm, θ = 40°, φ = 30° (conical: both polarisations meet the
walls' normals), as two cases with the same staircase of slices:
  tilted  one layer with a tapered circle: its slices hold a lone sloped shape, whose normal-vector field
          gratingsim tilts along the true wall (docs/normal-vector.md §4.2);
  steps   the same staircase as a stack of one-slice layers with vertical circles (the in-plane field).
Both converge to one limit in M (the same slices, only the field differs). Prints every efficiency of the
orders (0, 0) and the largest change over R00, T00 (s and p) against the highest M of each, and the
difference between the two cases at that M.

    validation/convergence/tilted_pillars.py --gratingsim build-gpu/app/gratingsim --ms 4 6 8 11 14 18 \
        --slices 32 [--backend auto] [--out DIR]

Needs h5py.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

HEADER = """units: nm
wavelength: 633
incidence: {{theta_deg: 40, phi_deg: 30, polarization: both}}
lattice: {{period_x: 400, period_y: 400}}
superstrate: air
substrate: SiO2
numerics: {{harmonics: {m}, richardson: true, backend: {backend}, solver: {{method: gmres, restart: 200, tolerance: 1e-9, max_iterations: 4000}}}}
output: {{fields: false}}
layers:
"""


def case_text(variant, m, slices, backend):
    text = HEADER.format(m=m, backend=backend)
    if variant == "tilted":
        text += (f"  - {{name: pillars, thickness: 300, slices: {slices},\n"
                 "     shapes: [{type: circle, material: Si3N4, bottom_diameter: 240, top_diameter: 160}]}\n")
    else:  # cut_into_steps' heights: step j (top first) at h = 300 (1 − (j + ½)/slices)
        for j in range(slices):
            h = 300 * (1 - (j + 0.5) / slices)
            d = 240 + (160 - 240) * h / 300
            text += (f"  - {{name: step{j}, thickness: {300 / slices!r}, slices: 1,\n"
                     f"     shapes: [{{type: circle, material: Si3N4, diameter: {d!r}}}]}}\n")
    return text


def run(exe, variant, m, slices, backend, workdir):
    path = os.path.join(workdir, f"{variant}_M{m}.yaml")
    with open(path, "w") as f:
        f.write(case_text(variant, m, slices, backend))
    out = path[:-5] + ".h5"
    start = time.time()
    subprocess.run([exe, "run", path, "-o", out, "--overwrite"], check=True, stdout=subprocess.DEVNULL)
    seconds = time.time() - start
    with h5py.File(out, "r") as h:
        orders = [tuple(o) for o in h["orders"][()]]
        zero = orders.index((0, 0))
        r = h["results/R"][0, 0, 0, :, zero]
        t = h["results/T"][0, 0, 0, :, zero]
    return np.array([r[0], r[1], t[0], t[1]]), seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gratingsim", required=True)
    parser.add_argument("--ms", type=int, nargs="+", required=True)
    parser.add_argument("--slices", type=int, default=32)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--out", default=None, help="keep the cases and result files here")
    args = parser.parse_args()
    workdir = args.out or tempfile.mkdtemp()
    os.makedirs(workdir, exist_ok=True)
    values = {}
    print(f"# tapered Si3N4 pillars, 633 nm, θ 40°, φ 30°, {args.slices} + {2 * args.slices} slices (Richardson), "
          f"backend {args.backend}")
    print(f"{'variant':8} {'M':>3} {'R00 s':>11} {'R00 p':>11} {'T00 s':>11} {'T00 p':>11} {'time/s':>7}")
    for m in args.ms:
        for variant in ("tilted", "steps"):
            v, seconds = run(args.gratingsim, variant, m, args.slices, args.backend, workdir)
            values[(variant, m)] = v
            print(f"{variant:8} {m:3d} " + " ".join(f"{x:11.7f}" for x in v) + f" {seconds:7.1f}", flush=True)
    last = args.ms[-1]
    print(f"\nlargest |change| of R00, T00 (s, p) against M = {last} of the same variant")
    print(f"{'M':>3} {'tilted':>10} {'steps':>10}")
    for m in args.ms[:-1]:
        t = np.max(np.abs(values[("tilted", m)] - values[("tilted", last)]))
        s = np.max(np.abs(values[("steps", m)] - values[("steps", last)]))
        print(f"{m:3d} {t:10.2e} {s:10.2e}")
    print(f"tilted − steps at M = {last}: " + " ".join(f"{x:+.2e}" for x in values[("tilted", last)] - values[("steps", last)]))


if __name__ == "__main__":
    sys.exit(main())
