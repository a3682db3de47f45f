"""Host-side bookkeeping of the training loop: ``metrics.jsonl`` records, progress
output, the training clock, and the loss monitor that turns a diverging or non-finite
loss into an outcome."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from .._jsonsafe import dumps as json_dumps
from ..errors import RunDirError
from ..parallel.mesh import is_main_process
from . import checkpoint as ckpt


class Log:
    """Progress output on stderr (process 0, when enabled): a tqdm bar on a terminal,
    plain lines otherwise; `note` prints one line either way (compilation, resume)."""

    def __init__(self, total: int, start: int, enabled: bool):
        self.bar = None
        self.enabled = enabled and is_main_process()
        if self.enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, unit="step", dynamic_ncols=True)

    def note(self, text: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def compiling(self, what: str, compile_fn):
        """``compile_fn()`` under a ``compiling WHAT ... (N s)`` line."""
        t0 = time.perf_counter()
        if self.enabled and self.bar is None:
            print(f"pinnkit: compiling {what} ...", end="", file=sys.stderr, flush=True)
        elif self.bar is not None:
            self.bar.set_description("compiling")
        compiled = compile_fn()
        took = f"({time.perf_counter() - t0:.1f} s)"
        if self.enabled and self.bar is None:
            print(f" {took}", file=sys.stderr, flush=True)
        elif self.bar is not None:
            self.bar.set_description(None)
            self.note(f"pinnkit: compiling {what} ... {took}")
        return compiled

    def update(self, step: int, n: int, loss: float, rate: float):
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix(loss=f"{loss:.3e}", steps_per_s=f"{rate:.1f}")
        else:
            print(f"step {step:>8d}  loss {loss:.4e}  {rate:8.1f} steps/s", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


class TrainClock:
    """Wall (`time.perf_counter`) and process CPU (`time.process_time`) seconds since
    creation, less the intervals between `pause` and `resume` (evaluations)."""

    def __init__(self):
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        self.paused = (0.0, 0.0)

    def pause(self) -> tuple[float, float]:
        self.paused = (time.perf_counter(), time.process_time())
        return self.paused[0] - self.wall0, self.paused[1] - self.cpu0

    def resume(self) -> None:
        self.wall0 += time.perf_counter() - self.paused[0]
        self.cpu0 += time.process_time() - self.paused[1]


class LossMonitor:
    """The first step whose loss is non-finite, or exceeds ``factor`` times the best
    (lowest positive) loss seen before it in this `fit`."""

    def __init__(self, factor: float):
        self.factor = factor
        self.best = math.inf

    def first_bad(self, losses: np.ndarray) -> tuple[int, str] | None:
        """``(index, "nonfinite_loss" | "diverged")`` of the first bad loss, or None; the
        best loss is updated with the good ones."""
        for i, value in enumerate(np.asarray(losses, np.float64)):
            if not np.isfinite(value):
                return i, "nonfinite_loss"
            if 0 < self.best < math.inf and value > self.factor * self.best:
                return i, "diverged"
            if value > 0:
                self.best = min(self.best, float(value))
        return None


def append_lines(path: Path | None, records: list[dict]) -> None:
    if path is None or not records or not is_main_process():
        return
    try:
        with open(path, "a") as f:
            for r in records:
                f.write(json_dumps(r) + "\n")  # strict JSON: NaN as null, flagged
    except OSError as e:
        raise RunDirError(f"cannot append to {path}: {e.strerror or e}") from None


def log_records(path, history, m, start, phase, every, total, upto=None):
    """Per-step records for the steps of this chunk that fall on the logging cadence
    (steps ``< upto`` when given)."""
    n = len(m["loss"])
    recs = []
    for i in range(n):
        s = start + i
        if upto is not None and s >= upto:
            break
        if s % every == 0 or s == total - 1:
            terms = {k: float(v[i]) for k, v in sorted(m["terms"].items())}
            rec = {"step": s, "phase": phase, "loss": float(m["loss"][i]), "terms": terms}
            if "weights" in m:
                rec["weights"] = {k: float(v[i]) for k, v in sorted(m["weights"].items())}
            # second-order phases: the line search's step, and for ssbfgs/ssbroyden the
            # curvature y.s and the self-scaling factor tau of the step
            for name in ("step_size", "curvature", "scaling"):
                if name in m:
                    rec[name] = float(m[name][i])
            if "grad_norm" in m:  # a phase stopping on grad_tol
                rec["grad_norm"] = float(m["grad_norm"][i])
            if "causal" in m:
                rec["causal"] = {k: [float(x) for x in v[i]] for k, v in sorted(m["causal"].items())}
            recs.append(rec)
    history.extend(recs)
    append_lines(path, recs)


def truncate_metrics(path: Path | None, step: int) -> None:
    """Drops records of steps >= ``step`` (written after the checkpoint we resume from)."""
    if path is None or not path.exists() or not is_main_process():
        return
    if not path.is_file():  # a FIFO is never read (it would block)
        raise RunDirError(f"{path} is not a regular file; move it away, then resume")

    def before(line: str) -> bool:  # damaged lines go (they were the log's, not the model's)
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            return False
        return isinstance(rec, dict) and isinstance(rec.get("step"), int) and rec["step"] < step

    kept = [line for line in path.read_text(errors="replace").splitlines() if line.strip() and before(line)]
    ckpt.atomic_write_bytes(path, ("\n".join(kept) + "\n" if kept else "").encode())


def next_multiple(step: int, every: int) -> int:
    return 0 if every <= 0 else (step // every + 1) * every
