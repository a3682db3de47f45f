"""Loss balancing (grad_norm, NTK trace): the weights do what the papers say, are the
same on 1 and 4 devices, are logged, checkpointed and resumed bit for bit."""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.errors import ConfigError
from pinnkit.parallel.mesh import make_mesh, replicate
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config
from pinnkit.train import checkpoint as ckpt
from pinnkit.train.loop import RESULTS, fit
from pinnkit.train.loss import make_loss
from pinnkit.train.step import init_extra, make_adapt, point_arrays, split_model
from pinnkit.train.weighting import grad_norms, per_term_grads

# Tiny P1 with pde + boundary terms: their gradient norms differ by orders of magnitude.
SOFT = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "poisson2d_soft.yaml"


def _cfg(*overrides):
    return load_config(SOFT, list(overrides))


def _first_update(cfg, n_dev, accumulate=1):
    """Weights after the step-0 update, and the per-term statistics they came from."""
    run = build_run(cfg, mesh=make_mesh(n_dev))
    params, static = split_model(run)
    params = replicate(params, run.mesh)
    arrays = point_arrays(run)
    loss = make_loss(run, static, accumulate=accumulate)
    adapt = make_adapt(run, loss)
    key = jax.random.key(0)
    extra = eqx.filter_jit(adapt)(params, key, arrays, init_extra(run), jnp.asarray(0))
    ctx = loss.context(extra, 0)
    norms = eqx.filter_jit(
        lambda p: grad_norms(per_term_grads(lambda q: loss(q, key, arrays, 0, ctx)[1]["terms"], p))
    )(params)
    norms = {k: float(v) for k, v in norms.items()}
    return {k: float(v) for k, v in extra["weights"].items()}, norms, (run, params, loss, arrays)


def test_grad_norm_equalises_weighted_gradient_norms():
    """With momentum 0, after an update λ_i ‖∇L_i‖ = Σ_j ‖∇L_j‖ for every term i
    (float32, rtol 1e-5), although the raw norms differ by more than 10×."""
    lam, norms, _ = _first_update(_cfg("weighting.kind=grad_norm", "weighting.momentum=0.0"), 1)
    raw = sorted(norms.values())
    assert raw[-1] / raw[0] > 10, norms
    total = sum(norms.values())
    for k in norms:
        np.testing.assert_allclose(lam[k] * norms[k], total, rtol=1e-5)


def test_grad_norm_momentum_and_devices():
    """Moving average from the initial weights (here boundary 10, pde 1), and identical
    weights on 1 and 4 devices (global pmean-ed gradients; float32 reduction order)."""
    cfg = _cfg("weighting.kind=grad_norm", "weighting.momentum=0.9")
    lam1, norms, _ = _first_update(cfg, 1)
    lam4, _, _ = _first_update(cfg, 4)
    total = sum(norms.values())
    init = {"pde": 1.0, "boundary": 10.0}
    for k in norms:
        np.testing.assert_allclose(lam1[k], 0.9 * init[k] + 0.1 * total / norms[k], rtol=1e-5)
        np.testing.assert_allclose(lam4[k], lam1[k], rtol=1e-4)


@pytest.mark.parametrize("kind", ["grad_norm", "ntk"])
def test_weights_do_not_depend_on_accumulate(kind):
    """With 4 micro-batches the weights come from the whole batch, as with one: grad_norm
    from the per-term gradients of the mean of the micro-batches' means (the mean: float32
    rounding, rtol 1e-5), ntk from the same every-s-th-point subset. From micro-batch 0
    alone they would differ by the sampling error of a quarter of the points (percent
    level here)."""
    cfg = _cfg(f"weighting.kind={kind}", "weighting.momentum=0.0", "weighting.ntk_points=64")
    lam1, _, _ = _first_update(cfg, 1)
    lam4, _, _ = _first_update(cfg, 1, accumulate=4)
    for k in lam1:
        np.testing.assert_allclose(lam4[k], lam1[k], rtol=1e-5)


def test_ntk_weights_are_trace_ratios():
    """λ_i = Σ_j tr K_j / tr K_i with tr K_i = mean_x ‖∂θ r_i(x)‖², checked against a
    direct per-point gradient computation; 4 devices give the same weights."""
    cfg = _cfg("weighting.kind=ntk", "weighting.momentum=0.0", "weighting.ntk_points=64")
    lam, _, (run, params, loss, arrays) = _first_update(cfg, 1)
    lam4, _, _ = _first_update(cfg, 4)
    traces = {}
    for name, pts in arrays.items():
        sub = np.asarray(pts)[:: pts.shape[0] // 64]

        def r(p, x, name=name):
            n, c = eqx.combine(p, split_model(run)[1])
            return run.problem.residuals(n, c, {k: x[None] for k in arrays}, run.method)[name][0, 0]

        g = eqx.filter_jit(jax.vmap(jax.grad(r), in_axes=(None, 0)))(params, jnp.asarray(sub))
        traces[name] = float(sum(jnp.sum(x**2) for x in jax.tree_util.tree_leaves(g))) / len(sub)
    total = sum(traces.values())
    for k in traces:
        np.testing.assert_allclose(lam[k], total / traces[k], rtol=1e-4)
        np.testing.assert_allclose(lam4[k], lam[k], rtol=1e-4)


def test_weights_logged_and_resume_is_exact(tmp_path):
    """grad_norm weights are logged per term and change; an interrupted run resumed from
    its checkpoint ends with the same checkpoint bytes and metrics as an uninterrupted one."""
    over = ("weighting.kind=grad_norm", "weighting.update_every=10", "train.steps=80",
            "train.chunk=20", "checkpoint.every=20")
    a = fit(build_run(_cfg(*over), mesh=make_mesh(1)), out_dir=tmp_path / "a", progress=False)
    ws = [h["weights"]["pde"] for h in a.history]
    assert len(set(ws)) > 2 and all(w > 0 for w in ws)
    calls = iter(range(100))
    part = fit(build_run(_cfg(*over), mesh=make_mesh(1)), out_dir=tmp_path / "b", progress=False,
               should_stop=lambda: next(calls) >= 2)
    assert part.result is RESULTS.interrupted and part.step == 40
    fit(build_run(_cfg(*over), mesh=make_mesh(1)), out_dir=tmp_path / "b", resume=True,
        progress=False)
    ha = ckpt.latest_valid(tmp_path / "a" / "checkpoints")[1]
    hb = ckpt.latest_valid(tmp_path / "b" / "checkpoints")[1]
    assert ha["step"] == hb["step"] == 80 and ha["payload_sha256"] == hb["payload_sha256"]
    assert (tmp_path / "a" / "metrics.jsonl").read_text() == (tmp_path / "b" / "metrics.jsonl").read_text()


def test_bad_weighting_values_are_config_errors():
    with pytest.raises(ConfigError, match="weighting.momentum"):
        _cfg("weighting.kind=grad_norm", "weighting.momentum=1.5")
    with pytest.raises(ConfigError, match="weighting.kind"):
        _cfg("weighting.kind=gradnorm")
    with pytest.raises(ConfigError, match="weighting.causal: causal weights need a time-dependent"):
        build_run(_cfg("weighting.causal={chunks: 8}"), mesh=make_mesh(1))
