"""The Python module (python/) against the command line: the same case solved by `gratingsim run` and by
gratingsim.solve must give the same result file, bit for bit in double precision (both run the same
solve per wavelength; the solve times aside), and cases from dicts must read as their YAML files do.
Run through CTest (validation/CMakeLists.txt), which sets PYTHONPATH to the built package,
GRATINGSIM_EXECUTABLE to the CLI and GRATINGSIM_FFTW_PLANNING=estimate (FFTW's measured plans could
differ between two processes, and with them the rounding)."""
import os
import pathlib
import re
import subprocess
import threading
import time

import h5py
import numpy as np
import pytest
import yaml

import gratingsim

CASES = pathlib.Path(__file__).parent / "cases"
CLI = os.environ.get("GRATINGSIM_EXECUTABLE", "gratingsim")
# Per-point datasets that hold wall times: the only values two runs of one case may not share.
TIMES = {"solver/seconds", "solver/phase_seconds"}


def run_cli(case, output, *args):
    subprocess.run([CLI, "run", str(case), "-o", str(output), "--quiet", "--overwrite", *args], check=True)


# Dimension-scale bookkeeping (io/SCHEMA.md §2.4): object references, which differ between two files by
# construction; io.dimension_scales checks the scales themselves.
SCALE_ATTRIBUTES = {"CLASS", "NAME", "REFERENCE_LIST", "DIMENSION_LIST", "DIMENSION_LABELS"}


def file_datasets(path):
    """Every dataset of an HDF5 file: path → (array, attributes), the dimension scales' attributes, the
    label scales and the root-group links to the sweep axes (one object, named by its sweep/ path) aside."""
    found = {}
    with h5py.File(path, "r") as f:
        def attributes(item):
            return {k: v for k, v in item.attrs.items() if k not in SCALE_ATTRIBUTES}

        def walk(group, prefix):
            for key, item in group.items():
                name = prefix + key
                if isinstance(item, h5py.Group):
                    walk(item, name + "/")
                    continue
                if item.attrs.get("CLASS") == b"DIMENSION_SCALE" and item.dtype.kind == "O":
                    continue  # a label scale (text coordinates)
                if not prefix and "sweep" in f and key in f["sweep"] and f["sweep"][key] == item:
                    continue  # the sweep axis, linked into the root group
                found[name] = (item[()], attributes(item))
        walk(f, "")
        found["/"] = (None, attributes(f))
        for group in f.values():
            if isinstance(group, h5py.Group):
                found[group.name.lstrip("/") + "/"] = (None, attributes(group))
    return found


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def as_stored(array):
    """A module array as the file stores it: complex values as a trailing (re, im) dimension."""
    if np.iscomplexobj(array):
        return np.ascontiguousarray(array).view(np.float64).reshape(array.shape + (2,))
    return array


def compare_with_cli(case, tmp_path, backend, precision):
    """Solves `case` with the CLI (one worker) and the module; every dataset bit for bit."""
    run_cli(CASES / case, tmp_path / "cli.h5", "--backend", backend, "--precision", precision, "--workers", "1")
    results = gratingsim.solve(gratingsim.load(str(CASES / case)), backend=backend, precision=precision)
    arrays = results.arrays()
    stored = file_datasets(tmp_path / "cli.h5")
    # Every per-point dataset and axis of the file is in the module, and nothing else.
    expected = {name for name, (data, _) in stored.items() if data is not None} - {"done", "input/case"}
    assert set(arrays) == expected
    for name, array in arrays.items():
        data = stored[name][0]
        if name in TIMES:
            assert as_stored(array).shape == data.shape, name
        else:
            assert same_bits(as_stored(array), data), name
    assert results.backend == stored["/"][1]["backend"] == backend
    assert results.precision == stored["/"][1]["precision"] == precision
    assert results.device == stored["/"][1]["device"]


@pytest.mark.parametrize("case, precision", [("lines_fields.yaml", "double"), ("lines_auto.yaml", "double"),
                                             ("lines_fields.yaml", "single")])
def test_results_equal_cli_file_bitwise(case, precision, tmp_path):
    compare_with_cli(case, tmp_path, "cpu-fftw", precision)


GPU_BACKENDS = ["gpu-cufft", "gpu-cufft-callbacks", "gpu-fused", "gpu-direct"]


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_results_equal_cli_file_bitwise_on_gpu(backend, tmp_path):
    why = gratingsim.info()["backends"][backend]
    if why != "available":
        pytest.skip(f"{backend}: {why}")
    compare_with_cli("lines_fields.yaml", tmp_path, backend, "double")


def test_result_arrays_are_read_only():
    results = gratingsim.solve(gratingsim.load(str(CASES / "lines_fields.yaml")))
    with pytest.raises(ValueError):
        results["results/R"][0, 0, 0, 0, 0] = 2.0


