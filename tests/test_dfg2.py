"""DFG 2D-2 vortex shedding over one period (`pinnkit.problems.dfg2`): the signal analysis on
sampled sinusoids, the unsteady volume force, the residuals and anchor on analytic fields,
the exact boundary data at every phase, bad parameters, and the tiny config end to end."""

import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.cli import main
from pinnkit.diffops import METHODS
from pinnkit.problems import PROBLEMS
from pinnkit.problems.dfg import CENTER, RADIUS, annulus_rule, circle_force, cutoff, volume_force
from pinnkit.problems.dfg2 import DFG2_BANDS, TimeSlice, oscillation, peak
from pinnkit.run.metrics import Predictor

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny" / "ns_cylinder_dfg2.yaml")
NU, FREQ = 1e-3, 3.1  # any frequency (Hz): the phase s = f t


def _phases(samples):
    """What `shedding_quantities` samples: two periods, ``samples`` phases each, ends included."""
    return np.arange(2 * samples + 1) / samples


@pytest.mark.parametrize("samples", [8, 48])
def test_frequency_is_exact_when_sampled_as_the_metrics_sample(samples):
    """A periodic signal sampled a whole number of times per period: every crossing sees the
    same samples, so the period is exact up to float64 rounding of t ~ 1 (1e-12 leaves 1e4
    ulps), whatever the phase, the mean and a strong second harmonic."""
    t = _phases(samples) / FREQ
    for phase in (0.0, 0.37, 2.0):
        y = 0.1 + np.sin(2 * np.pi * FREQ * t + phase) + 0.4 * np.sin(4 * np.pi * FREQ * t + 1.0)
        got = oscillation(t, y)
        assert got["frequency"] == pytest.approx(FREQ, rel=1e-12), (phase, got)
        assert len(got["crossings"]) == 2 and got["note"] is None


def test_frequency_on_an_incommensurate_grid_has_the_interpolation_error():
    """37.3 samples per period over 6 periods: at a zero of sin (an inflection) the chord's
    zero is off by h³ a(1 - a)(1 - 2a)/6 ≤ 0.016 h³ rad (h = 2π f Δt = 0.168, the crossing
    at a fraction a of the step): 7.6e-5 rad, so the period over the 4-5 cycles between the
    first and last crossing is off by at most 2·7.6e-5 / (2π·4) = 6e-6 (measured up to 3.7e-6)."""
    t = np.arange(0, 6 / FREQ, 1 / (37.3 * FREQ))
    got = oscillation(t, np.sin(2 * np.pi * FREQ * t + 1.0))
    assert got["frequency"] == pytest.approx(FREQ, rel=1e-5)
    assert got["frequency"] != pytest.approx(FREQ, rel=1e-12)  # not commensurate: not exact


def test_no_oscillation_gives_no_frequency():
    t = _phases(48) / FREQ
    flat = oscillation(t, 0.3 + 1e-3 * np.sin(2 * np.pi * FREQ * t))  # below 0.01
    assert flat["frequency"] is None and "no oscillation" in flat["note"]
    assert flat["amplitude"] == pytest.approx(1e-3, rel=1e-2)
    ramp = oscillation(t, np.sin(np.pi * FREQ * t / 2))  # half a wave: one crossing at most
    assert ramp["frequency"] is None and "no period" in ramp["note"]


@pytest.mark.parametrize("samples", [8, 48])
def test_peak_refinement(samples):
    """The parabola through the top three samples of A sin + c: the error is O(h⁴) in value
    and O(h³) in phase, h = 2π/n the sample spacing (measured over all sample offsets: at
    most 0.024 A h⁴, 7e-6 A at n = 48, and 0.016 h³ rad); the bounds A h⁴/8 and h³ rad leave
    5x and 60x, and are far below the raw top sample's A h²/8."""
    t = _phases(samples) / FREQ
    h = 2 * np.pi / samples
    for phase in (0.1, 0.25, 0.77):
        y = 0.5 + 1.3 * np.sin(2 * np.pi * (FREQ * t + phase))
        tp, yp = peak(t, y)
        assert abs(yp - 1.8) <= 1.3 * h**4 / 8 + 1e-15, (phase, yp)
        assert yp >= y.max() - 1e-15
        # the top's time, modulo the period
        top = ((0.25 - phase) % 1.0) / FREQ
        dt = (tp - top + 0.5 / FREQ) % (1 / FREQ) - 0.5 / FREQ
        assert abs(dt) <= h**3 / (2 * np.pi * FREQ), (phase, tp, top)


