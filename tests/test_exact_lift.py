"""No exact solution in training by default (issue 37): a hard constraint whose lift is
the exact solution is refused unless ``network.allow_exact_lift: true``, which warns and
is recorded in summary.json. On the unit disk with $u^* = x^2 + y^2$ the boundary data
are 1: given as ``boundary_value: 1`` the lift (1) differs from $u^*$ inside; left to
default (the data of ``exact``) the lift is $u^*$ itself."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from pinnkit.cli.main import main
from pinnkit.errors import ConfigError
from pinnkit.physics.constraints import exact_lift_fields
from pinnkit.run.build import build_problem
from pinnkit.run.config import load_config
from pinnkit.run.exactlift import ExactLiftWarning
from pinnkit.run.rundir import train_to_dir

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp_path, params: dict, network: dict, name="poisson_domain") -> Path:
    cfg = {
        "problem": {"name": name, "params": params},
        "network": {"width": 8, "depth": 1, **network},
        "sampler": {"method": "uniform", "batch": {"pde": 64, "boundary": 32}},
        "optim": {"phases": [{"kind": "adam", "lr": 1e-2}]},
        "train": {"steps": 20, "chunk": 10, "log_every": 10},
        "checkpoint": {"every": 0},
        "eval": {"resolution": 21},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


DISK = {"domain": {"disk": {"center": [0, 0], "radius": 1}}, "exact": "x**2 + y**2"}


def _interior(problem, n=32):
    return problem.domain.sample(jax.random.key(3), n, "interior", jnp.float32)


def test_default_refuses_the_exact_lift(tmp_path):
    cfg = load_config(_config(tmp_path, DISK, {"hard_constraint": True}))
    with pytest.raises(ConfigError) as e:
        build_problem(cfg)
    msg = str(e.value)
    for part in ("network.allow_exact_lift: true", "boundary_value", "network.hard_constraint: false",
                 "for u"):
        assert part in msg, msg


def test_boundary_data_that_differ_inside_give_a_lift_that_is_not_the_solution(tmp_path):
    cfg = load_config(_config(tmp_path, {**DISK, "boundary_value": 1}, {"hard_constraint": True}))
    problem = build_problem(cfg)
    assert exact_lift_fields(problem) == ()
    x = _interior(problem)
    lift = jax.vmap(lambda p: problem.hard_constraint(p, jnp.zeros(1)))(x)[:, 0]
    np.testing.assert_allclose(lift, 1.0, rtol=1e-6)  # g = 1, while u* = |x|^2 < 1 inside
    assert float(jnp.min(1.0 - jnp.sum(x**2, axis=1))) > 0


def test_soft_default_takes_the_boundary_data_only(tmp_path):
    """Without a hard constraint nothing is refused: the Dirichlet term's target is the
    exact solution's boundary values (the declared condition), 1 on the circle."""
    problem = build_problem(load_config(_config(tmp_path, DISK, {})))
    term = problem.terms["boundary"]
    pts = problem.domain.sample(jax.random.key(0), 16, "boundary", jnp.float32)
    np.testing.assert_allclose(jax.vmap(term.target)(pts), 1.0, rtol=1e-5)


def test_exact_lift_of_the_expression_problem_is_refused_too(tmp_path):
    params = {"domain": {"rectangle": {"lower": [0, 0], "upper": [1, 1]}}, "fields": ["u"],
              "equations": {"pde": "-lap(u) + 4"}, "conditions": {"wall": {"where": "boundary",
              "dirichlet": "x**2 + y**2"}}, "exact": {"u": "x**2 + y**2"}}
    cfg = load_config(_config(tmp_path, params, {"hard_constraint": True}, name="expression"))
    with pytest.raises(ConfigError, match="network.allow_exact_lift"):
        build_problem(cfg)


def test_opt_in_warns_and_is_recorded_in_summary(tmp_path):
    path = _config(tmp_path, {**DISK, "boundary_value": "exact"},
                   {"hard_constraint": True, "allow_exact_lift": True})
    with pytest.warns(ExactLiftWarning, match="lift is the exact solution for u"):
        summary = train_to_dir(load_config(path), tmp_path / "run", progress=False, plots=False)
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert written["exact_in_training"]["fields"] == ["u"]
    assert "allow_exact_lift" in written["exact_in_training"]["note"]
    assert summary["exact_in_training"] == written["exact_in_training"]


def test_command_line_refusal_is_one_paragraph_and_writes_nothing(tmp_path, capsys):
    path = _config(tmp_path, DISK, {"hard_constraint": True})
    out = tmp_path / "run"
    assert main(["train", str(path), "--out", str(out), "--quiet", "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinnkit: error: network.hard_constraint: true would train from the exact")
    assert "\n\n" not in err.strip() and "Traceback" not in err
    assert not out.exists()


def test_the_rossby_haurwitz_lift_is_the_initial_wave_only():
    """C4's hard initial condition lifts the wave at t = 0, not the wave at each point's
    own time: with a zero network the constrained field is exact at t = 0 and, one day
    later, is the initial wave while the true one has moved on (by nu*t in longitude)."""
    from pinnkit.problems import PROBLEMS

    problem = PROBLEMS["rossby_haurwitz"](days=1.0)
    assert exact_lift_fields(problem) == ()
    x = _interior(problem)
    zero = jnp.zeros(2)
    lift = jax.vmap(lambda p: problem.hard_constraint(p, zero))
    at = lambda t: x.at[:, 0].set(t)  # noqa: E731
    exact = jax.vmap(problem.reference)
    np.testing.assert_allclose(lift(at(0.0)), exact(at(0.0)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lift(at(1.0)), exact(at(0.0)), rtol=1e-5, atol=1e-5)
    moved = float(jnp.max(jnp.abs(exact(at(1.0)) - exact(at(0.0)))))
    assert moved > 1e-2
