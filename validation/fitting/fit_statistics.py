#!/usr/bin/env python3
"""The statistical proof of `gratingsim fit` at full size (issue #11), run where a GPU makes it quick:
spectra computed by `gratingsim run` at the case's parameter values (the truth), Gaussian noise of the
stated σ added in DRAWS independent draws (numpy default_rng(SEED + draw)), each draw fitted by
`gratingsim fit`. Passes when every parameter is recovered within 3 reported standard errors in at
least 19 of 20 draws (for DRAWS = 20; generally DRAWS − ceil(DRAWS/20) + 1) and the mean reported
standard error agrees with the scatter (sample standard deviation) of the estimates over the draws
within a factor 1.5. Prints one table row per parameter; exit status 1 when a criterion fails.

  python3 validation/fitting/fit_statistics.py --gratingsim build-gpu/app/gratingsim \
      --case validation/fitting/si_lines_fit_full.yaml --out /tmp/fitstat --backend gpu-fused --jobs 4

Needs numpy and h5py. The measured tables carry σ per row, so the fit's `errors: measured` reads the
reported standard errors as standard deviations."""
import argparse
import concurrent.futures
import math
import pathlib
import subprocess
import sys
import time

import h5py
import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gratingsim", required=True)
    ap.add_argument("--case", required=True)
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--sigma-psi", type=float, default=0.05, help="deg")
    ap.add_argument("--sigma-delta", type=float, default=0.1, help="deg")
    ap.add_argument("--jobs", type=int, default=1, help="fits run at once")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    exe = a.gratingsim

    start = time.perf_counter()
    truth_file = a.out / "truth.h5"
    subprocess.run([exe, "run", a.case, "-o", str(truth_file), "--overwrite", "--quiet", "--backend", a.backend],
                   check=True)
    with h5py.File(truth_file, "r") as f:
        wavelengths = f["sweep/wavelength"][:]
        thetas, phis = f["sweep/theta"][:], f["sweep/phi"][:]
        psi, delta = f["results/psi_deg"][...], f["results/delta_deg"][...]
    # A case with parameters has their axes first (io/SCHEMA.md §2.5), each of length 1 here.
    psi = psi.reshape(psi.shape[-3:])
    delta = delta.reshape(delta.shape[-3:])
    print(f"truth spectrum: {psi.size} points in {time.perf_counter() - start:.1f} s")

    def fit_draw(draw):
        rng = np.random.default_rng(a.seed + draw)
        csv = a.out / f"measured_{draw:02d}.csv"
        rows = ["wavelength, theta_deg, phi_deg, psi_deg, delta_deg, sigma_psi, sigma_delta"]
        for i, w in enumerate(wavelengths):
            for j, t in enumerate(thetas):
                for k, p in enumerate(phis):
                    noisy_psi = psi[i, j, k] + rng.normal(0.0, a.sigma_psi)
                    noisy_delta = delta[i, j, k] + rng.normal(0.0, a.sigma_delta)
                    values = (w, t, p, noisy_psi, noisy_delta, a.sigma_psi, a.sigma_delta)
                    rows.append(", ".join(repr(float(v)) for v in values))  # shortest round-trip decimals
        csv.write_text("\n".join(rows) + "\n")
        fit_file = a.out / f"fit_{draw:02d}.h5"
        log = a.out / f"fit_{draw:02d}.log"
        with open(log, "w") as out:
            rc = subprocess.run([exe, "fit", a.case, str(csv), "-o", str(fit_file), "--overwrite", "--backend", a.backend],
                                stdout=out, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            raise RuntimeError(f"draw {draw}: gratingsim fit exited {rc} (see {log})")
        with h5py.File(fit_file, "r") as f:
            return (f["parameters/names"].asstr()[:].tolist(), f["parameters/value"][:], f["parameters/standard_error"][:],
                    bool(f.attrs["converged"]), float(f.attrs["reduced_chi2"]))

    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        fits = list(pool.map(fit_draw, range(a.draws)))
    elapsed = time.perf_counter() - start
    fitted_names = fits[0][0]
    # The truth: the case's parameter values, read from the case itself (the fitted names are its keys).
    truth = parse_truth(pathlib.Path(a.case), fitted_names)
    values = np.array([f[1] for f in fits])
    errors = np.array([f[2] for f in fits])
    converged = sum(f[3] for f in fits)
    needed = a.draws - math.ceil(a.draws / 20) + 1
    ok = converged == a.draws
    print(f"{a.draws} draws, {converged} converged, σ_Ψ {a.sigma_psi}°, σ_Δ {a.sigma_delta}°, backend {a.backend}, "
          f"{elapsed:.1f} s in all; mean reduced χ² {np.mean([f[4] for f in fits]):.3f}")
    print(f"{'parameter':<10} {'truth':>9} {'mean':>11} {'mean error':>11} {'scatter':>10} {'scatter/error':>13} "
          f"{'within 3σ':>10}")
    for j, name in enumerate(fitted_names):
        within = int(np.sum(np.abs(values[:, j] - truth[j]) <= 3 * errors[:, j]))
        scatter = float(np.std(values[:, j], ddof=1))
        mean_error = float(np.mean(errors[:, j]))
        ratio = scatter / mean_error
        passed = within >= needed and 1 / 1.5 <= ratio <= 1.5
        ok &= passed
        print(f"{name:<10} {truth[j]:>9.4f} {np.mean(values[:, j]):>11.5f} {mean_error:>11.5f} {scatter:>10.5f} "
              f"{ratio:>13.3f} {within:>5}/{a.draws} {'ok' if passed else 'FAILED'}")
    print("PASSED" if ok else "FAILED")
    return 0 if ok else 1


def parse_truth(case_path, names):
    """The case's `parameters:` values for `names` (plain numbers in the case: the truth)."""
    import yaml
    case = yaml.safe_load(case_path.read_text())
    return [float(case["parameters"][n]) for n in names]


if __name__ == "__main__":
    sys.exit(main())
