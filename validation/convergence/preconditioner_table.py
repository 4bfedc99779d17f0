#!/usr/bin/env python3
"""Iterations and wall time with and without the preconditioner (numerics.solver.preconditioner none vs
averaged), per case: writes the two variants of each case (backend fixed, formulation optionally
overridden) under /tmp/pc, runs them, prints iterations (solver/iterations), unconverged solves, wall time
and the largest Ψ/Δ difference between the two.

    validation/convergence/preconditioner_table.py GRATINGSIM BACKEND NAME=CASE.yaml[:formulation] ...
"""
import os
import subprocess, sys, time, yaml, h5py, numpy as np
exe, backend = sys.argv[1], sys.argv[2]
cases = sys.argv[3:]  # NAME=PATH[:formulation]
print(f"{'case':22s} {'precond':9s} {'median it':>9s} {'max it':>7s} {'total it':>9s} {'unconv':>7s} {'wall s':>7s}")
os.makedirs("/tmp/pc", exist_ok=True)
for spec in cases:
    name, rest = spec.split("=")
    path, _, formulation = rest.partition(":")
    base = yaml.safe_load(open(path))
    rows = {}
    for pc in ("none", "averaged"):
        c = yaml.safe_load(open(path))
        n = c.setdefault("numerics", {})
        n["backend"] = backend
        if formulation: n["formulation"] = formulation
        n.setdefault("solver", {})["preconditioner"] = pc
        y, h = f"/tmp/pc/{name}_{pc}.yaml", f"/tmp/pc/{name}_{pc}.h5"
        yaml.safe_dump(c, open(y, "w"), sort_keys=False)
        t = time.perf_counter()
        p = subprocess.run([exe, "run", y, "-o", h, "--overwrite", "--quiet"], capture_output=True, text=True)
        wall = time.perf_counter() - t
        if p.returncode not in (0, 3):
            print(f"{name:22s} {pc:9s} FAILED rc={p.returncode}: {p.stderr.strip()[:300]}"); continue
        with h5py.File(h) as f:
            it = np.array(f["solver/iterations"]); cv = np.array(f["solver/converged"])
            rows[pc] = np.array(f["results/psi_deg"]).ravel(), np.array(f["results/delta_deg"]).ravel()
        print(f"{name:22s} {pc:9s} {np.median(it):9.1f} {it.max():7d} {it.sum():9d} {int((cv == 0).sum()):3d}/{cv.size:<3d} {wall:7.1f}", flush=True)
    if "none" in rows and "averaged" in rows:
        d = lambda a, b: float(np.max(np.abs((a - b + 180) % 360 - 180)))
        print(f"{'':22s} max |dPsi| {d(rows['none'][0], rows['averaged'][0]):.2e} deg, |dDelta| {d(rows['none'][1], rows['averaged'][1]):.2e} deg (none vs averaged)")
