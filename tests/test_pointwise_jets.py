"""`jets.of_point` (the jet of a function of the point alone, in one trace) and the Taylor
rule of `DistanceDirichlet` built on it (issue 32: the hard-constraint configs compiled for
minutes because the generic rule differentiated the R-function distance functions along
the network's rows too, in three traces).

- `of_point` equals the generic rule (float64, rtol 1e-12: both exact, summing the same
  terms) for first-order, Laplacian and mixed second- and third-order rows, along
  coordinate axes and along free directions (the stochastic estimators' jets), on the 3-D ball-hole ADF;
- through the rule, a network with the DFG channel's no-slip constraint (three pieces,
  two outputs sharing them) has the derivatives of nested autodiff (rtol 1e-10), at
  interior points and next to the cylinder;
- the same for the corner enrichment on the L-shape (its own rule over the base's);
- the rule's program is about half of the generic rule's (jaxpr equations: what
  XLA's compile time grows with), a structural check, not a timing.
"""

import collections
import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jcore

from pinnkit.diffops import Autodiff, Layout, Taylor, jets
from pinnkit.diffops._base import Request
from pinnkit.geometry import Ball, Cuboid, DistanceDirichlet, Polygon, difference, signed_adf
from pinnkit.geometry.singular import enrich
from pinnkit.nn.nets import build_mlp_network
from pinnkit.problems import dfg


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def _ball_hole_fn(x):
    shape = difference(Cuboid([-1, -1, -1], [1, 1, 1]), Ball([0.2, 0.1, 0.0], 0.4))
    phi = signed_adf(shape, x)
    return jnp.stack([phi, phi * jnp.sin(x[0]), x[1] * x[2] ** 2])


REQUESTS = [Request("partial", 0, (0,)), Request("partial", 0, (2,)), Request("laplacian", 0, (0, 1, 2)),
            Request("partial", 0, (0, 1)), Request("partial", 0, (1, 2))]


# third-order rows (a stream function's, `pinnkit.geometry.stream`): the nested-jvp tensors
THIRD = [*REQUESTS, Request("partial", 0, (0, 0, 1)), Request("partial", 0, (1, 2, 2))]


@pytest.mark.parametrize("requests", [REQUESTS, THIRD], ids=["second", "third"])
@pytest.mark.parametrize("free", [False, True])
def test_of_point_equals_the_generic_rule(free, requests, f64):
    plan = jets.make_plan(requests)
    if free:
        plan = plan._replace(free=True)
    x = jnp.asarray([0.55, -0.3, 0.7])
    first = jets.input_jet(x, plan).first
    if free:  # any directions: rows of a random matrix
        first = jax.random.normal(jax.random.key(1), first.shape, jnp.float64)
    x_jet = jets.Jet(x, first, {})
    got = jax.jit(lambda j: jets.of_point(_ball_hole_fn, j, plan))(x_jet)
    ref = jax.jit(lambda j: jets.generic(_ball_hole_fn, (j,), plan))(x_jet)
    np.testing.assert_allclose(got.value, ref.value, rtol=1e-12)
    np.testing.assert_allclose(got.first, ref.first, rtol=1e-12)
    assert set(got.rest) == set(ref.rest) and ref.rest
    for k in ref.rest:
        np.testing.assert_allclose(got.rest[k], ref.rest[k], rtol=1e-12, atol=1e-14, err_msg=str(k))


def _dfg_net():
    hd = dfg.no_slip(dfg.channel_domain(), dfg.parabolic_inflow(0.3))
    return hd, build_mlp_network(("x", "y"), ("u", "v", "p"), width=6, depth=2, activation="tanh",
                                 init="glorot_normal", bounds=((0, 0), (2.2, 0.41)), transform=hd,
                                 key=jax.random.key(0), dtype=jnp.float64)


def _residual(f):
    return jnp.stack([f["u"], f["v"], *f.grad("u"), *f.grad("v"), f.laplacian("u"), f.laplacian("v"),
                      f.partial("v", "x", "y"), f.partial("p", "x")])


