"""`f.biharmonic`: the collapsed bi-Laplacian rows of the Taylor engine.

Every rule that carries the rows (element-wise activations, embeddings, the gated cores'
products, `HardDirichlet`, the generic nested-jvp rule for a user's module) is compared
with autodiff in float64 at rtol 1e-10 (both sides exact up to rounding: the engines sum
the same terms in different orders, ~1e-15 in practice). Networks are tiny: compiling the
fourth-order oracle is what these tests spend, so the deepest stacks (PirateNet,
HardDirichlet) are checked against `ForwardOverReverse` (`jax.hessian`-style
reverse-then-forward, itself checked against the reverse-mode oracle in test_fields),
which compiles 3x faster than nested `jacrev`; the others against `Autodiff`.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import Autodiff, ForwardOverReverse, Layout, Taylor, collect_requests
from pinnkit.diffops.jets import make_plan as _make_plan
from pinnkit.nn.embeddings import PeriodicEmbedding
from pinnkit.nn.layers import MLP, HardDirichlet, Network
from pinnkit.nn.nets import build_network


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def assert_close(got, ref, rtol=1e-10):
    """Relative to each column's largest magnitude over the points."""
    got, ref = np.asarray(got), np.asarray(ref)
    scale = np.maximum(np.abs(ref).max(axis=0, keepdims=True), 1e-300)
    np.testing.assert_array_less(np.abs(got - ref) / scale, rtol)


def evaluate(method, residual, net, layout, points):
    return jax.jit(jax.vmap(lambda x: method.evaluate(residual, net, layout, x)))(points)


LAYOUT2 = Layout(("x", "y"), ("x", "y"), ("u", "v"))
LAYOUT3 = Layout(("t", "x", "y"), ("x", "y"), ("u", "v"))


def residual(f):
    """The bi-Laplacian over the default (spatial) axes, over one axis (= u_xxxx) and
    next to a Laplacian and a gradient that share its rows."""
    return jnp.stack(
        [f.biharmonic("u"), f.biharmonic("v", ("x",)), f.laplacian("v"), f.partial("u", "y"), f["v"]]
    )


def test_plan_carries_collapsed_rows():
    """d = 2: value, 2 first-order, 3 Hessian, 2 gradient-of-Laplacian rows and one
    bi-Laplacian row (9), not the 13 multi-indices of u_xxxx + 2u_xxyy + u_yyyy; d = 3:
    1 + 3 + 6 + 3 + 1 = 14 rows against 25."""
    layout = Layout(("x", "y", "z"), ("x", "y", "z"), ("u",))
    for coords, rows in ((("x", "y"), 8), (("x", "y", "z"), 13)):
        reqs = collect_requests(lambda f, c=coords: f.biharmonic("u", c), layout, jnp.zeros(3))
        plan = _make_plan(reqs)
        assert len(plan.dirs) + len(plan.rest) == rows and plan.order == 4
        assert plan.needed == {("b", tuple(range(len(coords))))}
    plan = _make_plan(collect_requests(lambda f: f.biharmonic("u", ("x", "y")), layout, jnp.zeros(3)))
    assert set(plan.rest) == {
        ("p", (0, 0)), ("p", (0, 1)), ("p", (1, 1)), ("gl", (0, 0, 1)), ("gl", (1, 0, 1)), ("b", (0, 1)),
    }  # fmt: skip


def test_analytic_field(f64):
    """u = sin(2x) cos(3y) + x^3 y^2 + x y z: Delta^2 over (x, y) = 169 s + 24 x (hand-derived;
    a plain function: the generic rule; every method on another field in test_fields)."""
    layout = Layout(("x", "y", "z"), ("x", "y", "z"), ("u",))

    def field(p):
        x, y, z = p
        return jnp.stack([jnp.sin(2 * x) * jnp.cos(3 * y) + x**3 * y**2 + x * y * z])

    pts = jnp.array([[0.3, -0.7, 1.1], [1.2, 0.4, -0.5]])
    want = 169 * np.sin(2 * pts[:, 0]) * np.cos(3 * pts[:, 1]) + 24 * pts[:, 0]
    res = lambda f: f.biharmonic("u", ("x", "y"))
    np.testing.assert_allclose(evaluate(Taylor(), res, field, layout, pts), want, rtol=1e-12)


class UserNet(eqx.Module):
    """A user's own module (no fast rule: the generic path), with a product of branches."""

    a: eqx.nn.Linear
    b: eqx.nn.Linear

    def __init__(self, d, key):
        k1, k2 = jax.random.split(key)
        self.a = eqx.nn.Linear(d, 3, key=k1, dtype=jnp.float64)
        self.b = eqx.nn.Linear(3, 2, key=k2, dtype=jnp.float64)

    def __call__(self, x):
        h = self.a(x)
        return self.b(jnp.tanh(h) * jax.nn.softplus(h[::-1]))


