"""Callbacks: user code that `pinnkit.fit` calls between compiled chunks, on the host.

A callback subclasses `Callback` and overrides what it needs (every method is a no-op
by default): `on_chunk` after each chunk, `on_eval` after each evaluation
(``run.eval_every``), `on_phase_end` when an optimiser phase ends, `should_stop` after
each of those calls (true ends the run with outcome ``early_stopped``), and `metrics`
for extra figures of the current model, evaluated with the built-in errors and logged
beside them (``eval.metrics.NAME`` in ``metrics.jsonl``, ``eval/metrics/NAME`` in
TensorBoard, W&B and MLflow, ``metrics.NAME`` in ``summary.json``).

Each call receives a `TrainInfo`, a frozen record of where training is. Built-ins:
`EarlyStopping` (an evaluated metric that stopped improving; ``train.early_stopping``
in a config) and `ExtraMetrics` (a function of the model).

Callbacks run in every process of a multi-process job, on the same records; a stop
asked by any process is agreed by all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigError


@dataclass(frozen=True)
class TrainInfo:
    """Where training is, as a callback sees it.

    - `step`: steps done in this window (the next step to run); `total_steps`: its last.
    - `phase`, `phase_kind`: the current optimiser phase (index, ``kind``).
    - `loss`: the last step's loss (NaN before the first chunk).
    - `metrics`: the newest evaluation (``{"rel_l2": {field: value}, "linf": ...,
      "metrics": {...}, "coeffs": {...}}``), ``{}`` before the first one.
    - `wall_s`, `cpu_s`: the training clock (wall and process CPU seconds since `fit`
      began, evaluations excluded).
    - `network`, `coeffs`: the current model; valid during the call only (with
      ``donate=True`` the next chunk reuses its buffers).
    """

    step: int
    total_steps: int
    phase: int
    phase_kind: str
    loss: float
    metrics: Mapping[str, Any]
    wall_s: float
    cpu_s: float
    network: Any = field(default=None, repr=False)
    coeffs: Mapping[str, Any] = field(default_factory=dict, repr=False)


class Callback:
    """The base of callbacks (subclass it): every method does nothing unless overridden."""

    def on_chunk(self, info: TrainInfo) -> None:
        """After each compiled chunk (its records are in ``metrics.jsonl``)."""

    def on_eval(self, info: TrainInfo) -> None:
        """After each evaluation; ``info.metrics`` holds it."""

    def on_phase_end(self, info: TrainInfo) -> None:
        """When an optimiser phase ends (its steps done, its tolerance met, or the run stopped)."""

    def should_stop(self, info: TrainInfo) -> bool:
        """Polled after every call above: true ends the run (outcome ``early_stopped``,
        the current parameters kept and checkpointed)."""
        return False

    def stop_reason(self) -> str:
        """Why `should_stop` said true, for ``summary.json``'s ``stopped_by``."""
        return f"{type(self).__name__} asked to stop"

    def metrics(self, network, coeffs: Mapping[str, Any]) -> Mapping[str, float]:
        """Extra figures of the model, computed at each evaluation and at the end."""
        return {}


def lookup(record: Mapping[str, Any], name: str) -> float | None:
    """The number at the dotted (or slashed) path ``name`` of an evaluation record
    (``rel_l2.u``, ``metrics.c_D``, ``eval/linf/u``), or None if there is none."""
    parts = name.replace("/", ".").split(".")
    if parts[0] == "eval":
        parts = parts[1:]
    value: Any = record
    for p in parts:
        if not isinstance(value, Mapping) or p not in value:
            return None
        value = value[p]
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def require(record: Mapping[str, Any], name: str, key: str) -> float:
    """`lookup`, or a `ConfigError` naming config key ``key`` and what ``record`` holds."""
    value = lookup(record, name)
    if value is None:
        raise ConfigError(
            f"{key}: the evaluation has no metric {name!r}; it holds "
            f"{', '.join(metric_names(record)) or 'nothing'}. Set {key} to one of these")
    return value


