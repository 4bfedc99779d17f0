#!/usr/bin/env python3
"""Converged peer reference values for gratingsim, computed with the RCWA code fmmax.

    python3 compute_references.py > references.txt      # the full run (CPU, ~tens of minutes)
    python3 compute_references.py --case lamellar        # one case
    python3 compute_references.py --check                # conventions only (thin film S3)

Everything geometric is stated once, in CASES below (lengths in the unit of the wavelength,
λ = 1). The module is also imported by bench_peers.py (CASES, lattice_and_expansion, pattern_inputs,
efficiencies, summarise, read_references).

Conventions (verified, see README.md): gratingsim (docs/formulation.md §1) uses exp(-iωt), Im ε ≥ 0 for loss,
incidence from the superstrate going down. fmmax propagates "forward" along +z from layer 0 and
also uses Im ε > 0 for loss (eigenvalues chosen with Im q ≥ 0, fields ~ exp(+iqz)); a mirror
z → -z maps one geometry onto the other and leaves efficiencies and the s/p character unchanged,
so the stack is [superstrate, pattern, substrate] with the incident wave forward in layer 0.
fmmax's wave amplitudes in a uniform layer are the transverse magnetic-field Fourier components
(hx of every order, then hy): s (TE, E ⟂ plane of incidence) has H_t ∥ t̂ = (cos φ, sin φ),
p (TM) has H_t ∥ ê = ẑ × t̂ = (-sin φ, cos φ).
Efficiencies: per-order z-flux (fmmax.amplitude_poynting_flux, both field components summed)
divided by the incident z-flux; sums over all orders (evanescent orders carry no flux in the
lossless superstrate and substrate).
"""
from __future__ import annotations

import os

# At most 2 threads (shared build machine). Must be set before jax is imported.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=2")
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "2")

import argparse
import datetime
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fmmax  # noqa: E402

# ---------------------------------------------------------------------------------------------
# The cases (λ = 1; lengths in units of λ). Superstrate (air, ε = 1) also fills the pattern's
# background. Shapes are centred in the unit cell. The pattern sits directly on the substrate.
# ---------------------------------------------------------------------------------------------
CASES = {
    "pillars": dict(
        lattice="2d", period_x=1.0, period_y=1.0,
        shape=dict(type="circle", radius=0.25), eps_shape=4.0 + 0j, height=0.5,
        eps_sup=1.0, eps_sub=2.25, wavelength=1.0, theta_deg=30.0, phi_deg=30.0,
    ),
    "rectangles": dict(
        lattice="2d", period_x=1.2, period_y=0.9,
        shape=dict(type="rectangle", width_x=0.6, width_y=0.45), eps_shape=6.0 + 0j, height=0.35,
        eps_sup=1.0, eps_sub=2.25, wavelength=1.0, theta_deg=20.0, phi_deg=45.0,
    ),
    "metal_1d": dict(
        lattice="1d", period_x=0.8,
        shape=dict(type="line", width=0.4), eps_shape=-20.0 + 1.5j, height=0.08,
        eps_sup=1.0, eps_sub=2.25, wavelength=1.0, theta_deg=15.0, phi_deg=0.0,
    ),
    # A high-contrast (silicon-like) block, long along y: the 2D field's harder case. Every order stays
    # at least 0.15 k0 away from a Rayleigh anomaly in air and in the substrate.
    "si_block": dict(
        lattice="2d", period_x=0.6, period_y=0.6,
        shape=dict(type="rectangle", width_x=0.2, width_y=0.42), eps_shape=12.0 + 0j, height=0.2,
        eps_sup=1.0, eps_sub=2.25, wavelength=1.0, theta_deg=30.0, phi_deg=10.0,
    ),
    "lamellar": dict(  # docs/reference-cases.md §3, "1D lamellar grating"
        lattice="1d", period_x=1.5,
        shape=dict(type="line", width=0.75), eps_shape=4.0 + 0j, height=0.5,
        eps_sup=1.0, eps_sub=2.25, wavelength=1.0, theta_deg=10.0, phi_deg=0.0,
    ),
}
QUANTITIES = ("R00", "T00", "sumR", "sumT")
POLARISATIONS = ("s", "p")

