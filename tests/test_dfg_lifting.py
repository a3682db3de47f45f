"""`StreamLifting`, the divergence-free hard no-slip of DFG 2D-1 (`dfg_cylinder(lifting=
"stream")`): the lifting is a curl (divergence zero to rounding, against order U/R for the
distance blend), it meets the data on the inlet, the walls and the cylinder whatever the
network outputs, it is C² across its outer circle (the momentum residual stays
continuous), and its Taylor rule gives nested autodiff's derivatives (float64, rtol 1e-10:
both exact)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import Autodiff, Layout, Taylor, jets
from pinnkit.nn.nets import build_mlp_network
from pinnkit.problems import dfg
from pinnkit.problems.dfg_lifting import StreamLifting, inflow_stream


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def _lifting(outer=0.2, profile="wall"):
    base = dfg.no_slip(dfg.channel_domain(), dfg.parabolic_inflow(0.3))
    return StreamLifting(base, 0.3, dfg.HEIGHT, dfg.CENTER, dfg.RADIUS, outer, profile)


def _interior(n, seed):
    pts = np.asarray(dfg.channel_domain().sample(jax.random.key(seed), n, "interior", jnp.float64))
    th = np.linspace(0.0, 2 * np.pi, 7, endpoint=False)
    near = np.stack([0.2 + 0.0505 * np.cos(th), 0.2 + 0.0505 * np.sin(th)], axis=1)  # 1 % of R out
    return jnp.asarray(np.concatenate([pts, near]))


@pytest.mark.parametrize("profile", ["wall", "septic"])
def test_lifting_is_divergence_free_where_the_distance_blend_is_not(f64, profile):
    x = _interior(2000, 1)

    def div(constraint):
        g = lambda z: constraint.lifting(z, 3)[0][:2]  # noqa: E731
        return np.asarray(jax.vmap(lambda z: jnp.trace(jax.jacfwd(g)(z)))(x))

    stream, blend = div(_lifting(profile=profile)), div(_lifting().base)
    assert np.abs(blend).max() > 1.0  # the distance blend: order U/R about the cylinder
    assert np.abs(stream).max() < 1e-12  # rounding of terms of order 10


def test_data_met_exactly_whatever_the_network_says(f64):
    sl = _lifting()
    y_net = jnp.array([0.7, -1.3, 2.0])
    th = np.linspace(0.0, 2 * np.pi, 64, endpoint=False)
    cyl = np.stack([0.2 + dfg.RADIUS * np.cos(th), 0.2 + dfg.RADIUS * np.sin(th)], axis=1)
    ys = np.linspace(0.0, dfg.HEIGHT, 33)
    xs = np.linspace(0.0, dfg.LENGTH, 33)
    inlet = np.stack([0 * ys, ys], axis=1)
    walls = np.concatenate([np.stack([xs, 0 * xs], 1), np.stack([xs, 0 * xs + dfg.HEIGHT], 1)])
    out = lambda pts: np.asarray(jax.vmap(lambda z: sl(z, y_net))(jnp.asarray(pts)))  # noqa: E731
    np.testing.assert_allclose(out(cyl)[:, :2], 0.0, atol=1e-15)
    np.testing.assert_allclose(out(walls)[:, :2], 0.0, atol=1e-15)
    _, u_in = inflow_stream(ys, 0.3, dfg.HEIGHT)
    np.testing.assert_allclose(out(inlet)[:, 0], u_in, rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(out(inlet)[:, 1], 0.0, atol=1e-15)
    assert np.all(out(cyl)[:, 2] == 2.0)  # the pressure passes through


@pytest.mark.parametrize(("profile", "outer"), [("wall", 0.2), ("septic", 0.15)])
def test_lifting_is_c2_across_its_outer_circle(f64, profile, outer):
    """g, its first and second radial derivatives on either side of r = outer agree to
    O(h) (both steps are flat to third order there; not to fourth, so the third radial
    derivative of g jumps, by about (c - psi) S^(4)(1) / (outer - R)^4, 1e5 to 1e6:
    h = 1e-9 keeps the second derivative's gap below 1e-3); beyond it g is the inflow
    profile."""
    sl = _lifting(outer, profile)
    a = 0.7
    g = lambda r: sl.velocity(jnp.array([0.2 + r * np.cos(a), 0.2 + r * np.sin(a)]))  # noqa: E731
    h = 1e-9
    for k, d in enumerate((g, jax.jacfwd(g), jax.jacfwd(jax.jacfwd(g)))):
        lo, hi = np.asarray(d(outer - h)), np.asarray(d(outer + h))
        assert np.abs(lo - hi).max() < 1e-3 * (1 + np.abs(hi).max()), (k, lo, hi)
    z = jnp.array([0.2 + (outer + 0.01) * np.cos(a), 0.2 + (outer + 0.01) * np.sin(a)])
    np.testing.assert_allclose(sl.velocity(z), [inflow_stream(z[1], 0.3, dfg.HEIGHT)[1], 0.0], rtol=1e-14)


def test_rule_matches_autodiff(f64):
    sl = _lifting()
    assert jets.has_rule(sl)
    net = build_mlp_network(("x", "y"), ("u", "v", "p"), width=6, depth=2, activation="tanh",
                            init="glorot_normal", bounds=((0, 0), (2.2, 0.41)), transform=sl,
                            key=jax.random.key(0), dtype=jnp.float64)
    x = _interior(8, 5)
    layout = Layout(("x", "y"), ("x", "y"), ("u", "v", "p"))

    def res(f, c):
        return jnp.stack([f["u"], f["v"], *f.grad("u"), *f.grad("v"), f.laplacian("u"), f.laplacian("v"),
                          f.partial("v", "x", "y"), f.partial("p", "x")])

    run = lambda m: jax.jit(jax.vmap(lambda p: m.evaluate(res, net, layout, p, {})))(x)  # noqa: E731
    got, ref = np.asarray(run(Taylor())), np.asarray(run(Autodiff()))
    assert np.all(np.isfinite(ref))
    np.testing.assert_array_less(np.abs(got - ref) / np.abs(ref).max(axis=0, keepdims=True), 1e-10)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="outer"):
        _lifting(outer=0.25)  # past the gap to the bottom wall (0.2 from the centre)
    with pytest.raises(ValueError, match="profile"):
        _lifting(profile="cubic")
    with pytest.raises(ValueError, match="lifting"):
        dfg.dfg_cylinder(lifting="curl")
    assert isinstance(dfg.dfg_cylinder(lifting="stream").hard_constraint, StreamLifting)
