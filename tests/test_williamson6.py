"""Williamson test 6 (C4, shallow water): the dinosaur spectral reference and the problem.

Reference tests need the ``climate`` extra (dinosaur; in ``dev``, so CI runs them). All
in float64 (the solver enables it locally). Tolerances:

- transforms: a degree-≤L harmonic is represented exactly, so synthesis/analysis
  round trips and evaluation at other Gauss nodes are exact up to rounding of O(L)-term
  sums of O(1) values: 1e-11 absolute;
- Williamson 2 at T21 without hyperdiffusion: the steady state (degree ≤ 2) and every
  product the model forms from it are represented exactly, and the time scheme keeps an
  exact steady state steady: what remains is rounding over 72 steps, measured 3e-14 (h,
  l∞) and 1.3e-13 (wind, l2), bound 1e-11. (With the default hyperdiffusion the degree-2
  height mode decays by ~(6/(22·23))²·4 ≈ 6e-4 per day at T21: h l∞ 2e-4, as measured;
  at T170 that factor is ~2e-8.)
- Williamson 6 T31 vs T42 after 6 hours (step 1200 s for both, so only the truncation
  differs): the RH wave's initial state is band-limited (degree ≤ 2R + 2 = 10), and the
  nonlinear terms fill higher degrees slowly; measured l2 9.5e-8 (h), 1.1e-6 (h anomaly),
  1.9e-6 (wind), bounds 1e-6 and 1e-5, against 8.9e-2 for the anomaly's change from
  the initial state.
"""

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.problems import PROBLEMS
from pinnkit.sphere.domain import gaussian_grid, lonlat_to_xyz, williamson_errors

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _real_ylm(deg, m, lon, lat):
    """Re Y_l^m (scipy's orthonormal complex harmonics): P_l^m(sin lat) cos(m lon) up to a constant."""
    from scipy.special import sph_harm_y

    return np.real(sph_harm_y(deg, m, np.pi / 2 - lat, lon))


def test_transforms_round_trip_ylm():
    """Y_lm on dinosaur's T42 grid: analysis gives one coefficient, synthesis gives Y_lm
    back, and `synthesis_at_gaussian_nodes` evaluates it exactly on pinnkit's Gaussian
    grid (other latitudes and longitudes than the model's)."""
    pytest.importorskip("dinosaur", reason="the climate extra (dinosaur) is not installed")
    from dinosaur import spherical_harmonic as sh

    from pinnkit.solvers.shallow_water import synthesis_at_gaussian_nodes

    with jax.enable_x64(True), jax.numpy_rank_promotion("allow"):
        grid = sh.Grid.T42()
        lon, sin_lat = grid.nodal_mesh
        glon, glat, _ = gaussian_grid(12)
        GLON, GLAT = np.meshgrid(glon, glat, indexing="ij")
        for deg, m in [(0, 0), (3, 0), (4, 3), (10, 7), (42, 42)]:
            y = _real_ylm(deg, m, lon, np.arcsin(sin_lat))
            modal = grid.to_modal(y)
            assert np.sum(np.abs(np.asarray(modal)) > 1e-10) == 1, (deg, m)
            np.testing.assert_allclose(grid.to_nodal(modal), y, atol=1e-11)
            np.testing.assert_allclose(synthesis_at_gaussian_nodes(sh, grid, modal, 12),
                                       _real_ylm(deg, m, GLON, GLAT), atol=1e-11)


def _williamson2_initial(u0=38.61, gh0=2.94e4, a=6.37122e6, omega=7.292e-5):
    def initial(lon, lat):
        return {"u": u0 * np.cos(lat) + 0 * lon, "v": 0 * lon,
                "phi": gh0 - (a * omega * u0 + 0.5 * u0 * u0) * np.sin(lat) ** 2 + 0 * lon}

    return initial


