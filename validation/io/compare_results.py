#!/usr/bin/python3
"""Result files of two gratingsim builds, compared byte for byte (issue #14: a change to io/ that must
not change any result file).

Runs BEFORE and AFTER (two gratingsim executables) on every case of configs/, with the sweep and
the resolution reduced so that all of it takes about a minute on two CPU cores (cpu-fftw backend),
plus two variants that cover what no config does (accuracy on demand with both polarisations; one
polarisation with fields), and compares the two files of each case:

- every dataset and every attribute, by path: the same set, and for each the same type, shape and
  raw bytes (strings: the same text);
- every dataset's storage: layout, chunk shape, filters (gzip level, shuffle, Fletcher32), fill
  value, and the file offset of its data (contiguous: the dataset's; chunked: every chunk's), so
  that the datasets are created and written in the same order;
- the file sizes.

Run-time dependent values are set aside (their shape and type are still compared):
  solver/seconds, solver/phase_seconds   wall times
No other dataset or attribute depends on the run: the case path stored (input/case@path) is the same
for both runs, and the `device` attribute names the same CPU. HDF5 also records object modification
times in the object headers (not readable through h5py as datasets or attributes), which is why the
files are compared object by object and not as one byte string.

Usage: /usr/bin/python3 validation/io/compare_results.py BEFORE AFTER [--work DIR] [--keep]
Exit status 0: every file identical (except the values above); 1: a difference (listed).
"""
import argparse
import copy
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import yaml

RUN_TIME_DEPENDENT = {"solver/seconds", "solver/phase_seconds"}

ROOT = pathlib.Path(__file__).resolve().parents[2]


def reduce_axis(value, keep=2):
    """At most `keep` values of a sweep axis: a list cut, a range given fewer points."""
    if isinstance(value, list):
        return value[:keep]
    if isinstance(value, dict) and "count" in value:
        return dict(value, count=min(value["count"], keep))
    return value


def reduced(case):
    """The case with at most 2 values per sweep axis, at most ±5 harmonics (±2 on a 2D lattice) and 12
    slices per layer."""
    c = copy.deepcopy(case)
    c["wavelength"] = reduce_axis(c["wavelength"])
    inc = c.get("incidence", {})
    for key in ("theta_deg", "phi_deg"):
        if key in inc:
            inc[key] = reduce_axis(inc[key])
    num = c.setdefault("numerics", {})
    most = 2 if "period_y" in c.get("lattice", {}) else 5
    h = num.get("harmonics")
    if isinstance(h, int):
        num["harmonics"] = min(h, most)
    elif isinstance(h, list):
        num["harmonics"] = [min(x, most) for x in h]
    for layer in c.get("layers", []):
        if isinstance(layer.get("slices"), int):
            layer["slices"] = min(layer["slices"], 12)
    return c


def variants():
    """(name, case) of every config reduced, and the two variants."""
    cases = []
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        cases.append((path.stem, reduced(yaml.safe_load(path.read_text()))))
    base = reduced(yaml.safe_load((ROOT / "configs" / "default.yaml").read_text()))
    auto = copy.deepcopy(base)
    auto["wavelength"] = [500, 700]
    auto["numerics"].update(harmonics="auto", target_error=5e-2, max_harmonics=9)
    auto["numerics"].pop("backend", None)
    cases.append(("default_accuracy_auto", auto))
    field = reduced(yaml.safe_load((ROOT / "configs" / "field_map.yaml").read_text()))
    field["incidence"]["polarization"] = "s"
    field["output"]["planes"] = [{"plane": "xz", "at": 0, "points": 31}, {"plane": "xz", "at": 100, "points": 9}]
    cases.append(("field_map_s_two_maps", field))
    return cases


