#!/usr/bin/python3
# usage: pt.py EXE NAME=CASE.yaml VARIANT... ; env overrides: WL="400,600" TH="0,40" ; VARIANT: precond[@ENV=VAL,ENV=VAL]
import os, subprocess, sys, time, yaml, h5py, numpy as np
exe, spec, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
name, path = spec.split("=")
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
        R = np.array(f["results/psi_deg"]) if "results/psi_deg" in f else None
    # phase seconds: per batch (one wavelength, all its angles), stored at every point of the batch
    per_batch = ph[:, 0, 0, :]
    setup = per_batch[:, names.index("preconditioner")].sum(); kry = per_batch[:, names.index("krylov")].sum()
    print(f"{name:16s} {v:28s} total it {it.sum():6d}  median/pt {np.median(it.sum(axis=-1)):6.1f} max/solve {it.max():5d} products {mv.sum():6d} unconv {int((cv==0).sum())}/{cv.size}  setup {setup:7.2f}s krylov {kry:7.2f}s wall {wall:7.1f}s", flush=True)
