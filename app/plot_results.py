#!/usr/bin/env python3
"""Figures of a gratingsim result file (io/SCHEMA.md §2, schema version 1 or 2) or fit file (io/SCHEMA.md §3)
as PNG files.

usage: python3 app/plot_results.py OUT.h5 [-o DIR]

Writes into DIR (default: the result file's directory), named after the result file:
  NAME_efficiencies.png  diffraction efficiencies R_m (solid) and T_m (dashed) of the strongest orders
                         against the swept quantity (wavelength, θ or φ: the longest sweep axis),
                         one panel per incident polarisation; a bar chart for a single point
  NAME_ellipsometry.png  Ψ and Δ of the order-0 reflection against the swept quantity (files with
                         both polarisations and more than one point); Δ in its stored range
                         (−180°, 180°], the curve broken where it wraps
Titles are wrapped to the figure's width. A file with parameter axes (schema version 2, a library) is
drawn at its first parameter point, which the titles name.
  NAME_field_K.png       |E| of field map K of the first sweep point, per incident polarisation
                         (files that store fields)
For a fit file (schema gratingsim.fit):
  NAME_fit.png           measured (dots) and fitted (lines) Ψ and Δ, or Mueller elements, against
                         wavelength (or θ where one wavelength was measured), one curve per (θ, φ);
                         below, the weighted residuals (fitted − measured)/σ; the title gives the
                         best-fit parameters ± standard errors, the reduced χ² and whether it converged
Needs Python 3 with h5py and matplotlib (Debian: python3-h5py python3-matplotlib); reads the file
with h5py alone, no gratingsim code."""
import argparse
import os
import sys

import h5py
import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from mpl_toolkits.axes_grid1 import make_axes_locatable  # noqa: E402
import numpy as np  # noqa: E402

AXES = (("wavelength", "wavelength λ (nm)"), ("theta", "polar angle θ (°)"), ("phi", "azimuth φ (°)"))
MAX_ORDERS = 6      # strongest orders drawn
MIN_EFFICIENCY = 1e-3  # orders never above this are left out
MAX_CURVES = 4      # values of the other sweep axes drawn as separate Ψ/Δ curves
DPI = 100


def polarisations(f):
    return {"s": ["s"], "p": ["p"], "both": ["s", "p"]}[f.attrs["polarization"]]


def sweep_axis(f):
    """The index (0 wavelength, 1 θ, 2 φ) of the longest sweep axis."""
    lengths = [len(f["sweep/" + name]) for name, _ in AXES]
    return int(np.argmax(lengths)), lengths


def other_combinations(lengths, axis):
    """Index tuples over the sweep axes other than `axis`, at most MAX_CURVES of them."""
    others = [range(n) if i != axis else [slice(None)] for i, n in enumerate(lengths)]
    combos = [(a, b, c) for a in others[0] for b in others[1] for c in others[2]]
    return combos[:MAX_CURVES], len(combos)


def label_of(f, combo, axis):
    parts = []
    for i, (name, _) in enumerate(AXES):
        if i == axis or len(f["sweep/" + name]) == 1:
            continue
        value = f["sweep/" + name][combo[i]]
        parts.append({"wavelength": "λ = %g nm", "theta": "θ = %g°", "phi": "φ = %g°"}[name] % value)
    return ", ".join(parts)


def fixed_values(f, axis):
    """'λ = 633 nm, θ = 45°' for the sweep axes of length one."""
    parts = []
    for i, (name, _) in enumerate(AXES):
        values = f["sweep/" + name][()]
        if i != axis and len(values) == 1:
            parts.append({"wavelength": "λ = %g nm", "theta": "θ = %g°", "phi": "φ = %g°"}[name] % values[0])
    return ", ".join(parts)


def title_of(f):
    note = getattr(f, "note", "")
    case = f["input/case"].asstr()[()]
    for line in case.splitlines():
        if line.startswith("description:"):
            return line.split(":", 1)[1].strip() + note
    return os.path.basename(f.filename) + note


