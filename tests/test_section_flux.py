"""SectionFlux, the volume flux through cross-sections as a loss term (issue 33): analytic
fluxes of Poiseuille fields along tilted axes and of a pipe flow that leaks, the term in
`pipe_flow` (residuals, Jacobians) and its bad input."""

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from pinnkit.diffops import Autodiff, Layout
from pinnkit.physics import SectionFlux
from pinnkit.physics.sections import section_frame, unit_disk_rule, unit_square_rule
from pinnkit.problems.pipe import section_flux

ROOT = Path(__file__).resolve().parents[1]
STL = ROOT / "configs" / "meshes" / "bent_pipe.stl"
LAYOUT = Layout(("x", "y", "z"), ("x", "y", "z"), ("u", "v", "w", "p"))


def _residuals(field, sections, **kw):
    term = SectionFlux(np.asarray(sections, np.float64), **kw)
    rows = jnp.asarray(term.rows())
    return np.asarray(jax.vmap(lambda r: term.network_residual(field, LAYOUT, r, {}))(rows))[:, 0]


def _poiseuille(Q, c, d, R, leak=0.0):
    """Poiseuille's profile of flux ``Q - leak * s`` along the unit ``d`` through ``c``,
    ``s`` the distance along the axis: a pipe that loses ``leak`` per unit length."""
    c, d = jnp.asarray(c), jnp.asarray(d) / np.linalg.norm(d)

    def u(x):
        q = x - c
        s = jnp.dot(q, d)
        r2 = jnp.sum(q * q) - s**2
        return jnp.concatenate([2 * (Q - leak * s) / (math.pi * R**2) * (1 - r2 / R**2) * d, jnp.ones(1)])

    return u


def test_unit_disk_rule_and_frames():
    nodes, w = unit_disk_rule(5, 12)
    assert nodes.shape == (60, 2) and w.sum() == pytest.approx(math.pi, rel=1e-14)
    # exact for r^4 (degree 4 <= 2 n_r - 2 in r, with the area element) and cos(3 theta) r^3
    r2 = np.sum(nodes**2, axis=1)
    assert np.sum(w * r2**2) == pytest.approx(math.pi / 3, rel=1e-13)
    assert abs(np.sum(w * nodes[:, 0] ** 3 - 3 * w * nodes[:, 0] * nodes[:, 1] ** 2)) < 1e-14
    for n in ([1, 0, 0], [0.3, -2.0, 0.7], [0, 0, -5]):
        f = section_frame(n)
        np.testing.assert_allclose(f @ f.T, np.eye(3), atol=1e-14)
        np.testing.assert_allclose(f[0], np.asarray(n) / np.linalg.norm(n), atol=1e-15)
    with pytest.raises(ValueError, match="n_theta"):
        unit_disk_rule(4, 2)


def test_unit_square_rule_and_square_sections(x64):
    """Tensor Gauss-Legendre with n per side: exact to degree 2n - 1 in each coordinate,
    not beyond; a square section's residual is the mean normal velocity over 4 R^2."""
    nodes, w = unit_square_rule(3)
    assert nodes.shape == (9, 2) and w.sum() == pytest.approx(4.0, rel=1e-15)
    assert np.sum(w * nodes[:, 0] ** 4 * nodes[:, 1] ** 4) == pytest.approx(0.4**2, rel=1e-14)
    assert abs(np.sum(w * nodes[:, 0] ** 5 * nodes[:, 1] ** 3)) < 1e-15
    assert abs(np.sum(w * nodes[:, 0] ** 6) - 4 / 7) > 1e-3  # degree 6 > 2n - 1: not exact
    # u = 1 + y^2 along e_x through the square of half-side 0.5 about the origin:
    # flux (1 + 1/12) * 1, mean 13/12
    u = lambda x: jnp.stack([1 + x[1] ** 2, x[2], x[0], x[0]])  # noqa: E731
    got = _residuals(u, [[0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.5, 0.0]], n_r=2, shape="square")
    np.testing.assert_allclose(got, [13 / 12], rtol=1e-14)
    with pytest.raises(ValueError, match="shape"):
        SectionFlux(np.zeros((1, 8)) + [0, 0, 0, 1, 0, 0, 1, 0], shape="hexagon")