def _unsteady():
    """(s, x, y) -> (u, v, p): a divergence-free flow vanishing on the cylinder, u = a(s) ∇⊥ψ
    (as in test_dfg), p = b(s) p0, and the body force that makes it a solution,
    f ∂_s u + (u·∇)u + ∇p − νΔu."""
    c = jnp.asarray(CENTER)

    def psi(x):
        r2 = jnp.sum((x - c) ** 2)
        return (r2 - RADIUS**2) ** 2 * (jnp.cos(3 * x[0]) + 2 * x[1] + x[0] * x[1]) * 1e3

    def fields(z):
        s, x = z[0], z[1:]
        g = jax.grad(psi)(x)
        a = 1.0 + 0.7 * jnp.sin(2 * jnp.pi * s)
        p = (jnp.sin(3 * x[0]) * x[1] + x[0] ** 2) * (1.0 + 0.5 * jnp.cos(2 * jnp.pi * s))
        return jnp.stack([a * g[1], -a * g[0], p])

    def forcing(z):
        jac = jax.jacfwd(fields)(z)  # columns (s, x, y)
        lap = jnp.trace(jax.hessian(fields)(z)[:2, 1:, 1:], axis1=1, axis2=2)
        u = fields(z)[:2]
        return FREQ * jac[:2, 0] + jac[:2, 1:] @ u + jac[2, 1:] - NU * lap

    return fields, forcing


def test_unsteady_volume_force_matches_the_surface_integral(x64):
    r"""At a time slice: $F_{surface} = F_{volume} + \int\xi\,\mathbf f$ once the volume rule
    has $-\int\xi\,\partial_t\mathbf u$ (`TimeSlice.dudt`, $f\,\partial_s$); both rules are
    converged in float64, so 1e-10. Without the term the two differ at O(1) of the force."""
    fields, forcing = _unsteady()
    pred = Predictor(fields, dtype=jnp.float64)
    for s in (0.1, 0.6):
        sl = TimeSlice(pred, s, FREQ, rows=512)
        surface = circle_force(sl, NU, n=128, offset=0.0)
        pts, w, r = annulus_rule(n_r=32, n_theta=256)
        f = np.asarray(jax.vmap(forcing)(jnp.asarray(np.c_[np.full(len(pts), s), pts])))
        body = (w[:, None] * cutoff(r)[0][:, None] * f).sum(axis=0)
        volume = volume_force(sl, NU, n_r=32, n_theta=256, dudt=sl.dudt)
        np.testing.assert_allclose(volume + body, surface, rtol=1e-10, atol=1e-14)
        steady = volume_force(sl, NU, n_r=32, n_theta=256)
        assert np.max(np.abs(steady + body - surface)) > 1e-2 * np.max(np.abs(surface))


def _wavy(z, k=40.0):
    """(s, x, y) -> u = a(s) sin(ky), v = a(s) sin(kx), p = b(s) e^x cos y."""
    s, x, y = z[0], z[1], z[2]
    a, b = 1.0 + 0.7 * jnp.sin(2 * jnp.pi * s), 1.0 + 0.5 * jnp.cos(2 * jnp.pi * s)
    return jnp.stack([a * jnp.sin(k * y), a * jnp.sin(k * x), b * jnp.exp(x) * jnp.cos(y)])


def test_residuals_and_anchor_on_an_analytic_field(x64):
    """Taylor-engine residuals against nested autodiff of the same field: momentum is
    f ∂_s u + (u·∇)u + ∇p − νΔu with the coefficient's f (float64: 1e-10); the anchor at the
    probe is (v, max(0, 2πa − ∂_s v)), active or not."""
    prob = PROBLEMS["dfg_shedding"](amplitude=1.0)
    assert prob.domain.coords == ("t", "x", "y") and (prob.domain.t0, prob.domain.t1) == (0.0, 1.0)
    assert prob.trainable == {"frequency"} and float(prob.coeffs["frequency"]) == pytest.approx(2.0)
    prob = prob.without(["continuity", "outlet", "inlet", "walls", "cylinder"])

    def expected(z):
        jac = jax.jacfwd(_wavy)(z)
        lap = jnp.trace(jax.hessian(_wavy)(z)[:2, 1:, 1:], axis1=1, axis2=2)
        return FREQ * jac[:2, 0] + jac[:2, 1:] @ _wavy(z)[:2] + jac[2, 1:] - NU * lap

    pts = jnp.asarray(prob.domain.sample(jax.random.key(0), 16, "interior", jnp.float64))
    coeffs = {**prob.coeffs, "frequency": jnp.asarray(FREQ)}
    batch = {"momentum": pts, "anchor": jnp.asarray(prob.terms["anchor"].rows())}
    res = prob.residuals(_wavy, coeffs, batch, METHODS["taylor"]())
    np.testing.assert_allclose(res["momentum"], jax.vmap(expected)(pts), rtol=1e-10, atol=1e-10)
    probe = jnp.asarray(prob.terms["anchor"].rows()[0])
    assert probe.tolist() == [0.0, 0.5, 0.2]
    v, dv = float(_wavy(probe)[1]), float(jax.jacfwd(_wavy)(probe)[1, 0])  # dv = 0.7·2π sin(20)
    floor = 2 * math.pi * 1.0
    assert 0 < dv < floor  # slow: the hinge is active
    np.testing.assert_allclose(res["anchor"][0], [v, floor - dv], rtol=1e-12)
    fast = prob.residuals(lambda z: _wavy(z) * 10.0, coeffs, batch, METHODS["taylor"]())["anchor"]
    np.testing.assert_allclose(fast[0], [10 * v, 0.0], rtol=1e-12)  # fast enough: inactive


