"""CircleFlux, the continuity equation averaged over disks (issue 36): analytic fluxes of
polynomial and point-source fields through circles, the circles of `inscribed_circles`
inside a shape with holes, and the term inside `Problem` (residuals, Jacobians, config)."""

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import Autodiff, Layout
from pinnkit.geometry.config import build_shape
from pinnkit.physics import CircleFlux
from pinnkit.physics.flow import inscribed_circles
from pinnkit.run.build import build_problem
from pinnkit.run.config import load_config

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "flow_channel.yaml"
LAYOUT = Layout(("x", "y"), ("x", "y"), ("u", "v", "p"))


def _flux(field, circles, nodes=16):
    term = CircleFlux(np.asarray(circles, np.float64), nodes=nodes)
    rows = jnp.asarray(term.rows())
    return np.asarray(jax.vmap(lambda r: term.network_residual(field, LAYOUT, r, {}))(rows))[:, 0]


def test_polynomial_fields_give_their_mean_divergence_over_the_disk(x64):
    # u = (x^2 + y, x y^3): div = 2x + 3x y^2, whose mean over the disk of centre (a, b)
    # and radius r is 2a + 3a (b^2 + r^2/4); the integrand on the circle is a
    # trigonometric polynomial of degree 4 < 16 nodes, so the trapezoidal rule is exact
    field = lambda z: jnp.stack([z[0] ** 2 + z[1], z[0] * z[1] ** 3, 7.0 + 0 * z[0]])  # noqa: E731
    c = np.array([[0.3, -0.2, 0.5, 0.1], [-1.0, 2.0, 0.05, 0.0], [2.0, 1.5, 1.3, 0.37]])
    a, b, r = c[:, 0], c[:, 1], c[:, 2]
    np.testing.assert_allclose(_flux(field, c), 2 * a + 3 * a * (b**2 + r**2 / 4), rtol=1e-12, atol=1e-12)
    # a divergence-free field (a rotation plus a strain) has no flux through any circle
    free = lambda z: jnp.stack([z[1] + z[0], -z[0] - z[1], 0 * z[0]])  # noqa: E731
    assert np.max(np.abs(_flux(free, c))) < 1e-12


@pytest.mark.parametrize("ratio", [0.3, 0.5, 2.0, 3.0])
def test_a_point_sink_is_seen_through_the_circle_to_quadrature_accuracy(x64, ratio):
    # u = -(x - s)/(2 pi |x - s|^2): a unit sink at s, divergence-free everywhere else.
    # Flux -1 through a circle around s (ratio = |s - c|/r < 1), 0 through one beside it;
    # the trapezoidal rule's error on the Poisson kernel is ~ ratio^{+-nodes}
    s = jnp.array([0.2, 0.1])
    sink = lambda z: jnp.stack([*(-(z - s) / (2 * math.pi * jnp.sum((z - s) ** 2))), 0 * z[0]])  # noqa: E731
    r, nodes = 0.4, 16
    centre = np.asarray(s) + ratio * r * np.array([0.6, 0.8])
    got = _flux(sink, [[*centre, r, 0.05]], nodes)[0]
    exact = -1 / (math.pi * r**2) if ratio < 1 else 0.0
    bound = 4 * min(ratio, 1 / ratio) ** nodes / (math.pi * r**2)
    assert abs(got - exact) < bound, (got, exact, bound)
    assert abs(got - exact) < 1e-4 * abs(-1 / (math.pi * r**2))


