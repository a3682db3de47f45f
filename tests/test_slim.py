"""``pinnkit slim``: a run folder copied with model-only checkpoints loads to the same
network (bitwise), predicts the same through the CLI, is a fraction of the size when the
optimiser holds a dense matrix, and refuses to resume; windowed runs keep every window."""

from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest

from pinnkit.cli.main import main as cli_main
from pinnkit.parallel.mesh import make_mesh
from pinnkit.run.config import load_config
from pinnkit.run.rundir import load_run, train_to_dir
from pinnkit.train import checkpoint as ckpt

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny"


def _leaves_equal(a, b) -> None:
    la, lb = jax.tree.leaves(eqx.filter(a, eqx.is_array)), jax.tree.leaves(eqx.filter(b, eqx.is_array))
    assert len(la) == len(lb) > 0
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_slim_copy_of_a_quasi_newton_run(x64, tmp_path, capsys):
    """SSBFGS keeps a P x P inverse Hessian (P = 105 here): the slim checkpoint drops it."""
    cfg = load_config(TINY / "poisson2d_ssbfgs.yaml", ["train.steps=40", "eval.resolution=11"])
    src = tmp_path / "run"
    train_to_dir(cfg, src, progress=False, plots=False, mesh=make_mesh(1))
    assert cli_main(["slim", str(src), "--out", str(tmp_path / "small")]) == 0
    assert "model-only" in capsys.readouterr().err
    (big,), (small,) = (ckpt.list_checkpoints(d / "checkpoints") for d in (src, tmp_path / "small"))
    head, _ = ckpt.read_header(small)
    assert ckpt.is_model_only(head) and head["step"] == 40 and head["phase"] == 1
    n_params = 2 * 8 + 8 + 8 * 8 + 8 + 8 + 1
    # the dense state alone is n_params^2 float64 words; the model is about n_params
    assert big.stat().st_size - small.stat().st_size >= 8 * n_params**2
    assert {p.name for p in (tmp_path / "small").iterdir()} == {p.name for p in src.iterdir()}

    orig, slim = load_run(src), load_run(tmp_path / "small")
    _leaves_equal(orig.network, slim.network)
    assert slim.step == orig.step and slim.summary == orig.summary

    pts = tmp_path / "pts.csv"
    pts.write_text("x,y\n0.1,0.2\n0.5,0.5\n0.9,0.3\n")
    for name in ("run", "small"):
        assert cli_main(["predict", str(tmp_path / name), "--points", str(pts),
                         "--out", str(tmp_path / f"{name}.csv")]) == 0
    assert (tmp_path / "run.csv").read_text() == (tmp_path / "small.csv").read_text()

    # resuming is refused in one paragraph, exit 2, the copy untouched
    assert cli_main(["train", str(TINY / "poisson2d_ssbfgs.yaml"), "--set", "train.steps=40",
                     "--set", "eval.resolution=11", "--out", str(tmp_path / "small"),
                     "--resume", "--no-plots"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "without its optimiser state" in err and "Traceback" not in err
    assert ckpt.list_checkpoints(tmp_path / "small" / "checkpoints") == [small]


def test_slim_keeps_every_window(tmp_path):
    cfg = load_config(TINY / "climate_tracer.yaml", ["train.time_windows=2", "train.window_time=local",
                                                     "train.steps=10", "eval.resolution=4"])
    src = tmp_path / "run"
    train_to_dir(cfg, src, progress=False, plots=False, mesh=make_mesh(1))
    assert cli_main(["slim", str(src), "--out", str(tmp_path / "small")]) == 0
    for w in (0, 1):
        (path,) = ckpt.list_checkpoints(tmp_path / "small" / "windows" / f"w{w}" / "checkpoints")
        assert ckpt.is_model_only(ckpt.read_header(path)[0])
    orig, slim = load_run(src), load_run(tmp_path / "small")
    assert len(slim.network.networks) == 2
    _leaves_equal(orig.network, slim.network)


@pytest.mark.parametrize("case", ["not_a_run", "out_not_empty", "out_inside"])
def test_slim_bad_folders_exit_2(tmp_path, capsys, case):
    src = tmp_path / "run"
    src.mkdir()
    out = tmp_path / "out"
    if case != "not_a_run":
        (src / "config.yaml").write_text("problem: {name: poisson2d}\n")
    if case == "out_not_empty":
        out.mkdir()
        (out / "keep.txt").write_text("mine")
    if case == "out_inside":
        out = src / "copy"
    assert cli_main(["slim", str(src), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())  # the CLI wraps its paragraph
    assert "Traceback" not in err and {"not_a_run": "config.yaml is missing", "out_not_empty": "not empty",
                                       "out_inside": "inside the run folder"}[case] in err
    if case == "out_not_empty":
        assert (out / "keep.txt").read_text() == "mine"
