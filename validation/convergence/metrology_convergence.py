#!/usr/bin/env python3
"""Convergence of Ψ, Δ and the diffraction efficiencies of a case in harmonics and slices.

Runs `gratingsim run` on CASE.yaml with the numerics settings rewritten (harmonics M, the slices of every
layer scaled by a factor, Richardson on or off, formulation), reads results/psi_deg, results/delta_deg,
results/R and results/T of every sweep point, and prints for each setting the largest |ΔΨ| and |ΔΔ| (degrees,
Δ difference wrapped into (−180°, 180°]) and the largest |ΔR|, |ΔT| over every stored order and polarisation
(T: where defined, the substrate not absorbing) against the last, most converged setting, with the time the
run took.

    validation/convergence/metrology_convergence.py --gratingsim build/app/gratingsim configs/default.yaml \
        --settings 12:1:0 20:1:1 30:2:1 48:4:1 [--backend cpu-fftw] [--formulation normal-vector] [--save all.json]

A setting is M:slice_factor:richardson. Needs PyYAML and h5py (Debian: python3-yaml python3-h5py).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import yaml


def run_setting(exe, case, m, factor, richardson, backend, formulation, workdir):
    numerics = case.setdefault("numerics", {})
    numerics["harmonics"] = m
    numerics["richardson"] = bool(richardson)
    if backend:
        numerics["backend"] = backend
    if formulation:
        numerics["formulation"] = formulation
    for layer in case["layers"]:
        if "slices" in layer:
            layer["slices"] = int(layer["slices"] * factor)
    path = os.path.join(workdir, f"case_M{m}_x{factor}_r{richardson}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(case, f, sort_keys=False)
    out = path[:-5] + ".h5"
    start = time.perf_counter()
    proc = subprocess.run([exe, "run", path, "-o", out, "--quiet"], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 3):
        sys.exit(f"gratingsim failed for M={m}, x{factor}: {proc.stderr.strip()}")
    with h5py.File(out, "r") as f:
        psi = np.array(f["results/psi_deg"]).ravel()
        delta = np.array(f["results/delta_deg"]).ravel()
        r = np.array(f["results/R"])
        t = np.array(f["results/T"])
    return psi, delta, r, t, seconds, proc.returncode


def wrap(d):
    return (d + 180.0) % 360.0 - 180.0


def save(path, rows):
    with open(path, "w") as f:
        json.dump({s: {"psi_deg": psi.tolist(), "delta_deg": delta.tolist(), "R": r.ravel().tolist(),
                       "T": t.ravel().tolist(), "seconds": seconds, "status": rc}
                   for s, psi, delta, r, t, seconds, rc in rows}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case")
    ap.add_argument("--gratingsim", required=True)
    ap.add_argument("--settings", nargs="+", required=True, help="M:slice_factor:richardson, last = reference")
    ap.add_argument("--backend")
    ap.add_argument("--formulation")
    ap.add_argument("--save", help="also write every setting's Ψ, Δ and time to this JSON file")
    args = ap.parse_args()
    with open(args.case) as f:
        text = f.read()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in args.settings:
            m, factor, rich = s.split(":")
            case = yaml.safe_load(text)
            rows.append((s,) + run_setting(args.gratingsim, case, int(m), float(factor), int(rich), args.backend,
                                           args.formulation, tmp))
            print(f"  ran {s}: {rows[-1][5]:.1f} s, status {rows[-1][6]}", file=sys.stderr, flush=True)
            if args.save:  # after every setting, so a run stopped by a time limit keeps what it finished
                save(args.save, rows)
    ref_psi, ref_delta, ref_r, ref_t = rows[-1][1:5]
    print(f"case {args.case}; reference setting {rows[-1][0]} (M:slice_factor:richardson); "
          f"formulation {args.formulation or 'case default'}; backend {args.backend or 'case default'}")
    print(f"{'setting':>12} {'max|dPsi| deg':>14} {'max|dDelta| deg':>16} {'max|dR|':>9} {'max|dT|':>9} {'time s':>8} "
          f"{'status':>6}")

    def largest(a, b):  # over the entries defined in both (T is NaN where the substrate absorbs); nan if none
        if a.shape != b.shape:
            return float("nan")
        d = np.abs(a - b)
        return float(np.nanmax(d)) if np.any(np.isfinite(d)) else float("nan")

    for s, psi, delta, r, t, seconds, rc in rows:
        dpsi = np.max(np.abs(psi - ref_psi))
        ddelta = np.max(np.abs(wrap(delta - ref_delta)))
        print(f"{s:>12} {dpsi:14.4f} {ddelta:16.4f} {largest(r, ref_r):9.2e} {largest(t, ref_t):9.2e} {seconds:8.1f} "
              f"{rc:6d}")


if __name__ == "__main__":
    main()
