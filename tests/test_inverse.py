"""Inverse problems: constrained trainable coefficients (own learning rate), observation
terms from files (and their errors), and coefficient recovery on a tiny problem."""

import math
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit import Interval, Observation
from pinnkit.errors import ConfigError
from pinnkit.physics.coeffs import Constrained, constrained
from pinnkit.physics.observations import DataError, load_observations, write_table
from pinnkit.run.build import build_run
from pinnkit.run.config import from_dict, load_config
from pinnkit.train.loop import fit
from pinnkit.train.step import split_model

# ------------------------------------------------------------------- coefficients


@pytest.mark.parametrize(
    "value,kind,lo,hi",
    [(0.3, "none", None, None), (2e-3, "positive", None, None), (0.7, "bounded", 0.5, 2.0)],
)
def test_constrained_value_round_trip(value, kind, lo, hi):
    c = constrained(value, kind, lo, hi)
    assert isinstance(c, Constrained)
    assert float(c) == pytest.approx(value, rel=1e-6)


def test_constrained_rejects_values_out_of_range():
    with pytest.raises(ValueError, match="> 0"):
        constrained(-1.0, "positive")
    with pytest.raises(ValueError, match="inside"):
        constrained(3.0, "bounded", 0.0, 1.0)


def _ebm_cfg(**problem):
    return from_dict({
        "problem": {"name": "ebm_inverse", "params": {"n_obs": 32}, **problem},
        "network": {"width": 8, "depth": 1, "hard_constraint": True},
        "sampler": {"batch": {"energy": 32}},
        "optim": {"phases": [{"kind": "adam", "lr": 1e-3}]},
        "train": {"steps": 1},
    })


def test_config_coeffs_transform_and_own_learning_rate():
    cfg = _ebm_cfg(coeffs={"D": {"init": 0.4, "transform": "positive", "lr": 0.05}})
    run = build_run(cfg, with_mesh=False)
    c = run.problem.coeffs["D"]
    assert "D" in run.problem.trainable and c.transform == "positive"
    assert float(c) == pytest.approx(0.4)
    # Adam's first update has magnitude lr for every parameter (sign of the gradient):
    # the coefficient moves by its own lr, the network by the phase's.
    params, _ = split_model(run)
    opt = run.phases[0].optimizer
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    upd, _ = opt.update(grads, opt.init(params), params)
    assert float(upd[1]["D"].raw) == pytest.approx(-0.05, rel=1e-4)
    net_upd = jax.tree_util.tree_leaves(upd[0])
    assert all(np.allclose(np.asarray(u), -1e-3, rtol=1e-4) for u in net_upd)


@pytest.mark.parametrize(
    "coeffs,match",
    [
        ({"D": {"transform": "positive", "init": -1.0}}, "problem.coeffs.D.init"),
        ({"D": {"transform": "bounded", "lower": 1.0, "upper": 0.5}}, "problem.coeffs.D.lower"),
        ({"nope": {"init": 1.0}}, "not coefficients"),
    ],
)
def test_config_coeff_errors(coeffs, match):
    with pytest.raises(ConfigError, match=match):
        build_run(_ebm_cfg(coeffs=coeffs), with_mesh=False)


@pytest.mark.trained
def test_coefficient_recovery_tiny_ebm(trained):
    """D of the steady energy-balance model from 64 stations (0.1 °C noise), D_init 0.3.

    Tolerance: with this noise the least-squares error of D is ~0.2% (T_2 moves by
    ~29 °C per unit D; 64 stations pin T_2 to ~0.03 °C); a tiny network trained for
    500 Adam steps adds a few tenths of a percent more (measured: 0.55 -> within 0.5%).
    3% is well clear of both and far from the 45% starting error.
    """
    cfg = from_dict({
        "problem": {"name": "ebm_inverse", "params": {"D_true": 0.55, "D_init": 0.3, "n_obs": 64},
                    "coeffs": {"D": {"transform": "positive", "lr": 0.02}}},
        "network": {"width": 16, "depth": 2, "hard_constraint": True},
        "sampler": {"method": "sobol", "batch": {"energy": 128}},
        "optim": {"phases": [{"kind": "adam", "lr": 0.01}]},
        "train": {"steps": 600, "chunk": 200, "log_every": 200, "seed": trained.seed},
    })
    res = fit(build_run(cfg), progress=False)
    D = float(res.coeffs["D"])
    trained.check("|D/D_true - 1|", abs(D / 0.55 - 1), "<", 0.03)


def _frozen_cfg(freeze, own_lr: bool, second: bool = True):
    coeff = {"transform": "positive", **({"lr": 0.02} if own_lr else {})}
    phases = [{"kind": "adam", "lr": 0.01, "steps": 20, "freeze": freeze}]
    return from_dict({
        "problem": {"name": "ebm_inverse", "params": {"D_true": 0.55, "D_init": 0.3, "n_obs": 16},
                    "coeffs": {"D": coeff}},
        "network": {"width": 8, "depth": 1},
        "sampler": {"method": "sobol", "batch": {"energy": 32}},
        "optim": {"phases": phases + [{"kind": "adam", "lr": 0.01}] * second},
        "train": {"steps": 40 if second else 20, "chunk": 10, "log_every": 10},
    })


