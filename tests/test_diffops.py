"""The Taylor derivative engine against the nested reverse-mode oracle and against
hand-derived derivatives of analytic fields.

Float64 comparisons use rtol 1e-10 (both sides are exact up to rounding; the engines sum
the same terms in different orders). Networks are tiny: compile time, not arithmetic,
dominates these tests, and most of it is the fourth-order oracle.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import METHODS, Autodiff, Layout, Taylor, activation_derivatives
from pinnkit.diffops.jets import Jet as _Jet
from pinnkit.diffops.jets import generic as _generic
from pinnkit.diffops.jets import input_jet as _input_jet
from pinnkit.diffops.jets import make_plan as _make_plan
from pinnkit.diffops.jets import propagate
from pinnkit.nn.embeddings import Normalize, PeriodicEmbedding
from pinnkit.nn.layers import (
    ACTIVATIONS,
    MLP,
    HardDirichlet,
    Network,
)
from pinnkit.nn.nets import build_mlp_network


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def assert_close(got, ref, rtol=1e-10):
    """Relative to each quantity's largest magnitude over the points (columns), so that
    entries that vanish by cancellation are compared on the scale of their column."""
    got, ref = np.asarray(got), np.asarray(ref)
    scale = np.maximum(np.abs(ref).max(axis=0, keepdims=True), 1e-300)
    np.testing.assert_array_less(np.abs(got - ref) / scale, rtol)


def evaluate(method, residual, net, layout, points):
    return jax.jit(jax.vmap(lambda x: method.evaluate(residual, net, layout, x)))(points)


# ---- analytic fields: hand-derived derivatives ----------------------------------------


def analytic(p):
    x, y, z = p
    u = x**3 * y**2 + jnp.sin(2 * x) * jnp.cos(3 * y) + x * y * z
    v = jnp.exp(x) * y**2 + x**4 * y**2
    return jnp.stack([u, v])


def analytic_expected(p):
    x, y, z = (float(c) for c in p)
    s = math.sin(2 * x) * math.cos(3 * y)
    e = math.exp(x)
    return [
        x**3 * y**2 + s + x * y * z,  # u
        3 * x**2 * y**2 + 2 * math.cos(2 * x) * math.cos(3 * y) + y * z,  # u_x
        x * y,  # u_z
        6 * x**2 * y - 6 * math.cos(2 * x) * math.sin(3 * y) + z,  # u_xy
        y,  # u_xz
        6 * y**2 - 8 * math.cos(2 * x) * math.cos(3 * y),  # u_xxx
        12 * x * y + 12 * math.sin(2 * x) * math.sin(3 * y),  # u_xxy
        1.0,  # u_xyz
        16 * s,  # u_xxxx
        12 * x + 36 * s,  # u_xxyy
        6 * x * y**2 + 2 * x**3 - 13 * s,  # laplacian over x, y, z
        24 * x + 169 * s,  # biharmonic over x, y
        3 * x**2 * y**2 + 2 * math.cos(2 * x) * math.cos(3 * y) + y * z + 2 * e * y + 2 * x**4 * y,
        2 * e + 2 * x**4,  # v_yy
        24 * y**2,  # v_xxxx minus e^x
    ]


def analytic_residual(f):
    bih = f.partial("u", "x", "x", "x", "x") + 2 * f.partial("u", "x", "x", "y", "y")
    bih = bih + f.partial("u", "y", "y", "y", "y")
    return jnp.stack(
        [
            f["u"],
            f.partial("u", "x"),
            f.partial("u", "z"),
            f.partial("u", "y", "x"),
            f.partial("u", "x", "z"),
            f.partial("u", "x", "x", "x"),
            f.partial("u", "x", "y", "x"),
            f.partial("u", "z", "y", "x"),
            f.partial("u", "x", "x", "x", "x"),
            f.partial("u", "x", "x", "y", "y"),
            f.laplacian("u", ("x", "y", "z")),
            bih,
            f.divergence(("u", "v"), ("x", "y")),
            f.hessian("v", ("x", "y"))[1, 1],
            f.partial("v", "x", "x", "x", "x") - jnp.exp(f.coord("x")) * f.coord("y") ** 2,
        ]
    )


class AnalyticModule(eqx.Module):
    """A user's own Equinox module (no fast rule: the generic path)."""

    scale: jax.Array

    def __call__(self, p):
        return self.scale * analytic(p)


