"""``pinnkit runs`` / ``pinnkit compare`` on two tiny runs that differ in seed and learning
rate: the table's rows and changed keys, the notes on damaged folders, and the figure's
curves (two per panel, the data of the runs' own records)."""

import json
from pathlib import Path

import numpy as np
import pytest

from pinnkit.cli.main import main
from pinnkit.plot.compare import compare_figure
from pinnkit.run.config import load_config
from pinnkit.run.rundir import train_to_dir
from pinnkit.run.runs_table import changed_keys, find_runs, flatten, read_run

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny" / "poisson2d.yaml"
SHORT = ["train.steps=60", "train.chunk=20", "train.log_every=10", "train.eval_every=20"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``root/a`` (seed 0, lr 1e-2), ``root/sub/b`` (seed 1, lr 3e-3), a run folder whose
    summary.json is damaged and a folder with a log but no config.yaml."""
    root = tmp_path_factory.mktemp("runs")
    for out, extra in ((root / "a", ["train.seed=0", "optim.phases.0.lr=1e-2"]),
                       (root / "sub" / "b", ["train.seed=1", "optim.phases.0.lr=3e-3"])):
        train_to_dir(load_config(TINY, SHORT + extra), out, progress=False, plots=False)
    bad = root / "zz_bad"
    bad.mkdir()
    (bad / "config.yaml").write_text((root / "a" / "config.yaml").read_text())
    (bad / "summary.json").write_text('{"steps": ')
    orphan = root / "zz_orphan"
    orphan.mkdir()
    (orphan / "metrics.jsonl").write_text('{"step": 0, "loss": 1.0}\n')
    (root / "notes").mkdir()  # no run files at all: searched silently
    return root


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def test_runs_table_rows_changed_keys_and_notes(runs, capsys, monkeypatch):
    monkeypatch.chdir(runs)
    assert main(["runs", "."]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["run", "problem", "changed", "steps", "wall", "errors", "outcome"]
    rows = {ln.split()[0]: ln for ln in lines[1:]}
    assert sorted(rows) == ["a", "sub/b"]  # the damaged and the log-only folders left out
    for name, seed, lr in (("a", 0, "0.01"), ("sub/b", 1, "0.003")):
        cells = rows[name].split()
        s = _summary(runs / name)
        assert cells[1] == "poisson2d"
        # exactly the two keys that differ, each with this run's value
        assert cells[2:4] == [f"optim.phases.0.lr={lr}", f"train.seed={seed}"]
        assert cells[4] == "60/60"
        assert cells[7:9] == ["u", f"{s['rel_l2']['u']:.2e}"]
        assert cells[-1] == "successful"
    notes = err.strip().splitlines()
    assert len(notes) == 2, err
    assert "zz_bad/summary.json is damaged" in notes[0]
    assert "zz_orphan is not a pinnkit run folder: config.yaml is missing" in notes[1]


def test_runs_in_folder_without_runs_exits_2(tmp_path, capsys):
    assert main(["runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no run folders found" in err and "Traceback" not in err


def test_compare_writes_one_png_with_two_curves_per_panel(runs, tmp_path, capsys):
    a, b = runs / "a", runs / "sub" / "b"
    png = tmp_path / "ab.png"
    assert main(["compare", str(a), str(b), "--out", str(png)]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 3 and "optim.phases.0.lr=0.003" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(png) in err
    recs = [read_run(a), read_run(b)]
    fig = compare_figure(recs)
    loss_ax, err_ax = fig.axes[:2]
    assert len(loss_ax.lines) == 2 and len(err_ax.lines) == 2
    for rec, loss_line, err_line in zip(recs, loss_ax.lines, err_ax.lines, strict=True):
        logged = [h for h in rec.history if "loss" in h]
        np.testing.assert_array_equal(loss_line.get_ydata(), [h["loss"] for h in logged])
        evals = [h for h in rec.history if "eval" in h]
        assert [h["step"] for h in evals] == [20, 40, 60]  # train.eval_every=20
        np.testing.assert_array_equal(err_line.get_xdata(), [20, 40, 60])
        assert err_line.get_ydata()[-1] == pytest.approx(rec.summary["rel_l2"]["u"], rel=1e-5)
    assert loss_ax.get_yscale() == "log" and err_ax.get_yscale() == "log"
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_compare_refuses_a_damaged_run_in_one_paragraph(runs, tmp_path, capsys):
    png = tmp_path / "x.png"
    assert main(["compare", str(runs / "a"), str(runs / "zz_bad"), "--out", str(png)]) == 2
    err = capsys.readouterr().err
    assert "cannot compare" in err and "summary.json is damaged" in err
    assert "\n\n" not in err.strip() and "Traceback" not in err
    assert not png.exists()
    assert main(["compare", str(runs / "a"), "--out", str(tmp_path / "x.pdf")]) == 2
    assert "ending in .png" in capsys.readouterr().err


def test_changed_keys_and_flatten():
    a = flatten({"optim": {"phases": [{"kind": "adam", "lr": 0.01}]}, "train": {"seed": 0}, "x": {}})
    assert a == {"optim.phases.0.kind": "adam", "optim.phases.0.lr": 0.01, "train.seed": 0, "x": {}}
    b = {**a, "train.seed": 1}
    c = {k: v for k, v in b.items() if k != "x"}
    assert changed_keys([a, b]) == ["train.seed"]
    assert changed_keys([a, c]) == ["train.seed", "x"]  # missing from one: changed
    assert changed_keys([a]) == []


def test_find_runs_notes_missing_folder(tmp_path):
    runs, notes = find_runs([tmp_path / "nope"])
    assert runs == [] and notes == [f"{tmp_path / 'nope'}: no such folder"]
