"""The error trace of ``train.eval_every``: eval records carry a training clock (wall and
CPU seconds, evaluations excluded), from which time-to-accuracy is read
(scripts/bench_time_to_accuracy.py)."""

import json
import time
from pathlib import Path

from pinnkit.run.config import load_config
from pinnkit.run.rundir import train_to_dir
from pinnkit.train.loop import _TrainClock

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "poisson2d.yaml"


def test_eval_records_carry_the_training_clock(tmp_path):
    cfg = load_config(TINY, ["train.steps=200", "train.chunk=50", "train.eval_every=50"])
    summary = train_to_dir(cfg, tmp_path / "run", progress=False, plots=False)
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    evals = [r for r in map(json.loads, lines) if "eval" in r]
    assert [r["step"] for r in evals] == [50, 100, 150, 200]
    walls, cpus = [r["wall_s"] for r in evals], [r["cpu_s"] for r in evals]
    assert 0 < walls[0] and walls == sorted(set(walls))
    assert 0 < cpus[0] and cpus == sorted(set(cpus))
    errs = [r["eval"]["rel_l2"]["u"] for r in evals]
    assert errs[-1] < errs[0]
    # The last record evaluates the final network on the same grid as summary.json.
    assert abs(errs[-1] - summary["rel_l2"]["u"]) <= 1e-6 * summary["rel_l2"]["u"]


def test_clock_excludes_paused_intervals():
    clock = _TrainClock()
    w0, c0 = clock.pause()
    time.sleep(0.3)  # an "evaluation": neither wall nor CPU time of it may count
    sum(i * i for i in range(200_000))  # CPU work while paused
    clock.resume()
    w1, c1 = clock.pause()
    assert 0 <= w0 <= w1 < w0 + 0.1
    assert 0 <= c0 <= c1 < c0 + 0.05


def test_eval_records_carry_the_problem_metrics(tmp_path):
    """A problem with its own metrics (here the Williamson errors of the Rossby-Haurwitz
    wave) logs them in every eval record, so their trace can be followed during training;
    the last record is the final network's, as in summary.json."""
    cfg = load_config(TINY.parent / "climate_rh.yaml", ["train.eval_every=10"])
    summary = train_to_dir(cfg, tmp_path / "run", progress=False, plots=False)
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    evals = [r["eval"] for r in map(json.loads, lines) if "eval" in r]
    assert len(evals) == 2
    assert evals[-1]["metrics"] == summary["metrics"]
    assert evals[0]["metrics"]["zeta"]["l2"] != evals[-1]["metrics"]["zeta"]["l2"]
