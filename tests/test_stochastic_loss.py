"""The loss's hook for stochastic derivative estimators: with a method that declares
``stochastic = True``, each squared residual is the product of the residuals under two
independent draws (``at_key``), an unbiased estimate of the exact squared residual for
residuals affine in the estimated operator; deterministic methods are untouched."""

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from pinnkit.diffops import AbstractDiffMethod, Autodiff
from pinnkit.parallel.mesh import make_mesh
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config
from pinnkit.train import RESULTS, fit
from pinnkit.train.loss import make_loss
from pinnkit.train.step import point_arrays, split_model

SOFT = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "poisson2d_soft.yaml"


class NoisyLaplacian(AbstractDiffMethod):
    """Exact derivatives (nested autodiff), plus zero-mean noise $\\sigma z$ on every
    Laplacian, $z \\sim N(0, 1)$ drawn per point from the method's key and the point's
    coordinates: an unbiased, noisy Laplacian estimator."""

    stochastic: ClassVar[bool] = True
    sigma: float = eqx.field(static=True)
    key: jax.Array | None = None

    def at_key(self, key):
        return NoisyLaplacian(self.sigma, key)

    def derivatives(self, net, x, requests: Sequence):
        table = Autodiff().derivatives(net, x, requests)
        bits = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)
        key = jax.random.fold_in(jax.random.fold_in(self.key, bits[0]), bits[1])
        for i, r in enumerate(requests):
            if r.kind == "laplacian":
                z = jax.random.normal(jax.random.fold_in(key, i), (), x.dtype)
                table[r] = table[r] + self.sigma * z
        return table


def _losses(run, keys):
    params, static = split_model(run)
    loss_fn = make_loss(run, static)
    loss = jax.jit(lambda p, k, a: loss_fn(p, k, a))
    arrays = point_arrays(run)
    return np.array([float(loss(params, k, arrays)[0]) for k in keys])


def test_product_of_two_draws_is_unbiased(x64):
    """float64. The pde residual is $-\\Delta u - f$, affine in the Laplacian, so
    $E[r_a r_b] = r^2$: the mean of the stochastic loss over 300 step keys equals the
    exact loss within 4 standard errors (their sample spread), on 1 and 4 devices, while
    one draw squared, $|r_a|^2$, is off by the noise variance $\\sigma^2 = 0.25$ (pde
    weight 1), many standard errors. Deterministic methods never see a key."""
    cfg = load_config(SOFT, ["numerics.x64=true", "diffops.method=autodiff"])
    assert Autodiff().at_key(jax.random.key(0)) == Autodiff() and not Autodiff.stochastic
    keys = [jax.random.key(s) for s in range(300)]
    for n_dev in (1, 4):
        run = build_run(cfg, mesh=make_mesh(n_dev))
        exact = _losses(run, keys[:1])[0]
        est = _losses(dataclasses.replace(run, method=NoisyLaplacian(0.5)), keys)
        se = est.std(ddof=1) / np.sqrt(len(est))
        assert est.std() > 0 and abs(est.mean() - exact) < 4 * se, (n_dev, est.mean(), exact, se)
    # One draw squared, from the same residuals (1 device: the batch is the fixed set).
    params, static = split_model(run := build_run(cfg, mesh=make_mesh(1)))
    loss = make_loss(dataclasses.replace(run, method=NoisyLaplacian(0.5)), static)
    batch = {k: jnp.asarray(v) for k, v in point_arrays(run).items()}

    @jax.jit
    def one_draw_squared(key):
        res = loss.residuals(params, batch, loss.method.at_key(key))
        return sum(loss.weights[k] * jnp.mean(jnp.sum(r**2, axis=-1)) for k, r in res.items())

    naive = np.array([float(one_draw_squared(k)) for k in keys])
    bias, se_naive = naive.mean() - exact, naive.std(ddof=1) / np.sqrt(len(naive))
    assert abs(bias - 0.25) < 4 * se_naive + 0.01 and bias > 10 * se, (bias, se_naive, se)


def test_training_with_a_stochastic_method_runs():
    """fit with the stochastic method: finite losses that fall (the noise is small)."""
    cfg = load_config(SOFT, ["diffops.method=autodiff", "train.steps=60", "train.chunk=30",
                             "train.log_every=10"])
    run = dataclasses.replace(build_run(cfg, mesh=make_mesh(2)), method=NoisyLaplacian(0.01))
    res = fit(run, progress=False)
    losses = [h["loss"] for h in res.history]
    assert res.result is RESULTS.successful and losses[-1] < losses[0], losses
