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
    then ``train.early_stopping``), the metrics of ``train.early_stopping`` and
    ``eval.keep_best`` checked against what ``problem``'s evaluations hold (`check_metric`).
    The `pinnkit.train.best.KeepBest` of ``eval.keep_best`` needs the run folder: `pinnkit.run.best`."""
    base = Path(cfg.source_dir) if cfg.source_dir else None
    dtype = jnp.float64 if cfg.numerics.x64 else jnp.float32

    def on_predictor(fn):  # the user's function sees the model as Problem.metrics does
        return ExtraMetrics(lambda net, coeffs: fn(Predictor(net, cfg.eval.batch, dtype)))

    extra = tuple(on_predictor(load_callable(spec, base_dir=base, what=f"eval.extra_metrics.{i}"))
                  for i, spec in enumerate(cfg.eval.extra_metrics))
    if cfg.eval.validation_points:
        extra = (*extra, Validation(problem, cfg.eval.validation_points, cfg.train.seed, dtype))
    if cfg.eval.keep_best:
        check_metric("eval.keep_best", cfg.eval.keep_best, cfg, problem)
    es = cfg.train.early_stopping
    if es is None:
        return extra
    check_metric("train.early_stopping.metric", es.metric, cfg, problem)
    return (*extra, EarlyStopping(es.metric, es.patience, es.min_delta, es.mode))


def check_metric(key: str, metric: str, cfg: RunConfig, problem: Problem) -> None:
    """Refuses (`ConfigError` naming ``key``) a ``metric`` that the run's evaluations will
    not hold: ``rel_l2.NAME`` of a reference's fields and vectors, ``linf.NAME`` of its
    fields, ``metrics.validation*`` with ``eval.validation_points``, and evaluations at all
    (``train.eval_every``); ``eval.keep_best`` in one time window."""
    head, _, name = metric.replace("/", ".").partition(".")
    known = {"rel_l2": (*problem.out_names, *(v for v, _ in problem.vectors))
             if problem.reference is not None else (),
             "linf": problem.out_names if problem.reference is not None else ()}
    if head in known and name not in known[head]:
        fix = (f"one of {', '.join(f'{head}.{n}' for n in known[head])}" if known[head] else
               "a metrics.NAME of the problem's (it has no reference solution to compare with)")
        raise ConfigError(f"{key}: {metric!r} is not evaluated; choose {fix}")
    if head not in (*known, "metrics", "coeffs"):
        hint = did_you_mean(head, [*known, "metrics"])
        raise ConfigError(f"{key}: {metric!r}: expected rel_l2.FIELD, "
                          f"linf.FIELD, metrics.NAME or coeffs.NAME.{hint}")
    if head == "metrics" and name.startswith("validation") and not cfg.eval.validation_points:
        raise ConfigError(f"{key}: {metric!r} is the residual on fresh points, which "
                          "eval.validation_points (0 here) draws: set it, e.g. to 4096")
    if cfg.train.eval_every < 1:
        raise ConfigError(f"{key}: {metric!r} is read at evaluations, and train.eval_every is "
                          f"{cfg.train.eval_every}: set it to the steps between them, e.g. 250")
    if key == "eval.keep_best" and cfg.train.time_windows > 1:
        raise ConfigError("eval.keep_best: a run in time windows (train.time_windows: "
                          f"{cfg.train.time_windows}) keeps each window's final model; set "
                          "eval.keep_best to null, or train in one window")
