"""Causal time-slice weights and residual-based adaptive sampling (RAD / RAR)."""

import dataclasses
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from pinnkit.errors import ConfigError
from pinnkit.geometry.domains import Box
from pinnkit.parallel.mesh import make_mesh, replicate
from pinnkit.physics.problem import Problem
from pinnkit.physics.terms import Equation
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config
from pinnkit.train import checkpoint as ckpt
from pinnkit.train.adaptive import Adaptive
from pinnkit.train.loop import RESULTS, fit
from pinnkit.train.loss import make_loss
from pinnkit.train.step import init_extra, make_adapt, point_arrays, redraw_between_chunks, split_model
from pinnkit.train.weighting import Causal

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny"


def _causal_on(n_dev, r2, t, causal, tol=1.0):
    mesh = make_mesh(n_dev)
    f = jax.shard_map(lambda a, b: causal.reduce(a, b, jnp.asarray(tol)), mesh=mesh,
                      in_specs=(P("data"), P("data")), out_specs=P())
    return jax.jit(f)(r2, t)


def test_causal_weights_formula_monotone_and_device_invariant():
    """Slice losses L = (1e-4, 1e-4, 1e-3, 1, 2, 4, 8, 16) at tol 2: w_k = exp(-2 Σ_{l<k} L_l),
    ≈ 1 while the earlier slices are solved, then falling; the same on 1 and 4 devices."""
    causal = Causal(("pde",), 0, 0.0, 1.0, chunks=8, tol=2.0)
    per = np.array([1e-4, 1e-4, 1e-3, 1.0, 2.0, 4.0, 8.0, 16.0], np.float32)
    t = (np.arange(8 * 32) % 8 + 0.5).astype(np.float32) / 8  # 32 points per slice
    r2 = per[(t * 8).astype(int)]
    loss1, w1 = _causal_on(1, r2, t, causal, tol=2.0)
    loss4, w4 = _causal_on(4, r2, t, causal, tol=2.0)
    want = np.exp(-2.0 * (np.cumsum(per) - per))
    np.testing.assert_allclose(w1, want, rtol=1e-6)
    np.testing.assert_allclose(w4, w1, rtol=1e-6)
    np.testing.assert_allclose(loss1, np.mean(want * per), rtol=1e-6)
    assert np.all(np.diff(np.asarray(w1)) <= 0)
    assert np.asarray(w1)[:3].min() > 0.999 and np.asarray(w1)[-1] < 1e-6
    # stop-gradient: d loss / d r2 at a point of slice k is w_k / (chunks · points in slice)
    g = jax.grad(lambda a: _causal_on(1, a, t, causal, tol=2.0)[0])(jnp.asarray(r2))
    k = (t * 8).astype(int)
    np.testing.assert_allclose(g, want[k] / (8 * 32), rtol=1e-5)


def test_causal_tolerance_schedule():
    c = Causal(("pde",), 0, 0.0, 1.0, chunks=4, tol=0.1, final_tol=10.0)
    assert np.isclose(c.tol_at(0, 101), 0.1) and np.isclose(c.tol_at(100, 101), 10.0)
    assert np.isclose(c.tol_at(50, 101), 1.0, rtol=1e-5)