@pytest.mark.parametrize("as_module", [False, True])
def test_analytic_fields(f64, as_module):
    layout = Layout(("x", "y", "z"), ("x", "y", "z"), ("u", "v"))
    net = AnalyticModule(jnp.ones(())) if as_module else analytic
    points = jnp.array([[0.3, -0.7, 1.1], [1.2, 0.4, -0.5], [-0.9, 1.3, 0.2]])
    got = evaluate(Taylor(), analytic_residual, net, layout, points)
    ref = np.array([analytic_expected(p) for p in points])
    assert_close(got, ref)


# ---- activations -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_derivatives(f64, name):
    """Closed forms of sigma^(k), k <= 5, against nested `jax.grad` of the activation."""
    a = jnp.array([-3.1, -0.8, -0.05, 0.0, 0.3, 1.7, 4.0])
    got = jnp.stack(activation_derivatives(name, a, 5))
    fn = ACTIVATIONS[name]
    ref, g = [fn(a)], fn
    for _ in range(5):
        g = jax.grad(g)
        ref.append(jax.jit(jax.vmap(g))(a))
    ref = jnp.stack(ref)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


def _second_order_residual(f):
    h = f.hessian("u")
    return jnp.stack(
        [
            f["u"],
            f["p"],
            *f.grad("v"),
            f.partial("u", "t"),
            f.partial("p", "t", "x"),
            f.divergence(("u", "v")),
            f.laplacian("u"),
            f.laplacian("v", ("t", "x", "y")),
            *h.ravel(),
        ]
    )


def _stack(activation, *, dtype=jnp.float64, fourier=(4, 1.0), transform=True, width=6):
    lower, upper = (0.0, -1.0, 0.0), (1.0, 1.0, 2.0)
    tr = HardDirichlet(lower, upper, (1, 2), (0, 1), t_axis=0) if transform else None
    return build_mlp_network(
        ("t", "x", "y"),
        ("u", "v", "p"),
        width=width,
        depth=2,
        activation=activation,
        init="glorot_normal",
        bounds=(lower, upper),
        fourier=fourier,
        transform=tr,
        key=jax.random.key(0),
        dtype=dtype,
    )


LAYOUT3 = Layout(("t", "x", "y"), ("x", "y"), ("u", "v", "p"))


def _points(n=4, dtype=jnp.float64):
    u = jax.random.uniform(jax.random.key(7), (n, 3), dtype)
    return u * jnp.array([[1.0, 2.0, 2.0]], dtype) + jnp.array([[0.0, -1.0, 0.0]], dtype)


# "swish" is another name for silu (the same rule); every other activation is checked
@pytest.mark.parametrize("activation", sorted(set(ACTIVATIONS) - {"swish"}))
def test_every_activation_vs_oracle(f64, activation):
    """Normalize + MLP fast rules, orders <= 2 (higher orders of each activation are the
    closed forms checked above, combined by the rules checked with tanh below)."""
    layout = Layout(("x", "y"), ("x", "y"), ("u",))
    net = build_mlp_network(
        ("x", "y"), ("u",), width=4, depth=2, activation=activation, init="glorot_normal",
        bounds=((0.0, -1.0), (1.0, 1.0)), key=jax.random.key(0), dtype=jnp.float64,
    )  # fmt: skip

    def res(f):
        return jnp.stack([f["u"], *f.grad("u"), f.partial("u", "x", "y"), f.laplacian("u")])

    pts = _points(3)[:, 1:]
    assert_close(evaluate(Taylor(), res, net, layout, pts), evaluate(Autodiff(), res, net, layout, pts))


def test_bare_mlp_takes_the_fast_rule(f64):
    """An `MLP` passed as the whole network (no `Network` wrapper) goes through the fast MLP
    rule (not the ~10x slower generic one) and agrees with the oracle, orders <= 4."""
    layout = Layout(("x", "y"), ("x", "y"), ("u", "v"))
    net = MLP(2, 2, 5, 2, "tanh", key=jax.random.key(4), dtype=jnp.float64)

    def res(f):
        return jnp.stack([f["u"], *f.grad("v"), f.laplacian("u"), f.partial("v", "x", "x", "y", "y")])

    pts = _points(3)[:, 1:]
    assert_close(evaluate(Taylor(), res, net, layout, pts), evaluate(Autodiff(), res, net, layout, pts))
    jaxpr = str(jax.make_jaxpr(lambda x: Taylor().evaluate(res, net, layout, x))(pts[0]))
    # the fast rule evaluates tanh once per hidden layer; the generic rule (nested jvp)
    # re-evaluates it in every directional derivative (10 times here)
    assert jaxpr.count(" tanh ") == 2


