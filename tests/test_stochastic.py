"""Stochastic Taylor estimators (`pinnkit.diffops.STDE`, `SDGD`), float64.

- unbiased for each operator kind (Laplacian over all or some axes, second-order
  operator with constant and point-dependent coefficients, bi-Laplacian): the mean of
  ``N`` = 80000 independent estimates is within 5 standard errors (sample standard
  deviation / sqrt(N)) of the exact value, a false alarm with probability < 1e-6 per
  check under the central limit theorem; each check also asserts that its bound is
  below 20 % of the operator's size, so a wrong scale or a missing term would fail;
- SDGD with as many dimensions as the operator has is the exact operator;
- the same key gives bitwise the same estimates, another key others;
- a point's estimate does not depend on its place in the batch, nor on the number of
  devices the batch is split over (1 vs 4 CPU devices, ``shard_map``);
- the exact methods' `second_order` (Hessian contraction) equals autodiff's.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from pinnkit.diffops import SDGD, STDE, Autodiff, Layout, Taylor
from pinnkit.nn.layers import HardDirichlet
from pinnkit.nn.nets import build_network

D = 6
COORDS = tuple(f"x{i}" for i in range(D))
LAYOUT = Layout(COORDS, COORDS[1:], ("u", "v"))  # x0 plays time: spatial axes are 1..5


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def _net(kind="mlp"):
    hd = HardDirichlet((-1.0,) * D, (1.0,) * D, (1, 2), (0,))  # a transform with its own rule
    return build_network(kind, COORDS, ("u", "v"), width=8, depth=2, activation="tanh",
                         init="glorot_normal", bounds=((-1.0,) * D, (1.0,) * D),
                         transform=hd, key=jax.random.key(0), dtype=jnp.float64)


A_CONST = np.random.default_rng(1).standard_normal((D - 1, D - 1))  # not symmetric


def _a_point(x):
    """Point-dependent coefficients: I + x x^T / 2 + a skew part."""
    s = x[1:]
    skew = jnp.outer(s, jnp.roll(s, 1)) - jnp.outer(jnp.roll(s, 1), s)
    return jnp.eye(D - 1) + 0.5 * jnp.outer(s, s) + skew


def _residual(f):
    """Every estimated kind at once, next to exact requests (value, u_x0, u_x1x2)."""
    return jnp.stack([
        f.laplacian("u"), f.laplacian("v", COORDS),
        f.second_order("u", A_CONST), f.second_order("v", _a_point(f.point)),
        f.biharmonic("u", COORDS[1:4]),
        f["u"], f.partial("v", "x0"), f.partial("u", "x1", "x2"),
    ])  # fmt: skip


ESTIMATED = slice(0, 5)


def _points(n=3):
    return jax.random.uniform(jax.random.key(7), (n, D), jnp.float64, -0.8, 0.8)


def _residual2(f):
    """The second-order kinds only (cheaper to compile)."""
    return jnp.stack([f.laplacian("u"), f.second_order("v", _a_point(f.point)), f.partial("v", "x0")])


@eqx.filter_jit
def _evaluate(method, net, pts, residual=_residual):
    return jax.vmap(lambda x: method.evaluate(residual, net, LAYOUT, x))(pts)


@pytest.mark.parametrize("estimator", [STDE(samples=4), SDGD(samples=2), STDE(samples=2, draw="step")])
def test_unbiased(f64, estimator):
    net, pts = _net(), _points()
    exact = np.asarray(_evaluate(Taylor(), net, pts))
    chunks, per = 20, 4000  # 80000 draws, 4000 at a time (bounded memory)
    keys = jax.random.split(jax.random.key(123), chunks * per).reshape(chunks, per)
    one = jax.vmap(lambda k: _evaluate(estimator.at_key(k), net, pts))
    draws = np.asarray(jax.jit(lambda ks: jax.lax.map(one, ks))(keys)).reshape(-1, *exact.shape)
    np.testing.assert_allclose(draws[:, :, 5:], np.broadcast_to(exact[:, 5:], draws[:, :, 5:].shape),
                               rtol=1e-12, atol=1e-12)  # the exact requests stay exact
    n = draws.shape[0]
    mean, sem = draws.mean(0)[:, ESTIMATED], draws.std(0, ddof=1)[:, ESTIMATED] / np.sqrt(n)
    err = np.abs(mean - exact[:, ESTIMATED])
    assert np.all(err <= 5.0 * sem + 1e-10), (err / sem).max()
    # power: the bound resolves a 20 % error of each operator (at its largest |value|)
    scale = np.abs(exact[:, ESTIMATED]).max(0)
    assert np.all(5.0 * sem < 0.2 * scale), (5.0 * sem / scale).max()


def test_sdgd_with_every_dimension_is_exact(f64):
    net, pts = _net(), _points()
    got = _evaluate(SDGD(samples=D).at_key(jax.random.key(3)), net, pts)
    np.testing.assert_allclose(got, _evaluate(Taylor(), net, pts), rtol=1e-10, atol=1e-10)


def test_exact_second_order_matches_autodiff(f64):
    net, pts = _net(), _points(2)
    res = lambda f: jnp.stack([f.second_order("u", A_CONST), f.second_order("v", _a_point(f.point))])
    ref = lambda f: jnp.stack([jnp.sum(A_CONST * f.hessian("u")),
                               jnp.sum(_a_point(f.point) * f.hessian("v"))])
    got = jax.vmap(lambda x: Taylor().evaluate(res, net, LAYOUT, x))(pts)
    want = jax.vmap(lambda x: Autodiff().evaluate(ref, net, LAYOUT, x))(pts)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)


def test_key_reproduces_bitwise(f64):
    net, pts = _net(), _points()
    m = STDE(samples=3)
    a, b, c = (_evaluate(m.at_key(jax.random.key(k)), net, pts, _residual2) for k in (5, 5, 6))
    np.testing.assert_array_equal(a, b)
    assert np.all(a[:, :2] != c[:, :2])
    with pytest.raises(ValueError, match="at_key"):
        _evaluate(m, net, pts, _residual2)


@pytest.mark.parametrize("draw", ["point", "step"])
def test_independent_of_batch_position_and_devices(f64, draw):
    net, pts = _net(), _points(8)
    method = SDGD(samples=3, draw=draw).at_key(jax.random.key(9))
    whole = _evaluate(method, net, pts, _residual2)
    perm = np.array([3, 1, 7, 0, 5, 2, 6, 4])
    np.testing.assert_allclose(_evaluate(method, net, pts[perm], _residual2), whole[perm],
                               rtol=1e-13, atol=1e-13)
    outs = []
    for n in (1, 4):
        mesh = Mesh(np.array(jax.devices()[:n]), ("data",))
        f = jax.shard_map(lambda p: _evaluate(method, net, p, _residual2), mesh=mesh,
                          in_specs=P("data"), out_specs=P("data"))
        outs.append(jax.jit(f)(pts))
    # the same per-point computation on each device; a device's batch size can change
    # XLA's loop blocking, hence rounding (not bitwise) agreement
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(outs[0], whole, rtol=1e-13, atol=1e-13)


def test_bad_samples_rejected():
    with pytest.raises(ValueError, match="samples >= 2"):
        SDGD(samples=1)
    with pytest.raises(ValueError, match="draw"):
        STDE(draw="batch")
