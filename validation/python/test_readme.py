"""The README's Python example (the block after <!-- python-example -->) runs as written: it plots the
Ψ/Δ spectrum and writes the result file, whose Ψ and Δ are the plotted ones."""
import os
import pathlib
import re
import subprocess
import sys

import h5py
import numpy as np

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_plots_and_writes_the_spectrum(tmp_path):
    text = README.read_text()
    example = re.search(r"<!-- python-example -->\s*```python\n(.*?)```", text, re.S).group(1)
    assert len(example.strip().splitlines()) <= 10  # the README promises ten lines
    script = tmp_path / "example.py"
    # The same program, then what it computed, for the check below.
    script.write_text(example + "import numpy\nnumpy.save('psi.npy', psi)\nnumpy.save('delta.npy', delta)\n")
    environment = dict(os.environ, MPLBACKEND="Agg", GRATINGSIM_BACKEND_CACHE=str(tmp_path / "backends.txt"))
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=environment, check=True)
    assert (tmp_path / "psi_delta.png").stat().st_size > 10_000
    psi, delta = np.load(tmp_path / "psi.npy"), np.load(tmp_path / "delta.npy")
    assert psi.shape == delta.shape == (41,)
    assert np.all((psi >= 0) & (psi <= 90)) and np.all((delta > -180) & (delta <= 180))
    with h5py.File(tmp_path / "psi_delta.h5", "r") as f:
        assert np.array_equal(f["results/psi_deg"][:, 0, 0], psi)
        assert np.array_equal(f["results/delta_deg"][:, 0, 0], delta)
        assert np.allclose(f["sweep/wavelength"][()], np.linspace(400, 800, 41), rtol=1e-15, atol=0)
