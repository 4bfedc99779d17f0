#!/usr/bin/env python3
"""Opens a gratingsim result file with xarray (engine="h5netcdf") and checks its labelled axes: the
dimension names of every group's variables, the coordinates, and that the values read through
xarray are h5py's, bit for bit (io/SCHEMA.md §2.4).

usage: check_xarray.py RESULT.h5
Exits 0 when everything matches, 1 with a list of problems, 77 when xarray or h5netcdf is missing."""
import sys

try:
    import h5netcdf  # noqa: F401  (xarray's engine)
    import xarray as xr
except ImportError as error:
    print("SKIPPED: %s (Debian: python3-xarray python3-h5netcdf)" % error)
    sys.exit(77)
import h5py
import numpy as np

SWEEP = ("wavelength", "theta", "phi")


def main(path):
    problems = []
    with h5py.File(path, "r") as f:
        groups = ["/"] + [name for name in ("results", "solver", "accuracy", "fields") if name in f]
        groups += ["fields/" + name for name in f.get("fields", {}) if name.startswith("map_")]
        polarization = ["s", "p"] if f.attrs["polarization"] == "both" else [f.attrs["polarization"]]
        orders = ["%d,%d" % tuple(o) for o in f["orders"][()]]
        sweep = {axis: f["sweep/" + axis][()] for axis in SWEEP}
        expected_dims = {
            "results/R": SWEEP + ("polarization", "order"),
            "results/jones_r": SWEEP + ("order", "outgoing", "polarization", "complex"),
            "results/mueller": SWEEP + ("stokes_out", "stokes_in"),
            "solver/phase_seconds": SWEEP + ("timing_phase",),
            "fields/harmonics": SWEEP + ("polarization", "slice_z", "field_component", "harmonic", "complex"),
            "fields/map_0/E": SWEEP + ("polarization", "field_component", "first", "second", "complex"),
            "orders": ("order", "lattice_axis"),
            "done": SWEEP,
        }
        root = xr.open_dataset(path, engine="h5netcdf")
        for axis in SWEEP:  # the sweep axes are coordinates of the root group, in the file's units
            if not np.array_equal(root[axis].values, sweep[axis]):
                problems.append("root coordinate %s: %s, expected %s" % (axis, root[axis].values, sweep[axis]))
        if list(root["polarization"].values) != polarization:
            problems.append("polarization labels %s, expected %s" % (list(root["polarization"].values), polarization))
        if list(root["order"].values) != orders:
            problems.append("order labels %s, expected %s" % (list(root["order"].values), orders))
        checked, seen = 0, set()
        for group in groups:
            ds = root if group == "/" else xr.open_dataset(path, engine="h5netcdf", group=group)
            for name, variable in ds.data_vars.items():
                h5path = name if group == "/" else group + "/" + name
                dims = expected_dims.get(h5path)
                seen.add(h5path)
                if dims is not None and variable.dims != dims:
                    problems.append("%s: dimensions %s, expected %s" % (h5path, variable.dims, dims))
                if variable.dims[:3] == SWEEP or h5path in ("orders", "fields/harmonic_index"):
                    if not np.array_equal(variable.values, f[h5path][()], equal_nan=True):
                        problems.append("%s: xarray's values differ from h5py's" % h5path)
                    checked += 1
            # A group's data on the root's coordinates: the labelled selection users write.
            if group == "results":
                r = ds.assign_coords(root.coords)["R"]  # as io/SCHEMA.md §2.4 shows
                picked = r.sel(wavelength=sweep["wavelength"][-1], polarization=polarization[-1], order=orders[0])
                direct = f["results/R"][-1, :, :, len(polarization) - 1, 0]
                if not np.array_equal(picked.values, direct, equal_nan=True):
                    problems.append("results/R selected by label differs from the index")
        for h5path in sorted(set(expected_dims) - seen):
            if h5path in f:  # (fields, mueller: not in every file)
                problems.append("%s: not a variable of its group" % h5path)
        if checked < 10:
            problems.append("only %d datasets checked" % checked)
    for problem in problems:
        print(problem)
    print("%s: %s" % (path, "ok" if not problems else "%d problems" % len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
