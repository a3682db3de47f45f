"""The second-order training phases (`pinnkit.train.phases`): ``ssbfgs`` / ``ssbroyden``
and the ``natural_gradient`` solvers.

- A self-scaled phase after Adam lowers tiny P1's loss by orders of magnitude, logs its
  step size, curvature $y^\\top s$ (> 0: the Wolfe curvature condition) and scaling
  factor, and a run interrupted in the middle of the phase resumes bit-identically (the
  dense inverse Hessian and the line search's state come from the checkpoint).
- A network whose dense matrix does not fit exits 2 through the real CLI with the
  parameter count, the memory needed and the suggestion (lbfgs), both where the phase's
  own limit refuses it and where the memory plan does.
- Through the phase, the point-space (Woodbury) and parameter-space natural gradients
  take the same step to 1e-10 (relative 2-norm) in float64, with fewer rows than parameters and with
  more; ``auto`` picks the one the shapes call for; SPRING momentum changes the step.
- ``refresh`` (the lazy Gramian): the second step solves with the first step's damped
  Gramian and its own gradient, and a run interrupted between refreshes resumes
  bit-identically (the factor is in the checkpoint).
"""

import json
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from pinnkit.errors import ConfigError
from pinnkit.parallel.mesh import make_mesh
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config
from pinnkit.train import RESULTS, fit
from pinnkit.train import checkpoint as ckpt
from pinnkit.train.loss import make_loss
from pinnkit.train.step import point_arrays, split_model

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny" / "poisson2d.yaml"


def _over(kind: str, seed: int) -> list[str]:
    return [f"train.seed={seed}", "numerics.x64=true", "network.width=8", "sampler.batch.pde=128",
            "train.steps=40", "train.chunk=10", "train.log_every=1", "checkpoint.every=10",
            "optim.phases.0={kind: adam, lr: 1.0e-2, steps: 10}", f"optim.phases.1={{kind: {kind}}}"]


def _trained(kind, out, trained):
    """Adam 10 steps, then 30 steps of ``kind`` (float64, chunks of 10); the run and the
    phase's records, checked."""
    over = _over(kind, trained.seed)
    full = fit(build_run(load_config(TINY, over), mesh=make_mesh(1)), out_dir=out, progress=False)
    assert full.result is RESULTS.successful and full.step == 40
    qn = [h for h in full.history if h["phase"] == 1]
    assert len(qn) == 30
    # Dense quasi-Newton from the Adam point: the loss falls > 100x in 30 steps here
    # (the loss after its first step to after its 30th: 2.9e-4 to 5.4e-4 over seeds 0-2,
    # float64, default ISA: margin >= 18x)
    trained.check(f"{kind}: loss 39 / loss 10", qn[-1]["loss"] / qn[0]["loss"], "<", 1e-2)
    # every accepted strong-Wolfe step has y.s > 0; the factor tau is in (0, 1] (SSBFGS
    # caps it at 1; SSBroyden multiplies that by sigma^(-1/(P-1)) <= 1 or takes sigma)
    assert all(h["step_size"] > 0 and h["curvature"] > 0 for h in qn), qn[:3]
    assert all(0 < h["scaling"] <= 1 + 1e-12 for h in qn)
    assert all(1 <= h["trials"] <= 16 for h in qn)  # max_linesearch_steps: 16
    assert all("curvature" not in h for h in full.history if h["phase"] == 0)
    return full


@pytest.mark.trained
def test_ssbfgs_phase_trains_and_logs(x64, tmp_path, trained):
    _trained("ssbfgs", tmp_path / "a", trained)


@pytest.mark.trained
def test_ssbroyden_phase_resumes_mid_phase_bit_identically(x64, tmp_path, trained):
    """Interrupted after two chunks (10 steps into the ssbroyden phase) and resumed, the
    run's per-step losses and final checkpoint equal the uninterrupted run's bit for
    bit (the two kinds share the state layout and the step: one of them suffices)."""
    full = _trained("ssbroyden", tmp_path / "a", trained)
    _resumes_bit_identically(_over("ssbroyden", trained.seed), full, tmp_path)