class AtParameterPoint:
    """A file with parameter axes (schema version 2) seen at one parameter point: its per-point
    datasets, which start with the parameter axes (io/SCHEMA.md section 2.6), read without them;
    everything else as stored."""

    def __init__(self, f, index):
        self.f, self.index, self.attrs, self.filename = f, tuple(index), f.attrs, f.filename
        names = f["sweep"].attrs["axes"].split(", ")[:-3]
        values = ", ".join("%s = %g" % (n, f["sweep/" + n][i]) for n, i in zip(names, self.index))
        self.note = " (at %s, the first of %d parameter points)" % (values, np.prod([len(f["sweep/" + n]) for n in names]))

    def __contains__(self, path):
        return path in self.f

    def __getitem__(self, path):
        per_point = path.startswith(("results/", "solver/", "accuracy/")) or path in ("done", "fields/harmonics") \
            or path.endswith(("/E", "/abs_E"))
        return self.f[path][self.index] if per_point else self.f[path]


def wrap(text, fig, fontsize=10, fraction=0.9):
    """Text in lines no wider than `fraction` of the figure at `fontsize` points, measured with the
    figure's renderer (a count of characters cuts titles with wide glyphs); a word longer than a
    line gets a line of its own."""
    renderer = fig.canvas.get_renderer()
    limit = fraction * fig.get_figwidth() * fig.dpi
    probe = fig.text(0, 0, "", fontsize=fontsize)

    def width(line):
        probe.set_text(line)
        return probe.get_window_extent(renderer=renderer).width

    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for w in paragraph.split():
            if line and width(line + " " + w) > limit:
                lines.append(line)
                line = w
            else:
                line = (line + " " + w).strip()
        lines.append(line)
    probe.remove()
    return "\n".join(lines)


def in_range_deg(delta, axis):
    """Δ as stored, in ellipsometry's (−180°, 180°], with NaN where it wraps between neighbouring sweep
    points (a jump of more than 180°), so that no line is drawn across the plot there."""
    delta = np.array(delta, dtype=float)
    jumps = np.abs(np.diff(delta, axis=axis)) > 180
    pad = [(0, 0)] * delta.ndim
    pad[axis] = (1, 0)
    return np.where(np.pad(jumps, pad), np.nan, delta)