@pytest.mark.parametrize("own_lr", [True, False])
def test_a_phase_freezes_a_coefficient_and_the_next_trains_it(own_lr):
    """``optim.phases.N.freeze``: the coefficient keeps its start value (0.3, to the
    positive transform's round trip) through the frozen phase, with or without its own
    learning rate, while the network trains; the next phase moves it."""
    run = build_run(_frozen_cfg(["D"], own_lr, second=False))
    held = fit(run, progress=False)
    assert float(held.coeffs["D"]) == pytest.approx(0.3, rel=1e-6)
    before = jax.tree_util.tree_leaves(eqx.filter(run.network, eqx.is_array))
    after = jax.tree_util.tree_leaves(eqx.filter(held.network, eqx.is_array))
    assert any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    both = fit(build_run(_frozen_cfg(["D"], own_lr)), progress=False)
    assert abs(float(both.coeffs["D"]) - 0.3) > 1e-4  # the second phase trains D


def test_freeze_names_a_trainable_coefficient():
    with pytest.raises(ConfigError, match=r"optim.phases.0.freeze: \['nu'\] are not trainable"):
        build_run(_frozen_cfg(["nu"], True), with_mesh=False)
    with pytest.raises(ConfigError, match="freeze"):
        from_dict({**_frozen_cfg(["D"], True).to_dict(),
                   "optim": {"phases": [{"kind": "adam", "freeze": ["D", "D"]}]}})


# ------------------------------------------------------------------ observations


def _columns(n=8, seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.uniform(-1, 1, n), "T": rng.normal(size=n), "err": np.full(n, 0.5)}


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_load_observations_round_trip(tmp_path, suffix):
    cols = _columns()
    path = write_table(tmp_path / f"obs{suffix}", {"lat_x": cols["x"], "temp": cols["T"], "err": cols["err"]})
    obs = load_observations(path, {"T": "temp"}, domain=Interval(-1, 1), coords={"x": "lat_x"}, sigma="err")
    np.testing.assert_allclose(obs.points[:, 0], cols["x"], rtol=1e-7)
    np.testing.assert_allclose(obs.values[:, 0], cols["T"], rtol=1e-7)
    np.testing.assert_allclose(obs.weights, 1.0)  # equal sigmas -> weight 1 after normalising
    assert obs.rows().shape == (8, 1 + 1 + 1)


def test_observation_weights_scale_the_residual():
    obs = Observation(np.zeros((2, 1)), np.array([[1.0], [1.0]]), ("T",), weights=np.array([4.0, 0.0]))

    class F:
        def __getitem__(self, k):
            return jnp.asarray(3.0)

    rows = obs.rows()
    r = [obs.residual(F(), {}, jnp.asarray(row[1:])) for row in rows]
    assert float(r[0][0]) == pytest.approx(2 * (3 - 1)) and float(r[1][0]) == 0.0


def _bad_file(tmp_path, kind):
    cols = _columns()
    if kind == "missing":
        cols.pop("T")
    elif kind == "nan":
        cols["T"][3] = np.nan
    elif kind == "outside":
        cols["x"][5] = 1.5
    elif kind == "shape":
        cols["T"] = np.ones((8, 2))
        return write_table(tmp_path / "bad.npz", cols)
    elif kind == "length":
        cols["T"] = np.ones(5)
        return write_table(tmp_path / "bad.npz", cols)
    return write_table(tmp_path / "bad.csv", cols)


@pytest.mark.parametrize(
    "kind,column,match",
    [
        ("missing", "T", "is missing"),
        ("nan", "T", "NaN"),
        ("outside", "x", "outside the problem's domain"),
        ("shape", "T", "shape \\(8, 2\\)"),
        ("length", "T", "same length"),
    ],
)
def test_bad_observation_files_name_file_and_column(tmp_path, kind, column, match):
    path = _bad_file(tmp_path, kind)
    with pytest.raises(DataError, match=match) as e:
        load_observations(path, ["T"], domain=Interval(-1, 1))
    msg = str(e.value)
    assert str(path) in msg and f"'{column}'" in msg, msg


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_observations(tmp_path / "nope.csv", ["T"], domain=Interval(-1, 1))
    (tmp_path / "a.xlsx").write_text("x")
    with pytest.raises(DataError, match="unknown format"):
        load_observations(tmp_path / "a.xlsx", ["T"], domain=Interval(-1, 1))


def test_netcdf_needs_xarray_or_loads(tmp_path):
    try:
        import xarray as xr
    except ImportError:
        (tmp_path / "a.nc").write_bytes(b"")
        with pytest.raises(DataError, match="xarray"):
            load_observations(tmp_path / "a.nc", ["T"], domain=Interval(-1, 1))
        return
    cols = _columns()
    xr.Dataset({k: ("station", v) for k, v in cols.items()}).to_netcdf(tmp_path / "a.nc")
    obs = load_observations(tmp_path / "a.nc", ["T"], domain=Interval(-1, 1))
    np.testing.assert_allclose(obs.values[:, 0], cols["T"])


