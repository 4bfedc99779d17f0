#!/usr/bin/env python3
"""Checks app/plot_results.py's ellipsometry figure of a result file whose Δ wraps through ±180° along
the sweep: every Δ drawn lies in ellipsometry's (−180°, 180°] (io/SCHEMA.md; the script unwrapped it to
−265° once), the curve is broken where Δ wraps, and every title line fits its figure (long ones were cut).

With --fit, checks the figure of a fit file (io/SCHEMA.md §3) instead: every measured value and every
weighted residual of the file is drawn, the fitted Δ lies in (−180°, 180°], and the title names every
parameter and whether the fit converged, fitting its figure.

usage: check_plot_results.py RESULT.h5 DIRECTORY
       check_plot_results.py --fit FIT.h5 DIRECTORY
Exits 0 when everything holds, 1 with a list of problems otherwise."""
import os
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.figure  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "app"))
import plot_results  # noqa: E402


def main(result_path, directory):
    problems = []
    figures = []
    # Keep the figures for inspection (pyplot itself may call close("all")).
    plot_results.plt.close = lambda fig=None: figures.append(fig) if isinstance(fig, matplotlib.figure.Figure) else None
    with h5py.File(result_path, "r") as f:
        stored = f["results/delta_deg"][()]
        out = plot_results.plot_ellipsometry(f, os.path.join(directory, "wrapped_ellipsometry.png"))
        plot_results.plot_efficiencies(f, os.path.join(directory, "wrapped_efficiencies.png"))
    if out is None or len(figures) != 2:
        return ["no ellipsometry figure"]
    ellipsometry = figures[0]
    if np.all(np.abs(np.diff(stored, axis=0)) <= 180):
        problems.append("the case's Δ does not wrap: the check checks nothing")
    drawn = np.concatenate([line.get_ydata() for line in ellipsometry.axes[1].get_lines()])
    if not (np.nanmin(drawn) > -180 and np.nanmax(drawn) <= 180):
        problems.append("Δ drawn from %g to %g, outside (−180, 180]" % (np.nanmin(drawn), np.nanmax(drawn)))
    if not np.any(np.isnan(ellipsometry.axes[1].get_lines()[0].get_ydata())):
        problems.append("the Δ curve is not broken where it wraps")
    for figure in figures:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        width = figure.get_figwidth() * figure.dpi
        titles = [figure._suptitle] if figure._suptitle else []
        titles += [ax.title for ax in figure.axes]
        for title in titles:
            box = title.get_window_extent(renderer=renderer)
            if title.get_text() and (box.x0 < 0 or box.x1 > width):
                problems.append("title %r spans x = %.0f..%.0f of a %.0f pixel figure" %
                                (title.get_text(), box.x0, box.x1, width))
    # wrap() alone: lines of a long title no wider than the figure, whatever their glyphs.
    figure = plt.figure(figsize=(5.2, 4))
    renderer = figure.canvas.get_renderer()
    for line in plot_results.wrap("Ψ/Δ of WWWWWW lines " * 30, figure).split("\n"):
        box = figure.text(0, 0, line, fontsize=10).get_window_extent(renderer=renderer)
        if box.width > figure.get_figwidth() * figure.dpi:
            problems.append("wrapped line %r is %.0f pixels wide" % (line, box.width))
    return problems


def titles_fit(figure, problems):
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    width = figure.get_figwidth() * figure.dpi
    titles = [figure._suptitle] if figure._suptitle else []
    for title in titles:
        box = title.get_window_extent(renderer=renderer)
        if title.get_text() and (box.x0 < 0 or box.x1 > width):
            problems.append("title %r spans x = %.0f..%.0f of a %.0f pixel figure" % (title.get_text(), box.x0, box.x1, width))


def check_fit(fit_path, directory):
    problems = []
    figures = []
    plot_results.plt.close = lambda fig=None: figures.append(fig) if isinstance(fig, matplotlib.figure.Figure) else None
    with h5py.File(fit_path, "r") as f:
        measured, residual = f["spectra/measured"][()], f["spectra/residual"][()]
        quantities = [q.decode() if isinstance(q, bytes) else q for q in f["spectra/quantities"][()]]
        names = [n.decode() if isinstance(n, bytes) else n for n in f["parameters/names"][()]]
        converged = int(f.attrs["converged"])
        out = plot_results.plot_fit(f, os.path.join(directory, "fit.png"))
    if out is None or len(figures) != 1 or not os.path.exists(out):
        return ["no fit figure"]
    figure = figures[0]
    value_axes, residual_axis = figure.axes[:len(quantities)], figure.axes[len(quantities)]
    for k, (name, ax) in enumerate(zip(quantities, value_axes)):
        lines = ax.get_lines()
        dots = np.concatenate([line.get_ydata() for line in lines if line.get_linestyle() == "None"])
        if sorted(dots) != sorted(measured[:, k]):
            problems.append("%s: the measured values drawn differ from the file's" % name)
        curves = np.concatenate([line.get_ydata() for line in lines if line.get_linestyle() != "None"])
        if name == "delta_deg" and not (np.nanmin(curves) > -180 and np.nanmax(curves) <= 180):
            problems.append("fitted Δ drawn from %g to %g, outside (−180, 180]" % (np.nanmin(curves), np.nanmax(curves)))
    drawn = [line.get_ydata() for line in residual_axis.get_lines() if line.get_linestyle() == "None"]
    if len(drawn) != len(quantities) or any(not np.array_equal(d, residual[:, k]) for k, d in enumerate(drawn)):
        problems.append("the residual panel does not show the file's residuals")
    title = figure._suptitle.get_text().replace("\n", " ") if figure._suptitle else ""
    for name in names:
        if name + " = " not in title:
            problems.append("parameter %s missing from the title %r" % (name, title))
    if ("NOT CONVERGED" in title) == bool(converged):
        problems.append("the title misreports convergence: %r" % title)
    titles_fit(figure, problems)
    return problems


if __name__ == "__main__":
    found = check_fit(sys.argv[2], sys.argv[3]) if sys.argv[1] == "--fit" else main(sys.argv[1], sys.argv[2])
    for problem in found:
        print("check_plot_results.py:", problem)
    sys.exit(1 if found else 0)