def test_williamson2_stays_steady():
    """Williamson 2 (alpha = 0) integrated one day at T42 stays at its initial state."""
    pytest.importorskip("dinosaur", reason="the climate extra (dinosaur) is not installed")
    from pinnkit.solvers.shallow_water import solve_shallow_water

    out = solve_shallow_water(_williamson2_initial(), 21, 1.0, 1200.0, nlat=16, diffusion_hours=math.inf)
    lon, lat, w = gaussian_grid(16)
    exact = _williamson2_initial()(*np.meshgrid(lon, lat, indexing="ij"))
    assert out["steps"] == 72
    assert williamson_errors(out["phi"], exact["phi"], w)["linf"] < 1e-11
    wind = np.stack([out["u"], out["v"]], -1)
    assert williamson_errors(wind, np.stack([exact["u"], exact["v"]], -1), w)["l2"] < 1e-11
    assert abs(out["mass_drift"]) < 1e-13 and abs(out["energy_drift"]) < 1e-12


def test_hyperdiffusion_rate():
    """With hyperdiffusion (top degree L = 22 e-folds in 6 h) the degree-2 height anomaly
    of Williamson 2 decays over a day by 1 - exp(-4 (6/(22·23))²) = 5.6e-4 if diffusion
    acted alone; geostrophic adjustment passes part of the loss to the wind (measured
    4.4e-4, i.e. 0.78 of it). Bounds 0.5–1.0 of the prediction: a wrong order or
    normalisation of nu4 is off by a factor of 8 or more."""
    pytest.importorskip("dinosaur", reason="the climate extra (dinosaur) is not installed")
    from pinnkit.solvers.shallow_water import solve_shallow_water

    out = solve_shallow_water(_williamson2_initial(), 21, 1.0, 1200.0, nlat=16, diffusion_hours=6.0)
    lon, lat, w = gaussian_grid(16)
    exact = _williamson2_initial()(*np.meshgrid(lon, lat, indexing="ij"))
    anomaly = lambda p: p - np.sum(w * p) / np.sum(w)
    a, b = anomaly(out["phi"]), anomaly(exact["phi"])
    decay = 1 - np.sum(w * a * b) / np.sum(w * b * b)
    predicted = 1 - math.exp(-4 * (6 / (22 * 23)) ** 2)
    assert 0.5 * predicted < decay < predicted


def test_williamson6_two_resolutions_agree(tmp_path):
    """T31 and T42 agree after 6 hours (the fast stand-in for the T85/T170 comparison in
    docs/climate.md), the wave has moved east at about its barotropic speed (differences
    far below the change from the initial state), and the cache returns the same numbers
    without solving."""
    pytest.importorskip("dinosaur", reason="the climate extra (dinosaur) is not installed")
    from pinnkit.solvers.shallow_water import williamson6_initial, williamson6_reference

    low = williamson6_reference(31, 0.25, 1200.0, 16, cache_dir=tmp_path)
    high = williamson6_reference(42, 0.25, 1200.0, 16, cache_dir=tmp_path)
    lon, lat, w = gaussian_grid(16)
    start = williamson6_initial(*np.meshgrid(lon, lat, indexing="ij"))
    anomaly = lambda p: p - np.sum(w * p) / np.sum(w)
    diff = williamson_errors(anomaly(low["phi"]), anomaly(high["phi"]), w)["l2"]
    moved = williamson_errors(anomaly(start["phi"]), anomaly(high["phi"]), w)["l2"]
    wind = lambda s: np.stack([s["u"], s["v"]], -1)
    assert williamson_errors(low["phi"], high["phi"], w)["l2"] < 1e-6
    assert diff < 1e-5 and williamson_errors(wind(low), wind(high), w)["l2"] < 1e-5
    assert moved > 5e-2  # the wave drifts ~3 degrees in 6 hours
    # ... eastward at about the barotropic Rossby–Haurwitz speed nu (the frame and sign of
    # the reference): the initial state shifted east by 0.9 nu t is far closer than either
    # persistence or a westward shift (day 1 at T85: 0.020 against 0.34 and 0.65)
    nu = (4 * 7 * 7.848e-6 - 2 * 7.292e-5) / 30 * 86400 * 0.25  # rad in 6 hours
    LON, LAT = np.meshgrid(lon, lat, indexing="ij")
    shifted = {d: williamson6_initial(LON - d * 0.9 * nu, LAT)["phi"] for d in (1, -1)}
    east, west = (williamson_errors(anomaly(shifted[d]), anomaly(high["phi"]), w)["l2"] for d in (1, -1))
    assert east < moved / 5 and west > moved
    again = williamson6_reference(42, 0.25, 1200.0, 16, cache_dir=tmp_path)
    assert again["wall_s"] == high["wall_s"] and np.array_equal(again["phi"], high["phi"])
    assert len(list(tmp_path.glob("williamson6_T*.npz"))) == 2


