"""Config: typed parsing, overrides, round trip, and a clear exit-2 message for every
user mistake (checked through the real `pinnkit` command, in a subprocess)."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pinnkit.run.config import ConfigError, RunConfig, apply_overrides, dump_config, from_dict, load_config

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny" / "poisson2d.yaml"


def test_defaults_and_round_trip(tmp_path):
    cfg = load_config(TINY)
    assert cfg.problem.name == "poisson2d" and cfg.train.steps == 500 and cfg.network.hard_constraint
    text = dump_config(cfg)
    again = from_dict(yaml.safe_load(text))
    assert again == cfg
    assert from_dict({}) == dataclasses.replace(RunConfig(), source_dir=None)


def test_overrides_and_yaml_floats():
    cfg = load_config(TINY, ["optim.phases.0.lr=3e-4", "train.steps=20", "network.width=8"])
    assert cfg.optim.phases[0].lr == 3e-4 and cfg.train.steps == 20 and cfg.network.width == 8
    # A phase list can be extended and a null phase takes the remaining steps.
    cfg = load_config(TINY, ["optim.phases.1={kind: lbfgs, steps: 50}", "optim.phases.0.steps=null"])
    assert cfg.phase_steps() == [450, 50]
    assert apply_overrides({}, ["a.b=1"]) == {"a": {"b": 1}, "optim": {"phases": [{}]}}


def test_base_merge(tmp_path):
    child = tmp_path / "child.yaml"
    child.write_text(f"base: {TINY}\nnetwork: {{width: 7}}\n")
    cfg = load_config(child)
    assert cfg.network.width == 7 and cfg.network.depth == 2 and cfg.train.steps == 500
    soft = load_config(TINY.with_name("poisson2d_soft.yaml"))
    assert not soft.network.hard_constraint and soft.sampler.batch == {"pde": 256, "boundary": 64}


@pytest.mark.parametrize(
    "data,match",
    [
        ({"trian": {}}, "unknown key 'trian'. Did you mean 'train'"),
        ({"train": {"stpes": 3}}, "unknown key 'train.stpes'. Did you mean 'steps'"),
        ({"train": {"steps": "many"}}, "train.steps: expected an integer, got 'many'"),
        ({"train": {"steps": 0}}, "train.steps: expected an integer from 1 to 2147483647"),
        ({"network": {"activation": "tanhh"}}, "network.activation: expected one of 'tanh'"),
        ({"optim": {"phases": [{"lr": -1}]}}, "optim.phases.0.lr: expected a number > 0"),
        ({"optim": {"phases": [{"steps": 10}]}}, "phases add up to 10 steps"),
        ({"diffops": {"method": "magic"}}, "diffops.method: expected one of"),
        ({"sampler": {"batch": {"pde": 0}}}, "sampler.batch.pde: expected an integer >= 1"),
        ({"network": {"hard_constraint": "yes"}}, "network.hard_constraint: expected true/false"),
    ],
)
def test_schema_errors(data, match):
    with pytest.raises(ConfigError, match=match):
        from_dict(data, "f.yaml")


def _cli(*args, cwd):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "pinnkit.cli", *args], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=300,
    )


CLI_CASES = {
    "missing_file": (None, [], "config file 'nope.yaml' not found"),
    "bad_yaml": ("train: {steps: 3\n", [], "invalid YAML"),
    "unknown_key": ("trian: {steps: 3}\n", [], "unknown key 'trian'"),
    "wrong_type": ("train: {steps: [1]}\n", [], "train.steps: expected an integer"),
    "impossible": ("train: {steps: -5}\n", [], "train.steps: expected an integer from 1"),
    "bad_override": ("{}\n", ["--set", "train.steps"], "expected KEY=VALUE"),
    "unknown_problem": ("problem: {name: poison}\n", [], "unknown problem 'poison'"),
    "bad_param": ("problem: {name: poisson2d, params: {kk: 1}}\n", [], "not accepted by problem"),
    "batch_mismatch": ("sampler: {batch: {pde: 8, walls: 8}}\n", [], "unknown=\\[.walls.\\]"),
    "indivisible": (
        "sampler: {batch: {pde: 9, boundary: 8}}\n", ["--devices", "2"],
        "multiple of the number of devices",
    ),
    "user_file": ("problem: {name: 'missing.py:make'}\n", [], "file not found"),
    "too_many_devices": ("{}\n", ["--set", "mesh.data=64"], "device\\(s\\) are visible"),
    # diffops: DiffOpsConfig.problems() (pinnkit/run/schema.py) and the loader's types
    "bad_estimator": (
        "diffops: {estimator: hutchinson}\n", [], "diffops.estimator: expected one of .*'stde'.*'sdgd'",
    ),
    "estimator_off_taylor": (
        "diffops: {method: autodiff, estimator: stde}\n", [],
        "diffops.method: the stde estimator runs on the Taylor engine; set diffops.method: taylor",
    ),
    "samples_zero": (
        "diffops: {estimator: stde, samples: 0}\n", [],
        "diffops.samples: expected an integer >= 1 \\(random directions",
    ),
    "sdgd_one_dimension": (  # SDGD's bi-Laplacian needs pairs of distinct dimensions
        "diffops: {estimator: sdgd, samples: 1}\n", [],
        "diffops.samples: expected an integer >= 2 \\(random dimensions",
    ),
    "samples_not_int": (
        "diffops: {estimator: sdgd, samples: 2.5}\n", [], "diffops.samples: expected an integer",
    ),
    "bad_draw": (  # through --set, as a sweep would pass it
        "diffops: {estimator: sdgd}\n", ["--set", "diffops.draw=batch"],
        "diffops.draw: expected point .* or step .*, got 'batch'",
    ),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_cli_config_errors_exit_2_without_traceback(case, tmp_path):
    import re

    text, extra, match = CLI_CASES[case]
    cfg = "nope.yaml"
    if text is not None:
        (tmp_path / "c.yaml").write_text(text)
        cfg = "c.yaml"
    r = _cli("train", cfg, "--out", "run", "--quiet", *extra, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert re.search(match, " ".join(r.stderr.split())), r.stderr
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert lines[0].startswith("pinnkit: error:") and len(lines) <= 8  # one paragraph


@pytest.mark.trained
def test_user_factory_named_in_config(tmp_path, trained):
    """`problem.name: file.py:factory` resolves relative to the config's folder."""
    from pinnkit.parallel.mesh import make_mesh
    from pinnkit.run.build import build_run
    from pinnkit.train.loop import fit

    (tmp_path / "my_pde.py").write_text(
        "from pinnkit import Box, Dirichlet, Equation, Problem\n"
        "def make_problem(kappa=1.0):\n"
        "    pde = Equation(lambda f, c: -c['kappa'] * f.laplacian('u') - 1.0)\n"
        "    return Problem(Box((0.0, 0.0), (1.0, 1.0)), ('u',),\n"
        "                   {'pde': pde, 'walls': Dirichlet('boundary')}, coeffs={'kappa': kappa})\n"
    )
    (tmp_path / "my.yaml").write_text(
        "problem: {name: my_pde.py:make_problem, params: {kappa: 0.5}}\n"
        "network: {width: 8, depth: 1}\n"
        "sampler: {batch: {pde: 64, walls: 32}}\n"
        "train: {steps: 20, chunk: 10, log_every: 10}\n"
    )
    cfg = load_config(tmp_path / "my.yaml", [f"train.seed={trained.seed}"])
    run = build_run(cfg, mesh=make_mesh(1))
    assert float(run.problem.coeffs["kappa"]) == 0.5 and set(run.problem.terms) == {"pde", "walls"}
    res = fit(run, progress=False)
    assert res.step == 20
    trained.check("final/first loss", res.history[-1]["loss"] / res.history[0]["loss"], "<", 1.0)


@pytest.mark.parametrize("settings, named", [
    ([], "weighting.causal"),  # the tiny Burgers config has causal weights
    (["weighting.causal=null", "weighting.kind=grad_norm"], "weighting.kind=grad_norm"),
    (["weighting.causal=null"], None),
    (["weighting.causal=null", "sampler.adaptive={kind: rad}"], None),  # its points: the adaptive set
])
def test_natural_gradient_rejects_adaptive_losses(settings, named):
    """The Gauss-Newton matrix is built from fixed weights (on the step's points, adaptive
    sets included), so a natural_gradient phase with adaptive or causal weights is refused
    at build time, and one with adaptive points is not."""
    from pinnkit.parallel.mesh import make_mesh
    from pinnkit.run.build import build_run

    cfg = load_config(ROOT / "configs" / "tiny" / "burgers.yaml", [
        "optim.phases=[{kind: adam, steps: 10}, {kind: natural_gradient}]", *settings,
    ])
    if named is None:
        assert build_run(cfg, mesh=make_mesh(1)).phases[1].kind == "natural_gradient"
        return
    with pytest.raises(ConfigError) as err:
        build_run(cfg, mesh=make_mesh(1))
    assert named in str(err.value) and "natural_gradient" in str(err.value)
