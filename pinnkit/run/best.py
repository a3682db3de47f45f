"""A run folder's best model (``eval.keep_best``, `pinnkit.train.best`)::

    DIR/best/step_XXXXXXXX.eqx   the parameters of the lowest evaluated metric so far

written (parameters only, atomically, by process 0) at each new best, so that a run
killed midway keeps it. At the end of the run the final parameters are evaluated once
more and compared: the lower of the two is the run's model, written to ``best/`` if it is
the final one, evaluated into summary.json (with ``best``: metric, value, step, and
``last``: the final parameters' step, metric and errors when they lost) and drawn in the
plots; `pinnkit.load_run`, ``pinnkit eval`` and ``pinnkit plot`` read it. ``checkpoints/``
keeps the training state, so a resume goes on from the last step as before.
"""

from __future__ import annotations

import math
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

from ..parallel.distributed import barrier, broadcast_from_main
from ..parallel.mesh import is_main_process
from ..train import checkpoint as ckpt
from ..train.best import KeepBest
from ..train.callbacks import lookup
from ..train.loop import phase_at
from ..train.step import split_model, trainable_spec

BEST = "best"


def keep_best(cfg, run, out: Path, resume: bool) -> tuple[KeepBest, ...]:
    """The `KeepBest` that ``eval.keep_best`` asks for (none when null), saving into
    ``out/best``; a resumed run's starts from the best already kept there."""
    metric = cfg.eval.keep_best
    if not metric:
        return ()
    folder, spec = Path(out) / BEST, trainable_spec(run)

    def save(step, value, network, coeffs):
        if not is_main_process():
            return
        head = ckpt.manifest(run.record, phase=phase_at(run, step),
                             n_devices=run.mesh.size if run.mesh else 1,
                             n_processes=jax.process_count(), seed=run.seed)
        head.update(contents=ckpt.PARAMS_ONLY, best_metric=metric, best_value=value)
        ckpt.save(folder, step, eqx.partition((network, coeffs), spec)[0], head, keep=1)

    found = ckpt.latest_valid(folder) if resume else None
    if found is not None and found[1].get("best_metric") == metric:
        return (KeepBest(metric, save, float(found[1]["best_value"]), int(found[1]["step"])),)
    return (KeepBest(metric, save),)


def choose(run, keeper: KeepBest, step: int, network, coeffs, last: dict, out: Path):
    """``(network, coeffs, record)``: the run's model, the final ``(network, coeffs)`` at
    ``step`` (their evaluation record ``last``: errors and metrics) or the best kept,
    whichever has the lower metric; ``record`` is summary.json's ``best`` (and ``last``
    when the final parameters lost). Every process takes process 0's choice."""
    value = lookup(last, keeper.metric)
    value = math.nan if value is None else value
    final = keeper.step is None or keeper.beaten_by(value) or value == keeper.value
    if bool(broadcast_from_main(np.int32(final))):
        if keeper.step != step and math.isfinite(value):
            keeper.keep(step, value, network, coeffs)
        return network, coeffs, {"metric": keeper.metric, "step": step,
                                  "value": value if math.isfinite(value) else None}
    record = {"metric": keeper.metric, "value": keeper.value, "step": keeper.step,
              "last": {"step": step, "value": value if math.isfinite(value) else None,
                       **{k: last[k] for k in ("rel_l2", "linf") if k in last}}}
    if keeper.network is not None:
        return keeper.network, keeper.coeffs, record
    barrier("pinnkit-best-read")  # kept before a resume: read back from best/
    params, static = split_model(run)
    path, head = ckpt.newest_valid(Path(out) / BEST, f"{Path(out) / BEST}: no best model to read")
    network, coeffs = eqx.combine(ckpt.load_model(path, head, params, run.phases, {})[0], static)
    return network, coeffs, record


def model_folder(run_dir: Path, last: bool = False) -> Path:
    """Where a run's model is read from: ``best/`` when it holds one (unless ``last``),
    else ``checkpoints/``."""
    best = Path(run_dir) / BEST
    if not last and best.is_dir() and ckpt.list_checkpoints(best):
        return best
    return Path(run_dir) / "checkpoints"
