"""Harmonic convergence of an independent RCWA code (fmmax 1.7.1, JONES_DIRECT: Li's inverse rule in
1D) on configs/default.yaml at its hardest wavelength, 400 nm: Si lines (bottom 90 nm, 85° walls, 120 nm,
pitch 500 nm) on Si at θ = 65°, ε(Si, 400 nm) = (5.613 + 0.296i)² from physics/materials.cpp (Green 2008).
The trapezoid is the same staircase gratingsim uses (N slices, each the width at its centre height, exact
in z within a layer). Prints Ψ and Δ of the order-0 reflection (Δ here is arg(r_p/r_s) in fmmax's
amplitude basis: gratingsim's Δ differs by 180°; compare changes, not values).
    python3 default_400nm_fmmax.py SLICES[,SLICES...] M[,M...]     (needs fmmax and jax from PyPI)
"""
import os, sys, time
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
import jax; jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np, fmmax
lam, P, H, wb, swa, th = 400.0, 500.0, 120.0, 90.0, 85.0, 65.0
eps_si = (5.613 + 0.296j) ** 2
def run(M, N, grid=20000):
    lat = fmmax.LatticeVectors(u=jnp.array([P, 0.0]), v=jnp.array([0.0, 1.0]))
    orders = [0] + [s * m for m in range(1, M + 1) for s in (-1, 1)]
    exp = fmmax.Expansion(basis_coefficients=np.array([[o, 0] for o in orders]))
    kin = fmmax.plane_wave_in_plane_wavevector(jnp.asarray(lam), jnp.deg2rad(th), 0.0, jnp.asarray(1.0))
    def eig(eps, form=fmmax.Formulation.FFT):
        return fmmax.eigensolve_isotropic_media(wavelength=jnp.asarray(lam), in_plane_wavevector=kin,
            primitive_lattice_vectors=lat, permittivity=jnp.asarray(eps, dtype=complex), expansion=exp, formulation=form)
    sup = eig(np.full((1, 1), 1.0 + 0j)); sub = eig(np.full((1, 1), eps_si))
    x = (np.arange(grid) + 0.5) / grid * P - P / 2
    layers, th_list = [sup], [0.0]
    dz = H / N
    for p in range(N):  # top down; z from the top
        zc_from_bottom = H - (p + 0.5) * dz
        w = wb - 2 * zc_from_bottom / np.tan(np.deg2rad(swa))
        # area-exact raster: pixel fraction
        lo, hi = -w / 2, w / 2
        pix = P / grid
        frac = np.clip((np.minimum(x + pix / 2, hi) - np.maximum(x - pix / 2, lo)) / pix, 0, 1)
        eps = 1.0 + (eps_si - 1.0) * frac
        layers.append(eig(eps[:, None], fmmax.Formulation.JONES_DIRECT)); th_list.append(dz)
    layers.append(sub); th_list.append(0.0)
    S = fmmax.stack_s_matrix(layers, [jnp.asarray(t) for t in th_list])
    n = exp.num_terms
    a = np.zeros((2 * n, 2), complex); a[0, 0] = 1; a[n, 1] = 1
    r = np.asarray(S.s21 @ jnp.asarray(a))
    rs, rp = r[0, 0], r[n, 1]
    rho = rp / rs
    return np.degrees(np.arctan(abs(rho))), np.degrees(np.angle(rho))
for N in [int(a) for a in sys.argv[1].split(",")]:
    for M in [int(a) for a in sys.argv[2].split(",")]:
        t = time.time(); psi, delta = run(M, N)
        print(f"N={N:4d} M={M:4d} psi={psi:.5f} delta={delta:.5f} ({time.time()-t:.1f}s)", flush=True)