def test_inscribed_circles_lie_inside_a_shape_with_holes(x64):
    shape = build_shape({"difference": [
        {"rectangle": {"lower": [0, 0], "upper": [3, 1]}},
        {"union": [{"disk": {"center": [0.5, 0.4], "radius": 0.1}},
                   {"rectangle": {"lower": [2.0, 0.3], "upper": [2.2, 0.5]}}]}]}, "shape")
    c = inscribed_circles(shape, 200, seed=3, nodes=16)
    assert c.shape == (200, 4) and np.all(c[:, 2] > 0)
    assert np.all((c[:, 3] >= 0) & (c[:, 3] < 2 * np.pi / 16))
    th = c[:, 3:4] + np.linspace(0, 2 * np.pi, 64, endpoint=False)
    pts = np.stack([c[:, :1] + c[:, 2:3] * np.cos(th), c[:, 1:2] + c[:, 2:3] * np.sin(th)], -1)
    # every point of every circle strictly inside (sdf < 0), with the gap fill[1] leaves
    sdf = np.asarray(jax.vmap(shape.sdf)(jnp.asarray(pts.reshape(-1, 2))))
    assert np.max(sdf) < 0
    np.testing.assert_array_equal(c, inscribed_circles(shape, 200, seed=3, nodes=16))  # fixed by the seed
    with pytest.raises(ValueError, match="fill"):
        inscribed_circles(shape, 4, fill=(0.5, 1.0))


def test_the_flux_term_in_a_flow_problem_sees_a_sink_and_has_jacobians(x64):
    p = build_problem(load_config(TINY, ["problem.params.fem_reference=false",
                                         "network.hard_constraint=false",
                                         "problem.params.flux_circles=32"]))
    term = p.terms["flux"]
    assert isinstance(term, CircleFlux) and term.rows().shape == (32, 4)
    nu = 0.05  # Poiseuille flow (tests/test_flow_problem.py) is divergence-free: no flux
    poiseuille = lambda x: jnp.stack([4 * x[1] * (1 - x[1]), 0 * x[0], 8 * nu * (2 - x[0])])  # noqa: E731
    batch = {"flux": jnp.asarray(term.rows())}
    flux_only = p.without([k for k in p.terms if k != "flux"])
    res = flux_only.residuals(poiseuille, p.coeffs, batch, Autodiff())["flux"]
    assert res.shape == (32, 1) and float(jnp.max(jnp.abs(res))) < 1e-12
    # the same flow less a unit sink at a point of the channel: the circles around it see
    # -1/(pi r^2), the others nothing
    s = jnp.array([1.0, 0.5])
    def sunk(x):
        d = x - s
        return poiseuille(x) - jnp.concatenate([d / (2 * math.pi * jnp.sum(d * d)), jnp.zeros(1)])
    res = np.asarray(flux_only.residuals(sunk, p.coeffs, batch, Autodiff())["flux"])[:, 0]
    rows = term.rows()
    inside = np.hypot(rows[:, 0] - 1.0, rows[:, 1] - 0.5) < rows[:, 2]
    assert inside.any() and (~inside).any()
    np.testing.assert_allclose(res[inside], -1 / (np.pi * rows[inside, 2] ** 2), rtol=1e-2)
    # Jacobians with respect to a parameter vector, as the natural gradient takes them
    def model(theta):
        return (lambda x: poiseuille(x) * theta[0] + theta[1] * jnp.stack([x[0], 0 * x[0], 0 * x[0]])), {}
    out = flux_only.residual_jacobians(model, jnp.array([1.0, 0.5]), batch, Autodiff())
    r, jac = out["flux"]
    assert jac.shape == (32, 1, 2)
    # d/dtheta_1 of the mean divergence of theta_1 (x, 0) is 1 on every disk
    np.testing.assert_allclose(np.asarray(jac[:, 0, 1]), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(r[:, 0]), 0.5, rtol=1e-12)


@pytest.mark.parametrize("value", ["-1", "2.5", "true"])
def test_bad_flux_circles_exit_2_with_one_paragraph(value, tmp_path, monkeypatch, capsys):
    from pinnkit.cli.main import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    args = ["train", str(TINY), "--out", str(tmp_path / "run"), "--quiet", "--no-plots",
            "--set", f"problem.params.flux_circles={value}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "flux_circles" in err and "Traceback" not in err and "\n\n" not in err.strip(), err