def test_burgers_causal_rad_gradnorm_logged_and_resume_exact(tmp_path):
    """Tiny Burgers with causal weights, grad_norm and RAD: causal weights are logged,
    monotone in time, and the last slice's weight rises as the earlier slices are
    learnt; interrupted + resumed equals uninterrupted bit for bit (RAD points and
    weights are in the checkpoint)."""
    over = ["train.steps=200", "train.chunk=50", "checkpoint.every=50",
            "weighting.kind=grad_norm", "weighting.update_every=25",
            "sampler.adaptive={kind: rad, every: 50, pool: 4}"]
    cfg = load_config(TINY / "burgers.yaml", over)
    a = fit(build_run(cfg, mesh=make_mesh(1)), out_dir=tmp_path / "a", progress=False)
    ws = [np.array(h["causal"]["pde"]) for h in a.history]
    assert all(np.all(np.diff(w) <= 1e-7) for w in ws)
    assert ws[-1][-1] > ws[0][-1] and ws[0][0] == 1.0
    calls = iter(range(100))
    part = fit(build_run(cfg, mesh=make_mesh(1)), out_dir=tmp_path / "b", progress=False,
               should_stop=lambda: next(calls) >= 3)
    assert part.result is RESULTS.interrupted and part.step == 150
    fit(build_run(cfg, mesh=make_mesh(1)), out_dir=tmp_path / "b", resume=True, progress=False)
    ha = ckpt.latest_valid(tmp_path / "a" / "checkpoints")[1]
    hb = ckpt.latest_valid(tmp_path / "b" / "checkpoints")[1]
    assert ha["payload_sha256"] == hb["payload_sha256"]
    assert (tmp_path / "a" / "metrics.jsonl").read_text() == (tmp_path / "b" / "metrics.jsonl").read_text()


def _sharp_front_run(kind, n_dev):
    """A 2-D problem whose residual for a network near 0 is a front of width 0.03 at
    x = 0.5: r = u − exp(−((x − 0.5)/0.03)²)."""
    run = build_run(load_config(TINY / "poisson2d.yaml"), mesh=make_mesh(n_dev))
    front = Equation(lambda f, c: f["u"] * 1e-3 - jnp.exp(-(((f.coord("x") - 0.5) / 0.03) ** 2)))
    problem = Problem(Box((0.0, 0.0), (1.0, 1.0)), ("u",), {"pde": front}, name="front")
    ad = Adaptive(kind, {"pde": 256}, every=10, pool=16, k=1.0, c=1.0, rar_fraction=0.25)
    return dataclasses.replace(run, problem=problem, adaptive=ad)


def _adapt_once(run):
    params, static = split_model(run)
    params = replicate(params, run.mesh)
    loss = make_loss(run, static)
    adapt = eqx.filter_jit(make_adapt(run, loss))
    extra = init_extra(run)
    key = jax.random.key(7)
    same = adapt(params, key, point_arrays(run), extra, jnp.asarray(0))
    new = adapt(params, key, point_arrays(run), extra, jnp.asarray(10))
    return tuple(np.asarray(e["points"]["pde"]) for e in (extra, same, new))


def test_rad_concentrates_points_at_the_front():
    """RAD with k = 1, c = 1: the density is ∝ |r|/mean|r| + 1; the band |x − 0.5| < 0.1
    (20% of the area) holds ≈ (0.053/0.106 + 0.2)/2 ≈ 0.6 of the mass (vs 0.2 uniform).
    Not at step 0; the same set on 4 devices."""
    old, same, new = _adapt_once(_sharp_front_run("rad", 1))
    np.testing.assert_array_equal(old, same)
    band = lambda p: np.mean(np.abs(p[:, 0] - 0.5) < 0.1)  # noqa: E731
    assert band(old) < 0.3 and band(new) > 0.5, (band(old), band(new))
    assert len(np.unique(new, axis=0)) == len(new)  # distinct candidates
    _, _, new4 = _adapt_once(_sharp_front_run("rad", 4))
    assert np.mean(np.all(np.isclose(new4, new), axis=1)) > 0.98


def test_rar_replaces_oldest_quarter_by_worst_candidates():
    old, _, new = _adapt_once(_sharp_front_run("rar", 1))
    np.testing.assert_array_equal(new[:192], old[64:])
    assert np.all(np.abs(new[192:, 0] - 0.5) < 0.03)  # the 64 largest |r| of 4096 candidates


