"""Callbacks (`pinnkit.train.callbacks`), early stopping (Python and ``train.early_stopping``),
extra metrics, and the time limits ``train.max_time`` / ``train.max_cpu_time`` honoured
inside a chunk (`pinnkit.train.records.TimeBudget`, driven here by a simulated clock so
that step counts, not timings, are asserted)."""

import json
from pathlib import Path

import pytest

import pinnkit
from pinnkit.errors import ConfigError
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config
from pinnkit.run.rundir import train_to_dir
from pinnkit.train import loop
from pinnkit.train.callbacks import Callback, EarlyStopping, ExtraMetrics, lookup
from pinnkit.train.records import TimeBudget

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny" / "poisson2d.yaml")


def _cfg(*overrides):
    return load_config(TINY, ["train.steps=200", "train.chunk=50", "train.log_every=1", *overrides])


class Recorder(Callback):
    def __init__(self):
        self.events = []

    def on_chunk(self, info):
        self.events.append(("chunk", info.step, info.phase))

    def on_eval(self, info):
        self.events.append(("eval", info.step, sorted(info.metrics.get("metrics", {}))))

    def on_phase_end(self, info):
        self.events.append(("phase_end", info.step, info.phase_kind))


def test_callbacks_called_in_order_across_phases():
    """Two phases (adam 100, sgd 100), chunks of 50, evaluations every 100 steps: each
    chunk, then the evaluation that falls at its end, then the phase's end; extra metrics
    reach the evaluation records and the callbacks."""
    cfg = _cfg("optim.phases=[{kind: adam, lr: 1.0e-2, steps: 100}, {kind: sgd, lr: 1.0e-3}]",
               "train.eval_every=100")
    rec = Recorder()
    extra = ExtraMetrics(lambda net, coeffs: {"u_centre": net(_centre())[0]})
    res = pinnkit.fit(build_run(cfg), callbacks=[extra, rec], progress=False)
    assert res.result is pinnkit.RESULTS.successful and res.step == 200
    assert rec.events == [
        ("chunk", 50, 0), ("chunk", 100, 0), ("eval", 100, ["u_centre"]), ("phase_end", 100, "adam"),
        ("chunk", 150, 1), ("chunk", 200, 1), ("eval", 200, ["u_centre"]), ("phase_end", 200, "sgd"),
    ]
    evals = [h for h in res.history if "eval" in h]
    assert [h["step"] for h in evals] == [100, 200]
    # the extra metric is the model's value, logged like a problem's own metrics
    assert evals[-1]["eval"]["metrics"]["u_centre"] == pytest.approx(float(res.network(_centre())[0]))


def _centre():
    import jax.numpy as jnp

    return jnp.array([0.5, 0.5])


def test_early_stopping_ends_the_run_with_its_own_outcome():
    """A metric that never improves: the best is set at the first evaluation (step 50),
    patience 2 ends the run at the third (step 150), with the `early_stopped` outcome and
    the trajectory of the unstopped run up to there."""
    cfg = _cfg("train.eval_every=50")
    flat = ExtraMetrics(lambda net, coeffs: {"flat": 1.0})
    stop = EarlyStopping("metrics.flat", patience=2)
    rec = Recorder()
    res = pinnkit.fit(build_run(cfg), callbacks=[flat, stop, rec], progress=False)
    assert res.result is pinnkit.RESULTS.early_stopped and res.step == 150
    assert "metrics.flat did not improve" in res.stop_reason and "at step 50" in res.stop_reason
    assert rec.events[-1] == ("phase_end", 150, "adam")
    assert [e[:2] for e in rec.events if e[0] == "eval"] == [("eval", 50), ("eval", 100), ("eval", 150)]
    # an improving metric (mode max on a growing count) never stops the run
    grow = iter(range(100))
    up = ExtraMetrics(lambda net, coeffs: {"n": float(next(grow))})
    res2 = pinnkit.fit(build_run(cfg), callbacks=[up, EarlyStopping("metrics.n", 1, mode="max")],
                       progress=False)
    assert res2.result is pinnkit.RESULTS.successful and res2.step == 200
    losses = [h["loss"] for h in res.history if "loss" in h]
    assert losses == [h["loss"] for h in res2.history if "loss" in h][: len(losses)]


