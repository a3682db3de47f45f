"""How a run ends besides completing: a diverging loss (an outcome, exit 1, the last good
checkpoint kept), a phase's stopping tolerance (exact to the step), train.max_time
(a checkpoint and a clean resume), and the progress lines for compilation and resume."""

import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from pinnkit.parallel.mesh import make_mesh
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config
from pinnkit.train import RESULTS, TrainingError, fit
from pinnkit.train import checkpoint as ckpt

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny" / "poisson2d.yaml"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "pinnkit.cli", "train", str(TINY), *args],
                          capture_output=True, text=True, timeout=600)


def test_divergence_is_an_outcome_with_the_last_good_checkpoint(tmp_path):
    """Adam with lr = 1e6 on tiny/poisson2d: the loss grows by far more than 1e6 at the
    first update (tanh saturates, the output layer's weights move by ~1e6: a finite loss
    ~1e12 against ~1), so the run stops as `diverged` at step 1, exits 1, and keeps and
    checkpoints the parameters before that chunk (step 0, finite)."""
    out = tmp_path / "run"
    r = _cli("--out", str(out), "--set", "optim.phases.0.lr=1e6", "--quiet", "--no-plots")
    assert r.returncode == 1, r.stderr
    assert "grew by more than train.divergence_factor" in r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["outcome"] == "diverged" and s["steps"] == 0, s
    path, head = ckpt.latest_valid(out / "checkpoints")
    assert head["step"] == 0
    recs = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [0] and np.isfinite(recs[0]["loss"])


def test_a_jump_at_a_redraw_is_named_as_overfitting_the_held_points(tmp_path):
    """16 points held for 10 steps and a natural gradient with damping 1e-10: each hold's
    337-parameter least-squares problem has 16 rows, so the first step solves it (held loss
    ~1e-20) and the next draw's loss is far above it. The run stops as `diverged` at step
    10, the first step on fresh points, and the message says so instead of advising a
    lower learning rate; a jump inside a hold keeps the plain advice (test above)."""
    out = tmp_path / "run"
    r = _cli("--out", str(out), "--quiet", "--no-plots", "--set", "sampler.batch.pde=16",
             "--set", "sampler.resample=true", "--set", "sampler.resample_every=10",
             "--set", "optim.phases=[{kind: natural_gradient, damping: 1.0e-10}]",
             "--set", "train.steps=40", "--set", "train.chunk=10",
             "--set", "train.divergence_factor=100", "--set", "numerics.x64=true")
    assert r.returncode == 1, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["outcome"] == "diverged" and s["steps"] == 10, s  # the last hold's end kept
    msg = " ".join(r.stderr.split())
    assert "step 10, the first step on freshly drawn points (sampler.resample_every: 10)" in msg, msg
    assert "Lower the learning rate" not in msg and "Lower the learning rate" not in s["message"]
    assert "step 10, the first step on freshly drawn points" in s["message"]


def test_divergence_raises_and_factor_is_configurable():
    cfg = load_config(TINY, ["optim.phases.0.lr=1e6", "train.steps=20", "train.chunk=10"])
    with pytest.raises(TrainingError, match="divergence_factor"):
        fit(build_run(cfg, mesh=make_mesh(1)), progress=False)
    # A factor above any growth the run shows turns the check off (the run completes:
    # tanh bounds the outputs, so the loss stays finite).
    cfg = load_config(TINY, ["optim.phases.0.lr=1e6", "train.steps=20", "train.chunk=10",
                             "train.divergence_factor=1e30"])
    assert fit(build_run(cfg, mesh=make_mesh(1)), progress=False).result is RESULTS.successful


def _rel_changes(history):
    losses = np.array([h["loss"] for h in history])
    return np.abs(np.diff(losses)) / np.abs(losses[:-1])


