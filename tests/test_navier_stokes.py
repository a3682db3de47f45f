"""Navier–Stokes problems: exact solutions zero every residual (and a wrong Reynolds
number does not), hard constraints hold exactly and use boundary data only, the Ghia
tables are intact, the spectral reference reproduces Taylor–Green, tiny configs train
and lower the error, and the flow figures (the notebooks: tests/test_notebooks.py)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import Autodiff
from pinnkit.problems import PROBLEMS
from pinnkit.problems.cavity import lid_driven_cavity
from pinnkit.problems.navier_stokes import (
    GHIA_U,
    GHIA_V,
    GHIA_X,
    GHIA_Y,
    ghia_deviation,
    kovasznay_solution,
    transfinite_extension,
)

ROOT = Path(__file__).resolve().parents[1]


def _batch(problem, n=64, seed=0):
    key = jax.random.key(seed)
    out = {}
    for i, (name, term) in enumerate(sorted(problem.terms.items())):
        if term.where == "data":
            out[name] = jnp.asarray(term.rows())
        else:
            out[name] = problem.domain.sample(jax.random.fold_in(key, i), n, term.where, jnp.float64)
    return out


def _max_residuals(problem, net, coeffs=None, method=None):
    res = problem.residuals(net, coeffs or problem.coeffs, _batch(problem), method or Autodiff())
    return {k: float(jnp.max(jnp.abs(r))) for k, r in res.items()}


EXACT = [
    ("kovasznay", {}),
    ("kovasznay", {"Re": 40, "form": "vorticity_streamfunction"}),
    ("kovasznay", {"pressure_pin": [0.25, 0.5]}),
    ("taylor_green", {}),
    ("taylor_green", {"nu": 0.1, "form": "vorticity_streamfunction"}),
    ("beltrami_flow", {}),
    ("channel_flow", {"Re": 50}),
]


@pytest.mark.parametrize("name,params", EXACT)
def test_exact_solution_zeroes_every_term(name, params, x64):
    problem = PROBLEMS[name](**params)
    res = _max_residuals(problem, problem.reference)
    # O(1) terms of exp/sin products: float64 round-off leaves ~1e-14.
    assert all(v < 1e-10 for v in res.values()), res


def test_taylor_engine_agrees(x64):
    from pinnkit.diffops import METHODS

    problem = PROBLEMS["kovasznay"]()
    wrong = lambda x: problem.reference(x) * 1.01  # noqa: E731
    a = problem.residuals(wrong, problem.coeffs, _batch(problem), Autodiff())
    b = problem.residuals(wrong, problem.coeffs, _batch(problem), METHODS["taylor"]())
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "name,params,wrong",
    [
        ("kovasznay", {"Re": 20}, {"nu": 1 / 25}),
        ("taylor_green", {"nu": 0.01}, {"nu": 0.02}),
        ("beltrami_flow", {"nu": 1.0}, {"nu": 1.1}),
    ],
)
def test_wrong_reynolds_number_leaves_a_residual(name, params, wrong, x64):
    problem = PROBLEMS[name](**params)
    coeffs = {k: jnp.asarray(v, jnp.float64) for k, v in wrong.items()}
    equation = "momentum"
    # Δu is O(1): a 10-25% viscosity error leaves a residual of order 1e-3 or more.
    assert _max_residuals(problem, problem.reference, coeffs)[equation] > 1e-3


@pytest.mark.parametrize(
    "name,params",
    [
        ("kovasznay", {}),
        ("kovasznay", {"form": "vorticity_streamfunction"}),
        ("taylor_green", {}),
        ("beltrami_flow", {"T": 0.5}),
        ("channel_flow", {}),
        ("lid_driven_cavity", {"lid_profile": "smoothed"}),
        ("lid_driven_cavity", {"lid_profile": "uniform"}),
    ],
)
def test_hard_constraint_enforces_its_terms(name, params, x64):
    problem = PROBLEMS[name](**params)
    m = len(problem.out_names)

    def net(x):  # an arbitrary smooth "network"
        raw = jnp.sin(jnp.arange(1, m + 1) * jnp.sum(x)) + 0.3
        return problem.hard_constraint(x, raw)

    # Only the enforced terms (values, no derivatives): cheap even through the 3-D transform.
    enforced = problem.without([k for k in problem.terms if k not in problem.enforced])
    res = _max_residuals(enforced, net)
    assert set(res) == set(problem.enforced) and max(res.values()) < 1e-12, res


def test_kovasznay_transform_sees_boundary_data_only(x64):
    """The hard constraint's extension G is built from boundary values: it agrees with the
    exact solution on the boundary but not inside (it would if it borrowed the interior)."""
    lower, upper = (-0.5, -0.5), (1.0, 1.5)
    calls = []

    def g(x):
        calls.append(x)
        return jnp.stack(kovasznay_solution(x)[:2])

    G = transfinite_extension(g, lower, upper, (0, 1))
    inside = jnp.asarray([0.3, 0.2])
    assert float(jnp.max(jnp.abs(G(inside) - g(inside)))) > 1e-2
    calls.clear()
    G(inside)
    on_faces = [
        bool(jnp.any(jnp.isclose(z, jnp.asarray(lower)) | jnp.isclose(z, jnp.asarray(upper)))) for z in calls
    ]
    assert len(calls) == 8 and all(on_faces)
    edge = jnp.asarray([0.37, 1.5])
    assert float(jnp.max(jnp.abs(G(edge) - g(edge)))) < 1e-14


def test_uniform_lid_leaves_the_lid_velocity_to_the_loss(x64):
    problem = lid_driven_cavity(lid_profile="uniform")
    assert set(problem.enforced) == {"wall_left", "wall_right", "wall_bottom"}
    y = problem.hard_constraint(jnp.asarray([0.5, 1.0]), jnp.asarray([0.7, 0.3, 0.1]))
    # u on the lid is the network's (free), v is exactly zero.
    assert float(y[0]) == pytest.approx(0.7) and float(y[1]) == 0.0


# ------------------------------------------------------------------ Ghia reference


def test_ghia_tables():
    assert GHIA_Y.shape == GHIA_X.shape == (17,)
    assert np.all(np.diff(GHIA_Y) < 0) and np.all(np.diff(GHIA_X) < 0)
    for Re in (100, 400, 1000):
        u, v = GHIA_U[Re], GHIA_V[Re]
        assert u.shape == v.shape == (17,)
        assert u[0] == 1.0 and u[-1] == 0.0  # lid and bottom wall
        assert v[0] == 0.0 and v[-1] == 0.0  # side walls
        # One primary vortex: u changes sign once on x = 0.5, v once on y = 0.5.
        assert np.sum(np.diff(np.sign(u[1:-1])) != 0) == 1
        vv = v[1:-1][~np.isnan(v[1:-1])]
        assert np.sum(np.diff(np.sign(vv)) != 0) == 1
    # The Re = 100 values of Ghia et al. (1982), Tables I and II (P4), spot checks.
    assert GHIA_U[100][8] == -0.20581 and GHIA_V[100][7] == -0.24533 and GHIA_V[100][9] == 0.17527
    # Only the suspect printed value (Re = 400, v at x = 0.9063) is left out.
    assert np.isnan(GHIA_V[400]).sum() == 1 and np.isnan(GHIA_V[400][5])


def test_ghia_deviation_measures_the_tables():
    def interpolant(Re, shift=0.0):
        order_y, order_x = np.argsort(GHIA_Y), np.argsort(GHIA_X)
        yu, uu = jnp.asarray(GHIA_Y[order_y]), jnp.asarray(GHIA_U[Re][order_y])
        xv, vv = jnp.asarray(GHIA_X[order_x]), jnp.asarray(GHIA_V[Re][order_x])
        return lambda p: jnp.stack([jnp.interp(p[1], yu, uu) + shift, jnp.interp(p[0], xv, vv), p[0] * 0])

    for Re in (100, 1000):
        dev = ghia_deviation(interpolant(Re), Re)
        assert dev["max"] < 1e-6, dev
    dev = ghia_deviation(interpolant(100, shift=0.05), 100)
    assert dev["u"] == pytest.approx(0.05, abs=1e-6) and dev["v"] < 1e-6
    with pytest.raises(ValueError, match="Re"):
        ghia_deviation(interpolant(100), 200)


# ------------------------------------------------------- spectral reference


def test_periodic_flow_reference(x64):
    """The spectral reference of the Taylor–Green initial state is Taylor–Green itself;
    for a non-trivial flow it satisfies the equations up to its time interpolation, and a
    wrong viscosity leaves a residual 100x larger."""
    tg = PROBLEMS["taylor_green"](nu=0.05, T=0.5)
    # Same grid, times and viscosity for both solves: one compilation of the solver.
    flow = PROBLEMS["periodic_flow"](omega0="taylor_green", nu=0.05, T=0.5, n=32, n_times=21)
    pts = _batch(flow)["momentum"]
    diff = jax.vmap(flow.reference)(pts) - jax.vmap(tg.reference)(pts)
    assert float(jnp.max(jnp.abs(diff))) < 1e-9
    flow = PROBLEMS["periodic_flow"](
        nu=0.05, T=0.5, n=32, n_times=21, forcing={"amplitude": 0.5, "wavenumber": 2, "drag": 0.1}
    )
    ok = _max_residuals(flow, flow.reference)
    bad = _max_residuals(flow, flow.reference, {"nu": jnp.asarray(0.06)})
    assert ok["continuity"] < 1e-12 and ok["initial"] < 1e-12
    assert ok["momentum"] < 1e-3 and bad["momentum"] > 100 * ok["momentum"], (ok, bad)


# ------------------------------------------------------------ tiny trainings


def _train(name, tmp_path):
    from conftest import TRAINED_SEED

    import pinnkit
    from pinnkit.run.metrics import evaluate

    cfg = pinnkit.load_config(ROOT / "configs" / "tiny" / f"{name}.yaml", [f"train.seed={TRAINED_SEED}"])
    before = pinnkit.build_run(cfg, with_mesh=False)
    errors, _ = evaluate(before.network, before.problem, cfg.eval.resolution, cfg.eval.batch)
    out = tmp_path / name
    summary = pinnkit.train_to_dir(cfg, out, progress=False)
    return out, errors, summary


class _Runs(dict):
    """Trained tiny runs by config name: those the tests below trained, and any other
    trained on first use, so that a test that reads them also runs alone (``-k``)."""

    def __init__(self, factory):
        super().__init__()
        self.factory = factory

    def __missing__(self, name):
        self[name] = _train(name, self.factory.mktemp("ns"))[0]
        return self[name]


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    return _Runs(tmp_path_factory)


@pytest.mark.parametrize("name", ["ns_kovasznay", "ns_taylor_green", "ns_periodic"])
@pytest.mark.trained
def test_tiny_config_trains_and_lowers_the_error(name, tmp_path_factory, tiny_runs, trained):
    out, before, summary = _train(name, tmp_path_factory.mktemp("ns"))
    tiny_runs[name] = out
    assert summary["outcome"] == "successful"
    for field in ("u", "v"):
        trained.check(f"rel_l2 {field} after/before", summary["rel_l2"][field] / before["rel_l2"][field],
                      "<", 0.5)


@pytest.mark.trained
def test_tiny_cavity_trains_toward_ghia(tmp_path_factory, tiny_runs, trained):
    import pinnkit

    out, _, summary = _train("ns_cavity", tmp_path_factory.mktemp("ns"))
    tiny_runs["ns_cavity"] = out
    cfg = pinnkit.load_config(ROOT / "configs" / "tiny" / "ns_cavity.yaml", [f"train.seed={trained.seed}"])
    before = ghia_deviation(pinnkit.build_run(cfg, with_mesh=False).network, 100)
    after = ghia_deviation(pinnkit.load_run(out), 100)
    assert summary["outcome"] == "successful"
    trained.check("Ghia max deviation after/before", after["max"] / before["max"], "<", 1.0)


def test_flow_plots(tiny_runs):
    import pinnkit
    from pinnkit.plot import flow as plot_flow

    run = pinnkit.load_run(tiny_runs["ns_taylor_green"])
    fields = plot_flow.flow_fields(run, resolution=33, t=0.0)
    # At t = 0 the hard constraint makes the network's velocity exact.
    np.testing.assert_allclose(fields["u"], fields["u_ref"], atol=1e-5)
    np.testing.assert_allclose(fields["omega_ref"], 2 * np.cos(fields["x"]) * np.cos(fields["y"]), atol=1e-5)
    paths = plot_flow.write_flow_plots(run, resolution=33, gif=False)
    gif = plot_flow.animate(run, run.path / "plots" / "flow.gif", frames=3, resolution=16)
    assert {p.name for p in paths} == {"flow.png", "flow_reference.png", "flow_error.png"}
    assert gif.stat().st_size > 0
    cavity = pinnkit.load_run(tiny_runs["ns_cavity"])
    assert "centrelines.png" in {p.name for p in plot_flow.write_flow_plots(cavity, 33)}