def test_until_step_freezes_the_set_and_is_validated():
    """``until_step`` = 20, every 10: redrawn at step 10 only (not 0, 20, 30); through the
    scanned step the set is unchanged at step 20 and moves at 10; until_step = 0 is a
    one-paragraph ConfigError naming the key."""
    ad = Adaptive("rad", {"pde": 256}, every=10, until_step=20)
    assert [bool(ad.due(jnp.asarray(s))) for s in (0, 10, 20, 30)] == [False, True, False, False]
    run = _sharp_front_run("rad", 1)
    run = dataclasses.replace(run, adaptive=dataclasses.replace(run.adaptive, until_step=20))
    params, static = split_model(run)
    params = replicate(params, run.mesh)
    adapt = eqx.filter_jit(make_adapt(run, make_loss(run, static)))
    extra, key = init_extra(run), jax.random.key(7)
    old = np.asarray(extra["points"]["pde"])
    at = {s: np.asarray(adapt(params, key, point_arrays(run), extra, jnp.asarray(s))["points"]["pde"])
          for s in (10, 20)}
    np.testing.assert_array_equal(at[20], old)
    assert not np.array_equal(at[10], old)
    with pytest.raises(ConfigError, match=r"sampler\.adaptive\.until_step"):
        load_config(TINY / "burgers.yaml", ["sampler.adaptive={kind: rad, until_step: 0}"])


def test_rad_redrawn_between_chunks_equals_the_redraw_inside_the_chunk(tmp_path):
    """RAD every 50 steps with 50-step chunks: the redraws fall on chunk starts, so the
    host loop runs them between chunks (`make_redraw`) and the chunks' program leaves out
    the candidates' residuals; with 30-step chunks they fall inside and stay in the
    program. The two loss histories are equal to the bit (and the redraw at step 50 moved
    the points: from step 50 on they differ from a run without it)."""
    def losses(chunk, adaptive="{kind: rad, every: 50, pool: 4}"):
        over = ["train.steps=100", f"train.chunk={chunk}", "train.log_every=1",
                "checkpoint.every=0", f"sampler.adaptive={adaptive}"]
        run = build_run(load_config(TINY / "burgers.yaml", over), mesh=make_mesh(1))
        between = redraw_between_chunks(run, run.phases[0], 0, run.chunk)
        res = fit(run, out_dir=tmp_path / f"c{chunk}", progress=False)
        return between, np.array([h["loss"] for h in res.history if "loss" in h])

    (between, a), (inside, b) = losses(50), losses(30)
    assert between and not inside and len(a) == len(b) == 100
    np.testing.assert_array_equal(a, b)
    _, never = losses(50, "{kind: rad, every: 50, pool: 4, until_step: 50}")
    np.testing.assert_array_equal(never[:50], a[:50])  # step 50's loss is on the new points
    assert never[50] != a[50]


def test_redraw_between_chunks_only_where_every_redraw_starts_a_chunk():
    """The rule `fit` uses: every due step (from the step the run enters the phase) on a
    chunk start, and no adaptive-weight update at a due step (within a step the weights are
    updated before the redraw, from the old points)."""
    run = _sharp_front_run("rad", 1)  # every 10
    ph = run.phases[0]
    assert redraw_between_chunks(run, ph, 0, 10) and redraw_between_chunks(run, ph, 0, 5)
    assert not redraw_between_chunks(run, ph, 0, 4)  # step 10 inside the chunk [8, 12)
    assert not redraw_between_chunks(run, ph, 3, 10)  # resumed at step 3: 10 inside [3, 13)
    assert redraw_between_chunks(dataclasses.replace(run, adaptive=None), ph, 0, 4) is False
    late = dataclasses.replace(run, adaptive=dataclasses.replace(run.adaptive, until_step=11))
    assert redraw_between_chunks(late, ph, 0, 5) and not redraw_between_chunks(late, ph, 0, 4)
    assert redraw_between_chunks(dataclasses.replace(late, adaptive=dataclasses.replace(
        late.adaptive, until_step=10)), ph, 0, 4)  # no redraw at all: nothing inside a chunk
    cfg = load_config(TINY / "burgers.yaml", ["weighting.kind=grad_norm", "weighting.update_every=25",
                                              "sampler.adaptive={kind: rad, every: 50}"])
    weighted = build_run(cfg, mesh=make_mesh(1))
    assert not redraw_between_chunks(weighted, weighted.phases[0], 0, 50)  # both at step 50
    cfg = load_config(TINY / "burgers.yaml", ["weighting.kind=grad_norm", "weighting.update_every=30",
                                              "sampler.adaptive={kind: rad, every: 50}",
                                              "train.steps=140"])
    weighted = build_run(cfg, mesh=make_mesh(1))  # redraws at 50, 100; weights at 0, 30, 60, 90, 120
    assert redraw_between_chunks(weighted, weighted.phases[0], 0, 50)


