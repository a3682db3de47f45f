"""Reference solvers: exactness where a closed form exists, convergence where it does not.

Everything runs in float64 (each test enables x64 locally and restores it). Grids are
small; each tolerance says where its size comes from.
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from pinnkit.solvers import (
    BURGERS_NU,
    KolmogorovForcing,
    allen_cahn_grid,
    allen_cahn_initial_condition,
    burgers_cole_hopf,
    burgers_reference,
    fourier_interpolate,
    periodic_grid,
    periodic_interpolate,
    pressure_from_velocity,
    primitive_from_vorticity,
    solve_allen_cahn,
    solve_vorticity,
    taylor_green,
    taylor_green_vorticity,
    velocity_from_vorticity,
    vorticity_from_velocity,
)


@pytest.fixture(autouse=True)
def _float64():
    with jax.enable_x64(True):
        yield


# One viscosity, output grid and tolerance for every Navier–Stokes solve below, so that
# solves on the same grid size share one compilation.
NU = 0.05
T_NS = [0.0, 0.5, 1.0]
TOL_NS = 1e-12


def _ns(omega0, forcing=None):
    return solve_vorticity(omega0, NU, T_NS, forcing=forcing, rtol=TOL_NS, atol=TOL_NS)


def _smooth_ic(x, y):
    # Non-trivial and non-stationary (several interacting modes), analytic: spectral
    # accuracy is limited only by the modes the nonlinear cascade creates.
    return jnp.cos(x + 0.3) * jnp.sin(2 * y) + 0.8 * jnp.sin(x) * jnp.cos(y) + 0.5 * jnp.cos(3 * x - y)


@pytest.fixture(scope="module")
def ns_convergence():
    with jax.enable_x64(True):
        return {n: np.asarray(_ns(_smooth_ic(*periodic_grid(n)))) for n in (16, 32, 64, 128)}


# ---------------------------------------------------------------- Navier–Stokes


def test_taylor_green_exact_float64_64():
    # Acceptance criterion: <= 1e-10 at 64^2. The advection term of Taylor–Green vanishes
    # identically and the integrating factor makes the viscous decay exact, so only
    # round-off (~1e-15) is left.
    x, y = periodic_grid(64)
    omega = _ns(taylor_green_vorticity(x, y, 0.0, NU))
    assert omega.dtype == jnp.float64
    for i, t in enumerate(T_NS):
        u, v, p = primitive_from_vorticity(omega[i])
        ue, ve, pe = taylor_green(x, y, t, NU)
        assert jnp.max(jnp.abs(omega[i] - taylor_green_vorticity(x, y, t, NU))) <= 1e-10
        for got, want in ((u, ue), (v, ve), (p, pe)):
            assert jnp.max(jnp.abs(got - want)) <= 1e-10
    # Off-grid, through the exact Fourier series.
    pts = np.random.default_rng(0).uniform(-1.0, 8.0, size=(2, 500))
    got = fourier_interpolate(omega[-1], pts[0], pts[1])
    assert jnp.max(jnp.abs(got - taylor_green_vorticity(pts[0], pts[1], T_NS[-1], NU))) <= 1e-10


def test_pressure_poisson_and_stream_function_on_taylor_green():
    x, y = periodic_grid(32)
    u, v, p = taylor_green(x, y, 0.3, NU)
    # The identity itself, with derivatives written out by hand:
    # lap p = -(u_x^2 + 2 u_y v_x + v_y^2) for divergence-free u.
    e = np.exp(-2 * NU * 0.3)
    u_x, u_y = np.sin(x) * np.sin(y) * e, -np.cos(x) * np.cos(y) * e
    v_x, v_y = np.cos(x) * np.cos(y) * e, -np.sin(x) * np.sin(y) * e
    lap_p = (np.cos(2 * x) + np.cos(2 * y)) * e**2
    np.testing.assert_allclose(lap_p, -(u_x**2 + 2 * u_y * v_x + v_y**2), atol=1e-14)
    # ... and the spectral solver of it (zero mean fixes the constant).
    assert jnp.max(jnp.abs(pressure_from_velocity(u, v) - p)) <= 1e-13
    assert abs(float(jnp.mean(pressure_from_velocity(u, v)))) <= 1e-14
    # Stream function round trip and incompressibility.
    omega = vorticity_from_velocity(u, v)
    assert jnp.max(jnp.abs(omega - taylor_green_vorticity(x, y, 0.3, NU))) <= 1e-13
    u2, v2 = velocity_from_vorticity(omega)
    assert max(jnp.max(jnp.abs(u2 - u)), jnp.max(jnp.abs(v2 - v))) <= 1e-13


def test_navier_stokes_spectral_convergence(ns_convergence):
    # Errors at t = 1 of n = 16, 32, 64 against n = 128, on the coarse grid points (a
    # subset of the fine grid). A method of order p would give a constant ratio
    # e(n)/e(2n) = 2^p; spectral convergence makes the ratio itself grow quickly.
    # Measured: e = 1.8e-2, 4.7e-5, 1.2e-10, ratios 375 and 4e5. The time error
    # (tolerance 1e-12) is far below e(64).
    ref = ns_convergence[128][-1]
    err = {n: np.max(np.abs(ns_convergence[n][-1] - ref[:: 128 // n, :: 128 // n])) for n in (16, 32, 64)}
    r1, r2 = err[16] / err[32], err[32] / err[64]
    assert err[64] < 1e-8
    assert r1 > 2**6  # already better than 6th order from 16 to 32 ...
    assert r2 > 100 * r1  # ... and the apparent order keeps rising
    # The flow did evolve (the cascade is what made n = 16 inaccurate).
    assert np.max(np.abs(ns_convergence[128][-1] - ns_convergence[128][0])) > 0.1


def test_fourier_interpolate_reproduces_grid_values(ns_convergence):
    # A generic (not band-limited) field on an even grid: the interpolant must pass
    # through the grid values, Nyquist modes included.
    omega = jnp.asarray(ns_convergence[32][-1])
    x, y = periodic_grid(32)
    assert jnp.max(jnp.abs(fourier_interpolate(omega, x, y) - omega)) <= 1e-13
    # Off-grid, the 32-point interpolant is as good as the 32-point solution: measured
    # 5.1e-5 against the 128-point one, the same as e(32) on the grid.
    pts = np.random.default_rng(1).uniform(0.0, 2 * np.pi, size=(2, 300))
    fine = fourier_interpolate(jnp.asarray(ns_convergence[128][-1]), pts[0], pts[1])
    assert jnp.max(jnp.abs(fourier_interpolate(omega, pts[0], pts[1]) - fine)) < 2e-4


def test_kolmogorov_forcing_laminar_response():
    # From rest, f = -A k cos(k y) drives the shear flow u = (U(t) sin(k y), 0), for which
    # u.grad(omega) = 0 exactly, so omega = -(A k / lam)(1 - e^{-lam t}) cos(k y) with
    # lam = nu k^2 + drag. Checks the sign, wavenumber and drag of the forcing.
    forcing = KolmogorovForcing(amplitude=1.0, wavenumber=2, drag=0.1)
    x, y = periodic_grid(16)
    omega = _ns(jnp.zeros_like(x), forcing)
    k, lam = 2.0, NU * 4.0 + 0.1
    for i, t in enumerate(T_NS):
        want = -(k / lam) * (1 - np.exp(-lam * t)) * np.cos(k * y)
        assert jnp.max(jnp.abs(omega[i] - want)) <= 1e-10


# ---------------------------------------------------------------- Burgers


def _burgers_fourier(n, t_final, n_seg, dt):
    """Independent check: u(x, 0) = -sin(pi x) is odd and 2-periodic, so the Dirichlet
    problem is the periodic one. Fourier Galerkin (2/3 rule) in x; the viscous term by an
    integrating factor (reset every segment so that it stays < e^700); the advection by
    fixed-step Tsit5 from diffrax."""
    x = -1.0 + 2.0 * jnp.arange(n) / n
    m = np.fft.rfftfreq(n, 1.0 / n)
    k = jnp.asarray(np.pi * m)
    mask = jnp.asarray(m <= (n - 1) // 3)
    lam = BURGERS_NU * k**2
    lam_if = jnp.where(mask, lam, 0.0)  # modes outside the band only decay

    def vector_field(s, w, args):
        grow = jnp.exp(lam_if * s)
        u = jnp.fft.irfft(jnp.where(mask, (w[0] + 1j * w[1]) / grow, 0), n)
        nl = grow * (-0.5j * k * jnp.where(mask, jnp.fft.rfft(u * u), 0))  # -(u^2/2)_x
        return jnp.stack([nl.real, nl.imag])

    h = t_final / n_seg

    def segment(u_hat, _):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(vector_field),
            diffrax.Tsit5(),
            0.0,
            h,
            dt,
            jnp.stack([u_hat.real, u_hat.imag]),
            saveat=diffrax.SaveAt(t1=True),
            max_steps=None,
            throw=False,  # no host callback, so the persistent compilation cache applies
        )
        u_hat = (sol.ys[0, 0] + 1j * sol.ys[0, 1]) * jnp.exp(-lam * h)
        return u_hat, (u_hat, sol.result == diffrax.RESULTS.successful)

    u0_hat = jnp.fft.rfft(-jnp.sin(jnp.pi * x))
    _, (out, ok) = jax.lax.scan(segment, u0_hat, None, length=n_seg)
    return x, jnp.fft.irfft(out, n), jnp.all(ok)


def test_burgers_cole_hopf_matches_independent_spectral_solve():
    # 2048 modes resolve the shock (width ~2 nu / |jump| ~ 4e-3) to ~4e-10 (measured with
    # Dopri8); fixed-step Tsit5 with dt = 1e-3 adds a fifth-order time error measured at
    # 2.1e-7 (4.7e-9 at dt = 5e-4). Tolerance 1e-6: 5x margin on the time error.
    n_seg = 40
    x, u, ok = jax.jit(_burgers_fourier, static_argnums=(0, 1, 2, 3))(2048, 1.0, n_seg, 1e-3)
    assert ok
    x, u = np.asarray(x), np.asarray(u)
    t = np.arange(1, n_seg + 1) / n_seg
    exact = burgers_cole_hopf(x[None, :], t[:, None])
    assert np.max(np.abs(u - exact)) < 1e-6


def test_burgers_quadrature_converged_and_symmetric():
    x, t, u = burgers_reference()
    assert u.shape == (100, 256) and u.dtype == np.float64
    # 100 vs 200 (default) Gauss-Hermite nodes: the module docstring explains why both
    # are at round-off; measured 4e-15.
    u100 = burgers_cole_hopf(x[None, :], t[:, None], n_quad=100)
    assert np.max(np.abs(u100 - u)) < 1e-12
    np.testing.assert_allclose(u[0], -np.sin(np.pi * x), atol=1e-15)
    np.testing.assert_allclose(u, -u[:, ::-1], atol=1e-13)  # odd in x
    assert np.max(np.abs(u[:, [0, -1]])) < 1e-13  # u(+-1, t) = 0
    assert np.max(np.abs(burgers_cole_hopf(0.0, t))) < 1e-13  # u(0, t) = 0
    assert np.max(np.abs(u)) <= 1.0  # maximum principle
    # A shock has formed: u jumps from ~+0.7 to ~-0.7 between the two points nearest 0.
    assert u[-1, 127] > 0.25 and u[-1, 128] < -0.25


def test_burgers_max_gradient_matches_basdevant():
    # Basdevant et al. (1986), the standard check of this problem: max_t |u_x(0, t)| =
    # 152.00516 at t = 1.6037 / pi. u_x(0, t) by Richardson-extrapolated central
    # differences (h^2 error removed; round-off ~1e-16 / h ~ 1e-11 relative).
    def u_x0(t, h):
        return (burgers_cole_hopf(h, t) - burgers_cole_hopf(-h, t)) / (2 * h)

    def slope(t):
        return float((4 * u_x0(t, 5e-6) - u_x0(t, 1e-5)) / 3)

    res = minimize_scalar(slope, bounds=(0.45, 0.55), method="bounded", options={"xatol": 1e-9})
    assert abs(-res.fun - 152.00516) < 5e-5
    assert abs(res.x * np.pi - 1.6037) < 5e-5


# ---------------------------------------------------------------- Allen–Cahn


@pytest.fixture(scope="module")
def allen_cahn_two_resolutions():
    with jax.enable_x64(True):
        t = np.linspace(0.0, 1.0, 21)
        out = {}
        for n in (1024, 2048):
            x = allen_cahn_grid(n)
            out[n] = np.asarray(solve_allen_cahn(allen_cahn_initial_condition(x), t))
        return t, out


def test_allen_cahn_two_resolutions_agree(allen_cahn_two_resolutions):
    # Measured 1024 vs 2048 (at the common points, 21 times): relative L2 1.4e-6, from
    # the kink of u0 at x = +-1 in the first few hundredths; max 3.2e-5 for t >= 0.1;
    # 1.3e-9 at t = 1, where only the interfaces matter. Tolerances ~3x those.
    t, u = allen_cahn_two_resolutions
    coarse, fine = u[1024], u[2048][:, ::2]
    diff = np.abs(coarse - fine)
    assert np.linalg.norm(coarse - fine) / np.linalg.norm(fine) < 5e-6
    assert np.max(diff[t >= 0.1]) < 1e-4
    assert np.max(diff[-1]) < 1e-8
    # Spectral in space: the interpolant of the coarse solution at the fine-only points
    # is as close to the fine solution as the grid values are.
    x_mid = np.asarray(allen_cahn_grid(2048))[1::2]
    mid = periodic_interpolate(jnp.asarray(coarse[-1]), x_mid)
    assert np.max(np.abs(np.asarray(mid) - u[2048][-1, 1::2])) < 1e-8


def test_allen_cahn_known_behaviour(allen_cahn_two_resolutions):
    t, u = allen_cahn_two_resolutions
    u = u[2048]
    x = np.asarray(allen_cahn_grid(2048))
    np.testing.assert_array_equal(u[0], np.asarray(allen_cahn_initial_condition(x)))
    final = u[-1]
    assert np.all(np.abs(final) <= 1.1)  # the benchmark's sanity bound
    assert np.all(np.abs(u) <= 1.0 + 1e-6)  # the maximum principle of u_t = d u_xx + r(u - u^3)
    # Even in x (u0 is even): x_j -> -x_j is j -> n - j.
    np.testing.assert_allclose(final[1:], final[1:][::-1], atol=1e-10)
    # Metastable plateaus at -1 (near x = +-1) and +1 (in between), thin interfaces.
    assert np.mean(np.abs(np.abs(final) - 1) < 0.05) > 0.7
    assert np.all(np.abs(final[np.abs(x) > 0.7] + 1) < 1e-3)
    assert np.all(final[(np.abs(x) > 0.2) & (np.abs(x) < 0.4)] > 0.95)
