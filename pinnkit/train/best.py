"""The best parameters of a run by an evaluated metric (``eval.keep_best``).

A network trained on a fixed set of points can pass its best field and move away from
it while the loss keeps falling (the backward-facing step, docs/benchmarks.md, session
33); a run given more steps than it needs then ends worse than it was. `KeepBest`
watches one evaluated metric $m$ (the fresh-point residual ``metrics.validation`` of
`pinnkit.train.validation` when there is no reference, or ``rel_l2.FIELD`` when there is)
and keeps the parameters of the evaluation where it was lowest,
$$\\theta^\\star = \\theta_{k^\\star}, \\qquad k^\\star = \\arg\\min_k m(\\theta_k)$$
over the evaluations $k$ (every ``train.eval_every`` steps; the first of equal values; a
NaN never counts), as a host copy, and hands each new best to ``save`` (the run folder's
``best/``, `pinnkit.run.best`). The training trajectory is unchanged: the optimiser goes
on from the current parameters, and the checkpoints that resume it hold those.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..parallel.distributed import to_host
from .callbacks import Callback, TrainInfo, require


class KeepBest(Callback):
    """Keeps the parameters of the evaluation with the lowest ``metric`` (module docstring).

    **Arguments:**
    - `metric`: a dotted name in the evaluation record (``metrics.validation``,
      ``rel_l2.u``, ``rel_l2.velocity``, ``metrics.NAME``).
    - `save`: called as ``save(step, value, network, coeffs)`` at each new best (default: none).
    - `value`, `step`: a best already kept (a resumed run's), which a later evaluation
      must beat; default none.

    **Attributes** after `fit`: `value`, `step` (None until an evaluation is finite),
    `network`, `coeffs` (host copies of the best model; None when it was kept by an
    earlier process, before a resume)."""

    def __init__(self, metric: str, save: Callable[[int, float, Any, Any], None] | None = None,
                 value: float = math.nan, step: int | None = None):
        self.metric, self.save = metric, save
        self.value, self.step = value, step
        self.network: Any = None
        self.coeffs: Mapping[str, Any] | None = None

    def beaten_by(self, value: float) -> bool:
        """Whether ``value`` is a new best: finite and below the kept one (or none kept)."""
        return math.isfinite(value) and (self.step is None or value < self.value)

    def keep(self, step: int, value: float, network, coeffs) -> None:
        """Takes ``(network, coeffs)`` at ``step`` as the best, ``value`` its metric."""
        self.value, self.step = value, step
        self.network, self.coeffs = to_host((network, coeffs))
        if self.save is not None:
            self.save(step, value, network, coeffs)

    def on_eval(self, info: TrainInfo) -> None:
        value = require(info.metrics, self.metric, "eval.keep_best")
        if self.beaten_by(value):
            self.keep(info.step, value, info.network, info.coeffs)