# Numerical settings of the reference run: the order counts (1D: highest order M, 2M+1 orders;
# 2D: fmmax's approximate_num_terms, circular truncation) and the raster of the permittivity.
# The last two counts of each list are the ones compared for convergence.
# formulation: a fmmax.Formulation name (JONES_DIRECT: fmmax's complex-Jones normal-vector
# formulation; for a 1D grating its tangent field is exactly along the lines, i.e. Li's inverse rule
# for E_x and Laurent's rule for E_y), or LI_RECTANGLE: Li's (1997) factorization rules for an
# axis-aligned rectangle (E_x: inverse rule along x then Laurent along y; E_y the converse; ε_zz
# Laurent) built from the exact (analytic) Fourier coefficients and handed to fmmax's own
# eigensolver (fmmax.fmm._numerical_eigensolve), parallelogramic truncation. LI_RECTANGLE needs no
# raster ('grid' unused) and converges about 3× faster than JONES_DIRECT on 'rectangles'.
# JONES_DIRECT_AA: fmmax's JONES_DIRECT tangent field and matrices, but with consistent area-weighted
# rasters of ε and of 1/ε (see _eigensolve_area_weighted); for the circle this makes the result
# converge as O(pixel²) in the grid (1024 vs 2048: 1.5e-6) instead of O(pixel) (3e-5 at 2048).
SETTINGS = {
    "pillars": dict(formulation="JONES_DIRECT_AA", counts=[100, 200, 400, 800, 1200, 1600], grid=1024),
    "rectangles": dict(formulation="LI_RECTANGLE", counts=[100, 200, 400, 800, 1200, 1681], grid=None),
    "si_block": dict(formulation="LI_RECTANGLE", counts=[100, 200, 400, 800, 1200, 1681, 2401], grid=None),
    "metal_1d": dict(formulation="JONES_DIRECT", counts=[20, 40, 80, 160, 320, 640], grid=16384),
    "lamellar": dict(formulation="JONES_DIRECT", counts=[20, 40, 80, 160, 320, 640], grid=16384),
}

# Same-order rows: fmmax at gratingsim's own truncation, written as case "<name>@M<count>". In 1D both
# codes use Li's inverse rule, so at equal M they must agree once gratingsim is converged in z: a check
# of the formulation independent of the truncation error. The thin metal needs it: its p-polarised
# truncation error is erratic in M and ~3e-3 at M = 15 in fmmax itself (validation/results/nv-accuracy-cpu.txt).
SAME_ORDER = {"metal_1d": 5}


# ---------------------------------------------------------------------------------------------
# Rasters. fmmax samples the permittivity on a grid with pixel centres at ((i+½)/nx, (j+½)/ny)
# of the lattice vectors; the shape is centred at the cell centre. Edges of lines and rectangles
# fall on pixel boundaries (width/period = ½ and even grids), so those rasters are exact; the
# circle's boundary pixels get their area fraction (supersampled 32 × 32).
# ---------------------------------------------------------------------------------------------
def raster(case: dict, grid: int) -> np.ndarray:
    """Permittivity on the grid (boundary pixels: area-weighted ε)."""
    eps_in, eps_out = complex(case["eps_shape"]), complex(case["eps_sup"])
    return eps_out + (eps_in - eps_out) * fill_fraction(case, grid)


def fill_fraction(case: dict, grid: int) -> np.ndarray:
    """Fraction of each pixel covered by the shape."""
    shape = case["shape"]
    if case["lattice"] == "1d":
        L = case["period_x"]
        x = (np.arange(grid) + 0.5) / grid * L - L / 2
        return (np.abs(x) < shape["width"] / 2).astype(float)[:, None]
    Lx, Ly = case["period_x"], case["period_y"]
    x = (np.arange(grid) + 0.5) / grid * Lx - Lx / 2
    y = (np.arange(grid) + 0.5) / grid * Ly - Ly / 2
    X, Y = np.meshgrid(x, y, indexing="ij")
    if shape["type"] == "rectangle":
        frac = ((np.abs(X) < shape["width_x"] / 2) & (np.abs(Y) < shape["width_y"] / 2)).astype(float)
    elif shape["type"] == "circle":
        r0 = shape["radius"]
        dx, dy = Lx / grid, Ly / grid
        rr = np.hypot(X, Y)
        frac = (rr < r0).astype(float)
        edge = np.abs(rr - r0) < 0.75 * np.hypot(dx, dy)
        sub = 32
        off = (np.arange(sub) + 0.5) / sub - 0.5
        ox, oy = np.meshgrid(off * dx, off * dy, indexing="ij")
        ex, ey = X[edge], Y[edge]
        inside = np.hypot(ex[:, None, None] + ox, ey[:, None, None] + oy) < r0
        frac[edge] = inside.mean(axis=(1, 2))
    else:
        raise ValueError(shape["type"])
    return frac