def storage(ds):
    """A dataset's storage: layout, chunks, filters, fill value, and where its data are in the file."""
    plist = ds.id.get_create_plist()
    info = {
        "layout": plist.get_layout(),
        "chunks": ds.chunks,
        "compression": ds.compression,
        "compression_opts": ds.compression_opts,
        "shuffle": ds.shuffle,
        "fletcher32": ds.fletcher32,
    }
    if ds.dtype.kind != "O":  # (h5py 3.7 crashes reading a variable-length string's fill value)
        info["fillvalue"] = np.asarray(ds.fillvalue).tobytes()
    if ds.chunks is None:
        info["offset"] = ds.id.get_offset()
    else:
        info["chunk_offsets"] = [ds.id.get_chunk_info(i).byte_offset for i in range(ds.id.get_num_chunks())]
    return info


def value_bytes(v):
    if isinstance(v, (bytes, str)):
        return v.encode() if isinstance(v, str) else v
    a = np.asarray(v)
    if a.dtype.hasobject:  # strings; the object references of dimension scales (a compound: by their place)
        return repr([x.decode() if isinstance(x, bytes) else x for x in a.ravel().tolist()]).encode()
    return a.tobytes()


def objects(f):
    """path -> (kind, type, shape, bytes or None, storage) for every dataset, group and attribute."""
    out = {}

    def attributes(path, obj):
        for name, value in obj.attrs.items():
            a = obj.attrs.get_id(name)
            out[f"{path}@{name}"] = ("attribute", str(a.dtype), a.shape, value_bytes(value), None)

    attributes("/", f)

    def visit(path, obj):
        if isinstance(obj, h5py.Dataset):
            data = None if path in RUN_TIME_DEPENDENT else value_bytes(obj[()])
            out[path] = ("dataset", str(obj.dtype), obj.shape, data, storage(obj))
        else:
            out[path] = ("group", None, None, None, None)
        attributes(path, obj)

    f.visititems(visit)
    return out


def compare(before, after):
    """The differences between two result files, as lines."""
    lines = []
    with h5py.File(before, "r") as fb, h5py.File(after, "r") as fa:
        ob, oa = objects(fb), objects(fa)
    for path in sorted(set(ob) | set(oa)):
        if path not in oa:
            lines.append(f"{path}: only in the file of BEFORE")
        elif path not in ob:
            lines.append(f"{path}: only in the file of AFTER")
        else:
            for name, x, y in zip(("kind", "type", "shape", "bytes", "storage"), ob[path], oa[path]):
                if x != y:
                    lines.append(f"{path}: {name} differs")
    sb, sa = os.path.getsize(before), os.path.getsize(after)
    if sb != sa:
        lines.append(f"file size differs: {sb} and {sa} bytes")
    return lines, len(ob)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--work", help="directory for the cases and files (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="gratingsim_compare_"))
    work.mkdir(parents=True, exist_ok=True)
    failures = 0
    started = time.monotonic()
    for name, case in variants():
        case_path = work / f"{name}.yaml"  # one path for both runs: input/case@path is compared too
        case_path.write_text(yaml.safe_dump(case, sort_keys=False, allow_unicode=True))
        files = []
        for label, exe in (("before", args.before), ("after", args.after)):
            out = work / f"{name}.{label}.h5"
            t0 = time.monotonic()
            run = subprocess.run([exe, "run", str(case_path), "-o", str(out), "--backend", "cpu-fftw", "--quiet",
                                  "--overwrite"], capture_output=True, text=True)
            if run.returncode not in (0, 3):  # 3: done, some solve short of its tolerance (the same in both)
                print(f"{name}: {label} exited {run.returncode}\n{run.stderr}")
                failures += 1
                break
            files.append((out, time.monotonic() - t0, run.returncode))
        if len(files) != 2:
            continue
        lines, count = compare(files[0][0], files[1][0])
        status = "identical" if not lines else "DIFFERENT"
        print(f"{name:24s} {status}: {count} objects, {os.path.getsize(files[1][0])} bytes, exit {files[0][2]}/"
              f"{files[1][2]}, {files[0][1]:.1f} s / {files[1][1]:.1f} s")
        for line in lines:
            print("    " + line)
        failures += bool(lines) or files[0][2] != files[1][2]
    print(f"{failures} case(s) differ; {time.monotonic() - started:.0f} s in all; set aside: "
          + ", ".join(sorted(RUN_TIME_DEPENDENT)))
    if not args.keep and not args.work:
        shutil.rmtree(work)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