def test_config_observations_from_file(tmp_path):
    cols = _columns(16)
    write_table(tmp_path / "stations.csv", {"x": cols["x"], "temp": cols["T"]})
    (tmp_path / "c.yaml").write_text(
        "problem: {name: ebm_inverse, params: {n_obs: 8},\n"
        "  observations: {extra: {file: stations.csv, fields: {T: temp}}}}\n"
        "network: {width: 8, depth: 1}\nsampler: {batch: {energy: 16}}\ntrain: {steps: 1}\n"
    )
    run = build_run(load_config(tmp_path / "c.yaml"), with_mesh=False)
    assert run.problem.terms["extra"].values.shape == (16, 1)
    (tmp_path / "d.yaml").write_text(
        "problem: {name: ebm_inverse, observations: {extra: {file: stations.csv, fields: {T: nope}}}}\n"
        "sampler: {batch: {energy: 16}}\n"
    )
    with pytest.raises(DataError, match="'nope'"):
        build_run(load_config(tmp_path / "d.yaml"), with_mesh=False)


def test_inverse_problems_build_and_have_true_reference():
    from pinnkit.problems.inverse import ebm_steady_modes, flow_assimilation, kovasznay_inverse

    T0, T2, T4 = ebm_steady_modes(0.55)
    np.testing.assert_allclose([T0, T2, T4], [15.733, -25.971, 0.5055], atol=1e-3)
    p = kovasznay_inverse(n_obs=16)
    assert float(p.coeffs["Re"]) == pytest.approx(10.0) and p.trainable == {"Re"}
    a = flow_assimilation(n_obs=16)
    assert not a.trainable and "boundary" not in a.terms
    ref = p.reference(jnp.asarray([0.3, 0.2]))
    lam = 10 - math.sqrt(100 + 4 * math.pi**2)
    assert float(ref[0]) == pytest.approx(1 - math.exp(0.3 * lam) * math.cos(0.4 * math.pi), rel=1e-5)


@pytest.mark.parametrize(
    "name",
    ["inverse_burgers", "inverse_kovasznay", "inverse_ebm", "assimilation_kovasznay", "tiny/inverse_ebm",
     "tiny/inverse_burgers"],
)
def test_inverse_configs_build(name):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    run = build_run(load_config(root / "configs" / f"{name}.yaml"), with_mesh=False)
    assert "data" in run.problem.terms or "stations" in run.problem.terms


def test_coefficient_field_is_trainable_and_reported_by_its_mean():
    """A `CoeffField` starts at its init everywhere, is a trainable subtree like a scalar,
    and gets gradients through a residual that calls it at the point."""
    from pinnkit import Box, Equation, Problem
    from pinnkit.diffops import METHODS
    from pinnkit.nn.nets import build_mlp_network
    from pinnkit.physics.coeffs import coeff_field

    domain = Box((0.0, 0.0), (1.0, 2.0))
    k = coeff_field(domain, init=0.5, key=jax.random.key(0))
    assert float(k) == pytest.approx(0.5) and float(k(jnp.asarray([0.3, 1.7]))) == pytest.approx(0.5)
    pde = Equation(lambda f, c: c["k"](f.point) * f.laplacian("u") - 1.0)
    prob = Problem(domain, ("u",), {"pde": pde},
                   coeffs={"k": k}, trainable=("k",))
    net = build_mlp_network(domain.coords, ("u",), width=8, depth=1, activation="tanh",
                            init="glorot_normal", bounds=None, key=jax.random.key(1))
    batch = {"pde": jax.random.uniform(jax.random.key(2), (16, 2))}

    def loss(c):
        return prob.loss_terms(net, c, batch, METHODS["autodiff"]())["pde"]

    g = eqx.filter_grad(loss)(prob.coeffs)
    assert float(jnp.abs(g["k"].layers[-1][0]).sum()) > 0



def test_coefficient_trajectory_is_logged(tmp_path):
    """Every eval record in metrics.jsonl carries the learnt coefficient's physical value."""
    import json

    from pinnkit.run.rundir import train_to_dir

    cfg = load_config(
        Path(__file__).resolve().parents[1] / "configs" / "tiny" / "inverse_ebm.yaml",
        ["optim.phases=[{kind: adam, lr: 0.01}]", "train.steps=60", "train.chunk=20",
         "train.eval_every=20"],
    )
    train_to_dir(cfg, tmp_path / "run", progress=False, plots=False)
    recs = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    traj = [r["eval"]["coeffs"]["D"] for r in recs if "eval" in r]
    assert len(traj) == 3 and all(d > 0 for d in traj)  # positive transform: physical values
    assert traj[0] != traj[-1]
