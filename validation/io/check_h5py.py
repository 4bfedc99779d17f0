#!/usr/bin/env python3
"""Reads a gratingsim result file with h5py alone (no gratingsim code) and checks it against
expected values: the schema's promise that the files are readable by anyone.

usage: check_h5py.py RESULT.h5 EXPECTED.txt
EXPECTED.txt lines:  dataset PATH v1,v2,...   |  attribute NAME TEXT  |  text PATH TEXT(escaped \\n)
Exits 0 when everything matches, 1 with a list of problems otherwise."""
import sys

import h5py
import numpy as np


def main(result_path, expected_path):
    problems = []
    with h5py.File(result_path, "r") as f:
        if f.attrs["schema"] != "gratingsim.result":
            problems.append("schema attribute: %r" % f.attrs["schema"])
        if int(f.attrs["schema_version"]) != 1:
            problems.append("schema_version: %r" % f.attrs["schema_version"])
        sweep = tuple(len(f["sweep/" + axis]) for axis in ("wavelength", "theta", "phi"))
        for group in ("results", "solver", "accuracy"):
            if group not in f:  # accuracy: only with harmonics: auto or slices: auto
                continue
            for name, dataset in f[group].items():
                if dataset.shape[:3] != sweep:
                    problems.append("%s/%s: shape %s does not start with the sweep %s" % (group, name, dataset.shape, sweep))
        if not np.all(f["done"][()] == 1):
            problems.append("done: not every point is finished")
        jones = f["results/jones_r"][()]
        complex_jones = jones[..., 0] + 1j * jones[..., 1]
        if complex_jones.shape != jones.shape[:-1]:
            problems.append("jones_r: complex view has shape %s" % (complex_jones.shape,))
        for line in open(expected_path, encoding="utf-8"):
            kind, name, value = line.rstrip("\n").split(" ", 2)
            if kind == "dataset":
                expected = np.array([float(v) for v in value.split(",")])
                actual = np.asarray(f[name][()], dtype=float).ravel()
                if actual.shape != expected.shape or not np.array_equal(actual, expected, equal_nan=True):
                    problems.append("dataset %s differs" % name)
            elif kind == "attribute":
                if f.attrs[name] != value:
                    problems.append("attribute %s: %r, expected %r" % (name, f.attrs[name], value))
            elif kind == "text":
                text = f[name].asstr()[()]
                if text != value.replace("\\n", "\n"):
                    problems.append("text %s: %r" % (name, text))
            else:
                problems.append("unknown expectation " + kind)
    for problem in problems:
        print("check_h5py:", problem)
    print("check_h5py: %s" % ("FAILED" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