def test_initial_state_cartesian_matches_lonlat_formula():
    """The problem's Cartesian initial state (stream function, wind n x grad psi, the A/B/C
    height) equals Williamson's lon/lat formulas, non-dimensionalised (rounding only)."""
    from pinnkit.problems.climate import DAY, EARTH_RADIUS
    from pinnkit.solvers.shallow_water import williamson6_initial

    with jax.enable_x64(True):
        problem = PROBLEMS["williamson6"](with_reference=False)
        rng = np.random.default_rng(0)
        lon = rng.uniform(0, 2 * np.pi, 64)
        lat = np.arcsin(np.concatenate([rng.uniform(-1, 1, 62), [-1 + 1e-15, 1 - 1e-15]]))
        pts = jnp.concatenate([jnp.zeros((64, 1)), jnp.asarray(lonlat_to_xyz(lon, lat))], 1)
        got = np.asarray(jax.vmap(problem.hard_constraint.value)(pts))
    ref = williamson6_initial(lon, lat)
    east = np.stack([-np.sin(lon), np.cos(lon), 0 * lon], -1)
    north = np.stack([-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon), np.cos(lat)], -1)
    s = DAY / EARTH_RADIUS
    wind = (ref["u"][:, None] * east + ref["v"][:, None] * north) * s
    np.testing.assert_allclose(got[:, :3], wind, atol=1e-13)
    np.testing.assert_allclose(got[:, 3], ref["phi"] * s * s, rtol=1e-13)


def test_drifting_wave_balances_momentum_not_continuity():
    r"""The initial state rotated east at the barotropic RH speed
    $\nu = (R(3 + R)\omega - 2\Omega)/((1 + R)(2 + R))$ solves the momentum equation
    exactly (Williamson's height is the nonlinear balance of the non-divergent wave), so
    every shallow-water departure from the barotropic wave sits in the continuity residual,
    where $h_0\nabla\cdot\mathbf v$ ($\Phi_0 \approx 14.4$) weighs it: unweighted, the loss
    hardly tells this 2 %-accurate state from persistence (why configs/climate_w6.yaml
    weights continuity by $1/\Phi_0$). Float64; the momentum bound is rounding of O(10)
    terms (measured 4e-30 mean square); the continuity figures measured 0.217/0.322."""
    from pinnkit.diffops import Autodiff
    from pinnkit.problems.climate import DAY, EARTH_OMEGA, EARTH_RADIUS, GRAVITY

    with jax.enable_x64(True):
        problem = PROBLEMS["williamson6"](with_reference=False).without(["initial"])
        state = problem.hard_constraint.value
        nu = (4 * 7 * 7.848e-6 - 2 * EARTH_OMEGA) * DAY / 30

        def rot(a, v):
            c, s = jnp.cos(a), jnp.sin(a)
            return jnp.stack([c * v[0] - s * v[1], s * v[0] + c * v[1], v[2]])

        def drifting(x):
            y = state(jnp.concatenate([x[:1], rot(-nu * x[0], x[1:])]))
            return jnp.concatenate([rot(nu * x[0], y[:3]), y[3:]])

        rng = np.random.default_rng(0)
        n = rng.normal(size=(512, 3))
        unit = n / np.linalg.norm(n, axis=1)[:, None]
        pts = jnp.asarray(np.concatenate([rng.uniform(0, 1, (512, 1)), unit], 1))
        loss = lambda net: {k: float(jnp.mean(jnp.sum(r * r, -1))) for k, r in problem.residuals(
            net, problem.coeff_values(), {"momentum": pts, "continuity": pts}, Autodiff()).items()}
        moving, still = loss(drifting), loss(state)
    phi0 = GRAVITY * 8000.0 * (DAY / EARTH_RADIUS) ** 2
    assert moving["momentum"] < 1e-20 < 0.1 < still["momentum"]
    assert 0.2 < still["continuity"] < moving["continuity"] < 0.5
    weighted = lambda m: m["momentum"] + m["continuity"] / phi0
    assert weighted(moving) < 0.2 * weighted(still)


