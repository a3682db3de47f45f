"""Residuals on fresh points at every evaluation (``eval.validation_points``): what a run
without a reference solution can see of overfitting.

A network trained on a fixed set of points can drive the loss there down while the field
between them moves away from the solution (measured on the backward-facing step,
docs/benchmarks.md, session 33: the field's best passes, the loss keeps falling, the
errors grow). The mean squares of the loss terms' residuals on points the training never
saw tell that apart from convergence with no reference at all: `Validation` draws $N$
points per term once (from ``train.seed``, apart from the training draws) and reports, at
every evaluation,
$$\\text{validation\\_}k = \\frac1N \\sum_{i=1}^N \\|r_k(x_i)\\|^2, \\qquad
\\text{validation} = \\sum_k \\text{validation\\_}k$$
for every pointwise term $k$ of the problem it is given (the run's: without the terms a
hard constraint enforces), boundary terms on their boundary, data terms left out;
unweighted. The figures go where a callback's ``metrics`` go (``eval.metrics.validation``
in ``metrics.jsonl``, ``metrics.validation`` in ``summary.json``), so
``train.early_stopping`` can watch them.
Evaluated with exact autodiff, outside the training clock.
"""

from __future__ import annotations

from collections.abc import Mapping

import equinox as eqx
import jax
import jax.numpy as jnp

from ..diffops import Autodiff
from ..physics.problem import Problem
from .callbacks import Callback

# folded into the run's seed: the validation points are not any training draw
_SALT = 0x5A11D


class Validation(Callback):
    """Mean squares of the loss terms' residuals on ``n`` fresh points per term (module
    docstring), as the callback metrics ``validation_TERM`` and ``validation``.

    **Arguments:** `problem`; `n`: points per term (>= 1); `seed`: the run's
    ``train.seed``; `dtype`: the points' dtype (the run's)."""

    def __init__(self, problem: Problem, n: int, seed: int, dtype=jnp.float32):
        if n < 1:
            raise ValueError(f"Validation: n must be >= 1, got {n}")
        names = sorted(k for k, t in problem.terms.items() if t.pointwise and t.where != "data")
        self.names = tuple(names)
        if not names:
            self._fn = None
            return
        keys = jax.random.split(jax.random.fold_in(jax.random.key(seed), _SALT), len(names))
        batch = {k: problem.domain.sample(key, n, problem.terms[k].where, dtype)
                 for k, key in zip(names, keys, strict=True)}
        only = problem.without(set(problem.terms) - set(names))

        @eqx.filter_jit
        def fn(network, coeffs):
            res = only.residuals(network, coeffs, batch, Autodiff())
            return {k: jnp.mean(jnp.sum(r**2, axis=-1)) for k, r in res.items()}  # r: (n, rows)

        self._fn = fn

    def metrics(self, network, coeffs: Mapping) -> dict[str, float]:
        if self._fn is None:
            return {}
        terms = {f"validation_{k}": float(v) for k, v in self._fn(network, coeffs).items()}
        return {**terms, "validation": sum(terms.values())}