def test_early_stopping_rules():
    es = EarlyStopping("rel_l2.u", patience=2, min_delta=0.1)
    for v in (1.0, 0.95, 0.5, 0.45, float("nan")):  # 0.95 and 0.45: within min_delta
        es.on_eval(_info({"rel_l2": {"u": v}}))
    assert (es.best, es.best_step, es.waited) == (0.5, 0, 2) and es.should_stop(_info({}))
    assert lookup({"rel_l2": {"u": 2.0}}, "eval/rel_l2/u") == 2.0
    assert lookup({"rel_l2": {"u": 2.0}}, "rel_l2.v") is None
    with pytest.raises(ConfigError, match=r"no metric 'rel_l2\.v'; it holds rel_l2\.u"):
        EarlyStopping("rel_l2.v").on_eval(_info({"rel_l2": {"u": 1.0}}))


def _info(metrics):
    from pinnkit.train.callbacks import TrainInfo

    return TrainInfo(0, 10, 0, "adam", 1.0, metrics, 0.0, 0.0)


def test_early_stopping_from_the_config(tmp_path):
    """``train.early_stopping`` in a config: outcome and reason in summary.json."""
    cfg = _cfg("train.eval_every=50", "train.early_stopping={metric: rel_l2.u, patience: 1, "
               "min_delta: 1.0}", "checkpoint.every=0")
    summary = train_to_dir(cfg, tmp_path / "run", progress=False, plots=False)
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["outcome"] == summary["outcome"] == "early_stopped"
    assert saved["steps"] == 100  # best at 50; 100 does not improve by 1.0
    assert saved["stopped_by"].startswith("early stopping: rel_l2.u did not improve")


@pytest.mark.parametrize("overrides, match", [
    (["train.eval_every=50", "train.early_stopping={metric: rel_l2.u, patiense: 3}"],
     r"unknown key 'train\.early_stopping\.patiense'\. Did you mean 'patience'\?"),
    (["train.early_stopping={metric: rel_l2.u}"], r"train\.eval_every: train\.early_stopping watches"),
    (["train.eval_every=50", "train.early_stopping={metric: rel_l2.u, patience: 0}"],
     r"train\.early_stopping\.patience: expected an integer >= 1"),
    (["train.eval_every=50", "train.early_stopping={metric: rel_l2.u, mode: biggest}"],
     r"train\.early_stopping\.mode"),
    (["train.max_cpu_time=0"], r"train\.max_cpu_time: expected seconds > 0 or null"),
    (["train.max_cpu_time=.inf"], r"train\.max_cpu_time: expected a finite number"),
])
def test_config_mistakes_name_the_key(overrides, match):
    with pytest.raises(ConfigError, match=match):
        _cfg(*overrides)


def test_early_stopping_metric_checked_before_training(tmp_path):
    cfg = _cfg("train.eval_every=50", "train.early_stopping={metric: rel_l2.v}")
    with pytest.raises(ConfigError, match=r"'rel_l2\.v' is not evaluated; choose one of rel_l2\.u"):
        train_to_dir(cfg, tmp_path / "run", progress=False, plots=False)
    assert not (tmp_path / "run").exists()  # nothing written


class FakeBudget(TimeBudget):
    """A simulated clock: each step costs 10 ms and each compilation 100 ms, of wall and
    CPU time alike; nothing else takes time."""

    def __init__(self, *limits):
        self.t = 0.0
        super().__init__(*limits)

    def now(self):
        return self.t, self.t

    def compiled(self, phase, t0):
        self.t += 0.1
        super().compiled(phase, t0)

    def ran(self, phase, n, t0):
        self.t += 0.01 * n
        super().ran(phase, n, t0)


@pytest.mark.parametrize("limit", ["max_time", "max_cpu_time"])
def test_time_limit_shortens_the_last_chunk(limit, monkeypatch):
    """Chunks of 50 steps, 0.5 s each after a 0.1 s compilation: three fit in 1.6 s; with
    1.835 s a fourth chunk does not fit, one compiled for 13 steps does (1.6 + 0.1 + 0.13
    <= 1.835), and then not one more step: the run stops at step 163 with outcome max_time,
    on the trajectory of the unlimited run."""
    import dataclasses

    monkeypatch.setattr(loop, "TimeBudget", FakeBudget)
    run = build_run(_cfg())
    full = pinnkit.fit(run, progress=False)
    res = pinnkit.fit(dataclasses.replace(run, **{limit: 1.835}), progress=False)
    assert res.result is pinnkit.RESULTS.max_time and res.step == 163
    losses = [h["loss"] for h in res.history]
    assert len(losses) == 163 and losses == [h["loss"] for h in full.history][:163]


