"""The memory plan (pinnkit.run.memplan): lower bounds without allocating, the compiled
estimate for large runs, and the grid size formula against the domains' own grids."""

import jax
import pytest

from pinnkit.errors import ConfigError
from pinnkit.parallel.mesh import make_mesh
from pinnkit.problems import PROBLEMS
from pinnkit.run import memplan
from pinnkit.run.build import build_problem, build_run
from pinnkit.run.config import from_dict


@pytest.mark.parametrize("name", ["poisson2d", "burgers", "taylor_green", "beltrami_flow",
                                  "ebm", "tracer_transport", "williamson2",
                                  "poisson_ball"])
def test_grid_points_match_the_domain_grid(name):
    domain = PROBLEMS[name]().domain
    for r in (3, 6):
        pts, shape = domain.grid(r)
        assert memplan.grid_points(domain, r) == pts.shape[0]


def _cfg(**train):
    return from_dict({"network": {"width": 32, "depth": 3},
                      "sampler": {"batch": {"pde": 512, "boundary": 128}},
                      "train": {"steps": 10, "chunk": 10, **train}, "optim": {"phases": [{"kind": "adam"}]},
                      "eval": {"batch": 256}})


def test_lower_bounds_count_parameters_points_and_activations():
    cfg = _cfg()
    problem = build_problem(cfg)
    parts = {p.what: p.bytes for p in memplan.lower_bounds(cfg, problem, 2)}
    run = build_run(cfg, mesh=make_mesh(1))
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(run.network) if hasattr(x, "size"))
    assert parts["parameters"] == 4 * n_params  # float32; eval_shape built the same network
    assert parts["optimiser state"] == 2 * parts["parameters"]  # Adam's two moments
    assert parts["points of term 'pde'"] == 256 * 2 * 4  # per device of 2, (x, y)
    assert parts["activations of term 'pde'"] == 256 * 32 * 4 * 4  # width x (depth + 1)
    half = {p.what: p.bytes for p in memplan.lower_bounds(_cfg(accumulate=2), problem, 2)}
    assert half["activations of term 'pde'"] == parts["activations of term 'pde'"] / 2


def test_lower_bounds_of_a_hard_constrained_mesh_problem():
    """Building the network reads the problem's arrays on the host (a triangle mesh's
    bounding box for the input normalisation): the plan must not trace the problem."""
    from pathlib import Path

    from pinnkit.run.config import load_config

    root = Path(__file__).resolve().parents[1]
    cfg = load_config(root / "configs" / "tiny" / "poisson_mesh.yaml", [])
    problem = build_problem(cfg)
    parts = {p.what: p.bytes for p in memplan.lower_bounds(cfg, problem, 1)}
    run = build_run(cfg, mesh=make_mesh(1))
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(run.network) if hasattr(x, "size"))
    assert parts["parameters"] == 4 * n_params


def test_compiled_estimate_refuses_what_the_bounds_let_through(monkeypatch):
    """With the device's free memory just above the lower bound, the compiled chunk (XLA's
    memory analysis: temporaries the bound does not count) is what refuses the run."""
    cfg = _cfg()
    problem = build_problem(cfg)
    mesh = make_mesh(1)
    bound = sum(p.bytes for p in memplan.lower_bounds(cfg, problem, 1) if p.when in ("always", "train"))
    monkeypatch.setattr(memplan, "device_available", lambda device: 1.05 * bound)
    with pytest.raises(ConfigError, match="XLA's compiled estimate"):
        memplan.check(cfg, problem, mesh, lambda: build_run(cfg, mesh=mesh), {})
    monkeypatch.setattr(memplan, "device_available", lambda device: 1e12)
    run = memplan.check(cfg, problem, mesh, lambda: build_run(cfg, mesh=mesh), {})
    assert run.problem is not None
