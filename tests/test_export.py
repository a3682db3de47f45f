"""`pinnkit predict` / `pinnkit export`: predictions of a trained run at points and on
grids (files in and out), and a `jax.export` artifact that a fresh Python process with
JAX alone on its path (pinnkit not importable) evaluates to the run's predictions."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from pinnkit.cli.main import main as cli_main
from pinnkit.errors import PinnkitError
from pinnkit.physics.observations import read_table, write_table
from pinnkit.run.config import load_config
from pinnkit.run.predict import predict, write_prediction
from pinnkit.run.rundir import load_run, train_to_dir

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "poisson"
    cfg = load_config(ROOT / "configs/tiny/poisson2d.yaml", ["train.steps=20", "train.chunk=20",
                                                              "checkpoint.every=0"])
    train_to_dir(cfg, out, progress=False, plots=False)
    return out


@pytest.fixture(scope="module")
def data(run_dir):
    return load_run(run_dir)


def _cli(*argv):
    """The real `pinnkit` entry point (predict/export are wired into pinnkit.cli)."""
    return cli_main([str(a) for a in argv])


def test_predict_points_and_grid_match_the_network(run_dir, data):
    pts = np.random.default_rng(0).uniform(0, 1, (37, 2))
    res = predict(run_dir, points=pts, batch=8)  # several batches, last one padded
    np.testing.assert_allclose(res["u"], data.predict(pts)[:, 0], rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(res["x"], pts[:, 0])
    g = predict(run_dir, grid="x=0:1:5,y=0:0.5:3")
    assert tuple(g["shape"]) == (5, 3) and g["u"].shape == (15,)
    np.testing.assert_allclose(g["y"].reshape(5, 3)[0], [0, 0.25, 0.5])
    with pytest.raises(PinnkitError, match="'z' is not a coordinate"):
        predict(run_dir, grid="z=0:1:3")
    with pytest.raises(PinnkitError, match="not both"):
        predict(run_dir, points=pts, grid="3")


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_predict_cli_round_trip_through_files(run_dir, tmp_path, suffix):
    pts = np.random.default_rng(1).uniform(0, 1, (11, 2))
    src = write_table(tmp_path / f"pts{suffix}", {"x": pts[:, 0], "y": pts[:, 1]})
    out = tmp_path / f"pred{suffix}"
    assert _cli("predict", run_dir, "--points", src, "--out", out) == 0
    back = read_table(out)
    direct = predict(run_dir, points=pts)
    np.testing.assert_allclose(back["x"], pts[:, 0], rtol=1e-7)
    np.testing.assert_allclose(back["u"], direct["u"], rtol=1e-6, atol=1e-7)
    # the written file is itself a valid --points file
    assert _cli("predict", run_dir, "--points", out, "--out", tmp_path / f"again{suffix}") == 0
    res = write_prediction(tmp_path / "g.npz", predict(run_dir, grid="4"))
    assert tuple(read_table(res)["shape"]) == (4, 4)
    assert _cli("predict", run_dir, "--points", tmp_path / "missing.csv", "--out", tmp_path / "x.csv") == 2


def _fresh_python(code: str, cwd: Path) -> str:
    """Runs ``code`` isolated (-I: no env vars, no script folder; -S: no site, so neither
    the repo nor pinnkit's editable install) with only JAX's site-packages on sys.path."""
    site = str(Path(jax.__file__).resolve().parents[1])
    prelude = f"import sys; sys.path.append({site!r})\n"
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR")}
    r = subprocess.run([sys.executable, "-I", "-S", "-c", prelude + code], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("derivatives", [False, True])
def test_exported_artifact_reproduces_predictions_without_pinnkit(run_dir, data, tmp_path, derivatives):
    pytest.importorskip("flatbuffers")
    model = tmp_path / "model.jaxexport"
    args = ["export", run_dir, "--out", model] + (["--derivatives"] if derivatives else [])
    assert _cli(*args) == 0
    meta = json.loads(Path(str(model) + ".json").read_text())
    assert meta["inputs"]["coords"] == ["x", "y"] and meta["fields"] == ["u"]
    pts = np.random.default_rng(2).uniform(0, 1, (13, 2)).astype(np.float32)
    np.save(tmp_path / "pts.npy", pts)
    code = (
        "try:\n    import pinnkit\n    print('PINNKIT_IMPORTABLE')\nexcept ImportError:\n    pass\n"
        "import jax, numpy as np\n"
        "m = jax.export.deserialize(bytearray(open('model.jaxexport', 'rb').read()))\n"
        "x = np.load('pts.npy')\n"
        "out = m.call(x)\n"
        "out = out if isinstance(out, tuple) else (out,)\n"
        "np.savez('out.npz', *[np.asarray(o) for o in out])\n"
        "m.call(x[:3])  # another batch size: the batch dimension is symbolic\n"
    )
    stdout = _fresh_python(code, tmp_path)
    assert "PINNKIT_IMPORTABLE" not in stdout
    with np.load(tmp_path / "out.npz") as z:
        outs = [z[k] for k in sorted(z.files)]
    np.testing.assert_allclose(outs[0], data.predict(pts), rtol=1e-6, atol=1e-6)
    if derivatives:
        jac = np.asarray(jax.vmap(jax.jacfwd(data.network))(pts))
        assert outs[1].shape == (13, 1, 2)
        np.testing.assert_allclose(outs[1], jac, rtol=1e-5, atol=1e-6)