def _resumes_bit_identically(over, full, tmp_path) -> None:
    """The run of ``over`` interrupted after two chunks (step 20, 10 steps into the
    second phase) and resumed in ``tmp_path/b``: every step's loss and the final
    checkpoint equal those of ``full`` (the uninterrupted run in ``tmp_path/a``) bitwise."""
    calls = iter(range(10_000))
    part = fit(build_run(load_config(TINY, over), mesh=make_mesh(1)), out_dir=tmp_path / "b",
               progress=False, should_stop=lambda: next(calls) >= 2)
    assert part.result is RESULTS.interrupted and part.step == 20  # 10 steps into the phase
    rest = fit(build_run(load_config(TINY, over), mesh=make_mesh(1)), out_dir=tmp_path / "b",
               resume=True, progress=False)
    assert rest.step == 40
    a = {h["step"]: h["loss"] for h in full.history}
    b = {h["step"]: h["loss"] for h in part.history + rest.history}
    assert sorted(b) == sorted(a) and all(a[s] == b[s] for s in a)  # bitwise
    ha = ckpt.latest_valid(tmp_path / "a" / "checkpoints")[1]
    hb = ckpt.latest_valid(tmp_path / "b" / "checkpoints")[1]
    assert ha["payload_sha256"] == hb["payload_sha256"]


def test_self_scaled_options_are_validated():
    for bad, key in [("max_linesearch_steps: 0", "max_linesearch_steps"), ("curv_rtol: 1.5", "curv_rtol"),
                     ("max_memory_gib: 0", "max_memory_gib"), ("tol: -1", "tol")]:
        with pytest.raises(ConfigError, match=f"optim.phases.0.{key}"):
            load_config(TINY, [f"optim.phases.0={{kind: ssbroyden, {bad}}}"])


def test_a_self_scaled_phase_in_float32_warns_once(monkeypatch):
    import warnings

    from pinnkit.train.phases import PHASES, quasi_newton

    monkeypatch.setattr(quasi_newton, "_warned_x64", False)
    assert not jax.config.jax_enable_x64
    build = {k: (PHASES[k], PHASES[k].Config()) for k in ("ssbfgs", "ssbroyden")}
    with pytest.warns(UserWarning, match="numerics.x64: true") as got:
        build["ssbfgs"][0].from_config(build["ssbfgs"][1], 0, 10, {})
    assert len(got) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        build["ssbroyden"][0].from_config(build["ssbroyden"][1], 10, 10, {})