def test_embeddings_and_transform_vs_oracle(f64):
    """Normalize + FourierFeatures + MLP + HardDirichlet (generic two-input rule), three
    outputs, a time axis, orders <= 2: what a Navier-Stokes residual asks for."""
    net, pts = _stack("gelu"), _points(3)
    got = evaluate(Taylor(), _second_order_residual, net, LAYOUT3, pts)
    ref = evaluate(Autodiff(), _second_order_residual, net, LAYOUT3, pts)
    assert_close(got, ref)


class Bump(eqx.Module):
    """A hand-written output transform: no fast rule, so the generic two-input path."""

    def __call__(self, x, y):
        return y * (x[0] * (1.0 - x[0])) + jnp.stack([x[1] ** 2, jnp.sin(x[0])])


def _fourth_order_residual(f):
    return jnp.stack(
        [
            f["u"],
            f.partial("u", "x"),
            f.partial("v", "y", "x"),
            f.laplacian("u"),
            f.partial("u", "x", "x", "x"),
            f.partial("v", "x", "y", "y"),
            f.partial("u", "x", "x", "y", "y"),
            f.partial("v", "y", "y", "y", "y"),
            f.partial("u", "x", "x", "x", "x")
            + 2 * f.partial("u", "x", "x", "y", "y")
            + f.partial("u", "y", "y", "y", "y"),
        ]
    )


def test_orders_three_and_four_vs_oracle(f64):
    """Normalize + FourierFeatures + MLP fast rules, every operator up to fourth order."""
    net = build_mlp_network(
        ("x", "y"),
        ("u", "v"),
        width=3,
        depth=1,
        activation="tanh",
        init="glorot_normal",
        bounds=((0.0, 0.0), (1.0, 1.0)),
        fourier=(2, 1.0),
        key=jax.random.key(1),
        dtype=jnp.float64,
    )
    layout = Layout(("x", "y"), ("x", "y"), ("u", "v"))
    pts = jax.random.uniform(jax.random.key(2), (2, 2), jnp.float64)
    got = evaluate(Taylor(), _fourth_order_residual, net, layout, pts)
    ref = evaluate(Autodiff(), _fourth_order_residual, net, layout, pts)
    assert_close(got, ref)


def test_periodic_embedding_vs_oracle(f64):
    """PeriodicEmbedding fast rule (x periodic, y normalised), orders <= 3."""
    pe = PeriodicEmbedding((2.0, None), (0.0, -1.0), (2.0, 1.0))
    core = MLP(3, 1, 4, 1, "sin", key=jax.random.key(8), dtype=jnp.float64)
    net = Network(core, ("u",), ("x", "y"), (pe,))
    layout = Layout(("x", "y"), ("x", "y"), ("u",))

    def res(f):
        uxy = [f.partial("u", "x", "y"), f.partial("u", "x", "x", "x"), f.partial("u", "x", "y", "y")]
        return jnp.stack([f["u"], *f.grad("u"), f.laplacian("u"), *uxy])

    pts = jax.random.uniform(jax.random.key(9), (2, 2), jnp.float64)
    assert_close(evaluate(Taylor(), res, net, layout, pts), evaluate(Autodiff(), res, net, layout, pts))


def test_fifth_order_fast_path(f64):
    """Any order: u^(5) of a 1-D MLP (Faà di Bruno with 52 partitions, sigma^(5))."""
    net = Network(MLP(1, 1, 4, 1, "sin", key=jax.random.key(3), dtype=jnp.float64), ("u",), ("x",))
    layout = Layout(("x",), ("x",), ("u",))
    res = lambda f: jnp.stack([f.partial("u", *["x"] * k) for k in range(6)])
    pts = jnp.array([[-0.4], [0.9]])
    assert_close(evaluate(Taylor(), res, net, layout, pts), evaluate(Autodiff(), res, net, layout, pts))


