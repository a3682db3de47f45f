"""`pinnkit.train.validation.Validation` (``eval.validation_points``): the loss terms'
residuals on fresh points, checked against fields whose residuals are known exactly, and
through a config run into metrics.jsonl and summary.json."""

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.errors import ConfigError
from pinnkit.problems import PROBLEMS
from pinnkit.run.config import load_config
from pinnkit.run.rundir import train_to_dir
from pinnkit.train.validation import Validation

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny" / "poisson2d.yaml")


def test_mean_squares_of_known_residuals(x64):
    """poisson2d (-Δu = f, u = g on the boundary; both terms in the loss without a hard
    constraint): the exact solution has residuals of rounding (~1e-30 in float64); adding
    c leaves the equation's residual and makes the boundary's c everywhere (mean square
    c² = 0.01 exactly); adding c x² adds 2c to Δu everywhere (0.04) and c x² on the
    boundary (a mean over random boundary points, so only its range is known)."""
    p = PROBLEMS["poisson2d"]()
    v = Validation(p, 512, seed=0, dtype=jnp.float64)
    assert v.names == ("boundary", "pde")
    exact = v.metrics(p.reference, p.coeffs)
    assert set(exact) == {"validation", "validation_boundary", "validation_pde"}
    assert max(exact.values()) < 1e-25, exact
    shifted = v.metrics(lambda x: p.reference(x) + 0.1, p.coeffs)
    assert shifted["validation_boundary"] == pytest.approx(0.01, rel=1e-12)
    assert shifted["validation_pde"] < 1e-25
    bent = v.metrics(lambda x: p.reference(x) + 0.1 * x[..., :1] ** 2, p.coeffs)
    assert bent["validation_pde"] == pytest.approx(0.04, rel=1e-12)
    assert 0 < bent["validation_boundary"] < 0.01
    assert bent["validation"] == pytest.approx(bent["validation_pde"] + bent["validation_boundary"])
    # the points are the seed's: the same numbers again, others from another seed
    def bend(x):
        return p.reference(x) + 0.1 * x[..., :1] ** 2

    again = Validation(p, 512, seed=0, dtype=jnp.float64).metrics(bend, p.coeffs)
    other = Validation(p, 512, seed=1, dtype=jnp.float64).metrics(bend, p.coeffs)
    assert again == bent and other["validation_boundary"] != bent["validation_boundary"]


def test_from_the_config_into_the_run_records(tmp_path):
    """``eval.validation_points`` adds ``validation`` and ``validation_TERM`` to every
    evaluation record and to summary.json's metrics; ``train.early_stopping`` can watch it.
    The tiny config has a hard constraint: the boundary term is not in the loss and not
    reported."""
    cfg = load_config(TINY, ["train.steps=100", "train.chunk=50", "train.eval_every=50",
                             "eval.validation_points=256", "checkpoint.every=0",
                             "train.early_stopping={metric: metrics.validation, patience: 5}"])
    summary = train_to_dir(cfg, tmp_path / "run", progress=False, plots=False)
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    evals = [json.loads(line)["eval"] for line in lines if '"eval"' in line]
    assert len(evals) == 2 and all(set(e["metrics"]) == {"validation", "validation_pde"} for e in evals)
    first, last = (e["metrics"]["validation"] for e in evals)
    # Adam at lr 1e-2 lowers the residual everywhere: last / first 0.16-0.56 over seeds 0-2
    assert np.isfinite(first) and last < first
    assert summary["metrics"]["validation"] == pytest.approx(last)


def test_a_negative_count_names_the_key():
    with pytest.raises(ConfigError, match=r"eval\.validation_points: expected an integer >= 0"):
        load_config(TINY, ["eval.validation_points=-1"])