def lattice_and_expansion(case: dict, count: int, formulation: str):
    if case["lattice"] == "1d":
        lat = fmmax.LatticeVectors(u=jnp.array([case["period_x"], 0.0]), v=jnp.array([0.0, 1.0]))
        orders = [0] + [s * m for m in range(1, count + 1) for s in (-1, 1)]
        exp = fmmax.Expansion(basis_coefficients=np.array([[o, 0] for o in orders]))
        return lat, exp
    lat = fmmax.LatticeVectors(u=jnp.array([case["period_x"], 0.0]), v=jnp.array([0.0, case["period_y"]]))
    trunc = fmmax.Truncation.PARALLELOGRAMIC if formulation == "LI_RECTANGLE" else fmmax.Truncation.CIRCULAR
    exp = fmmax.generate_expansion(lat, approximate_num_terms=count, truncation=trunc)
    return lat, exp


def _box_coefficient(n, w, L):
    """Fourier coefficient (1/L)∫ χ e^{-i2πnx/L} of the indicator χ of |x| < w/2 on the period L."""
    return (w / L) * np.sinc(n * w / L)


def _li_rectangle_matrices(case: dict, exp):
    """Li's factorization rules for one axis-aligned rectangle centred in the cell (exact coefficients).

    Returns (ε_zz Laurent, (1/ε)_zz Laurent, transverse block matrix in fmmax's layout
    [[ε_yy, -ε_yx], [-ε_xy, ε_xx]] (see fmmax.fmm_matrices.transverse_permittivity_fft_anisotropic)).
    """
    Lx, Ly = case["period_x"], case["period_y"]
    wx, wy = case["shape"]["width_x"], case["shape"]["width_y"]
    e_in, e_out = complex(case["eps_shape"]), complex(case["eps_sup"])
    bc = np.asarray(exp.basis_coefficients)
    m1, m2 = bc[:, 0], bc[:, 1]
    M1, M2 = int(np.abs(m1).max()), int(np.abs(m2).max())
    d1, d2 = m1[:, None] - m1[None, :], m2[:, None] - m2[None, :]
    cx, cy = _box_coefficient(d1, wx, Lx), _box_coefficient(d2, wy, Ly)
    eye = np.eye(len(bc))
    eps_laurent = e_out * eye + (e_in - e_out) * cx * cy
    inv_laurent = (1 / e_out) * eye + (1 / e_in - 1 / e_out) * cx * cy

    def inverse_rule(w, L, M):  # [[1/ε]]^{-1} of a line profile across the block, orders -M..M
        k = np.arange(-M, M + 1)
        d = k[:, None] - k[None, :]
        return np.linalg.inv((1 / e_out) * (d == 0) + (1 / e_in - 1 / e_out) * _box_coefficient(d, w, L))

    # Lines crossing the block carry the 1D inverse-rule matrix, the others ε_out: the y-(x-)
    # dependence is then a Laurent product with the block's indicator along y (x).
    ax, ay = inverse_rule(wx, Lx, M1), inverse_rule(wy, Ly, M2)
    eps_xx = e_out * eye + (ax[m1[:, None] + M1, m1[None, :] + M1] - e_out * (d1 == 0)) * cy
    eps_yy = e_out * eye + (ay[m2[:, None] + M2, m2[None, :] + M2] - e_out * (d2 == 0)) * cx
    zero = np.zeros_like(eye)
    return eps_laurent, inv_laurent, np.block([[eps_yy, zero], [zero, eps_xx]])