def test_missing_dinosaur_is_a_clear_error(monkeypatch):
    """Without the extra, building the problem (not the metrics after training) raises one
    PinnkitError naming the extra; with_reference=False still builds."""
    from pinnkit.errors import PinnkitError

    monkeypatch.setitem(sys.modules, "dinosaur", None)  # import dinosaur -> ImportError
    with pytest.raises(PinnkitError, match=r"pip install -e \.\[climate\]"):
        PROBLEMS["williamson6"]()
    assert PROBLEMS["williamson6"](with_reference=False).metrics is None


def test_bad_reference_settings_are_config_errors():
    """An unknown truncation or a step that does not divide the horizon: ConfigErrors at build."""
    import pinnkit
    from pinnkit.errors import ConfigError

    cfg = ROOT / "configs" / "tiny" / "climate_w6.yaml"
    build = lambda override: pinnkit.build_run(pinnkit.load_config(cfg, [override]), with_mesh=False)
    with pytest.raises(ConfigError, match="truncation"):
        build("problem.params.reference_truncation=50")
    with pytest.raises(ConfigError, match="whole number"):
        build("problem.params.reference_dt_s=7000")


@pytest.mark.slow
def test_tiny_run_reports_errors_against_reference(tmp_path, monkeypatch):
    """configs/tiny/climate_w6.yaml end to end through the CLI: summary.json has the
    Williamson errors against the T42 reference, its settings and drifts, and the
    persistence errors. The prediction at t0 is the exact initial state (hard constraint)
    and the reference conserves mass exactly (the spectral mean is not touched)."""
    pytest.importorskip("dinosaur", reason="the climate extra (dinosaur) is not installed")
    import json

    from pinnkit.cli.main import main

    monkeypatch.setenv("PINNKIT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "w6"
    rc = main(["train", str(ROOT / "configs" / "tiny" / "climate_w6.yaml"), "--out", str(out), "--overwrite",
               "--quiet", "--set", "train.steps=10"])
    assert rc in (0, None)
    m = json.loads((out / "summary.json").read_text())["metrics"]
    assert m["t"] == 0.25 and m["reference"]["truncation"] == 42 and m["reference"]["steps"] == 18
    assert m["reference"]["mass_drift"] == pytest.approx(0.0, abs=1e-14)
    for k in ("h", "h_anomaly", "wind"):
        assert set(m[k]) == {"l1", "l2", "linf"} and all(math.isfinite(v) for v in m[k].values())
    # persistence: the initial state vs the 6-hour reference; the anomaly moves by O(10 %)
    persist = m["persistence"]
    assert 1e-3 < persist["h_anomaly"] < 0.5 and persist["h"] < persist["h_anomaly"]
    assert math.isfinite(m["mass_drift"]) and math.isfinite(m["energy_drift"])
    assert len(list((tmp_path / "cache").glob("williamson6_T42_*.npz"))) == 1
