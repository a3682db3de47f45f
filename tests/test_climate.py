"""Climate problems (C1–C4): exact solutions have ~zero residual in float64, a wrong
parameter gives a clearly non-zero one; the tiny configs train end to end and write
Williamson's metrics into summary.json.

Residual tolerances: the residuals are O(1)–O(10) combinations of exact derivatives
evaluated by nested autodiff in float64, so 1e-9 absolute is ~1e6 ulps of headroom; the
wrong-parameter residuals are O(0.1) or larger.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import Taylor
from pinnkit.problems import PROBLEMS

CASES = [
    ("ebm", {}, "D", 1.2),
    ("tracer_transport", {}, "u0", 1.1),
    ("tracer_transport", {"alpha": math.pi / 2 - 0.05}, "u0", 1.1),
    ("williamson2", {}, "omega", 1.1),
    ("williamson2", {"alpha": math.pi / 4}, "omega", 1.1),
    ("rossby_haurwitz", {}, "omega", 1.1),
]


def _batch(problem, n=32):
    key = jax.random.key(0)
    return {k: problem.domain.sample(jax.random.fold_in(key, i), n, t.where, jnp.float64)
            for i, (k, t) in enumerate(sorted(problem.terms.items()))}


@pytest.mark.parametrize("name,params,coeff,factor", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_exact_solution_residuals(name, params, coeff, factor):
    with jax.enable_x64(True):
        problem = PROBLEMS[name](**params)
        batch = _batch(problem)
        coeffs = problem.coeff_values()
        for method in (Taylor(),):
            res = problem.residuals(problem.reference, coeffs, batch, method)
            for k, r in res.items():
                assert float(jnp.max(jnp.abs(r))) < 1e-9, (k, float(jnp.max(jnp.abs(r))))
        wrong = {**coeffs, coeff: coeffs[coeff] * factor}
        res = problem.residuals(problem.reference, wrong, batch, Taylor())
        worst = max(float(jnp.max(jnp.abs(r))) for k, r in res.items() if k != "initial")
        assert worst > 1e-2


def test_hard_constraint_gives_initial_state():
    """The InitialValue transform reproduces the exact state at t0 whatever the network."""
    with jax.enable_x64(True):
        problem = PROBLEMS["williamson2"](alpha=math.pi / 4)
        pts = problem.domain.sample(jax.random.key(1), 32, "initial", jnp.float64)
        y = jax.vmap(lambda p: problem.hard_constraint(p, jnp.ones(4, p.dtype)))(pts)
        ref = jax.vmap(problem.reference)(pts)
        np.testing.assert_allclose(y, ref, atol=1e-14)


def test_ebm_reference_modes():
    """At 5 years the exact EBM solution is within 1e-3 °C of its steady Legendre modes
    (15.733, -25.971, 0.5055 °C) apart from the slowest decaying part, and starts at 12 - 40 P2."""
    with jax.enable_x64(True):
        p = PROBLEMS["ebm"]()
        T = lambda t, x: float(p.reference(jnp.asarray([t, x]))[0])
        p2 = lambda x: 0.5 * (3 * x * x - 1)
        for x in (-1.0, 0.3, 1.0):
            assert abs(T(0.0, x) - (12 - 40 * p2(x))) < 1e-12
        # tau_0 = C/B = 0.66 yr: after 30 years everything has relaxed
        x = 0.3
        steady = 15.733 - 25.971 * p2(x) + 0.5055 * (35 * x**4 - 30 * x**2 + 3) / 8
        assert abs(T(30.0, x) - steady) < 2e-3


ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_tracer(tmp_path_factory):
    """The tiny cross-polar tracer config trained through the real CLI (seconds)."""
    from pinnkit.cli.main import main

    out = tmp_path_factory.mktemp("climate") / "tracer"
    cfg = ROOT / "configs" / "tiny" / "climate_tracer.yaml"
    rc = main(["train", str(cfg), "--out", str(out), "--overwrite",
               "--set", "problem.params.alpha=1.5207963267948966", "--set", "train.steps=10"])
    assert rc in (0, None)
    return out


@pytest.mark.slow
def test_tiny_run_summary_maps_netcdf(tiny_tracer):
    """End to end on a tiny run: Williamson metrics in summary.json (at t0 the hard
    constraint makes the prediction exact, so the grid's t0 half matches the reference),
    sphere maps, an animation, and a NetCDF file that round-trips through xarray with CF
    metadata (notebooks/03_climate.ipynb: tests/test_notebooks.py)."""
    import json as _json

    import xarray as xr

    import pinnkit
    from pinnkit.plot import sphere as plot_sphere

    summary = _json.loads((tiny_tracer / "summary.json").read_text())
    m = summary["metrics"]
    assert m["t"] == 12.0 and set(m["h"]) == {"l1", "l2", "linf"} and math.isfinite(m["h"]["l2"])
    run = pinnkit.load_run(tiny_tracer)
    f = plot_sphere.latlon_fields(run, [0.0, 12.0], nlat=8)
    assert f["h"].shape == (2, 8, 16) and np.all(np.diff(f["lat"]) > 0)
    np.testing.assert_allclose(f["h"][0], f["h_ref"][0], atol=1e-6)
    paths = plot_sphere.write_sphere_plots(run, nlat=8)
    assert {p.name for p in paths} == {"h_map.png", "h_hovmoller.png"}
    assert plot_sphere.animate(run, "h", tiny_tracer / "h.gif", frames=2, nlat=6).stat().st_size > 0
    nc = plot_sphere.to_netcdf(f, tiny_tracer / "h.nc", title="tiny", units=run.problem.units_map)
    with xr.open_dataset(nc) as ds:  # default arguments: time stays a number in days
        assert ds.attrs["Conventions"] == "CF-1.8" and ds.time.attrs["units"] == "day"
        np.testing.assert_allclose(ds.time.values, [0.0, 12.0])
        assert ds["lat"].attrs["units"] == "degrees_north" and ds["lon"].attrs["units"] == "degrees_east"
        np.testing.assert_allclose(ds["h"].values, f["h"], rtol=1e-6)
        np.testing.assert_allclose(ds["lat"].values, f["lat"])


def test_bad_inputs_are_clear_errors():
    """network.periodic on the sphere and impossible problem parameters are ConfigErrors
    naming the key, not tracebacks."""
    import pinnkit
    from pinnkit.errors import ConfigError

    cfg = ROOT / "configs" / "tiny" / "climate_tracer.yaml"
    with pytest.raises(ConfigError, match="network.periodic"):
        pinnkit.build_run(pinnkit.load_config(cfg, ["network.periodic.x=1.0"]), with_mesh=False)
    with pytest.raises(ConfigError, match="problem.params.*days"):
        pinnkit.build_run(pinnkit.load_config(cfg, ["problem.params.days=-1"]), with_mesh=False)
