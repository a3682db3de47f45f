"""OscillationFloor, the floor on a periodic solution's phase variance over a region
(issue 36, the DFG 2D-2 cold start): exact variances of trigonometric fields, zero for a
limit cycle that oscillates enough, the floor for a steady one, the term inside
`dfg_shedding` (residuals, Jacobians) and a bad option's one-paragraph exit 2."""

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import Autodiff, Layout
from pinnkit.physics.limit_cycle import EPS, OscillationFloor, box_points
from pinnkit.problems.dfg2 import dfg_shedding

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "ns_cylinder_dfg2.yaml"
LAYOUT = Layout(("t", "x", "y"), ("t", "x", "y"), ("u", "v", "p"))


def _residual(field, rows, floor, phases=8):
    term = OscillationFloor(np.asarray(rows, np.float64), floor, phases=phases)
    rows = jnp.asarray(term.rows())
    return np.asarray(jax.vmap(lambda r: term.network_residual(field, LAYOUT, r, {}))(rows))


@pytest.mark.parametrize("amp", [0.05, 0.3])
def test_the_residual_is_the_shortfall_of_the_exact_phase_variance(x64, amp):
    # v = g(x) + amp (sin 2 pi s + 0.5 cos 6 pi s): variance amp^2 (1/2 + 1/8) exactly with
    # 8 equally spaced phases (degree 3 < 8/2), whatever the offset and the steady part g
    field = lambda z: jnp.stack([z[1], 3 * z[1] * z[2] + amp * (jnp.sin(2 * math.pi * z[0])  # noqa: E731
                                  + 0.5 * jnp.cos(6 * math.pi * z[0])), z[2] ** 2])
    rows = box_points([[0.4, 1.2], [0.1, 0.3]], 16, 8, seed=1)
    var, a = amp**2 * 0.625, 0.1
    want = max(a - math.sqrt(var + (EPS * a) ** 2), 0.0)
    np.testing.assert_allclose(_residual(field, rows, a)[:, 0], want, atol=1e-14)


def test_a_steady_field_pays_the_floor_and_a_large_cycle_nothing(x64):
    rows = box_points([[0.4, 1.2], [0.1, 0.3]], 32, 8)
    steady = lambda z: jnp.stack([z[1], z[1] * z[2], z[2]])  # noqa: E731
    np.testing.assert_allclose(_residual(steady, rows, 0.2), 0.2 * (1 - EPS), rtol=1e-6)
    # a travelling wave v = A sin 2 pi (s - x / lambda): the same variance at every point
    wave = lambda z: jnp.stack([z[1], 0.4 * jnp.sin(2 * math.pi * (z[0] - z[1] / 0.8)), z[2]])  # noqa: E731
    assert np.max(_residual(wave, rows, 0.2)) == 0.0


def test_box_points_lie_in_the_box_with_offsets_below_one_phase_step():
    p = box_points([[0.4, 1.2], [0.1, 0.3]], 100, 8, seed=2)
    assert p.shape == (100, 3)
    assert np.all((p[:, 0] >= 0.4) & (p[:, 0] <= 1.2) & (p[:, 1] >= 0.1) & (p[:, 1] <= 0.3))
    assert np.all((p[:, 2] >= 0) & (p[:, 2] < 1 / 8))
    np.testing.assert_array_equal(p, box_points([[0.4, 1.2], [0.1, 0.3]], 100, 8, seed=2))
    with pytest.raises(ValueError, match="lo < hi"):
        box_points([[1.2, 0.4], [0.1, 0.3]], 10, 8)
    with pytest.raises(ValueError, match="floor > 0"):
        OscillationFloor(p, 0.0)


def test_the_term_in_dfg_shedding_has_residuals_and_jacobians(x64):
    p = dfg_shedding(oscillation=0.1, oscillation_points=24)
    term = p.terms["oscillation"]
    assert isinstance(term, OscillationFloor) and term.rows().shape == (24, 3)
    assert "oscillation" not in dfg_shedding().terms
    only = p.without([k for k in p.terms if k != "oscillation"])
    batch = {"oscillation": jnp.asarray(term.rows())}

    def model(theta):  # v = theta_0 sin 2 pi s: variance theta_0^2 / 2
        return (lambda x: jnp.stack([x[1], theta[0] * jnp.sin(2 * math.pi * x[0]), 0 * x[0]])), {}
    r, jac = only.residual_jacobians(model, jnp.array([0.05]), batch, Autodiff())["oscillation"]
    # r = a - sqrt(theta^2/2 + e^2), dr/dtheta = -(theta/2)/sqrt(theta^2/2 + e^2) at theta = a/2
    a, th = 0.1, 0.05
    sd = math.sqrt(th**2 / 2 + (EPS * a) ** 2)
    np.testing.assert_allclose(np.asarray(r[:, 0]), a - sd, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(jac[:, 0, 0]), -(th / 2) / sd, rtol=1e-12)
    # at zero oscillation the gradient along the oscillating direction does not vanish
    # (the variance's would): d r / d theta -> -1/sqrt(2) as theta -> 0 (for theta >> e)
    _, jac0 = only.residual_jacobians(model, jnp.array([1e-2 * a]), batch, Autodiff())["oscillation"]
    assert float(jnp.max(jac0[:, 0, 0])) < -0.7


@pytest.mark.parametrize("setting", ["problem.params.oscillation_box=[[1.2, 0.4], [0.1, 0.3]]",
                                     "problem.params.oscillation=-0.1"])
def test_bad_oscillation_options_exit_2_with_one_paragraph(setting, tmp_path, monkeypatch, capsys):
    from pinnkit.cli.main import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    args = ["train", str(TINY), "--out", str(tmp_path / "run"), "--quiet", "--no-plots", "--set", setting,
            "--set", "problem.params.oscillation=0.1" if "box" in setting else "train.steps=1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "oscillation" in err and "Traceback" not in err and "\n\n" not in err.strip(), err
