"""summary.json's record of a finished run (`summarize`) and the problem's own metrics of
a model (`problem_metrics`), which `pinnkit.run.rundir` writes and ``pinnkit eval`` reports."""

from __future__ import annotations

import numpy as np

from ..physics.coeffs import values as coeff_values
from ..physics.problem import Problem
from ..train.loop import FitResult
from ..train.records import result_message
from .exactlift import exact_lift_record
from .metrics import Predictor


def summarize(run, res: FitResult, errors: dict, logged: list[dict] = ()) -> dict:
    """summary.json's record. The final loss is the last one of this session's history,
    else of ``logged`` (metrics.jsonl: a resumed run that logged nothing new)."""
    last = next((h for h in reversed([*logged, *res.history]) if "loss" in h), None)
    acceptance = run.sampler.acceptance(run.problem)  # rejection-sampled terms only
    return {
        "problem": run.config.problem.name,
        "outcome": res.result.name,
        "message": result_message(res.result, res.detail),
        "steps": res.step,
        # all windows together, like "steps" (train.steps is per window)
        "total_steps": run.total_steps * run.config.train.time_windows,
        "wall_s": round(res.wall_s, 3),
        "steps_per_s": None if np.isnan(res.steps_per_s) else round(res.steps_per_s, 3),
        # compilation (this session's): seconds per phase, wall and CPU, and the first chunk's
        **{k: {p: round(t, 3) for p, t in getattr(res, k).items()} for k in ("compile_s", "compile_cpu_s")},
        "compile_first_chunk_s": None if res.first_compile_s is None else round(res.first_compile_s, 3),
        "n_devices": run.mesh.size if run.mesh is not None else 1,
        "accumulate": res.accumulate,  # micro-batches per step (train.accumulate, auto resolved)
        "seed": run.config.train.seed,
        "final_loss": last["loss"] if last else None,
        "final_terms": last["terms"] if last else None,
        "rel_l2": errors.get("rel_l2", {}),
        "linf": errors.get("linf", {}),
        # fields the errors compare less their means (pressure is defined up to a constant)
        **({"gauge": run.problem.gauge_map} if run.problem.gauge and errors.get("rel_l2") else {}),
        "coeffs": {k: float(v) for k, v in res.coeffs.items()},
        **({"sampling_acceptance": acceptance} if acceptance else {}),
        **exact_lift_record(run.config, run.problem),  # network.allow_exact_lift, when used
    }


def problem_metrics(problem: Problem, network, batch: int, dtype, coeffs=None) -> dict:
    """``{"metrics": problem.metrics(predict)}`` if the problem defines extra metrics,
    else ``{}`` (see `Problem`). ``coeffs`` (default: the problem's own) reach the metrics
    as ``predict.coeffs``, the physical values of the scalar ones."""
    if problem.metrics is None:
        return {}
    known = coeff_values(problem.coeffs if coeffs is None else coeffs)
    scalars = {k: float(v) for k, v in known.items() if getattr(v, "ndim", 1) == 0}
    return {"metrics": problem.metrics(Predictor(network, batch, dtype, scalars))}