def metric_names(record: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted names of the numbers in an evaluation record."""
    out = []
    for k, v in record.items():
        if isinstance(v, Mapping):
            out += metric_names(v, f"{prefix}{k}.")
        elif isinstance(v, int | float) and not isinstance(v, bool):
            out.append(f"{prefix}{k}")
    return out


class EarlyStopping(Callback):
    """Stops a run whose evaluated ``metric`` has not improved for ``patience``
    evaluations.

    An evaluation improves on the best value $b$ so far when its value $v$ satisfies
    $v < b - \\delta$ (``mode="min"``, errors) or $v > b + \\delta$ (``"max"``), with
    $\\delta$ = ``min_delta`` >= 0; a NaN never improves. Needs evaluations
    (``run.eval_every`` > 0). A resumed run starts counting afresh.

    **Arguments:**
    - `metric`: a dotted name in the evaluation record: ``rel_l2.FIELD``,
      ``linf.FIELD``, ``metrics.NAME`` (the problem's or an `ExtraMetrics`'), ``coeffs.NAME``.
    - `patience`: evaluations without improvement before the stop (>= 1).
    - `min_delta`: the least change that counts as an improvement (default 0).
    - `mode`: ``"min"`` (default) or ``"max"``.
    """

    def __init__(self, metric: str, patience: int = 5, min_delta: float = 0.0,
                 mode: Literal["min", "max"] = "min"):
        if mode not in ("min", "max"):
            raise ConfigError(f"EarlyStopping: mode {mode!r}: expected 'min' or 'max'")
        if not (isinstance(patience, int) and patience >= 1):
            raise ConfigError(f"EarlyStopping: patience {patience!r}: expected an integer >= 1")
        if not (math.isfinite(min_delta) and min_delta >= 0):
            raise ConfigError(f"EarlyStopping: min_delta {min_delta!r}: expected a number >= 0")
        self.metric, self.patience, self.min_delta, self.mode = metric, patience, min_delta, mode
        self.best: float = math.nan
        self.best_step: int | None = None
        self.waited = 0

    def on_eval(self, info: TrainInfo) -> None:
        value = require(info.metrics, self.metric, "train.early_stopping.metric")
        sign = 1.0 if self.mode == "min" else -1.0
        if self.best_step is None or sign * value < sign * self.best - self.min_delta:
            self.best, self.best_step, self.waited = value, info.step, 0
        else:  # NaN compares false: never an improvement
            self.waited += 1

    def should_stop(self, info: TrainInfo) -> bool:
        return self.waited >= self.patience

    def stop_reason(self) -> str:
        return (f"early stopping: {self.metric} did not improve by more than {self.min_delta:g} "
                f"in {self.patience} evaluation(s); best {self.best:.6g} at step {self.best_step}")


class ExtraMetrics(Callback):
    """Figures of the model that ``fn(network, coeffs) -> {name: number}`` computes,
    evaluated with the built-in errors and logged like a problem's own metrics."""

    def __init__(self, fn: Callable[[Any, Mapping[str, Any]], Mapping[str, float]]):
        self.fn = fn

    def metrics(self, network, coeffs):
        return {str(k): float(v) for k, v in dict(self.fn(network, coeffs)).items()}


def extra_metrics(callbacks: Sequence[Callback], network, coeffs) -> dict[str, float]:
    """The callbacks' `Callback.metrics` together (a later callback's name wins)."""
    out: dict[str, float] = {}
    for cb in callbacks:
        out.update(cb.metrics(network, coeffs))
    return out


def with_extra(record: Mapping[str, Any], extra: Mapping[str, float]) -> dict[str, Any]:
    """An evaluation record with ``extra`` merged into its ``metrics``."""
    if not extra:
        return dict(record)
    return {**record, "metrics": {**dict(record.get("metrics", {})), **extra}}


def notify(callbacks: Sequence[Callback], event: str, info: TrainInfo) -> Callback | None:
    """Calls ``event`` (``on_chunk``, ``on_eval``, ``on_phase_end``) of each callback in
    order, then polls `should_stop`; the first callback that asks to stop, or None."""
    for cb in callbacks:
        getattr(cb, event)(info)
    return next((cb for cb in callbacks if cb.should_stop(info)), None)
