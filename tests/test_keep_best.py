"""``eval.keep_best`` (`pinnkit.train.best`, `pinnkit.run.best`): the parameters of the
lowest evaluated metric are the run's model — in summary.json, ``best/``, `load_run`,
``pinnkit eval``, slim copies and resumed runs — while ``checkpoints/`` keeps the
training state.

The runs: poisson2d tiny, Adam at lr 1e-2 for 100 steps, then 50 steps at lr 1 that wreck
the field (Adam moves every weight by ~lr a step): evaluations at steps 50, 100, 150,
the best at 100. Measured (seed 0): rel. L2 of u 3.7e-2, 7.9e-3, 0.22; fresh-point
residual 0.96, 0.54, 11.4: a factor 14 between the best and the last, 1.8 between the
first two, so the order cannot flip with the CPU's rounding (seeds 1, 2: best at 100 too,
the last's u error 7.9x and 86x the best's; the tests assert 5x). Same under
XLA_FLAGS=--xla_cpu_max_isa=AVX2 and AVX."""

import json
from pathlib import Path

import pytest

from pinnkit.errors import ConfigError
from pinnkit.run.config import load_config
from pinnkit.run.rundir import evaluate_dir, load_run, train_to_dir
from pinnkit.run.slim import slim_run
from pinnkit.train import checkpoint as ckpt

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny" / "poisson2d.yaml")
WRECK = ["train.steps=150", "train.chunk=50", "train.eval_every=50", "checkpoint.every=50",
         "eval.validation_points=256",
         "optim.phases=[{kind: adam, lr: 1.0e-2, steps: 100}, {kind: adam, lr: 1.0, steps: 50}]"]


def evals(run: Path) -> dict[int, dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return {r["step"]: r["eval"] for r in map(json.loads, lines) if "eval" in r}


@pytest.mark.parametrize("metric", ["metrics.validation", "rel_l2.u"])
def test_the_best_evaluation_is_the_runs_model(tmp_path, metric):
    """Either metric finds step 100; summary.json's errors are that evaluation's, its
    ``best.last`` the final parameters'; ``best/`` holds step 100 and every reader of
    the run's model reads it (``--last``: the final one)."""
    out = tmp_path / "run"
    summary = train_to_dir(load_config(TINY, [*WRECK, f"eval.keep_best={metric}"]), out,
                           progress=False, plots=False)
    ev = evals(out)
    assert sorted(ev) == [50, 100, 150]
    best = summary["best"]
    assert best["metric"] == metric and best["step"] == 100 and summary["steps"] == 150
    # the best's errors, evaluated anew from the kept parameters: the same numbers
    assert summary["rel_l2"]["u"] == pytest.approx(ev[100]["rel_l2"]["u"], rel=1e-6)
    assert summary["metrics"]["validation"] == pytest.approx(ev[100]["metrics"]["validation"], rel=1e-6)
    assert best["last"]["step"] == 150
    assert best["last"]["rel_l2"]["u"] == pytest.approx(ev[150]["rel_l2"]["u"], rel=1e-6)
    assert best["last"]["rel_l2"]["u"] > 5 * summary["rel_l2"]["u"]
    assert [p.name for p in ckpt.list_checkpoints(out / "best")] == ["step_00000100.eqx"]
    assert ckpt.list_checkpoints(out / "checkpoints")[-1].name == "step_00000150.eqx"
    assert load_run(out).step == 100 and load_run(out, last=True).step == 150
    assert evaluate_dir(out)["rel_l2"]["u"] == pytest.approx(summary["rel_l2"]["u"], rel=1e-6)
    assert evaluate_dir(out, last=True)["rel_l2"]["u"] == pytest.approx(ev[150]["rel_l2"]["u"], rel=1e-6)
    # a slim copy keeps the best
    slim_run(out, tmp_path / "slim")
    assert load_run(tmp_path / "slim").step == 100


def test_a_final_model_that_is_best_is_kept(tmp_path):
    """Without the wrecking phase the residual falls at every evaluation: the final
    parameters are the model, ``best/`` holds them and summary.json has no ``last``."""
    out = tmp_path / "run"
    cfg = load_config(TINY, ["train.steps=100", "train.chunk=50", "train.eval_every=50",
                             "checkpoint.every=0", "eval.validation_points=256",
                             "eval.keep_best=metrics.validation"])
    summary = train_to_dir(cfg, out, progress=False, plots=False)
    assert summary["best"]["step"] == 100 and "last" not in summary["best"]
    assert summary["best"]["value"] == pytest.approx(summary["metrics"]["validation"])
    assert load_run(out).step == 100


def test_a_resumed_run_keeps_the_best_of_before(tmp_path):
    """Stopped after step 100 (the best), resumed to 150: the resumed process has only
    ``best/`` on disk to go by, and the run's model is still step 100, equal to the
    uninterrupted run's."""
    cfg = load_config(TINY, [*WRECK, "eval.keep_best=metrics.validation"])
    log = tmp_path / "run" / "metrics.jsonl"
    first = train_to_dir(cfg, tmp_path / "run", progress=False, plots=False,  # after step 100's eval
                         should_stop=lambda: log.is_file() and 100 in evals(tmp_path / "run"))
    assert first["outcome"] == "interrupted" and first["steps"] == 100
    summary = train_to_dir(cfg, tmp_path / "run", resume=True, progress=False, plots=False)
    straight = train_to_dir(cfg, tmp_path / "straight", progress=False, plots=False)
    assert summary["steps"] == 150 and summary["best"]["step"] == 100
    assert summary["rel_l2"]["u"] == pytest.approx(straight["rel_l2"]["u"], rel=1e-6)
    assert summary["best"]["last"]["rel_l2"]["u"] > 5 * summary["rel_l2"]["u"]


@pytest.mark.parametrize(("extra", "match"), [
    (["eval.keep_best=rel_l2.w"], r"eval\.keep_best: 'rel_l2\.w' is not evaluated; choose one of rel_l2\.u"),
    (["eval.keep_best=metrics.validation", "eval.validation_points=0"],
     r"eval\.keep_best: 'metrics\.validation' is the residual on fresh points.*validation_points"),
    (["eval.keep_best=rel_l2.u", "train.eval_every=0"], r"eval\.keep_best: .*train\.eval_every is 0"),
    (["eval.keep_best=rell2.u"], r"eval\.keep_best: 'rell2\.u': expected rel_l2\.FIELD.*rel_l2"),
])
def test_a_metric_the_run_cannot_evaluate_is_refused_before_training(tmp_path, extra, match):
    cfg = load_config(TINY, [*WRECK, *extra])
    with pytest.raises(ConfigError, match=match):
        train_to_dir(cfg, tmp_path / "run", progress=False, plots=False)
    assert not (tmp_path / "run").exists()