def test_written_file_equals_cli_file(tmp_path):
    case = str(CASES / "lines_fields.yaml")
    run_cli(case, tmp_path / "cli.h5")
    gratingsim.solve(gratingsim.load(case)).write(str(tmp_path / "module.h5"))
    assert not (tmp_path / "module.h5.partial").exists() and not (tmp_path / "module.h5.lock").exists()
    cli, module = file_datasets(tmp_path / "cli.h5"), file_datasets(tmp_path / "module.h5")
    assert set(cli) == set(module)
    for name, (data, attributes) in cli.items():
        assert set(attributes) == set(module[name][1]), name
        for key, value in attributes.items():
            assert same_bits(value, module[name][1][key]), (name, key)
        if data is None:
            continue
        if name in TIMES:
            assert data.shape == module[name][0].shape, name
        else:
            assert same_bits(data, module[name][0]), name
    # An existing result is replaced only when asked, as by `gratingsim run`.
    results = gratingsim.solve(gratingsim.load(case))
    with pytest.raises(gratingsim.Error, match="already exists|overwrite"):
        results.write(str(tmp_path / "module.h5"))
    results.write(str(tmp_path / "module.h5"), overwrite=True)


def located(text, needle):
    """1-based line and column of the first occurrence of `needle` in `text`."""
    offset = text.index(needle)
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def test_yaml_error_carries_line_and_column(tmp_path):
    text = (CASES / "lines_fields.yaml").read_text()
    broken = text.replace("thickness: 120", "thickness: -120")
    path = tmp_path / "broken.yaml"
    path.write_text(broken)
    with pytest.raises(gratingsim.CaseError) as caught:
        gratingsim.load(str(path))
    error = caught.value
    assert isinstance(error, ValueError) and isinstance(error, gratingsim.Error)
    assert (error.line, error.column) == located(broken, "-120")
    assert error.file == str(path)
    assert "thickness" in error.message
    assert str(error).startswith(f"{path}:{error.line}:{error.column}: error: ")
    # Text read from a string is located the same way.
    with pytest.raises(gratingsim.CaseError) as caught:
        gratingsim.parse_case(broken, "text")
    assert (caught.value.line, caught.value.column, caught.value.file) == (error.line, error.column, "text")


def test_dict_error_names_key_path():
    case = yaml.safe_load((CASES / "lines_fields.yaml").read_text())
    case["layers"][0]["shapes"][0]["bottom_width"] = -90
    with pytest.raises(gratingsim.CaseError) as caught:
        gratingsim.from_dict(case)
    error = caught.value
    assert error.path == "layers[0].shapes[0].bottom_width"
    assert str(error).startswith("<dict>: error: layers[0].shapes[0].bottom_width")
    text, _ = gratingsim.case_yaml(case)
    lines = text.splitlines()
    assert lines[error.line - 1].strip() == "bottom_width: -90"
    assert lines[error.line - 1][error.column - 1:].startswith("-90")
    # An unknown key is named by its own path.
    case = yaml.safe_load((CASES / "lines_fields.yaml").read_text())
    case["numerics"]["harmonix"] = 3
    with pytest.raises(gratingsim.CaseError) as caught:
        gratingsim.from_dict(case)
    assert caught.value.path == "numerics.harmonix"


def test_dict_and_yaml_file_solve_identically():
    # (PyYAML reads YAML 1.1, where 1e-10 without a dot is text: the case writes 1.0e-10.)
    text = (CASES / "lines_fields.yaml").read_text()
    from_file = gratingsim.load(str(CASES / "lines_fields.yaml"))
    case = yaml.safe_load(text)
    # NumPy values are written as the numbers they hold.
    case["wavelength"] = np.array(case["wavelength"], dtype=np.float64)
    case["numerics"]["harmonics"] = np.int64(case["numerics"]["harmonics"])
    from_dict = gratingsim.from_dict(case)
    assert from_dict.wavelength_nm == from_file.wavelength_nm
    assert from_dict.incidence.theta_deg == from_file.incidence.theta_deg
    a, b = gratingsim.solve(from_file).arrays(), gratingsim.solve(from_dict).arrays()
    assert set(a) == set(b)
    for name in set(a) - TIMES:
        assert same_bits(a[name], b[name]), name


def test_structure_built_in_python_solves_as_the_yaml_one():
    case = gratingsim.load(str(CASES / "lines_fields.yaml"))
    reference = gratingsim.solve(case).arrays()
    si = case.materials["Si"]
    line = gratingsim.TrapezoidLine(bottom_width=90, sidewall_angle_deg=85, material=si)
    case.structure = gratingsim.Structure(
        lattice=gratingsim.Lattice(period_x=500), superstrate=case.materials["air"], substrate=si,
        layers=[gratingsim.Layer(thickness=120, slices=6, background=case.materials["air"], shapes=[line])])
    rebuilt = gratingsim.solve(case).arrays()
    for name in set(reference) - TIMES:
        assert same_bits(reference[name], rebuilt[name]), name
    # Edited in place: a thicker layer changes the result.
    case.structure.layers[0].thickness = 150
    thicker = gratingsim.solve(case)["results/R"]
    assert not np.allclose(thicker, reference["results/R"], rtol=1e-3, atol=0)