def test_distance_dirichlet_rule_matches_autodiff(f64):
    hd, net = _dfg_net()
    assert jets.has_rule(hd)
    domain = dfg.channel_domain()
    inner = np.asarray(domain.sample(jax.random.key(5), 8, "interior", jnp.float64))
    th = np.linspace(0.0, 2 * np.pi, 5, endpoint=False)
    near = np.stack([0.2 + 0.0505 * np.cos(th), 0.2 + 0.0505 * np.sin(th)], axis=1)  # 1 % of R out
    x = jnp.asarray(np.concatenate([inner, near]))
    layout = Layout(("x", "y"), ("x", "y"), ("u", "v", "p"))
    run = lambda m: jax.jit(jax.vmap(lambda p: m.evaluate(lambda f, c: _residual(f), net, layout, p, {})))(x)  # noqa: E731
    got, ref = np.asarray(run(Taylor())), np.asarray(run(Autodiff()))
    assert np.all(np.isfinite(ref))
    scale = np.abs(ref).max(axis=0, keepdims=True)
    np.testing.assert_array_less(np.abs(got - ref) / scale, 1e-10)


def test_corner_enrichment_rule_matches_autodiff(f64):
    shape = Polygon([[-1, -1], [0, -1], [0, 0], [1, 0], [1, 1], [-1, 1]])
    hd = DistanceDirichlet(shape, ("boundary",), ((0,),), (None,))
    spec = types.SimpleNamespace(at=(0.0, 0.0), radius=None, terms=None, fields=())
    ce = enrich(shape, ("u",), [spec], base=hd, dtype=jnp.float64)
    ce = eqx.tree_at(lambda c: c.coef, ce, jnp.linspace(0.5, -0.3, ce.coef.size).reshape(ce.coef.shape))
    assert jets.has_rule(ce)
    net = build_mlp_network(("x", "y"), ("u",), width=6, depth=2, activation="tanh", init="glorot_normal",
                            bounds=((-1, -1), (1, 1)), transform=ce, key=jax.random.key(0), dtype=jnp.float64)
    x = shape.sample(jax.random.key(5), 12, "interior", jnp.float64)
    layout = Layout(("x", "y"), ("x", "y"), ("u",))
    res = lambda f, c: jnp.stack([f["u"], *f.grad("u"), f.laplacian("u"), f.partial("u", "x", "y")])  # noqa: E731
    run = lambda m: jax.jit(jax.vmap(lambda p: m.evaluate(res, net, layout, p, {})))(x)  # noqa: E731
    got, ref = np.asarray(run(Taylor())), np.asarray(run(Autodiff()))
    assert np.all(np.isfinite(ref))
    np.testing.assert_array_less(np.abs(got - ref) / np.abs(ref).max(axis=0, keepdims=True), 1e-10)


def _equations(jaxpr, counts):
    for e in jaxpr.eqns:
        counts[e.primitive.name] += 1
        for p in e.params.values():
            for sub in p if isinstance(p, (list, tuple)) else [p]:
                if isinstance(sub, jcore.ClosedJaxpr):
                    _equations(sub.jaxpr, counts)
                elif isinstance(sub, jcore.Jaxpr):
                    _equations(sub, counts)
    return sum(counts.values())


def test_rule_program_is_about_half_the_generic_one(f64):
    hd, net = _dfg_net()
    plan = jets.make_plan([Request("laplacian", 0, (0, 1)), Request("partial", 0, (0,)),
                           Request("partial", 0, (1,))])
    x = jnp.asarray([0.5, 0.1], jnp.float64)
    y_jet = jets.Jet(jnp.ones(3), jnp.ones((2, 3)), {k: jnp.ones(3) for k in plan.rest})

    def size(rule):
        f = lambda z: rule(jets.input_jet(z, plan))  # noqa: E731
        return _equations(jax.make_jaxpr(f)(x).jaxpr, collections.Counter())

    fast = size(lambda xj: jets.propagate(hd, xj, y_jet, plan=plan))
    generic = size(lambda xj: jets.generic(hd, (xj, y_jet), plan))
    assert fast < 0.6 * generic, (fast, generic)  # measured 3859 / 7171 = 0.54