def test_lbfgs_tolerance_ends_the_run_at_the_first_step_that_meets_it():
    """L-BFGS with tol = 3e-2 after Adam (on this tiny problem L-BFGS lowers the loss by
    3-15 % a step for a long while): the run ends `converged` before its last step, at the
    first L-BFGS step whose loss changed by <= 3e-2 relative to the previous step (every
    earlier L-BFGS step changed it by more); the step after is not taken."""
    over = ["train.steps=220", "train.chunk=25", "train.log_every=1", "optim.phases.0.steps=20",
            "optim.phases.1={kind: lbfgs, tol: 3.0e-2}"]
    res = fit(build_run(load_config(TINY, over), mesh=make_mesh(1)), progress=False)
    assert res.result is RESULTS.converged and 20 < res.step < 220, res.step
    lb = [h for h in res.history if h["phase"] == 1]
    rel = _rel_changes(lb)
    assert rel[-1] <= 3e-2 and np.all(rel[:-1] > 3e-2), rel
    assert lb[-1]["step"] == res.step - 1  # the step that met it was the last one taken


def test_tolerance_of_an_earlier_phase_starts_the_next_on_schedule():
    """A phase that meets its gradient-norm tolerance (0.5: L-BFGS's gradient norm falls
    from ~5 to ~0.3 in its first 60 steps here) ends; the next phase starts at its own
    first step (the skipped steps are not run)."""
    over = ["train.steps=200", "train.chunk=30", "train.log_every=1", "optim.phases.0.steps=20",
            "optim.phases.1={kind: lbfgs, steps: 150, grad_tol: 0.5}",
            "optim.phases.2={kind: adam, lr: 1.0e-4, steps: 30}"]
    res = fit(build_run(load_config(TINY, over), mesh=make_mesh(1)), progress=False)
    assert res.result is RESULTS.successful and res.step == 200
    lb = [h for h in res.history if h["phase"] == 1]
    assert lb[-1]["grad_norm"] <= 0.5 and all(h["grad_norm"] > 0.5 for h in lb[:-1])
    assert lb[-1]["step"] < 169  # stopped early
    adam = [h["step"] for h in res.history if h["phase"] == 2]
    assert adam[0] == 170 and adam[-1] == 199


def test_max_time_stops_with_a_checkpoint_and_resumes(tmp_path):
    """train.max_time = 1 ms: over before the first chunk; outcome max_time in
    summary.json, exit 0, a checkpoint; --resume without the limit completes the run."""
    out = tmp_path / "run"
    r = _cli("--out", str(out), "--set", "train.max_time=0.001", "--quiet", "--no-plots")
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["outcome"] == "max_time" and s["steps"] < s["total_steps"], s
    assert ckpt.latest_valid(out / "checkpoints") is not None
    r = _cli("--out", str(out), "--resume", "--set", "train.max_time=null", "--no-plots")
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "summary.json").read_text())["outcome"] == "successful"
    assert f"resuming from {out / 'checkpoints' / 'step_00000000.eqx'} at step 0/500" in r.stderr


def test_compiling_line_and_rates_without_compilation(tmp_path):
    """The first chunk of each phase is compiled ahead of time under a ``compiling`` line
    with its duration; the summary's rate times every chunk (none is left out), so the
    tiny run's one-chunk phases still get a rate."""
    out = tmp_path / "run"
    r = _cli("--out", str(out), "--set", "train.steps=100", "--set", "train.chunk=50",
             "--set", "optim.phases.0.steps=50", "--set", "optim.phases.1={kind: lbfgs}", "--no-plots")
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("pinnkit: compiling")]
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith("pinnkit: compiling phase 0 (adam), 50-step chunk ... (")
    assert lines[1].startswith("pinnkit: compiling phase 1 (lbfgs), 50-step chunk ... (")
    s = json.loads((out / "summary.json").read_text())
    assert s["steps_per_s"] is not None and s["steps_per_s"] > 0


def test_stopping_options_are_validated():
    from pinnkit.errors import ConfigError

    for over, key in ((["train.divergence_factor=1"], "train.divergence_factor"),
                      (["train.max_time=-1"], "train.max_time"),
                      (["optim.phases.0={kind: lbfgs, tol: 0}"], "optim.phases.0.tol")):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_config(TINY, over)
    with pytest.raises(ConfigError, match=r"kind 'adam' do not take 'tol' \(lbfgs, natural_gradient"):
        load_config(TINY, ["optim.phases.0.tol=1e-3"])
    assert jax.devices()  # the session's devices are untouched by the checks above
