"""`predict --points` on a domain with a hole: points in the hole or beyond the box are
NaN in every output format, with a one-line count (``--allow-outside`` extrapolates)."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from pinnkit.cli.main import main as cli_main
from pinnkit.physics.observations import DataError, read_table, write_table
from pinnkit.run.config import load_config
from pinnkit.run.predict import OutsideDomainWarning, predict
from pinnkit.run.rundir import load_run, train_to_dir

ROOT = Path(__file__).resolve().parents[1]

# the hole is the disk of radius 0.4 about (0.3, 0.2) in [-1, 1]^2
PTS = np.array([
    [0.3, 0.2], [0.4, 0.3], [0.2, 0.1],  # in the hole
    [1.5, 0.0], [0.0, -1.2],  # beyond the box
    [-0.5, -0.5], [0.9, 0.9], [-0.9, 0.5], [0.3, 0.75], [-1.0, 0.0],  # inside (the last on a face)
])
OUT = np.array([True] * 5 + [False] * 5)


@pytest.fixture(scope="module")
def hole_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("hole") / "run"
    cfg = load_config(ROOT / "configs/tiny/poisson_hole.yaml", ["train.steps=20", "train.chunk=20"])
    train_to_dir(cfg, out, progress=False, plots=False)
    return out


def test_points_outside_are_nan_with_a_count(hole_run):
    with pytest.warns(OutsideDomainWarning, match="5 of 10 points lie outside the domain") as rec:
        res = predict(hole_run, points=PTS)
    assert [w.message.n_outside for w in rec] == [5]
    np.testing.assert_array_equal(np.isnan(res["u"]), OUT)
    np.testing.assert_array_equal(res["x"], PTS[:, 0])  # coordinates are kept
    # inside, the values are the network's own; with allow_outside, everywhere
    net = load_run(hole_run).predict(PTS)[:, 0]
    np.testing.assert_allclose(res["u"][~OUT], net[~OUT], rtol=1e-6, atol=1e-7)
    with pytest.warns(OutsideDomainWarning, match="extrapolated"):
        free = predict(hole_run, points=PTS, allow_outside=True)
    np.testing.assert_allclose(free["u"], net, rtol=1e-6, atol=1e-7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning when every point is inside
        predict(hole_run, points=PTS[~OUT])


@pytest.mark.parametrize("suffix", [".csv", ".npz", ".nc"])
def test_cli_masks_every_format_and_prints_one_line(hole_run, tmp_path, capsys, suffix):
    if suffix == ".nc":
        pytest.importorskip("xarray")
    src = write_table(tmp_path / "pts.csv", {"x": PTS[:, 0], "y": PTS[:, 1]})
    out = tmp_path / f"pred{suffix}"
    assert cli_main(["predict", str(hole_run), "--points", str(src), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert ("pinnkit: 5 of 10 points lie outside the domain; their values are NaN "
            "(use --allow-outside to extrapolate)\n") in err
    assert "10 points written" in err
    np.testing.assert_array_equal(np.isnan(read_table(out)["u"]), OUT)
    assert cli_main(["predict", str(hole_run), "--points", str(src), "--out", str(out),
                     "--allow-outside"]) == 0
    assert "5 of 10 points lie outside the domain; extrapolated (--allow-outside)" in capsys.readouterr().err
    assert not np.isnan(read_table(out)["u"]).any()


def test_one_point_is_singular(hole_run, tmp_path, capsys):
    src = write_table(tmp_path / "one.csv", {"x": [-0.5], "y": [-0.5]})
    assert cli_main(["predict", str(hole_run), "--points", str(src), "--out", str(tmp_path / "o.csv")]) == 0
    err = capsys.readouterr().err
    assert "pinnkit: 1 point written to" in err and "outside" not in err
    assert cli_main(["predict", str(hole_run), "--grid", "x=-1:1:1,y=0:0:1",
                     "--out", str(tmp_path / "g.npz")]) == 0
    assert "pinnkit: 1 point on a 1 x 1 grid" in capsys.readouterr().err


def test_headerless_points_file_is_called_a_points_file(hole_run, tmp_path):
    src = tmp_path / "bare.csv"
    src.write_text("0.1,0.2\n0.3,0.4\n")
    with pytest.raises(DataError, match=r"points file .*bare\.csv.*column 'x'.*first line looks like data"):
        predict(hole_run, points=src)