def _gated(kind):
    net = build_network(
        kind, ("x", "y"), ("u", "v"), width=3, depth=1, activation="tanh", init="glorot_normal",
        bounds=((0.0, -1.0), (1.0, 1.0)), fourier=(2, 1.0), key=jax.random.key(5), dtype=jnp.float64,
    )  # fmt: skip
    if kind == "pirate":  # alpha off 0 so that the residual block takes part
        net = eqx.tree_at(lambda n: n.core.blocks[0].alpha, net, jnp.asarray(0.4, jnp.float64))
    return net


def _hard(d):
    lower, upper = (0.0, -1.0, 0.0)[:d], (1.0, 1.0, 2.0)[:d]
    value = lambda x: jnp.sin(x[-2:-1]) * x[-1:] ** 2  # noqa: E731
    hd = HardDirichlet(lower, upper, (d - 2, d - 1), (0,), value, 0 if d == 3 else None)
    core = MLP(d, 2, 3, 1, "gelu", key=jax.random.key(6), dtype=jnp.float64)
    names = ("t", "x", "y")[3 - d :]
    return Network(core, ("u", "v"), names, (), hd)


def _periodic():
    pe = PeriodicEmbedding((2.0, None), (0.0, -1.0), (2.0, 1.0))
    core = MLP(3, 2, 3, 1, "sin", key=jax.random.key(8), dtype=jnp.float64)
    return Network(core, ("u", "v"), ("x", "y"), (pe,))


# the gates' product rule is the same for ModifiedMLP and PirateNet: PirateNet covers both
NETS = {
    "mlp": lambda: MLP(2, 2, 4, 2, "tanh", key=jax.random.key(4), dtype=jnp.float64),
    "generic": lambda: MLP(2, 2, 4, 1, "tanh", key=jax.random.key(4), dtype=jnp.float64),
    "periodic": _periodic,
    "pirate": lambda: _gated("pirate"),
    "hard_dirichlet_t": lambda: _hard(3),
    "user_module": lambda: UserNet(2, jax.random.key(7)),
}


# the PirateNet's oracle is the slowest compile here; HardDirichlet covers the product rule too
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "pirate" else n for n in sorted(NETS)]
)
def test_vs_oracle(f64, name):
    net = NETS[name]()
    layout = LAYOUT3 if name.endswith("_t") else LAYOUT2
    pts = jax.random.uniform(jax.random.key(2), (2, len(layout.coords)), jnp.float64)
    method = Taylor(force_generic=name == "generic")
    oracle = ForwardOverReverse() if name in ("pirate", "hard_dirichlet_t") else Autodiff()
    assert_close(evaluate(method, residual, net, layout, pts), evaluate(oracle, residual, net, layout, pts))


def test_parameter_gradients_match_oracle(f64):
    """Training: `value_and_grad` over the parameters of mean((Delta^2 u - 1)^2)."""
    net = MLP(2, 2, 4, 1, "tanh", key=jax.random.key(9), dtype=jnp.float64)
    params, static = eqx.partition(net, eqx.is_inexact_array)
    pts = jax.random.uniform(jax.random.key(10), (3, 2), jnp.float64)

    def grads(method):
        def loss(p):
            net = eqx.combine(p, static)
            r = jax.vmap(lambda x: method.evaluate(lambda f: f.biharmonic("u"), net, LAYOUT2, x))(pts)
            return jnp.mean((r - 1.0) ** 2)

        return jax.jit(jax.value_and_grad(loss))(params)

    (lt, gt), (la, ga) = grads(Taylor()), grads(Autodiff())
    np.testing.assert_allclose(lt, la, rtol=1e-10)
    for a, b in zip(jax.tree.leaves(gt), jax.tree.leaves(ga), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10 * float(np.abs(b).max()))


def test_float32(f64):
    """float32 against float64 (Taylor, equal to the oracle to 1e-10 in test_vs_oracle): a
    fourth-order row sums ~10 products of rows through each of 3 layers, each rounding to
    2^-24 relative; 2000 ulps of each column's magnitude (as for the lower orders in
    test_diffops) bounds that with a wide margin."""
    net64 = NETS["mlp"]()
    net32 = jax.tree.map(lambda a: a.astype(jnp.float32) if eqx.is_inexact_array(a) else a, net64)
    pts = jax.random.uniform(jax.random.key(2), (4, 2), jnp.float64)
    got = evaluate(Taylor(), residual, net32, LAYOUT2, pts.astype(jnp.float32))
    assert got.dtype == jnp.float32
    ref = evaluate(Taylor(), residual, net64, LAYOUT2, pts)
    assert_close(got, ref, rtol=2000 * float(jnp.finfo(jnp.float32).eps))