def test_rotated_lattice_set_in_python_solves_as_the_yaml_key():
    # lattice.rotation_deg read from a case equals physics' Lattice.rotation_deg set on a structure in Python.
    case = yaml.safe_load((CASES / "lines_fields.yaml").read_text())
    case["lattice"]["rotation_deg"] = 30
    reference = gratingsim.solve(gratingsim.from_dict(case)).arrays()
    edited = gratingsim.load(str(CASES / "lines_fields.yaml"))
    assert edited.structure.lattice.rotation_deg == 0
    unrotated = gratingsim.solve(edited).arrays()
    edited.structure.lattice.rotation_deg = 30
    rotated = gratingsim.solve(edited).arrays()
    for name in set(reference) - TIMES:
        assert same_bits(reference[name], rotated[name]), name
    # The rotation is seen: the order directions turn (Ψ, Δ change too: φ − α is another azimuth).
    assert not np.allclose(rotated["results/reflected_direction"], unrotated["results/reflected_direction"],
                           equal_nan=True)


def test_single_precision_agrees_with_double():
    case = gratingsim.load(str(CASES / "lines_fields.yaml"))
    double = gratingsim.solve(case, precision="double")
    single = gratingsim.solve(case, precision="single")
    assert single.precision == "single"
    # The solver tolerance is raised to single precision's floor (1e-6), as `gratingsim run` does.
    assert any("tolerance raised" in w for w in single.warnings)
    # complex64 arithmetic and a 1e-6 residual: efficiencies within 1e-5 (absolute) of double's.
    assert np.max(np.abs(single["results/R"] - double["results/R"])) < 1e-5
    assert np.max(np.abs(single["results/R"] - double["results/R"])) > 0


def test_solve_releases_the_gil():
    case = gratingsim.load(str(CASES / "lines_fields.yaml"))
    # One solve long enough to tell (over 0.5 s on this machine, whatever its speed and load, so that
    # the timed one below is surely over 0.1 s): more harmonics until it is.
    for harmonics in (6, 12, 24, 48, 96, 192):
        case.numerics.harmonics_x = harmonics
        start = time.perf_counter()
        gratingsim.solve(case)
        if time.perf_counter() - start > 0.5:
            break
    ticks, span, done = [], [], threading.Event()

    def solve():
        start = time.perf_counter()
        gratingsim.solve(case)
        span.extend([start, time.perf_counter()])
        done.set()

    worker = threading.Thread(target=solve)
    worker.start()
    while not done.is_set():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    worker.join()
    start, end = span
    # With the GIL held for the whole solve this thread could not run in the middle half of it (it can
    # run only for a switch interval, 5 ms, at either end).
    assert end - start > 0.1, "the case solves too fast for this test to tell"
    quarter = (end - start) / 4
    assert sum(start + quarter < t < end - quarter for t in ticks) >= 3  # 0 with the GIL held (checked)