def _eigensolve_area_weighted(case, lat, exp, kin, frac, base_formulation):
    """fmmax's vector formulation (tangent field from fmmax) with consistent rasters: boundary pixels
    carry the area-weighted ε in the ε matrices and the area-weighted 1/ε in the 1/ε matrices. (fmmax
    itself takes 1/ε of the area-weighted ε raster, whose Fourier coefficients then converge only as
    O(pixel) for curved boundaries; here both converge as O(pixel²).) Mirrors
    fmmax.fmm._fourier_matrices_patterned_isotropic_media and fmm_matrices.transverse_permittivity_vector.
    frac: the shape's fill fraction per pixel (fill_fraction)."""
    from fmmax import fft as _fft, fmm as _fmm, fmm_matrices as _fm, vector as _vector
    dtype = jnp.result_type(complex)  # complex128 with jax_enable_x64, else complex64
    e_in, e_out = complex(case["eps_shape"]), complex(case["eps_sup"])
    eps = (e_out + (e_in - e_out) * frac).astype(dtype)
    eta = (1 / e_out + (1 / e_in - 1 / e_out) * frac).astype(dtype)
    tx, ty = _vector.VECTOR_FIELD_SCHEMES[getattr(fmmax.Formulation, base_formulation).value](eps, exp, lat)

    def transform(x):
        return _fft.fourier_convolution_matrix(x, exp)

    eps_hat, eta_hat = transform(eps), transform(eta)
    zeros = jnp.zeros_like(eps_hat)
    delta_hat = eps_hat - jnp.linalg.inv(eta_hat)
    pxx, pxy, pyx, pyy = _fm._tangent_terms(tx, ty)
    p_matrix = jnp.block([[transform(pyy), transform(pyx)], [transform(pxy), transform(pxx)]])
    trans = (jnp.block([[eps_hat, zeros], [zeros, eps_hat]])
             - jnp.block([[delta_hat, zeros], [zeros, delta_hat]]) @ p_matrix)
    ident = jnp.eye(exp.num_terms, dtype=dtype)
    return _fmm._numerical_eigensolve(
        wavelength=jnp.asarray(case["wavelength"]), in_plane_wavevector=kin, primitive_lattice_vectors=lat,
        z_permittivity_matrix=eps_hat, inverse_z_permittivity_matrix=eta_hat, transverse_permittivity_matrix=trans,
        z_permeability_matrix=ident, inverse_z_permeability_matrix=ident,
        transverse_permeability_matrix=jnp.block([[ident, zeros], [zeros, ident]]),
        expansion=exp, tangent_vector_field=(tx, ty))


def pattern_inputs(case: dict, exp, formulation: str, grid: int | None) -> tuple:
    """The patterned layer's data as NumPy arrays (the argument of efficiencies, which is traceable by
    jax.jit): the exact-coefficient matrices for LI_RECTANGLE, the fill fraction for *_AA, else the
    permittivity raster; () for a uniform film."""
    if "eps_film" in case:
        return ()
    if formulation == "LI_RECTANGLE":
        return _li_rectangle_matrices(case, exp)
    if formulation.endswith("_AA"):
        return (fill_fraction(case, grid),)
    return (raster(case, grid),)