def _cli(*args):
    cmd = [sys.executable, "-m", "pinnkit.cli", "train", str(TINY), "--devices", "1", "--quiet",
           "--no-plots", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_a_dense_matrix_that_does_not_fit_exits_2_through_the_cli(tmp_path):
    """Tiny P1 (width 16, depth 2: 337 parameters; three 337 x 337 float64 matrices are
    2.6 MiB) under a 1 MiB cap: the phase refuses with the count, the memory and lbfgs.
    Width 4000 (16 million parameters, a 2 PB matrix) is refused by the memory plan
    before anything is built, naming the count and lbfgs too. No traceback either way."""
    r = _cli("--out", str(tmp_path / "a"), "--set", "numerics.x64=true",
             "--set", "optim.phases.0={kind: ssbfgs, max_memory_gib: 0.0009765625}")
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    msg = " ".join(r.stderr.split())
    assert "337 trainable parameters" in msg and "2.6 MiB" in msg and "kind: lbfgs" in msg, msg

    r = _cli("--out", str(tmp_path / "b"), "--set", "network.width=4000",
             "--set", "optim.phases.0={kind: ssbroyden}")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    msg = " ".join(r.stderr.split())
    assert "16,020,001 parameters" in msg and "here ssbroyden" in msg and "lbfgs" in msg, msg


# ------------------------------------------------------------------ natural gradient


def _ng_step(solver: str, batch: int, *extra: str, grid: int = 6):
    """Parameters after one natural-gradient step (solver ``solver``) from the same
    initial network on tiny P1 (width 8: 97 parameters, ``batch`` interior rows)."""
    phase = (f"{{kind: natural_gradient, solver: {solver}, damping: 1.0e-3, step_grid: {grid}"
             f"{''.join(extra)}}}")
    cfg = load_config(TINY, ["numerics.x64=true", "network.width=8", f"sampler.batch.pde={batch}",
                             "sampler.method=sobol", "train.steps=2", f"optim.phases.0={phase}"])
    run = build_run(cfg, mesh=make_mesh(1))
    params, static = split_model(run)
    loss, (ph,) = make_loss(run, static), run.phases
    arrays, key = point_arrays(run), jax.random.key(0)
    step = eqx.filter_jit(lambda p, s, c: ph.step(loss, p, s, key, arrays, c))  # eager: minutes
    new, state, m = step(params, ph.init(params), loss.context({}, 0))
    new2, _, _ = step(new, state, loss.context({}, 1))
    return ph, ravel_pytree(params)[0], ravel_pytree(new)[0], ravel_pytree(new2)[0], m


def _rel(a, b) -> float:
    """Norm-wise relative difference (a direction's components span decades, so an
    elementwise rtol would judge its smallest ones by the rounding of the largest)."""
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("batch", [32, 256])  # rows < P = 97 and rows > P
def test_woodbury_and_gramian_take_the_same_step_through_the_phase(x64, batch):
    """One step (and a second one) of ``woodbury`` equals ``gramian``'s to rtol 1e-10.
    Tolerance: both are Cholesky solves of a matrix with the same nonzero spectrum plus
    lambda = 1e-3 tr(G)/P, so its condition number is at most ~P/1e-3 = 1e5 and each
    solve is accurate to ~1e5 x 2.2e-16 ~ 2e-11 relative; the grid's step sizes are
    exact powers of 2 and the same one wins (its losses differ by far more)."""
    _, p0, gram1, gram2, mg = _ng_step("gramian", batch)
    _, q0, wood1, wood2, mw = _ng_step("woodbury", batch)
    np.testing.assert_array_equal(p0, q0)
    assert float(mg["step_size"]) == float(mw["step_size"])
    assert _rel(wood1 - q0, gram1 - p0) < 1e-10
    assert _rel(wood2 - wood1, gram2 - gram1) < 1e-8  # from points 1e-10 apart
    assert float(mg["loss"]) == pytest.approx(float(mw["loss"]), rel=1e-14)


def test_auto_momentum_and_the_default_path(x64):
    """``auto`` runs the point-space solve below P rows (bitwise the ``woodbury`` step)
    and the parameter-space one above (the plain method's step to rtol 1e-10, reasoned
    as above); the default config stays the plain method (`optim.natgrad`'s state, no
    residual rows); SPRING momentum leaves the first step (no previous direction) as it
    is, to rounding, and changes the second."""
    ph = _ng_step("gramian", 32)[0]
    assert not ph.rows and type(ph.init(jax.numpy.zeros(3))).__name__ == "NaturalGradientState"
    auto, wood = _ng_step("auto", 32), _ng_step("woodbury", 32)
    assert auto[0].rows
    np.testing.assert_array_equal(auto[2], wood[2])
    auto, gram = _ng_step("auto", 256), _ng_step("gramian", 256)
    assert _rel(auto[2] - auto[1], gram[2] - gram[1]) < 1e-10
    mom = _ng_step("woodbury", 32, ", momentum: 0.5")
    assert _rel(mom[2] - mom[1], wood[2] - wood[1]) < 1e-12  # previous = 0: the same solve
    second, second_mom = wood[3] - wood[2], mom[3] - mom[2]
    assert np.max(np.abs(second - second_mom)) > 1e-3 * np.max(np.abs(second))


def test_a_step_size_schedule_scales_the_second_step(x64):
    """``step_size: 0.5`` with ``schedule: exponential_decay`` (rate 0.5 per step): the
    first step is the fixed step's (eta_0 = 0.5), the second one, from the same point,
    the same direction at eta_1 = 0.25, so half the fixed step's second update. The step
    sizes are powers of 2 (exact also in the float32 that optax's exponential_decay
    returns), so the only differences are the solves' rounding in two compilations:
    rtol 1e-10, reasoned as in the woodbury-vs-gramian test above."""
    fixed = _ng_step("woodbury", 32, ", step_size: 0.5")
    sched = _ng_step("woodbury", 32, ", step_size: 0.5, "
                     "schedule: {kind: exponential_decay, decay_steps: 1, rate: 0.5}")
    assert float(sched[4]["step_size"]) == 0.5
    assert _rel(sched[2] - sched[1], fixed[2] - fixed[1]) < 1e-10
    assert _rel(sched[3] - sched[2], 0.5 * (fixed[3] - fixed[2])) < 1e-8  # from points 1e-10 apart


def test_natural_gradient_options_are_validated():
    for bad, key in [("momentum: 1.0", "momentum"), ("step_size: 0", "step_size"),
                     ("solver: woodbury, safeguard: true", "safeguard"), ("solver: cg", "solver"),
                     ("schedule: {kind: cosine}", "schedule.kind"), ("refresh: 0", "refresh"),
                     ("refresh: 5, safeguard: true", "refresh"), ("refresh: 5, momentum: 0.5", "refresh"),
                     ("step_size: 0.2, schedule: {kind: exponential_decay, rate: 0}", "schedule.rate")]:
        with pytest.raises(ConfigError, match=f"optim.phases.0.{key}"):
            load_config(TINY, [f"optim.phases.0={{kind: natural_gradient, {bad}}}"])


def test_memory_plan_counts_the_solver():
    from pinnkit.train.phases.natural_gradient import NaturalGradientConfig as C

    p, rows = 1000, 100
    assert C().state_words(p, rows) == p * p + rows * p  # unchanged for the default
    assert C(solver="woodbury").state_words(p, rows) == rows * rows + rows * p + p
    assert C(solver="auto").state_words(p, rows) == C(solver="woodbury").state_words(p, rows)
    assert C(solver="auto").state_words(p, 5000) == p * p + 5000 * p + p
    assert json.dumps(C(solver="auto").state_words(p, rows))  # a plain float
    assert C(refresh=20).state_words(p, rows) == 2 * p * p + rows * p  # the kept factor


def test_a_lazy_gramian_phase_steps_with_its_old_factor(x64):
    """``refresh: 3`` through the phase on tiny P1 (97 parameters, 256 rows): the first
    step is the plain method's (the same solve; rtol 1e-12 for two compilations of it),
    the second -eta (G_0 + lambda_0 I)^{-1} grad L(p_1), with G_0 from `Loss.gauss_newton`
    at the first point, against numpy (lambda = 1e-3 tr(G)/P bounds the condition number
    by ~1e5: rtol 1e-9)."""
    ph, p0, lazy1, lazy2, m = _ng_step("gramian", 256, ", refresh: 3", grid=20)
    _, q0, plain1, _, _ = _ng_step("gramian", 256, grid=20)
    np.testing.assert_array_equal(p0, q0)
    assert ph.refresh == 3 and _rel(lazy1 - p0, plain1 - q0) < 1e-12
    cfg = load_config(TINY, ["numerics.x64=true", "network.width=8", "sampler.batch.pde=256",
                             "sampler.method=sobol", "train.steps=2"])
    run = build_run(cfg, mesh=make_mesh(1))
    params, static = split_model(run)
    loss, arrays, key = make_loss(run, static), point_arrays(run), jax.random.key(0)
    unravel = ravel_pytree(params)[1]
    _, _, g0, _ = loss.gauss_newton(unravel(p0), key, arrays)
    _, _, _, grad1 = loss.gauss_newton(unravel(lazy1), key, arrays)
    g0, grad1 = np.asarray(g0), np.asarray(ravel_pytree(grad1)[0])
    d = -np.linalg.solve(g0 + 1e-3 * np.trace(g0) / g0.shape[0] * np.eye(g0.shape[0]), grad1)
    step = lazy2 - lazy1
    eta = 2.0 ** round(np.log2(np.dot(step, d) / np.dot(d, d)))  # the grid's step, a power of 2
    assert _rel(step, eta * d) < 1e-9


def test_a_lazy_gramian_phase_resumes_bit_identically(x64, tmp_path):
    """Adam 10 steps, then 30 of ``natural_gradient`` with ``refresh: 4`` (the factor is
    optimiser state): interrupted 10 steps into the phase and resumed, every loss and
    the final checkpoint equal the uninterrupted run's bit for bit."""
    over = _over("natural_gradient, damping: 1.0e-3, step_grid: 8, refresh: 4", 0)
    full = fit(build_run(load_config(TINY, over), mesh=make_mesh(1)), out_dir=tmp_path / "a", progress=False)
    assert full.result is RESULTS.successful and full.step == 40
    ng = [h for h in full.history if h["phase"] == 1]
    assert ng[-1]["loss"] < 0.1 * ng[0]["loss"]  # it trains (a real trajectory to compare)
    _resumes_bit_identically(over, full, tmp_path)


@pytest.mark.parametrize(("over", "fixed"), [
    ([], True),                                            # one fixed set of points
    (["sampler.resample=true"], False),                    # a fresh draw every step
    (["sampler.adaptive={kind: rad, every: 5, pool: 2, k: 1.0, c: 1.0, terms: [pde], until_step: 10}"],
     True),                                                # RAD stopped before the phase
    (["sampler.adaptive={kind: rad, every: 5, pool: 2, k: 1.0, c: 1.0, terms: [pde], until_step: 30}"],
     False),                                               # RAD redraws during the phase
])
def test_a_self_scaled_phase_reuses_its_gradient_only_on_a_fixed_objective(x64, over, fixed):
    """`Loss.fixed` (the quasi-Newton phase then takes the gradient at the parameters from
    its last line search): fixed points, or adaptive sets that are no longer redrawn in the
    phase (`held`); not with fresh points or RAD redraws inside the phase."""
    from pinnkit.train.step import held, init_extra

    run = build_run(load_config(TINY, _over("ssbroyden", 0) + over), mesh=make_mesh(1))
    loss = make_loss(run, split_model(run)[1])
    ctx = loss.context(init_extra(run), 10)
    assert held(loss, run, run.phases[1]).fixed(ctx) is fixed
    if run.adaptive is not None:  # the Adam phase before redraws its sets
        assert not held(loss, run, run.phases[0]).fixed(ctx)
