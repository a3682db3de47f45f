"""The BDF2 finite-element flow stepper (pinnkit.solvers.fem_unsteady): second order in
time, the steady limit, the cache, the periodic figures. Needs the ``fem`` extra."""

import math

import numpy as np
import pytest

pytest.importorskip("ngsolve", reason="the fem extra (NGSolve) is not installed: pip install -e .[fem]")

from pinnkit.geometry import Rectangle  # noqa: E402
from pinnkit.solvers.fem_unsteady import periodic_figures, solve_unsteady  # noqa: E402

L, H, U, NU = 1.0, 0.5, 1.0, 0.05
CHANNEL = Rectangle((0, 0), (L, H), names={"left": "inlet", "right": "outlet"})
BC = {"inlet": lambda x, y: (4 * U * y * (H - y) / H**2, 0 * y), "bottom": (0, 0), "top": (0, 0)}


def _probe(dt, t_end=0.4, cache=False):
    h = solve_unsteady(CHANNEL, NU, BC, t_end=t_end, dt=dt, maxh=0.25, ramp=0.4,
                       probes=[[0.5, 0.2]], forces=["bottom"], cache=cache)
    return h


def test_bdf2_is_second_order_in_time():
    # Channel start-up under a ramped inflow, a transient with no closed form: the probe's
    # u at t = 0.4 for dt = 0.04, 0.02, 0.01 on one mesh; successive differences shrink by
    # 2^p: 4 for BDF2 (measured 4.6), 2 for backward Euler. Assert > 3.
    u = [_probe(dt).probes[-1, 0, 0] for dt in (0.04, 0.02, 0.01)]
    ratio = abs(u[0] - u[1]) / abs(u[1] - u[2])
    assert ratio > 3.0, (u, ratio)


def test_start_up_reaches_the_exact_poiseuille_flow_and_the_cache_reads_it_back(tmp_path):
    # Long after the ramp the flow is plane Poiseuille (exact in P2 x P1, see
    # test_fem_ns); the diffusive time H^2 / nu = 5 s, so by t = 12 the transient has
    # decayed by exp(-pi^2 nu t / H^2) ~ 1e-10.
    h = solve_unsteady(CHANNEL, NU, BC, t_end=12.0, dt=0.2, maxh=0.25, ramp=0.4,
                       probes=[[0.5, 0.2]], forces=["bottom"], cache=tmp_path)
    x, y = 0.5, 0.2
    exact = (4 * U * y * (H - y) / H**2, 0.0, 8 * NU * U / H**2 * (L - x))
    np.testing.assert_allclose(h.probes[-1, 0], exact, atol=1e-7)
    np.testing.assert_allclose(h.final.evaluate(np.array([[x, y]]))[0], exact, atol=1e-7)
    again = solve_unsteady(CHANNEL, NU, BC, t_end=12.0, dt=0.2, maxh=0.25, ramp=0.4,
                           probes=[[0.5, 0.2]], forces=["bottom"], cache=tmp_path)
    assert again.info["cached"] and not h.info["cached"]
    np.testing.assert_array_equal(again.probes, h.probes)
    np.testing.assert_array_equal(again.forces["bottom"], h.forces["bottom"])
    assert len(h.times) == 60 and h.times[-1] == pytest.approx(12.0)


def test_periodic_figures_of_a_known_signal():
    t = np.linspace(0, 10, 4001)
    f = 3.05
    lift = 1.01 * np.sin(2 * math.pi * f * t + 0.3)
    drag = 3.2 + 0.03 * np.sin(4 * math.pi * f * t)
    out = periodic_figures(t, drag, lift)
    assert out["frequency"] == pytest.approx(f, rel=1e-5)
    assert out["c_L_max"] == pytest.approx(1.01, rel=1e-5)
    assert out["c_L_min"] == pytest.approx(-1.01, rel=1e-5)
    assert out["c_D_max"] == pytest.approx(3.23, rel=1e-5)
    with pytest.raises(ValueError, match="no periodic shedding"):
        periodic_figures(t, drag, 0.01 + 0 * t)


def test_kept_steps_are_the_solutions_of_their_times_and_are_cached(tmp_path):
    """keep_from: the whole solution of every step from then on; each snapshot evaluates to
    the probe values recorded at its step, the last is the final solution, and a second
    call reads them back from the cache; a time outside [0, t_end] is refused."""
    from pinnkit.solvers.fem_geometry import FemGeometryError

    kw = dict(t_end=0.4, dt=0.04, maxh=0.25, ramp=0.4, probes=[[0.5, 0.2]], cache=tmp_path)
    h = solve_unsteady(CHANNEL, NU, BC, keep_from=0.3, **kw)
    np.testing.assert_allclose(h.kept_times, [0.32, 0.36, 0.4])
    assert h.kept.shape[0] == 3 and not h.info["cached"]
    for i, t in enumerate(h.kept_times):
        step = int(np.argmin(np.abs(h.times - t)))
        np.testing.assert_allclose(h.snapshot(i).evaluate(np.array([[0.5, 0.2]]))[0], h.probes[step, 0],
                                   atol=1e-12)
    np.testing.assert_array_equal(h.kept[-1], h.final.gf.vec.FV().NumPy())
    again = solve_unsteady(CHANNEL, NU, BC, keep_from=0.3, **kw)
    assert again.info["cached"]
    np.testing.assert_array_equal(again.kept, h.kept)
    np.testing.assert_array_equal(again.kept_times, h.kept_times)
    plain = solve_unsteady(CHANNEL, NU, BC, **kw)  # its own cache entry: nothing kept
    assert not plain.info["cached"] and plain.kept.shape[0] == 0
    np.testing.assert_array_equal(plain.probes, h.probes)
    with pytest.raises(FemGeometryError, match="keep_from must be a time in"):
        solve_unsteady(CHANNEL, NU, BC, keep_from=0.5, **kw)
