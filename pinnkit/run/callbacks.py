"""The callbacks a config asks for (`config_callbacks`): what ``eval.extra_metrics``,
``eval.validation_points`` and ``train.early_stopping`` add to a run's `pinnkit.fit`."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp

from .._loader import load_callable
from ..errors import ConfigError
from ..physics.problem import Problem
from ..train.callbacks import EarlyStopping, ExtraMetrics
from ..train.validation import Validation
from .config import RunConfig, did_you_mean
from .metrics import Predictor


def config_callbacks(cfg: RunConfig, problem: Problem) -> tuple:
    """The callbacks a config asks for (``eval.extra_metrics``, ``eval.validation_points``,
    then ``train.early_stopping``, its metric checked against what ``problem``'s
    evaluations hold: a reference's fields and vectors for ``rel_l2``, its fields for
    ``linf``)."""
    base = Path(cfg.source_dir) if cfg.source_dir else None
    dtype = jnp.float64 if cfg.numerics.x64 else jnp.float32

    def on_predictor(fn):  # the user's function sees the model as Problem.metrics does
        return ExtraMetrics(lambda net, coeffs: fn(Predictor(net, cfg.eval.batch, dtype)))

    extra = tuple(on_predictor(load_callable(spec, base_dir=base, what=f"eval.extra_metrics.{i}"))
                  for i, spec in enumerate(cfg.eval.extra_metrics))
    if cfg.eval.validation_points:
        extra = (*extra, Validation(problem, cfg.eval.validation_points, cfg.train.seed, dtype))
    es = cfg.train.early_stopping
    if es is None:
        return extra
    head, _, name = es.metric.replace("/", ".").partition(".")
    known = {"rel_l2": (*problem.out_names, *(v for v, _ in problem.vectors))
             if problem.reference is not None else (),
             "linf": problem.out_names if problem.reference is not None else ()}
    if head in known and name not in known[head]:
        fix = (f"one of {', '.join(f'{head}.{n}' for n in known[head])}" if known[head] else
               "a metrics.NAME of the problem's (it has no reference solution to compare with)")
        raise ConfigError(f"train.early_stopping.metric: {es.metric!r} is not evaluated; "
                          f"choose {fix}")
    if head not in (*known, "metrics", "coeffs"):
        hint = did_you_mean(head, [*known, "metrics"])
        raise ConfigError(f"train.early_stopping.metric: {es.metric!r}: expected rel_l2.FIELD, "
                          f"linf.FIELD, metrics.NAME or coeffs.NAME.{hint}")
    return (*extra, EarlyStopping(es.metric, es.patience, es.min_delta, es.mode))