def plot_efficiencies(f, out):
    R, T = f["results/R"][()], f["results/T"][()]  # [w, θ, φ, P, order]
    # Orders that do not propagate at a point are left out there (their stored 0 is not a value).
    up = ~np.isnan(f["results/reflected_direction"][..., 0])  # [w, θ, φ, order]
    down = ~np.isnan(f["results/transmitted_direction"][..., 0])
    R = np.where(up[:, :, :, None, :], R, np.nan)
    T = np.where(down[:, :, :, None, :], T, np.nan)
    orders = [tuple(o) for o in f["orders"][()]]
    pols = polarisations(f)
    axis, lengths = sweep_axis(f)
    strength = np.nanmax(np.fmax(R, T), axis=(0, 1, 2, 3))
    chosen = [k for k in np.argsort(-strength)[:MAX_ORDERS] if strength[k] >= MIN_EFFICIENCY]
    chosen.sort(key=lambda k: orders[k])
    one_d = all(o[1] == 0 for o in orders)
    name = (lambda o: "%d" % o[0]) if one_d else (lambda o: "(%d,%d)" % o)
    fig, panels = plt.subplots(1, len(pols), figsize=(5.2 * len(pols), 4.2), squeeze=False, sharey=True)
    if max(lengths) == 1:  # one point: a bar chart per polarisation
        x = np.arange(len(chosen))
        for i, (pol, ax) in enumerate(zip(pols, panels[0])):
            ax.bar(x - 0.2, np.nan_to_num(R[0, 0, 0, i, chosen]), 0.4, label="R")
            ax.bar(x + 0.2, np.nan_to_num(T[0, 0, 0, i, chosen]), 0.4, label="T")
            ax.set_xticks(x, [name(orders[k]) for k in chosen])
            ax.set_xlabel("order")
            ax.set_title("%s polarisation" % pol)
            ax.legend()
        panels[0][0].set_ylabel("efficiency")
    else:
        combo = other_combinations(lengths, axis)[0][0]
        x = f["sweep/" + AXES[axis][0]][()]
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, (pol, ax) in enumerate(zip(pols, panels[0])):
            for c, k in enumerate(chosen):
                colour = colours[c % len(colours)]
                index = combo + (i, k)
                ax.plot(x, R[index], "-", color=colour, label="R " + name(orders[k]))
                if np.nanmax(T[index], initial=0) > 0:
                    ax.plot(x, T[index], "--", color=colour, label="T " + name(orders[k]))
            ax.set_xlabel(AXES[axis][1])
            ax.set_title("%s polarisation" % pol)
            ax.grid(alpha=0.3)
        panels[0][0].set_ylabel("efficiency")
        panels[0][-1].legend(fontsize=8, loc="best")
        where = ", ".join(p for p in (fixed_values(f, axis), label_of(f, combo, axis)) if p)
        if where:
            fig.text(0.5, 0.005, where, ha="center", fontsize=9)
    fig.suptitle(wrap(title_of(f), fig), fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


def plot_ellipsometry(f, out):
    if f.attrs["polarization"] != "both":
        return None
    axis, lengths = sweep_axis(f)
    if max(lengths) == 1:
        return None
    psi, delta = f["results/psi_deg"][()], f["results/delta_deg"][()]
    # Δ is shown in its stored range (−180°, 180°] (io/SCHEMA.md), as ellipsometers report it; where
    # it wraps between two points the curve is broken, not unwrapped beyond the range.
    shown = in_range_deg(delta, axis)
    x = f["sweep/" + AXES[axis][0]][()]
    combos, total = other_combinations(lengths, axis)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5.6), sharex=True)
    for combo in combos:
        label = label_of(f, combo, axis) or None
        top.plot(x, psi[combo], label=label)
        line, = bottom.plot(x, shown[combo], label=label)
        # Points left alone by the breaks (a wrap at both sides) still show, as dots.
        bottom.plot(x, delta[combo], ".", color=line.get_color(), markersize=3)
    top.set_ylabel("Ψ (°)")
    bottom.set_ylabel("Δ (°)")
    if np.any(np.isnan(shown) & ~np.isnan(delta)):  # Δ wraps: the whole range, room for a curve at 180°
        bottom.set_ylim(-190, 190)
        bottom.set_yticks(np.arange(-180, 181, 90))
    bottom.set_xlabel(AXES[axis][1])
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    if len(combos) > 1:
        top.legend(fontsize=8)
    note = fixed_values(f, axis)
    if total > len(combos):
        note += " (first %d of %d curves)" % (len(combos), total)
    top.set_title(wrap(title_of(f) + ("\n" + note if note else ""), fig), fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


def lattice_rotation_deg(f):
    """α of a rotated 1D grating (io/SCHEMA.md §1.3.1), read from the case text; 0 where absent or not
    a plain number (an expression of parameters: the maps are then labelled in the grating's frame)."""
    try:
        import yaml
        text = f["input/case"][()]
        case = yaml.safe_load(text.decode() if isinstance(text, bytes) else str(text))
        value = (case.get("lattice") or {}).get("rotation_deg", 0)
        return float(value)
    except Exception:
        return 0.0


def plot_field_maps(f, stem):
    if "fields" not in f:
        return []
    # A rotated 1D grating's maps are in its own frame: u across the lines, v along them (§2.2).
    alpha = lattice_rotation_deg(f)
    across, along = ("u", "v") if alpha else ("x", "y")
    outputs = []
    pols = polarisations(f)
    for key in sorted(k for k in f["fields"] if k.startswith("map_")):
        group = f["fields/" + key]
        plane = group.attrs["plane"]
        position = float(group.attrs["position"])
        first, second = group["first"][()], group["second"][()]
        magnitude = f["fields/" + key + "/abs_E"][0, 0, 0]  # first sweep point: [P, N1, N2]
        # Height from the plane's aspect ratio, plus room for the titles.
        aspect = (second[-1] - second[0]) / max(first[-1] - first[0], 1e-300) if len(second) > 1 else 0.5
        height = min(max(5.2 * aspect + 1.6, 3.0), 9.0)
        fig, panels = plt.subplots(1, len(pols), figsize=(6.4 * len(pols), height), squeeze=False)
        for i, (pol, ax) in enumerate(zip(pols, panels[0])):
            image = ax.pcolormesh(first, second, magnitude[i].T, shading="nearest")
            ax.set_xlabel("%s (nm)" % (along if plane == "yz" else across))
            ax.set_ylabel(along + " (nm)" if plane == "xy" else "z (nm)")
            ax.set_aspect("equal")
            bar = make_axes_locatable(ax).append_axes("right", size="4%", pad=0.1)  # as tall as the map
            fig.colorbar(image, cax=bar, label="|E| (incident amplitude 1)")
            ax.set_title("%s polarisation" % pol)
        where = {"xz": along + " = %g nm", "yz": across + " = %g nm", "xy": "z = %g nm"}[plane] % position
        if alpha:
            where += " (u across the lines, v along them: grating vector at %g° from x)" % alpha
        w, t, p = (f["sweep/" + a][0] for a in ("wavelength", "theta", "phi"))
        fig.suptitle(wrap(title_of(f) + "\n|E| on the %s plane at %s; λ = %g nm, θ = %g°, φ = %g°"
                          % (plane, where, w, t, p), fig), fontsize=10)
        fig.tight_layout()
        out = "%s_field_%s.png" % (stem, key[len("map_"):])
        fig.savefig(out, dpi=DPI)
        plt.close(fig)
        outputs.append(out)
    return outputs


QUANTITY_LABELS = {"psi_deg": "Ψ (°)", "delta_deg": "Δ (°)"}


def plot_fit(f, out):
    """Measured vs fitted spectra of a fit file and the weighted residuals (io/SCHEMA.md §3)."""
    s = f["spectra"]
    wavelength, theta, phi = s["wavelength"][()], s["theta"][()], s["phi"][()]
    quantities = [q.decode() if isinstance(q, bytes) else q for q in s["quantities"][()]]
    measured, fitted, residual = s["measured"][()], s["fitted"][()], s["residual"][()]  # [row, quantity]
    if len(np.unique(wavelength)) > 1:
        x, xlabel = wavelength, AXES[0][1]
    elif len(np.unique(theta)) > 1:
        x, xlabel = theta, AXES[1][1]
    else:
        x, xlabel = np.arange(len(wavelength)), "measured row"
    # One curve per (θ, φ) (per φ where x is θ), rows sorted along x.
    keys = list(zip(theta, phi)) if x is not theta else [(None, p) for p in phi]
    combos = list(dict.fromkeys(keys))
    shown, total = combos[:MAX_CURVES], len(combos)
    q = len(quantities)
    columns = 1 if q <= 2 else min(q, 4)
    value_rows = -(-q // columns)
    fig = plt.figure(figsize=(7 if columns == 1 else 3.2 * columns, 2.6 * (value_rows + 1)))
    grid = fig.add_gridspec(value_rows + 1, columns)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    value_axes = []
    for k, name in enumerate(quantities):
        ax = fig.add_subplot(grid[k // columns, k % columns])
        value_axes.append(ax)
        for c, combo in enumerate(shown):
            rows = np.array([i for i, key in enumerate(keys) if key == combo])
            rows = rows[np.argsort(x[rows])]
            label = ", ".join(part for part in (
                "θ = %g°" % combo[0] if combo[0] is not None else "", "φ = %g°" % combo[1] if len(np.unique(phi)) > 1 else "") if part)
            curve = fitted[rows, k]
            if name == "delta_deg":  # in (−180°, 180°], broken where it wraps (as plot_ellipsometry)
                curve = in_range_deg(curve, 0)
            ax.plot(x[rows], measured[rows, k], ".", color=colours[c % len(colours)], markersize=4,
                    label=(label + " measured").strip())
            ax.plot(x[rows], curve, "-", color=colours[c % len(colours)], label=(label + " fitted").strip())
        ax.set_ylabel(QUANTITY_LABELS.get(name, name))
        ax.grid(alpha=0.3)
    value_axes[0].legend(fontsize=7)
    bottom = fig.add_subplot(grid[value_rows, :])
    for k, name in enumerate(quantities):
        bottom.plot(x, residual[:, k], ".", markersize=3, label=QUANTITY_LABELS.get(name, name))
    bottom.axhline(0, color="black", linewidth=0.5)
    bottom.set_ylabel("(fitted − measured)/σ")
    bottom.set_xlabel(xlabel)
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize=7, ncol=min(q, 8))
    p = f["parameters"]
    names = [n.decode() if isinstance(n, bytes) else n for n in p["names"][()]]
    units = [u.decode() if isinstance(u, bytes) else u for u in p["units"][()]]
    parts = [("%s = %.6g%s at a bound" if b else "%s = %.6g ± %.2g%s") % ((n, v, (" " + u) if u else "") if b else (n, v, e, (" " + u) if u else ""))
             for n, v, e, u, b in zip(names, p["value"][()], p["standard_error"][()], units, p["at_bound"][()])]
    status = "converged" if int(f.attrs["converged"]) else "NOT CONVERGED: " + str(f.attrs["reason"])
    title = "fit: %s; reduced χ² = %.3g; %s" % (", ".join(parts), float(f.attrs["reduced_chi2"]), status)
    if total > len(shown):
        title += " (first %d of %d curves)" % (len(shown), total)
    fig.suptitle(wrap(title, fig), fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


def main(argv):
    parser = argparse.ArgumentParser(description="PNG figures of a gratingsim result file.")
    parser.add_argument("result", help="a result file written by 'gratingsim run' (or a fit file)")
    parser.add_argument("-o", "--output", help="directory for the figures (default: the result file's)")
    args = parser.parse_args(argv)
    directory = args.output or os.path.dirname(os.path.abspath(args.result))
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, os.path.splitext(os.path.basename(args.result))[0])
    with h5py.File(args.result, "r") as f:
        if f.attrs.get("schema") == "gratingsim.fit":
            if int(f.attrs["schema_version"]) != 1:
                sys.exit("plot_results.py: %s is a fit file of an unknown schema version" % args.result)
            print(plot_fit(f, stem + "_fit.png"))
            return
        if f.attrs.get("schema") != "gratingsim.result" or int(f.attrs["schema_version"]) not in (1, 2):
            sys.exit("plot_results.py: %s is not a gratingsim result file of schema version 1 or 2" % args.result)
        if not np.all(f["done"][()] == 1):
            sys.exit("plot_results.py: %s is incomplete (a partial file?)" % args.result)
        if int(f.attrs["schema_version"]) == 2:
            f = AtParameterPoint(f, [0] * (len(f["sweep"].attrs["axes"].split(", ")) - 3))
        written = [plot_efficiencies(f, stem + "_efficiencies.png"), plot_ellipsometry(f, stem + "_ellipsometry.png")]
        written += plot_field_maps(f, stem)
    for path in written:
        if path:
            print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