class UserNet(eqx.Module):
    """A user's own network: a modified-MLP-like product of two branches."""

    a: eqx.nn.Linear
    b: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.a = eqx.nn.Linear(2, 3, key=k1, dtype=jnp.float64)
        self.b = eqx.nn.Linear(3, 2, key=k2, dtype=jnp.float64)

    def __call__(self, x):
        h = self.a(x)
        return self.b(jnp.tanh(h) * jax.nn.softplus(h[::-1]))


def test_user_module_generic_path(f64):
    """A user's Equinox module as the whole network (orders <= 4) and as the core of a
    `Network` with a fast embedding and a generic output transform (orders <= 2)."""
    layout = Layout(("x", "y"), ("x", "y"), ("u", "v"))
    user = UserNet(jax.random.key(4))
    pts = jax.random.uniform(jax.random.key(5), (1, 2), jnp.float64)
    got = evaluate(Taylor(), _fourth_order_residual, user, layout, pts)
    ref = evaluate(Autodiff(), _fourth_order_residual, user, layout, pts)
    assert_close(got, ref)
    wrapped = Network(user, ("u", "v"), ("x", "y"), (Normalize((0.0, 0.0), (2.0, 1.0)),), Bump())
    res = lambda f: jnp.stack([f["u"], f.partial("u", "x"), f.partial("v", "x", "y"), f.laplacian("v")])
    got = evaluate(Taylor(), res, wrapped, layout, pts)
    assert_close(got, evaluate(Autodiff(), res, wrapped, layout, pts))


# ---- what is propagated ------------------------------------------------------------------


def _requests(residual, layout, d):
    from pinnkit.diffops import collect_requests

    return collect_requests(residual, layout, jnp.zeros((d,)))


def test_plan_laplacian_is_one_row():
    """A Laplacian is one row, never d second derivatives; with the Hessian asked for
    anyway, it is summed from its diagonal instead."""
    layout = Layout(tuple(f"x{i}" for i in range(8)), tuple(f"x{i}" for i in range(8)), ("u",))
    plan = _make_plan(_requests(lambda f: f.laplacian("u"), layout, 8))
    assert plan.rest == (("l", tuple(range(8))),) and plan.order == 2
    plan = _make_plan(_requests(lambda f: f.laplacian("u") + f.hessian("u")[0, 1], layout, 8))
    assert ("l", tuple(range(8))) not in plan.rest and len(plan.rest) == 36


def test_plan_biharmonic_rows():
    layout = Layout(("x", "y"), ("x", "y"), ("u",))
    res = lambda f: f.partial("u", "x", "x", "x", "x") + f.partial("u", "x", "x", "y", "y")
    plan = _make_plan(_requests(res, layout, 2))
    expect = {(0, 0), (0, 1), (1, 1), (0, 0, 0), (0, 0, 1), (0, 1, 1), (0, 0, 0, 0), (0, 0, 1, 1)}
    assert {a for _, a in plan.rest} == expect and plan.dirs == (0, 1)


def test_laplacian_from_diagonal_and_edge_cases(f64):
    net, pts = _stack("tanh", fourier=None, transform=False, width=4), _points(3)

    def res(f):
        h = f.hessian("u", ("t", "x", "y"))
        return jnp.stack([f.laplacian("u", ("t", "x", "y")), jnp.trace(h), f.laplacian("v", ()), f["p"]])

    got = evaluate(Taylor(), res, net, LAYOUT3, pts)
    assert_close(got, evaluate(Autodiff(), res, net, LAYOUT3, pts))
    np.testing.assert_array_equal(got[:, 2], 0.0)
    values_only = evaluate(Taylor(), lambda f: f["p"], net, LAYOUT3, pts)
    np.testing.assert_allclose(values_only, jax.vmap(net)(pts)[:, 2], rtol=1e-14)


