"""Fields defined up to a constant (pressure) declare their gauge, and every reported
error compares them in it: summary.json, metrics.jsonl's eval records, `pinnkit eval`."""

import json
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pinnkit
from pinnkit.cli.main import main
from pinnkit.expr import ExprError
from pinnkit.parallel import mesh as mesh_mod
from pinnkit.parallel.mesh import evaluate_sharded, make_mesh
from pinnkit.physics.problem import Problem
from pinnkit.problems import PROBLEMS
from pinnkit.problems.navier_stokes import kovasznay_solution

ROOT = Path(__file__).resolve().parents[1]


def _rel(pred, ref):
    return float(np.linalg.norm(pred - ref) / np.linalg.norm(ref))


@pytest.fixture(scope="module")
def kovasznay_run(tmp_path_factory):
    """A 100-step tiny Kovasznay run with two eval records in metrics.jsonl."""
    cfg = pinnkit.load_config(ROOT / "configs" / "tiny" / "ns_kovasznay.yaml",
                              ["train.steps=100", "train.eval_every=50"])
    out = tmp_path_factory.mktemp("gauge") / "kov"
    summary = pinnkit.train_to_dir(cfg, out, progress=False, plots=False)
    return out, summary


def _mean_removed_p(out):
    """p's errors less the means over the evaluation points, computed here from the
    trained network and the analytic solution on the run's own grid."""
    run = pinnkit.load_run(out)
    pts, _ = run.problem.domain.grid(run.config.eval.resolution)
    x = jnp.asarray(pts, jnp.float32)
    p = np.asarray(jax.vmap(run.network)(x))[:, 2].astype(np.float64)
    ref = np.asarray(jax.vmap(lambda z: jnp.stack(kovasznay_solution(z, 20.0)))(x))[:, 2].astype(np.float64)
    raw = _rel(p, ref)
    p, ref = p - p.mean(), ref - ref.mean()
    return _rel(p, ref), float(np.abs(p - ref).max()), raw


def test_kovasznay_p_error_is_the_mean_removed_one(kovasznay_run):
    out, summary = kovasznay_run
    rel, linf, raw = _mean_removed_p(out)
    assert summary["rel_l2"]["p"] == pytest.approx(rel, rel=1e-5)
    assert summary["linf"]["p"] == pytest.approx(linf, rel=1e-5)
    assert abs(raw - rel) > 1e-3 * rel  # the gauge is not a no-op on this run
    assert summary["gauge"] == {"p": "mean"}
    assert json.loads((out / "summary.json").read_text())["gauge"] == {"p": "mean"}
    evals = [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "eval" in r]
    assert evals[-1]["step"] == 100
    assert evals[-1]["eval"]["rel_l2"]["p"] == pytest.approx(rel, rel=1e-5)


