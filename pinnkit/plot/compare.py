"""Several runs overlaid (``pinnkit compare RUN...``): the training loss and the error
against the reference over the steps, one colour per run.

- left panel: the total loss of every logged step (``metrics.jsonl``), log scale;
- right panel: ``rel_l2`` per field at each evaluation (``train.eval_every`` records),
  ending at the final one of ``summary.json``; one line style per field. A problem
  without an exact solution shows its first own metric there instead (``c_D``...), on a
  linear scale. A run that logged no evaluation shows its final error as one marker.

Inputs are records with ``path``, ``history`` and ``summary`` (`pinnkit.run.runs_table.RunRecord`,
no JAX, no checkpoint), received as data: plot does not import run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from .._jsonsafe import metric_scalars
from .fields import _plt


class RunRecord(Protocol):
    """What a figure reads of one run (`pinnkit.run.runs_table.RunRecord` is one)."""

    path: Path
    history: list[dict]
    summary: dict | None


_STYLES = ("-", "--", ":", "-.")


def _loss(rec: RunRecord) -> tuple[np.ndarray, np.ndarray]:
    pts = [(h["step"], h["loss"]) for h in rec.history
           if isinstance(h.get("loss"), int | float) and not isinstance(h.get("loss"), bool)]
    arr = np.array(pts, dtype=float).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def _final_step(rec: RunRecord) -> float:
    s = (rec.summary or {}).get("steps")
    if isinstance(s, int):
        return float(s)  # as an evaluation record's step: after s steps
    return float(max((h["step"] for h in rec.history), default=0))


def error_series(rec: RunRecord, what: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of ``rel_l2`` of field ``name`` (``what="rel_l2"``) or of
    problem metric ``name`` (``what="metrics"``): every evaluation record, then the
    final value of ``summary.json`` at the last step (unless an evaluation is there)."""
    pts = []
    for h in rec.history:
        ev = h.get("eval")
        if isinstance(ev, dict):
            v = (ev.get("rel_l2") or {}).get(name) if what == "rel_l2" else \
                metric_scalars(ev.get("metrics")).get(name)
            if isinstance(v, int | float) and not isinstance(v, bool):
                pts.append((float(h["step"]), float(v)))
    s = rec.summary or {}
    final = (s.get("rel_l2") or {}).get(name) if what == "rel_l2" else \
        metric_scalars(s.get("metrics")).get(name)
    if isinstance(final, int | float) and not isinstance(final, bool):
        step = _final_step(rec)
        if not pts or pts[-1][0] < step:
            pts.append((step, float(final)))
    arr = np.array(pts, dtype=float).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def _error_quantity(runs: Sequence[RunRecord]) -> tuple[str, list[str]]:
    """``("rel_l2", fields)`` when any run has an error against a reference, else
    ``("metrics", [first metric])`` (or none)."""
    fields = list(dict.fromkeys(f for r in runs for f in ((r.summary or {}).get("rel_l2") or {})))
    fields += [f for r in runs for h in r.history if isinstance(h.get("eval"), dict)
               for f in (h["eval"].get("rel_l2") or {}) if f not in fields]
    if fields:
        return "rel_l2", list(dict.fromkeys(fields))
    names = [n for r in runs for n in metric_scalars((r.summary or {}).get("metrics"))]
    return "metrics", names[:1]


def compare_figure(runs: Sequence[RunRecord], labels: Sequence[str] | None = None):
    """The figure of module `pinnkit.plot.compare` for ``runs`` (labels: the run paths by
    default). **Returns:** the matplotlib figure; ``fig.axes[0]`` the loss, ``[1]`` the
    errors, each with one line per run (per run and field on the right)."""
    plt = _plt()
    labels = list(labels) if labels is not None else [str(r.path) for r in runs]
    fig, (ax_loss, ax_err) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained",
                                         sharex=True)  # a final-error marker alone keeps the loss's steps
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    what, names = _error_quantity(runs)
    for i, (rec, lab) in enumerate(zip(runs, labels, strict=True)):
        c = colours[i % len(colours)]
        steps, loss = _loss(rec)
        ax_loss.plot(steps, loss, color=c, label=lab)
        for j, n in enumerate(names):
            s, v = error_series(rec, what, n)
            tag = lab if len(names) == 1 else f"{lab}: {n}"
            ax_err.plot(s, v, color=c, linestyle=_STYLES[j % len(_STYLES)],
                        marker="o" if len(s) == 1 else None, markersize=4, label=tag)
    ax_loss.set(yscale="log", xlabel="step", ylabel="loss", title="training loss")
    if what == "rel_l2" and names:
        ax_err.set(yscale="log", ylabel="rel. L2 error",
                   title="rel. L2 error" + (f" of {names[0]}" if len(names) == 1 else " per field"))
    elif names:
        ax_err.set(ylabel=names[0], title=f"{names[0]} (no exact solution)")
    else:
        ax_err.set(title="no error or metric recorded")
    ax_err.set_xlabel("step")
    for ax in (ax_loss, ax_err):
        ax.grid(True, which="major", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
    return fig