def test_hard_dirichlet_rule_matches_generic(f64):
    """The HardDirichlet rule (affine in y: generic rule on x only, Leibniz for y) against
    the generic two-input rule, on a random jet with rows up to fourth order."""
    hd = HardDirichlet((0.0, -1.0, 0.0), (1.0, 1.0, 2.0), (1, 2), (0, 2), lambda x: x[:2] ** 2, 0)

    def res(f):
        return jnp.stack([f.partial("u", "x", "x", "y", "y"), f.laplacian("p"), f.partial("v", "t", "y")])

    plan = _make_plan(_requests(res, LAYOUT3, 3))
    keys = jax.random.split(jax.random.key(11), 3 + len(plan.rest))
    x = jax.random.uniform(keys[0], (3,), jnp.float64)
    y = _Jet(
        jax.random.normal(keys[1], (3,), jnp.float64),
        jax.random.normal(keys[2], (len(plan.dirs), 3), jnp.float64),
        {k: jax.random.normal(kk, (3,), jnp.float64) for k, kk in zip(plan.rest, keys[3:], strict=True)},
    )

    @jax.jit
    def both(x, y):
        xj = _input_jet(x, plan)
        return propagate(hd, xj, y, plan=plan), _generic(hd, (xj, y), plan)

    fast, generic = both(x, y)
    np.testing.assert_allclose(fast.value, generic.value, rtol=1e-14)
    np.testing.assert_allclose(fast.first, generic.first, rtol=1e-13, atol=1e-14)
    assert set(fast.rest) == set(generic.rest) == set(plan.rest)
    for k in plan.rest:
        np.testing.assert_allclose(fast.rest[k], generic.rest[k], rtol=1e-12, atol=1e-13)


# ---- training: gradients w.r.t. parameters, float32 -------------------------------------


def _loss(method, net, pts):
    def res(f):
        return jnp.stack([f.laplacian("u") - f["v"] + f.partial("u", "t"), f.divergence(("u", "v"))])

    r = jax.vmap(lambda x: method.evaluate(res, net, LAYOUT3, x))(pts)
    return jnp.mean(r**2)


def test_parameter_gradients_match_oracle(f64):
    """`jax.value_and_grad` over the parameters (training): Taylor's reverse pass through
    its forward propagation, including the generic transform, equals the oracle's."""
    net, pts = _stack("silu", fourier=None, width=4), _points(4)
    params, static = eqx.partition(net, eqx.is_inexact_array)

    def grads(method):
        fn = lambda p: _loss(method, eqx.combine(p, static), pts)
        return jax.jit(jax.value_and_grad(fn))(params)

    (lt, gt), (la, ga) = grads(Taylor()), grads(Autodiff())
    np.testing.assert_allclose(lt, la, rtol=1e-10)
    for a, b in zip(jax.tree.leaves(gt), jax.tree.leaves(ga), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10 * float(np.abs(b).max()))


def test_float32(f64):
    """float32 against the float64 oracle. Each of the ~20 operations between input and
    output rounds to 2^-24 relative, and a k-th derivative row mixes ~k rows of similar
    size; errors stay within a few hundred ulps of each quantity's magnitude, so we allow
    2000 ulps (eps32 = 1.19e-7)."""
    net64, pts64 = _stack("tanh", fourier=None), _points(4)
    net32 = jax.tree.map(lambda a: a.astype(jnp.float32) if eqx.is_inexact_array(a) else a, net64)
    got = evaluate(Taylor(), _second_order_residual, net32, LAYOUT3, pts64.astype(jnp.float32))
    assert got.dtype == jnp.float32
    ref = evaluate(Autodiff(), _second_order_residual, net64, LAYOUT3, pts64)
    assert_close(got, ref, rtol=2000 * float(jnp.finfo(jnp.float32).eps))


def test_registered():
    assert METHODS["taylor"] is Taylor and METHODS["autodiff"] is Autodiff


def test_square_features_vs_oracle(f64):
    """SquareFeatures fast rule ([z, z²] after Normalize, then Fourier features and the MLP),
    every operator up to fourth order: the square's derivatives (2z, 2, 0, ...) enter
    Faà di Bruno's formula at each order."""
    net = build_mlp_network(
        ("x", "y"), ("u", "v"), width=3, depth=1, activation="silu", init="glorot_normal",
        bounds=((0.0, 0.0), (1.0, 1.0)), squares=True, fourier=(4, 1.0), key=jax.random.key(1),
        dtype=jnp.float64,
    )  # fmt: skip
    assert type(net.embedding[1]).__name__ == "SquareFeatures"
    layout = Layout(("x", "y"), ("x", "y"), ("u", "v"))
    pts = jax.random.uniform(jax.random.key(2), (2, 2), jnp.float64)
    got = evaluate(Taylor(), _fourth_order_residual, net, layout, pts)
    ref = evaluate(Autodiff(), _fourth_order_residual, net, layout, pts)
    assert_close(got, ref)
