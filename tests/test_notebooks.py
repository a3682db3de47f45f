"""Every notebook in notebooks/ runs top to bottom on a fresh clone: the files git tracks
under notebooks/ (the notebooks and the runs they ship in notebooks/data/) and
pyproject.toml (how a notebook finds the repository root) are copied to an empty folder,
with no runs/ beside them, and each notebook is executed there by nbclient with the
kernel started in notebooks/, as Jupyter does; any cell error fails the test. The kernel
imports pinnkit from this checkout (PYTHONPATH)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
# What each notebook must print: proof that it read its shipped run, not just that no cell failed.
EXPECT = {
    "01_poisson.ipynb": ["poisson2d step 2000", "relative L2 error on the grid"],
    "02_navier_stokes.ipynb": ["max deviation from Ghia", "reference  5.579535"],
    "03_climate.ipynb": ["Williamson l2(h)", "round-trip max difference: 0.0"],
}


def _tracked() -> list[str]:
    """The files a clone has under notebooks/, and pyproject.toml."""
    try:
        out = subprocess.run(["git", "ls-files", "notebooks", "pyproject.toml"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an sdist): all of it
        out = [str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").rglob("*") if p.is_file()]
        out.append("pyproject.toml")
    return out


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("clone")
    for rel in _tracked():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def test_every_notebook_has_its_expectations():
    assert NOTEBOOKS and set(NOTEBOOKS) == set(EXPECT), NOTEBOOKS


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_a_fresh_clone(clone, name, monkeypatch):
    import nbclient
    import nbformat

    assert not (clone / "runs").exists()
    monkeypatch.delenv("PINNKIT_RUN", raising=False)
    monkeypatch.delenv("PINNKIT_DFG_RUN", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    before = {p: p.stat().st_mtime_ns for p in (clone / "notebooks" / "data").rglob("*") if p.is_file()}
    nb = nbformat.read(clone / "notebooks" / name, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(clone / "notebooks")}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    for want in EXPECT[name]:
        assert want in text, (want, text[-2000:])
    # the shipped runs are read, never written (a notebook's files go to a temporary folder)
    after = {p: p.stat().st_mtime_ns for p in (clone / "notebooks" / "data").rglob("*") if p.is_file()}
    assert after == before
