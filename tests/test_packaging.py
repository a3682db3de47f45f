"""The package a user installs: a wheel built from this tree, installed into a fresh venv
outside the repository, carries the example configs, one top-level package and the
LICENSE, and trains ``tiny/poisson2d.yaml`` from the copied examples.

The fresh venv gets the wheel alone (``--no-deps``); its third-party dependencies come
from the test's own environment through a ``.pth`` line (its site-packages are visible,
but not the editable install of this tree: ``.pth`` files of a path added that way are
not run, and the check below asserts pinnkit is imported from the new venv). A full
install of the dependencies from the pip cache takes minutes more for the same check.
"""

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, cwd, env=None, timeout=900):
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.mark.slow
def test_wheel_installs_and_trains_outside_the_repository(tmp_path):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "-q", "-w", dist], cwd=tmp_path)
    (wheel,) = dist.glob("pinnkit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.startswith("pinnkit-")} == {"pinnkit"}  # one package
    assert "pinnkit/examples/tiny/poisson2d.yaml" in names
    assert any(n.endswith("licenses/LICENSE") for n in names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    py = venv / "bin" / "python"
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], cwd=tmp_path)
    new_site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         cwd=tmp_path).stdout.strip())
    (new_site / "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    work = tmp_path / "user"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "LANG")}
    env.update(JAX_PLATFORMS="cpu", MPLBACKEND="Agg")
    where = _run([py, "-c", "import pinnkit; print(pinnkit.__file__)"], cwd=work, env=env)
    assert where.stdout.startswith(str(new_site)), where.stdout  # the wheel, not this tree
    pinnkit = venv / "bin" / "pinnkit"
    assert _run([pinnkit, "--version"], cwd=work, env=env).stdout.startswith("pinnkit 0.")
    _run([pinnkit, "examples", "copy", "configs"], cwd=work, env=env)
    _run([pinnkit, "train", "configs/tiny/poisson2d.yaml", "--set", "train.steps=100", "--out", "runs/p1",
          "--quiet"], cwd=work, env=env)
    summary = (work / "runs" / "p1" / "summary.json").read_text()
    assert '"outcome": "successful"' in summary and (work / "runs" / "p1" / "plots" / "u.png").is_file()