@pytest.mark.parametrize("rows", [False, True])
def test_natural_gradient_solves_on_the_adaptive_points(rows):
    """A natural-gradient phase's Gauss-Newton pass (the Gramian's, or the Woodbury solve's
    weighted rows) sees the RAD set, not the sampler's points: its loss and gradient equal
    the loss's own (`Loss.value_and_grad` with the adaptive set) to float32 rounding, and
    differ from the sampler's points' (the front's residual is ~10x larger on the RAD set)."""
    from jax.flatten_util import ravel_pytree

    run = _sharp_front_run("rad", 1)
    params, static = split_model(run)
    params = replicate(params, run.mesh)
    loss = make_loss(run, static)
    key, arrays = jax.random.key(7), point_arrays(run)
    extra = eqx.filter_jit(make_adapt(run, loss))(params, key, arrays, init_extra(run), jnp.asarray(10))
    ctx = loss.context(extra, 10)
    (value, _), grads = eqx.filter_jit(loss.value_and_grad)(params, key, arrays, ctx)

    def gn(points):
        if rows:
            total, _, jac, r = eqx.filter_jit(loss.residual_rows)(params, key, arrays, points)
            return total, jac.T @ r
        total, _, _, g = eqx.filter_jit(loss.gauss_newton)(params, key, arrays, points)
        return total, ravel_pytree(g)[0]

    total, g = gn(extra["points"])
    flat = ravel_pytree(grads)[0]
    np.testing.assert_allclose(float(total), float(value), rtol=1e-5)
    scale = float(jnp.abs(flat).max())
    np.testing.assert_allclose(np.asarray(g), np.asarray(flat), rtol=1e-4, atol=1e-6 * scale)
    sampler_total, _ = gn({})
    assert float(value) > 3 * float(sampler_total), (float(value), float(sampler_total))


def test_flow_natural_gradient_on_rad_points_resumes_exactly(tmp_path, x64):
    """The flows' recipe with RAD: Adam then the natural gradient on a tiny channel flow
    (float64), RAD every 10 steps with 10-step chunks (redrawn between chunks, also inside
    the natural-gradient phase): the loss falls through the phase, and a run interrupted
    after 3 chunks and resumed equals the uninterrupted one to the bit (the RAD set and
    the phase's state are in the checkpoint)."""
    over = ["numerics.x64=true", "train.steps=50", "train.chunk=10", "train.log_every=10",
            "checkpoint.every=10", "sampler.adaptive={kind: rad, every: 10, pool: 4}",
            "problem.params.fem_reference=false",
            "optim.phases=[{kind: adam, steps: 20, lr: 1.0e-2}, {kind: natural_gradient, damping: 1.0e-3}]"]
    cfg = load_config(TINY / "flow_channel.yaml", over)
    a = fit(build_run(cfg, mesh=make_mesh(1)), out_dir=tmp_path / "a", progress=False)
    loss = [h["loss"] for h in a.history if "loss" in h]
    assert np.isfinite(loss).all() and loss[-1] < 0.1 * loss[2], loss  # step 20: the phase's start
    calls = iter(range(100))
    part = fit(build_run(cfg, mesh=make_mesh(1)), out_dir=tmp_path / "b", progress=False,
               should_stop=lambda: next(calls) >= 3)
    assert part.result is RESULTS.interrupted and part.step == 30
    fit(build_run(cfg, mesh=make_mesh(1)), out_dir=tmp_path / "b", resume=True, progress=False)
    assert (tmp_path / "a" / "metrics.jsonl").read_text() == (tmp_path / "b" / "metrics.jsonl").read_text()
