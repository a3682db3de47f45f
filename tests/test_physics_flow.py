"""The public flow and energy-balance pieces (`pinnkit.physics.flow`,
`pinnkit.physics.energy_balance`): residuals against jax.grad of analytic fields, Stokes
against Navier–Stokes, the outflow condition along either axis, Dirichlet and exact
velocity data on named pieces, the old import paths."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit import Box, Problem
from pinnkit.diffops import Autodiff
from pinnkit.physics import energy_balance as ebm
from pinnkit.physics import flow


def _harmonic(x):
    """u = psi_y, v = -psi_x of the harmonic psi = x^3 y - x y^3: divergence-free,
    harmonic velocity (a Stokes flow with p = const) whose convection is not zero."""
    u = x[0] ** 3 - 3 * x[0] * x[1] ** 2
    v = x[1] ** 3 - 3 * x[0] ** 2 * x[1]
    return jnp.stack([u, v, jnp.zeros_like(u)])


def _residuals(problem, net, n=32):
    batch = {k: problem.domain.sample(jax.random.key(i), n, t.where, jnp.float64)
             for i, (k, t) in enumerate(sorted(problem.terms.items()))}
    return problem.residuals(net, problem.coeff_values(), batch, Autodiff()), batch


@pytest.mark.parametrize("stokes", [False, True])
def test_momentum_is_navier_stokes_or_stokes(stokes, x64):
    dom = Box((-1.0, -1.0), (1.0, 1.0))
    terms = flow.equations("velocity_pressure", 2, unsteady=False, convection=not stokes)
    p = Problem(dom, flow.out_names("velocity_pressure", 2), terms, coeffs={"nu": 0.3})
    res, batch = _residuals(p, _harmonic)
    assert float(jnp.max(jnp.abs(res["continuity"]))) < 1e-12
    # oracle: (u . grad) u from jax's Jacobian of the analytic field
    jac = jax.vmap(jax.jacfwd(lambda x: _harmonic(x)[:2]))(batch["momentum"])
    vel = jax.vmap(_harmonic)(batch["momentum"])[:, :2]
    convection = jnp.einsum("nij,nj->ni", jac, vel)
    want = jnp.zeros_like(convection) if stokes else convection
    np.testing.assert_allclose(res["momentum"], want, rtol=1e-12, atol=1e-12)
    assert float(jnp.max(jnp.abs(convection))) > 0.1  # the two variants differ


def test_vorticity_form_refuses_stokes_and_3d():
    with pytest.raises(ValueError, match="2-D only"):
        flow.equations("vorticity_streamfunction", 3, unsteady=False)
    with pytest.raises(ValueError, match="velocity–pressure form"):
        flow.equations("vorticity_streamfunction", 2, unsteady=False, convection=False)
    with pytest.raises(ValueError, match="form must be one of"):
        flow.check_form("primitive")
    assert flow.out_names("vorticity_streamfunction", 2) == ("psi", "omega")
    assert flow.out_names("velocity_pressure", 3) == ("u", "v", "w", "p")


@pytest.mark.parametrize("axis", ["x", "y"])
def test_outflow_residual_along_either_axis(axis, x64):
    """nu d_n u - p n with n = e_axis, against the formula written out."""
    from pinnkit.physics.terms import Equation

    def field(x):
        return jnp.stack([jnp.sin(x[0]) * x[1], jnp.cos(x[1]) + x[0] ** 2, jnp.exp(x[0] - x[1])])

    dom = Box((0.0, 0.0), (1.0, 1.0))
    out = lambda f, c: flow.outflow_residual(f, c, axis=axis)  # noqa: E731
    p = Problem(dom, ("u", "v", "p"), {"out": Equation(out, where="interior")}, coeffs={"nu": 0.2})
    res, batch = _residuals(p, field)
    k = "xy".index(axis)
    jac = jax.vmap(jax.jacfwd(field))(batch["out"])
    want = 0.2 * jac[:, :2, k] - jax.vmap(field)(batch["out"])[:, 2:3] * jnp.eye(2)[k][None, :]
    np.testing.assert_allclose(res["out"], want, rtol=1e-12, atol=1e-14)


def test_velocity_data_as_terms_and_exactly():
    dom = Box((0.0, 0.0), (2.0, 1.0))
    inflow = flow.parabolic_inflow(1.5, 1.0)
    data = {"left": inflow, "top": None, "bottom": None}
    terms = flow.velocity_terms(data)
    assert list(terms) == ["left", "top", "bottom"]
    assert terms["left"].target is inflow and terms["top"].target is None
    assert all(t.fields == ("u", "v") for t in terms.values())
    np.testing.assert_allclose(inflow(jnp.asarray([0.0, 0.5])), [1.5, 0.0])  # peak on the centre line
    from pinnkit.geometry import Rectangle

    shape = Rectangle((0.0, 0.0), (2.0, 1.0))
    hc = flow.hard_velocity(shape, data)
    y = jnp.asarray([0.3, -0.8, 0.25])
    for piece, g in data.items():
        pts = shape.sample(jax.random.key(3), 8, piece, jnp.float32)
        got = jax.vmap(lambda x: hc(x, y))(pts)
        want = jnp.zeros((8, 2)) if g is None else jax.vmap(g)(pts)
        np.testing.assert_allclose(got[:, :2], want, atol=1e-6)
        np.testing.assert_allclose(got[:, 2], 0.25)
    with pytest.raises(ValueError, match="pressure_pin must be a point with 2 coordinates"):
        flow.pressure_pin(dom, [0.5], 0.0)
    pin = flow.pressure_pin(dom, [0.5, 0.5], 1.25)
    assert pin.fields == ("p",) and np.all(pin.rows()[:, -1] == 1.25)


def test_old_paths_give_the_public_pieces():
    from pinnkit.problems import dfg, inverse, navier_stokes

    assert navier_stokes.momentum_residual is flow.momentum_residual
    assert navier_stokes.continuity_residual is flow.continuity_residual
    assert navier_stokes._equations is flow.equations and navier_stokes.FORMS is flow.FORMS
    assert inverse.ebm_steady_modes is ebm.ebm_steady_modes and inverse._p2 is ebm.legendre_p2
    assert inverse.EBM_A == ebm.EBM_A and dfg.momentum_residual is flow.momentum_residual


def test_energy_balance_steady_modes_solve_the_steady_equation(x64):
    """D d/dx[(1 - x^2) T'] - (A + B T) + Q s a = 0 for T = T0 + T2 P2 + T4 P4, by jax.grad."""
    D, a0, a2, s2 = 0.55, 0.7, 0.078, 0.48
    T0, T2, T4 = ebm.ebm_steady_modes(D, a0=a0, a2=a2, s2=s2)

    def T(x):
        return T0 + T2 * ebm.legendre_p2(x) + T4 * ebm.legendre_p4(x)

    def residual(x):
        flux = lambda z: (1 - z * z) * jax.grad(T)(z)  # noqa: E731
        sa = ebm.absorbed_fraction(x, a0, a2, s2)
        return D * jax.grad(flux)(x) - (ebm.EBM_A + ebm.EBM_B * T(x)) + ebm.EBM_Q * sa

    xs = jnp.linspace(-1.0, 1.0, 41)
    # terms of size Q ~ 341 W m^-2: float64 round-off ~1e-13
    assert float(jnp.max(jnp.abs(jax.vmap(residual)(xs)))) < 1e-10
    assert abs(T0 - 15.733) < 1e-3 and abs(T2 + 25.971) < 1e-3  # North's values (docstring)