def test_boundary_data_are_exact_at_every_phase(x64):
    """The hard constraint on the space-time channel: the inflow U_max = 1.5 and no-slip at
    points of any phase, the outlet and the pressure free."""
    prob = PROBLEMS["dfg_shedding"]()
    hard, dom = prob.hard_constraint, prob.domain
    y = jnp.array([0.7, -0.3, 0.4])
    pts = np.concatenate([dom.sample(jax.random.key(1), 32, piece, jnp.float64)
                          for piece in ("inlet", "walls", "cylinder")])
    assert np.ptp(pts[:32, 0]) > 0.5 and np.ptp(pts[-32:, 0]) > 0.5  # spread over the period
    out = np.asarray(jax.jit(jax.vmap(lambda z: hard(z, y)))(jnp.asarray(pts)))
    want = np.zeros((96, 2))
    want[:32, 0] = 6 * pts[:32, 2] * (0.41 - pts[:32, 2]) / 0.41**2  # U_max = 1.5
    np.testing.assert_allclose(out[:, :2], want, atol=1e-12)
    np.testing.assert_allclose(out[:, 2], 0.4)


@pytest.mark.parametrize(("setting", "named"), [
    ("St0=0.9", "St0=0.9 must lie strictly inside St_range"),
    ("St_range=[0.5,0.1]", "St_range=[0.5, 0.1] must be two Strouhal numbers"),
    ("probe=[0.1,0.2]", "probe=[0.1, 0.2] must be a point of the fluid downstream"),
    ("amplitude=-1", "amplitude=-1.0 must be >= 0"),
    ("samples=2", "samples=2 must be an integer >= 4"),
    ("nu=0", "nu=0.0 must be a positive kinematic viscosity"),
])
def test_bad_params_exit_2_with_one_paragraph(setting, named, capsys):
    rc = main(["train", TINY, "--dry-run", "--set", f"problem.params.{setting}"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err, err
    text = " ".join(err.split())
    assert "problem.params of 'dfg_shedding'" in text and named in text, text
    assert "\n\n" not in err.strip()


@pytest.mark.parametrize("periodic", ["{}", "{t: 2.0}"])
def test_a_network_not_periodic_in_the_phase_exits_2(periodic, capsys):
    """The phase formulation is wrong without a network periodic in t over [0, 1]
    (`Problem.periodic`): refused before training, with the line to add."""
    rc = main(["train", TINY, "--dry-run", "--set", f"network.periodic={periodic}"])
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2 and "Traceback" not in err, err
    assert "needs a network periodic in {'t': 1.0}" in err and "add network.periodic: {t: 1}" in err


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from conftest import TRAINED_SEED

    out = tmp_path_factory.mktemp("dfg2") / "run"
    rc = main(["train", TINY, "--out", str(out), "--quiet", "--no-plots",
               "--set", f"train.seed={TRAINED_SEED}"])
    assert rc == 0
    return out


def test_tiny_config_writes_the_figures(tiny_run):
    summary = json.loads((tiny_run / "summary.json").read_text())
    m = summary["metrics"]
    assert len(m["t"]) == len(m["c_L"]) == len(m["c_D_volume"]) == 2 * 8 + 1
    # time in seconds: two periods of the trained frequency, which is the summary's coefficient
    f = summary["coeffs"]["frequency"]
    assert m["frequency_coefficient"] == f and m["t"][-1] == pytest.approx(2 / f, rel=1e-12)
    assert f != pytest.approx(2.0, rel=1e-6) and 1.0 < f < 5.0  # trained, inside St_range
    # the network is periodic in the phase (float32 rounding of cos 2π)
    assert m["periodic_defect"] < 1e-5
    assert m["c_L_max"] == pytest.approx(max(m["c_L"]), abs=0.5 * np.ptp(m["c_L"]))
    assert set(m["bands"]) == set(DFG2_BANDS)
    for k, b in m["bands"].items():
        assert b["band"] == list(DFG2_BANDS[k]) and (b["met"] is None) == (b["value"] is None)
    if m["St"] is None:
        assert m["delta_p"] is None and m["note"]
    else:
        assert m["St"] == pytest.approx(m["frequency_lift"] * 2 * RADIUS / 1.0, rel=1e-12)
        assert math.isfinite(m["delta_p"])


@pytest.mark.trained
def test_tiny_config_trains(tiny_run, trained):
    summary = json.loads((tiny_run / "summary.json").read_text())
    first = json.loads((tiny_run / "metrics.jsonl").read_text().splitlines()[0])
    # 100 Adam steps (seed 0, default ISA, AMD EPYC): loss 18.3 -> 0.78, ratio 0.043, margin
    # 11.7x (other seeds and ISAs not measured yet)
    trained.check("final/first loss", summary["final_loss"] / first["loss"], "<", 0.5)