def efficiencies(case, lat, exp, formulation: str, inputs: tuple):
    """R and T per order (jax arrays), shape (num_terms, 2) with columns (s, p); inputs from
    pattern_inputs. Pure jax in `inputs`, so jax.jit(lambda x: efficiencies(case, lat, exp, f, x)) works.
    Arrays are complex128 with jax_enable_x64 (this module's default), else complex64."""
    dtype = jnp.result_type(complex)
    lam = jnp.asarray(case["wavelength"])
    kin = fmmax.plane_wave_in_plane_wavevector(
        lam, jnp.deg2rad(case["theta_deg"]), jnp.deg2rad(case["phi_deg"]), jnp.asarray(case["eps_sup"]))

    def eig(eps, form=fmmax.Formulation.FFT):
        return fmmax.eigensolve_isotropic_media(
            wavelength=lam, in_plane_wavevector=kin, primitive_lattice_vectors=lat,
            permittivity=jnp.asarray(eps, dtype=dtype), expansion=exp, formulation=form)

    sup = eig(np.full((1, 1), case["eps_sup"]))
    sub = eig(np.full((1, 1), case["eps_sub"]))
    if "eps_film" in case:  # uniform film (convention check)
        pat = eig(np.full((1, 1), case["eps_film"]))
    elif formulation == "LI_RECTANGLE":
        from fmmax import fmm as _fmm
        ezz, inv_ezz, trans = (jnp.asarray(x, dtype=dtype) for x in inputs)
        ident = jnp.eye(exp.num_terms, dtype=dtype)
        zero = jnp.zeros_like(ident)
        pat = _fmm._numerical_eigensolve(
            wavelength=lam, in_plane_wavevector=kin, primitive_lattice_vectors=lat,
            z_permittivity_matrix=ezz, inverse_z_permittivity_matrix=inv_ezz,
            transverse_permittivity_matrix=trans,
            z_permeability_matrix=ident, inverse_z_permeability_matrix=ident,
            transverse_permeability_matrix=jnp.block([[ident, zero], [zero, ident]]),
            expansion=exp, tangent_vector_field=None)
    elif formulation.endswith("_AA"):
        pat = _eigensolve_area_weighted(case, lat, exp, kin, jnp.asarray(inputs[0]), formulation[:-3])
    else:
        pat = eig(inputs[0], getattr(fmmax.Formulation, formulation))
    S = fmmax.stack_s_matrix([sup, pat, sub], [jnp.asarray(0.0), jnp.asarray(case["height"]), jnp.asarray(0.0)])
    n = exp.num_terms
    i0 = zeroth_order_index(exp)
    c, s = np.cos(np.deg2rad(case["phi_deg"])), np.sin(np.deg2rad(case["phi_deg"]))
    a = np.zeros((2 * n, 2), complex)
    a[i0, 0], a[n + i0, 0] = c, s  # s: H_t ∥ t̂
    a[i0, 1], a[n + i0, 1] = -s, c  # p: H_t ∥ ê = ẑ × t̂
    a = jnp.asarray(a, dtype=dtype)
    z = jnp.zeros_like(a)
    r = S.s21 @ a
    t = S.s11 @ a
    f_inc, _ = fmmax.amplitude_poynting_flux(a, z, sup)
    _, f_r = fmmax.amplitude_poynting_flux(z, r, sup)
    f_t, _ = fmmax.amplitude_poynting_flux(t, z, sub)
    inc = jnp.sum(f_inc, axis=-2)
    R = -(f_r[:n] + f_r[n:]) / inc
    T = (f_t[:n] + f_t[n:]) / inc
    return R, T


def zeroth_order_index(exp) -> int:
    return int(np.where(np.all(np.asarray(exp.basis_coefficients) == 0, axis=1))[0][0])


def summarise(R, T, i0: int) -> dict:
    """{(pol, quantity): value} from per-order efficiencies (columns s, p)."""
    R, T = np.asarray(R), np.asarray(T)
    out = {}
    for k, pol in enumerate(POLARISATIONS):
        out[(pol, "R00")] = float(R[i0, k])
        out[(pol, "T00")] = float(T[i0, k])
        out[(pol, "sumR")] = float(R[:, k].sum())
        out[(pol, "sumT")] = float(T[:, k].sum())
    return out


def solve_case(name: str, count: int, formulation: str | None = None, grid: int | None = None,
               case: dict | None = None) -> dict:
    """{(pol, quantity): value} for one case at one order count (see SETTINGS for 'count')."""
    case = case or CASES[name]
    formulation = formulation or SETTINGS[name]["formulation"]
    grid = grid or SETTINGS[name]["grid"]
    lat, exp = lattice_and_expansion(case, count, formulation)
    R, T = efficiencies(case, lat, exp, formulation, pattern_inputs(case, exp, formulation, grid))
    out = summarise(R, T, zeroth_order_index(exp))
    out["num_terms"] = exp.num_terms
    return out


def read_references(path: str) -> dict:
    """{(case, pol, quantity): value} from a references.txt."""
    ref = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            c, p, q, v = line.split()
            ref[(c, p, q)] = float(v)
    return ref