def test_poiseuille_flux_through_tilted_sections_is_its_q_to_rounding(x64):
    Q, R = 0.3, 0.4
    c, d = np.array([0.1, -0.2, 0.3]), np.array([1.0, 2.0, -0.5])
    u = _poiseuille(Q, c, d, R)
    dn = d / np.linalg.norm(d)
    secs = [[*(c + t * dn), *d, R, Q] for t in (-1.0, 0.0, 2.5)]
    assert np.max(np.abs(_residuals(u, secs))) < 1e-14
    # another target: the mean normal velocity's deviation (Q - Q') / (pi R^2); the flux
    # counts along the row's normal, so the reversed normal sees -Q
    got = _residuals(u, [[*c, *d, R, 0.1], [*c, *(-d), R, 0.1]])
    np.testing.assert_allclose(got, [0.2 / (math.pi * R**2), -0.4 / (math.pi * R**2)], rtol=1e-13)
    # the check's quadrature (pinnkit.problems.pipe) agrees
    assert section_flux(lambda p: jax.vmap(u)(jnp.asarray(p)), c, d, R) == pytest.approx(Q, rel=1e-13)


def test_a_leaking_pipe_shows_its_lost_flux_in_every_section(x64):
    Q, R, leak = 0.2, 0.5, 0.01  # 0.01 lost per unit length through the wall
    c, d = np.zeros(3), np.array([0.0, 1.0, 1.0]) / math.sqrt(2)
    u = _poiseuille(Q, c, d, R, leak)
    s = np.array([0.5, 1.5, 3.0])
    got = _residuals(u, [[*(c + t * d), *d, R, Q] for t in s], n_r=4, n_theta=8)
    np.testing.assert_allclose(got, -leak * s / (math.pi * R**2), rtol=1e-12)


def _pipe_config(**params):
    return {"problem": {"name": "pipe_flow", "params": {
        "domain": {"mesh": {"file": str(STL)}}, "Q": 0.2, "nu": 0.05, **params}},
        "sampler": {"batch": {"momentum": 16, "continuity": 16, "wall": 16, "inlet": 16, "outlet": 16}},
        "train": {"steps": 1, "chunk": 1}, "checkpoint": {"every": 0}}


def test_pipe_flow_flux_sections_make_a_term_with_jacobians(x64, tmp_path):
    from pinnkit.run.build import build_problem
    from pinnkit.run.config import load_config

    path = tmp_path / "pipe.yaml"
    secs = [[[-2.0, 0, 0], [1, 0, 0]], [[1.5, 2.5, 0], [0, 2, 0]]]
    path.write_text(yaml.safe_dump(_pipe_config(flux_sections=secs)))
    p = build_problem(load_config(path))
    term = p.terms["flux"]
    assert isinstance(term, SectionFlux) and term.rows().shape == (2, 14)
    np.testing.assert_allclose(term.sections[:, 6:], [[0.5, 0.2], [0.5, 0.2]], atol=1e-6)  # the cap's R
    only = p.without([k for k in p.terms if k != "flux"])
    batch = {"flux": jnp.asarray(term.rows())}
    # a uniform velocity (1, 0, 0): flux pi R^2 through the inlet leg's section, 0 through the outlet leg's
    def model(theta):
        return (lambda x: jnp.stack([theta[0] + 0 * x[0], theta[1] + 0 * x[0], 0 * x[0], 0 * x[0]])), {}
    r, jac = only.residual_jacobians(model, jnp.array([1.0, 0.0]), batch, Autodiff())["flux"]
    area = math.pi * term.sections[0, 6] ** 2
    np.testing.assert_allclose(np.asarray(r[:, 0]), [1 - 0.2 / area, -0.2 / area], rtol=1e-12)
    assert jac.shape == (2, 1, 2)
    np.testing.assert_allclose(np.asarray(jac[:, 0]), [[1, 0], [0, 1]], atol=1e-12)
    assert "flux" not in build_problem(load_config(path, ["problem.params.flux_sections=[]"])).terms


@pytest.mark.parametrize("value, says", [
    ([[1, 2]], "flux_sections.0.0"),
    ([[[0, 0, 0], [0, 0, 0]]], "flux_sections.0.1: the normal must not be zero"),
    ("all", "flux_sections: expected a list"),
])
def test_bad_flux_sections_exit_2_with_one_paragraph(tmp_path, capsys, value, says):
    from pinnkit.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_pipe_config(flux_sections=value)))
    rc = main(["train", str(path), "--out", str(tmp_path / "run"), "--no-plots", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "Traceback" not in err and "\n\n" not in err, err
    assert says in " ".join(err.split()), err