def test_pinnkit_eval_reports_the_gauge(kovasznay_run, capsys):
    out, _ = kovasznay_run
    rel, _, _ = _mean_removed_p(out)
    assert main(["eval", str(out)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["gauge"] == {"p": "mean"}
    assert record["rel_l2"]["p"] == pytest.approx(rel, rel=1e-5)


def _random_net(problem, seed=0):
    return eqx.nn.MLP(len(problem.domain.coords), len(problem.out_names), 8, 1, key=jax.random.key(seed))


def test_unsteady_pressure_removes_the_spatial_mean_at_each_time(monkeypatch):
    # Taylor-Green: p is defined up to c(t); a network whose p drifts in time by c(t)
    # must score as well as the same network without the drift.
    problem = PROBLEMS["taylor_green"]()
    assert problem.gauge_map == {"p": "mean_per_time"}
    base = _random_net(problem)
    ip = problem.out_names.index("p")

    def drifting(z):
        y = base(z)
        return y.at[ip].add(5.0 * z[0] ** 2)

    mesh = make_mesh(1)
    res = 9
    errs, grid = evaluate_sharded(drifting, problem, mesh, res, 64, jnp.float32, grid=True)
    pts = grid["points"]
    t = pts[:, 0]
    p, ref = grid["pred"][:, ip].astype(np.float64), grid["ref"][:, ip].astype(np.float64)
    for level in np.unique(t):
        at = t == level
        p[at] -= p[at].mean()
        ref[at] -= ref[at].mean()
    assert errs["rel_l2"]["p"] == pytest.approx(_rel(p, ref), rel=1e-9)
    assert errs["linf"]["p"] == pytest.approx(np.abs(p - ref).max(), rel=1e-9)
    plain, _ = evaluate_sharded(base, problem, mesh, res, 64, jnp.float32, grid=False)
    assert errs["rel_l2"]["p"] == pytest.approx(plain["rel_l2"]["p"], rel=1e-4)
    # the streamed path (large grids) gives the same figures
    monkeypatch.setattr(mesh_mod, "STREAM_ROWS", 200)  # 729 points: 4 blocks across time levels
    streamed, _ = evaluate_sharded(drifting, problem, mesh, res, 64, jnp.float32, grid=False)
    for kind in ("rel_l2", "linf"):
        for k, v in errs[kind].items():
            assert streamed[kind][k] == pytest.approx(v, rel=1e-9), (kind, k)
    # and so does the single-process `metrics.evaluate`
    from pinnkit.run.metrics import evaluate

    single, _ = evaluate(drifting, problem, res, 64)
    assert single["rel_l2"]["p"] == pytest.approx(errs["rel_l2"]["p"], rel=1e-9)


@pytest.mark.parametrize("name, gauge", [
    ("kovasznay", {"p": "mean"}), ("lid_driven_cavity", {"p": "mean"}),
    ("kovasznay_inverse", {"p": "mean"}), ("taylor_green", {"p": "mean_per_time"}),
    ("periodic_flow", {"p": "mean_per_time"}), ("beltrami_flow", {"p": "mean_per_time"}),
    # the traction-free outflow fixes the pressure itself: no gauge to remove
    ("channel_flow", {}), ("dfg_cylinder", {}),
])
def test_builtin_flows_declare_their_gauge(name, gauge):
    if name == "periodic_flow":
        problem = PROBLEMS[name](n=16, n_times=4)
    else:
        problem = PROBLEMS[name]()
    assert problem.gauge_map == gauge
    assert set(problem.mean_free) == set(gauge)


def test_problem_refuses_a_bad_gauge():
    problem = PROBLEMS["kovasznay"]()
    args = (problem.domain, problem.out_names, problem.terms)
    with pytest.raises(ValueError, match="'q', which is not a field"):
        Problem(*args, gauge={"q": "mean"})
    with pytest.raises(ValueError, match="not a gauge kind"):
        Problem(*args, gauge={"p": "median"})
    with pytest.raises(ValueError, match="no time coordinate"):
        Problem(*args, gauge={"p": "mean_per_time"})


def _expression(gauge, domain=None):
    from pinnkit.problems.expression import expression

    return expression(domain or {"x": [0, 1], "y": [0, 1]}, ["u", "p"],
                      {"pde": "lap(u) + p_x", "gauge_eq": "p_y - 1"}, exact={"u": "x", "p": "y"},
                      gauge=gauge)


def test_expression_gauge_key():
    assert _expression({"p": "mean"}).gauge_map == {"p": "mean"}
    st = _expression({"p": "mean_per_time"}, {"x": [0, 1], "y": [0, 1], "t": [0, 1]})
    assert st.gauge_map == {"p": "mean_per_time"}
    with pytest.raises(ExprError, match=r"gauge\.pp: 'pp' is not a field.*Did you mean 'p'"):
        _expression({"pp": "mean"})
    with pytest.raises(ExprError, match=r"unknown gauge 'maen'. Did you mean 'mean'"):
        _expression({"p": "maen"})
    with pytest.raises(ExprError, match="mean_per_time needs a time coordinate"):
        _expression({"p": "mean_per_time"})