def check_conventions(log=sys.stderr) -> float:
    """Thin film S3 of docs/reference-cases.md §2 (lossy film, s and p): returns the largest deviation."""
    case = dict(lattice="2d", period_x=1.0, period_y=1.0, eps_sup=1.0, eps_sub=2.25, wavelength=1.0,
                theta_deg=30.0, phi_deg=0.0, height=0.3, eps_film=4.0 + 1.0j)
    lat = fmmax.LatticeVectors(u=jnp.array([1.0, 0.0]), v=jnp.array([0.0, 1.0]))
    exp = fmmax.Expansion(basis_coefficients=np.array([[0, 0]]))
    expect = {"R": (0.1461523295, 0.0805380058), "T": (0.3164499363, 0.3438427747)}
    worst = 0.0
    for phi in (0.0, 37.0):  # the s/p basis must not depend on the azimuth of a film
        case["phi_deg"] = phi
        got = summarise(*efficiencies(case, lat, exp, "FFT", ()), zeroth_order_index(exp))
        for k, pol in enumerate(POLARISATIONS):
            r, t = got[(pol, "R00")], got[(pol, "T00")]
            dR, dT = r - expect["R"][k], t - expect["T"][k]
            worst = max(worst, abs(dR), abs(dT))
            print(f"# S3 phi={phi:g} {pol}: R={r:.10f} (dev {dR:.1e})  T={t:.10f} (dev {dT:.1e})", file=log)
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", choices=list(CASES), help="only these cases (repeatable)")
    ap.add_argument("--check", action="store_true", help="only the thin-film convention check")
    ap.add_argument("--same-order", action="store_true", help="only the same-order rows (SAME_ORDER)")
    args = ap.parse_args()
    same_order = []
    for name, count in SAME_ORDER.items():
        res = solve_case(name, count)
        same_order += [f"{name}@M{count} {p} {q} {res[(p, q)]:.9g}" for p in POLARISATIONS for q in QUANTITIES]
    if args.same_order:
        print("\n".join(same_order))
        return
    s3 = check_conventions()
    if args.check:
        return
    names = args.case or list(CASES)
    lines, conv = [], []
    for name in names:
        case, st = CASES[name], SETTINGS[name]
        form = st["formulation"]
        results = []
        for count in st["counts"]:
            t0 = time.time()
            res = solve_case(name, count, form, st["grid"])
            dt = time.time() - t0
            results.append(res)
            row = " ".join(f"{p}:{q}={res[(p, q)]:.9f}" for p in POLARISATIONS for q in QUANTITIES)
            print(f"# conv {name} count={count} num_terms={res['num_terms']} {dt:.1f}s {row}",
                  file=sys.stderr, flush=True)
            conv.append(f"# conv {name} {count:5d} {res['num_terms']:5d} " +
                        " ".join(f"{res[(p, q)]:.9f}" for p in POLARISATIONS for q in QUANTITIES))
        last, prev = results[-1], results[-2]
        diff = max(abs(last[k] - prev[k]) for k in last if k != "num_terms")
        conv.append(f"# {name}: formulation {form}, grid {st['grid']}, counts {st['counts'][-2]} "
                    f"(num_terms {prev['num_terms']}) vs {st['counts'][-1]} (num_terms {last['num_terms']}): "
                    f"max |difference| {diff:.2e}")
        for p in POLARISATIONS:
            for q in QUANTITIES:
                lines.append(f"{name} {p} {q} {last[(p, q)]:.9g}")
    print("# gratingsim peer references computed with fmmax (RCWA / Fourier modal method)")
    print(f"# fmmax {fmmax.__version__}, jax {jax.__version__}, numpy {np.__version__}, float64 (jax_enable_x64)")
    print(f"# date {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    print("# produced by validation/peers/compute_references.py (case definitions and settings there)")
    print("# conventions: exp(-i omega t), Im eps >= 0 is loss; s = TE (E perpendicular to the plane of incidence),")
    print("#   p = TM; efficiencies = z-flux of an order / incident z-flux; R00/T00 order (0,0); sumR/sumT over all")
    print("#   propagating orders; unit-power pure s or pure p incidence from the superstrate.")
    print(f"# convention check: thin film S3 of docs/reference-cases.md §2 (s, p; phi 0 and 37 deg) max deviation {s3:.1e}")
    print("# 1D counts: highest order M (2M+1 orders); 2D counts: fmmax approximate_num_terms (circular truncation)")
    print("# convergence rows: case count num_terms s:R00 s:T00 s:sumR s:sumT p:R00 p:T00 p:sumR p:sumT")
    for c in conv:
        print(c)
    print("# case polarisation quantity value")
    for line in lines:
        print(line)
    print(f"# same-order rows (SAME_ORDER): fmmax at gratingsim's truncation, same formulation and grid")
    for line in same_order:
        print(line)


if __name__ == "__main__":
    main()