def test_info_reports_version_and_backends():
    info = gratingsim.info()
    version = subprocess.run([CLI, "--version"], check=True, capture_output=True, text=True).stdout
    assert version.strip() == f"gratingsim {info['version']}"
    assert info["backends"]["cpu-direct"] == "available" and info["backends"]["cpu-fftw"] == "available"
    assert set(info["backends"]) == {"cpu-direct", "cpu-fftw", "gpu-cufft", "gpu-cufft-callbacks", "gpu-fused",
                                     "gpu-direct"}
    for name in ("gpu-cufft", "gpu-fused", "gpu-direct"):
        assert (info["backends"][name] == "available") == bool(info["cuda_devices"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", info["libraries"]["hdf5"])
    # libpng: "none" in a build without PNG masks, else its version, as `gratingsim info` says.
    listed = subprocess.run([CLI, "info"], check=True, capture_output=True, text=True).stdout
    assert re.search(r"^\s*libpng\s+" + re.escape(info["libraries"]["libpng"]) + r"\s", listed, re.M)
    assert info["libraries"]["libpng"] == "none" or re.fullmatch(r"\d+\.\d+\.\d+", info["libraries"]["libpng"])


def test_unknown_backend_and_precision_are_errors():
    case = gratingsim.load(str(CASES / "lines_fields.yaml"))
    with pytest.raises(gratingsim.Error, match="gpu-fast"):
        gratingsim.solve(case, backend="gpu-fast")
    with pytest.raises(gratingsim.Error, match="quad"):
        gratingsim.solve(case, precision="quad")


def test_layers_and_shapes_held_across_changes_stay_valid():
    # An audit of session 36: a layer taken from structure.layers read a thickness of 9.7e-320 once the list grew (its
    # item was a reference into the vector's storage), and a shape list held across an assignment of new shapes read
    # a width of -3.4e33; under a malloc checker the interpreter aborted. Layers are now views by index, shape lists
    # copies.
    case = gratingsim.load(str(CASES / "lines_fields.yaml"))
    layer = case.structure.layers[0]
    thickness, shapes = layer.thickness, layer.shapes
    width = shapes[0].bottom_width
    for i in range(64):
        case.structure.layers.append(gratingsim.Layer(thickness=1.0 + i, slices=1))
    assert layer.thickness == thickness
    layer.thickness = thickness + 30  # a view: changes the structure
    assert case.structure.layers[0].thickness == thickness + 30
    for i in range(200):
        layer.shapes = [gratingsim.TrapezoidLine(bottom_width=float(i), material=case.materials["Si"])] * 3
    assert shapes[0].bottom_width == width  # a copy, taken before
    assert [s.bottom_width for s in case.structure.layers[0].shapes] == [199.0] * 3
    shapes[0].bottom_width = 1.0  # a copy: the structure keeps its own
    assert case.structure.layers[0].shapes[0].bottom_width == 199.0
    assert [l.thickness for l in case.structure.layers[1:3]] == [1.0, 2.0]  # a slice: copies
    copied = gratingsim.Layer(layer)
    layer.thickness = 5.0
    assert copied.thickness == thickness + 30
    case.structure.layers = [gratingsim.Layer(thickness=80.0, slices=4)]
    with pytest.raises(IndexError):
        case.structure.layers[1]
    assert layer.thickness == 80.0  # index 0 of the list as it is now


def test_arrays_is_a_new_dict_each_call():
    results = gratingsim.solve(gratingsim.load(str(CASES / "lines_fields.yaml")))
    arrays = results.arrays()
    arrays["results/R"] = None
    del arrays["results/T"]
    assert isinstance(results["results/R"], np.ndarray)
    assert isinstance(results.arrays()["results/T"], np.ndarray)


def test_write_refuses_what_run_refuses_before_writing(tmp_path):
    case_file = tmp_path / "case.yaml"
    case_file.write_text((CASES / "lines_fields.yaml").read_text())
    text = case_file.read_bytes()
    results = gratingsim.solve(gratingsim.load(case_file))  # a pathlib.Path, as str
    with pytest.raises(gratingsim.Error, match="refusing output .*a file the case reads"):
        results.write(str(case_file), overwrite=True)
    assert case_file.read_bytes() == text
    out = tmp_path / "out.h5"
    results.write(out)
    with pytest.raises(gratingsim.Error, match="already exists.*overwrite=True replaces it"):
        results.write(str(out))
    assert not (tmp_path / "out.h5.partial").exists()
    results.write(str(out), overwrite=True)
    with pytest.raises(gratingsim.Error, match="is a directory"):
        results.write(str(tmp_path))


def test_a_case_with_parameters_refuses_an_edited_structure():
    # Every parameter point's structure is built from the YAML at its values; an edit of case.structure reached the
    # first point alone (an audit of session 36: cd = 60 changed, cd = 120 did not, nothing said). Refused now.
    case = yaml.safe_load((CASES / "lines_fields.yaml").read_text())
    case["parameters"] = {"height": [120, 150]}
    case["layers"][0]["thickness"] = "${height}"
    case["output"] = {"fields": False}
    swept = gratingsim.from_dict(case)
    unchanged = gratingsim.solve(swept)["results/R"]
    assert unchanged.shape[0] == 2
    swept.structure.layers[0].thickness = 300
    with pytest.raises(gratingsim.Error, match="a case with parameters builds every parameter point's structure"):
        gratingsim.solve(swept)
    swept.structure.layers[0].thickness = 120  # as read again: solves
    assert same_bits(gratingsim.solve(swept)["results/R"], unchanged)


def test_a_case_edited_into_nonsense_is_refused_with_what_is_wrong():
    case = gratingsim.load(str(CASES / "lines_fields.yaml"))
    case.wavelength_nm = []
    with pytest.raises(gratingsim.Error, match="no sweep point"):
        gratingsim.solve(case)
    case = gratingsim.load(str(CASES / "lines_fields.yaml"))
    case.structure.lattice.period_x = float("nan")
    with pytest.raises(gratingsim.Error, match="finite period_x > 0"):
        gratingsim.solve(case)
    with pytest.raises(gratingsim.Error, match="ε = 0 is not a material"):
        gratingsim.Material.constant_index(0)