def test_time_budget_ends_a_shortened_chunk_where_a_hold_ends():
    """The clock of `test_time_budget_prefers_a_compiled_size` (0.305 s left: 20 new steps
    or 30 compiled ones fit) with holds of 8 steps: a compiled 24 from step 0 ends a hold
    and runs; a compiled 28 would stop 4 steps into the next hold, whose rest (to 32) does
    not fit: 16 new steps run instead; the compiled 25 from step 3 ends mid-hold and gives
    way to 13 new steps (3 + 13 = 16); the bisection's 20 becomes 19 from step 5. With
    0.055 s left (no compilation fits) a compiled 3 from step 5 ends a hold and runs, a
    compiled 5 does not: 0."""
    b = FakeBudget(1.005, None)
    b.compiled(0, b.now())
    b.ran(0, 10, b.now())
    b.t = 0.7
    assert b.chunk_size(0, 24, {24}, step=0, every=8) == 24
    assert b.chunk_size(0, 28, {28}, step=0, every=8) == 16
    assert b.chunk_size(0, 50, {50, 25}, step=3, every=8) == 13
    assert b.chunk_size(0, 50, {50, 16}, step=0, every=8) == 16
    assert b.chunk_size(0, 50, {50}, step=5, every=8) == 19
    b.t = 0.95
    assert b.chunk_size(0, 50, {50, 3}, step=5, every=8) == 3
    assert b.chunk_size(0, 50, {50, 5}, step=5, every=8) == 0


@pytest.mark.parametrize("every, stop", [(5, 160), (100, 100)])
def test_time_limit_ends_at_the_end_of_a_hold(every, stop, monkeypatch):
    """The budget of `test_time_limit_shortens_the_last_chunk` with the points redrawn
    every 5 steps: its 13 new steps become 10, and the run stops at step 160, where a hold
    ends, not 3 steps into the next (then 0.035 s are left: less than a chunk or a
    compilation). Held for 100 steps, longer than a chunk of 50: at step 100 the chunk
    fits but the rest of its hold (to 200) does not, and the run stops there. Both on the
    unlimited run's trajectory."""
    import dataclasses

    monkeypatch.setattr(loop, "TimeBudget", FakeBudget)
    run = build_run(_cfg("sampler.resample=true", f"sampler.resample_every={every}"))
    full = pinnkit.fit(run, progress=False)
    res = pinnkit.fit(dataclasses.replace(run, max_cpu_time=1.835), progress=False)
    assert res.result is pinnkit.RESULTS.max_time and res.step == stop
    losses = [h["loss"] for h in res.history]
    assert len(losses) == stop and losses == [h["loss"] for h in full.history][:stop]


def test_time_budget_prefers_a_compiled_size():
    """10 ms a step, 100 ms a compilation, 0.305 s left: 20 new steps fit after a
    compilation, 30 of an already compiled chunk without one; none once spent."""
    b = FakeBudget(1.005, None)
    b.compiled(0, b.now())
    b.ran(0, 10, b.now())
    b.t = 0.7
    assert b.chunk_size(0, 30, {30}) == 30
    assert b.chunk_size(0, 50, {50, 10}) == 20
    assert b.chunk_size(0, 50, {50, 25}) == 25
    assert b.chunk_size(1, 50, {}) == 50  # an unmeasured phase runs whole
    b.t = 1.01
    assert b.chunk_size(0, 50, {50}) == 0


def test_extra_metrics_from_the_config(tmp_path):
    """``eval.extra_metrics``: a function of the model in a file beside the config, logged
    in the evaluations and summary.json as the problem's own metrics are, and watched by
    early stopping."""
    (tmp_path / "centre.py").write_text(
        "import numpy as np\n\n\ndef centre(predict):\n"
        "    return {'u_centre': float(predict(np.array([[0.5, 0.5]]))[0, 0])}\n")
    (tmp_path / "run.yaml").write_text(
        f"base: {TINY}\ntrain: {{steps: 100, chunk: 50, eval_every: 50,\n"
        "        early_stopping: {metric: metrics.u_centre, mode: max}}\n"
        "eval: {extra_metrics: ['centre.py:centre']}\ncheckpoint: {every: 0}\n")
    out = tmp_path / "run"
    summary = train_to_dir(load_config(tmp_path / "run.yaml"), out, progress=False, plots=False)
    value = float(pinnkit.load_run(out).predict([[0.5, 0.5]])[0, 0])
    assert summary["metrics"]["u_centre"] == pytest.approx(value, rel=1e-6)
    recs = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs if "u_centre" in r.get("eval", {}).get("metrics", {})] == [50, 100]
    bad = load_config(tmp_path / "run.yaml", ["eval.extra_metrics=['centre.py:center']"])
    with pytest.raises(ConfigError, match=r"eval\.extra_metrics\.0"):
        train_to_dir(bad, tmp_path / "other", progress=False, plots=False)
