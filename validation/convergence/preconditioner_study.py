#!/usr/bin/python3
"""Krylov iterations, products and the preconditioner's set-up and Krylov seconds per preconditioner
variant on one case (issue #10's iteration study, validation/results/preconditioner-cpu-session11.txt).

    validation/convergence/preconditioner_study.py GRATINGSIM NAME=CASE.yaml VARIANT...

VARIANT: a numerics.solver.preconditioner value (none, averaged, coarse, auto), optionally followed by
@VAR=VALUE,VAR=VALUE: environment variables for that run. The experiment switches of the session-11
study (GS_PC_OUTER=local|product, GS_PC_MC, GS_PC_GROUP) exist only in the tree of commit d592b3d;
elsewhere they are ignored. The backend is cpu-fftw (iteration counts do not depend on it) with one
OpenMP thread unless OMP_NUM_THREADS is set. Reduced sweeps through the environment: WL="400,600"
(wavelengths), TH="0,40" (θ), SOLVER="{method: gmres, restart: 200}" (merged into numerics.solver).
Each run writes its case and result under /tmp/pcs. Iterations and products are summed over all solves
(s and p); the set-up ("preconditioner") and "krylov" seconds over the wavelength batches
(solver/phase_seconds, stored at every point of a batch: read at the first angle).
"""
import os, subprocess, sys, time, yaml, h5py, numpy as np
exe, spec, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
name, path = spec.split("=")
os.makedirs("/tmp/pcs", exist_ok=True)
for v in variants:
    pc, _, envs = v.partition("@")
    c = yaml.safe_load(open(path))
    n = c.setdefault("numerics", {}); n["backend"] = "cpu-fftw"
    n.setdefault("solver", {})["preconditioner"] = pc
    if os.environ.get("WL"): c["wavelength"] = [float(x) for x in os.environ["WL"].split(",")]
    if os.environ.get("TH"): c["incidence"]["theta_deg"] = [float(x) for x in os.environ["TH"].split(",")]
    if os.environ.get("SOLVER"): n["solver"].update(yaml.safe_load(os.environ["SOLVER"]))
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    for e in filter(None, envs.split(",")):
        k, val = e.split("="); env[k] = val
    tag = v.replace("@", "_").replace(",", "_").replace("=", "")
    y, h = f"/tmp/pcs/{name}_{tag}.yaml", f"/tmp/pcs/{name}_{tag}.h5"
    yaml.safe_dump(c, open(y, "w"), sort_keys=False)
    t = time.perf_counter()
    p = subprocess.run([exe, "run", y, "-o", h, "--overwrite", "--quiet"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if p.returncode not in (0, 3):
        print(f"{name:16s} {v:28s} FAILED rc={p.returncode}: {p.stderr.strip()[:300]}", flush=True); continue
    with h5py.File(h) as f:
        it = np.array(f["solver/iterations"]); mv = np.array(f["solver/matvecs"]); cv = np.array(f["solver/converged"])
        ph = np.array(f["solver/phase_seconds"]); names = f["solver/phase_seconds"].attrs["phases"].split(",")
    per_batch = ph[:, 0, 0, :]
    setup = per_batch[:, names.index("preconditioner")].sum(); kry = per_batch[:, names.index("krylov")].sum()
    print(f"{name:16s} {v:36s} total it {it.sum():6d}  max/solve {it.max():5d} products {mv.sum():6d} "
          f"unconv {int((cv == 0).sum())}/{cv.size}  setup {setup:7.2f}s krylov {kry:7.2f}s wall {wall:7.1f}s", flush=True)
