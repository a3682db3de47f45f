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


def eta(seconds: float) -> str:
    """``1h02m``, ``3m05s``, ``42s``; ``?`` when unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Log:
    """Progress output on stderr (process 0, when enabled): a tqdm bar on a terminal,
    plain lines otherwise (piped output, a batch job's log): one per chunk with the step,
    percent done, loss, rate and ETA. The rate is the only one shown: steps per second
    of the chunks run so far, compilation excluded (tqdm's own rate, which counts
    compilation, is left out of the bar); the ETA is the steps left at that rate.
    `note` prints one line either way (compilation, resume)."""

    def __init__(self, total: int, start: int, enabled: bool):
        self.bar = None
        self.total = total
        self.enabled = enabled and is_main_process()
        if self.enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, unit="step", dynamic_ncols=True,
                            bar_format="{desc}{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                       "[{elapsed}{postfix}]")

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
        left = eta((self.total - step) / rate if rate > 0 else math.nan)
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix_str(f"loss {loss:.3e}, {rate:.1f} steps/s, ETA {left}")
        else:
            pct = 100.0 * step / max(self.total, 1)
            print(f"step {step:>8d}/{self.total} ({pct:5.1f}%)  loss {loss:.4e}  {rate:8.1f} steps/s"
                  f"  ETA {left}", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


class TrainClock:
    """Wall (`time.perf_counter`) and process CPU (`time.process_time`) seconds since
    creation, less the intervals between `pause` and `resume` (evaluations)."""

    def __init__(self):
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        self.paused = (0.0, 0.0)

    def elapsed(self) -> tuple[float, float]:
        """``(wall_s, cpu_s)`` of training so far (pauses excluded)."""
        return time.perf_counter() - self.wall0, time.process_time() - self.cpu0

    def pause(self) -> tuple[float, float]:
        self.paused = (time.perf_counter(), time.process_time())
        return self.paused[0] - self.wall0, self.paused[1] - self.cpu0

    def resume(self) -> None:
        self.wall0 += time.perf_counter() - self.paused[0]
        self.cpu0 += time.process_time() - self.paused[1]


class TimeBudget:
    """``train.max_time`` (wall seconds, `time.perf_counter`) and ``train.max_cpu_time``
    (process CPU seconds, `time.process_time`, all threads) since `fit` began; None: no
    limit.

    `chunk_size` shortens a chunk that would overrun a limit to the steps that fit, from
    the phase's measured seconds per step (its last chunk) and, for a chunk size not
    compiled yet, its measured compilation: a chunk of ``n`` steps fits when
    ``used + n * per_step (+ compile) <= limit`` for both clocks. A phase's first chunk
    has no measurement and runs whole. Chunking never changes the trajectory (the step
    key is ``fold_in(train_key, step)``; the losses are bitwise those of any chunking).
    """

    def __init__(self, max_wall: float | None, max_cpu: float | None):
        self.limits = (max_wall, max_cpu)
        self.per_step: dict[int, tuple[float, float]] = {}
        self.compile: dict[int, tuple[float, float]] = {}
        self.start = self.now()

    def now(self) -> tuple[float, float]:
        """``(wall, CPU)`` clock readings; every measurement goes through this."""
        return time.perf_counter(), time.process_time()

    def _since(self, t0: tuple[float, float]) -> tuple[float, float]:
        now = self.now()
        return now[0] - t0[0], now[1] - t0[1]

    def compiled(self, phase: int, t0: tuple[float, float]) -> None:
        """Records a compilation of ``phase`` begun at ``t0`` (a `now`); the longest counts."""
        took = self._since(t0)
        old = self.compile.get(phase, (0.0, 0.0))
        self.compile[phase] = (max(old[0], took[0]), max(old[1], took[1]))

    def ran(self, phase: int, n: int, t0: tuple[float, float]) -> None:
        """Records a chunk of ``n`` steps of ``phase`` begun at ``t0``."""
        wall, cpu = self._since(t0)
        self.per_step[phase] = (wall / n, cpu / n)

    def _fits(self, phase: int, n: int, compile: bool) -> bool:
        used = self._since(self.start)
        per = self.per_step.get(phase, (0.0, 0.0))
        extra = self.compile.get(phase, (0.0, 0.0)) if compile else (0.0, 0.0)
        return all(lim is None or u + n * p + e <= lim
                   for u, lim, p, e in zip(used, self.limits, per, extra, strict=True))

    def chunk_size(self, phase: int, n: int, compiled, step: int = 0, every: int = 1) -> int:
        """The steps of the next chunk, which begins at global step ``step``: ``n`` if they
        fit (or the phase is unmeasured and time is left), else the most that fit,
        preferring a size in ``compiled``; 0 when a limit is spent or not one step fits.

        With ``every`` = k > 1 (the sampler holds its points for k steps, ``k`` may exceed
        the chunk) the clock stops a run only where a hold ends: a chunk runs whole if the
        rest of the hold it ends in fits too, and a shortened chunk ends where a hold ends
        (``step + size ≡ 0 mod k``), or is 0. The run then returns the field its last held
        points trained, not one a few steps into a redraw, where a second-order optimiser's
        field moves most; it gives up at most k − 1 steps' time."""
        if not self._fits(phase, 0, False):
            return 0
        hold_end = lambda k: -(-(step + k) // every) * every - step  # noqa: E731  (steps)
        if phase not in self.per_step or self._fits(phase, hold_end(n), n not in compiled):
            return n
        ready = [k for k in compiled
                 if k < n and hold_end(k) == k and self._fits(phase, k, False)]
        lo, hi = 0, n - 1  # the most steps a new compilation leaves room for (bisection)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self._fits(phase, mid, True) else (lo, mid - 1)
        lo = max(0, (step + lo) // every * every - step)  # fits: fewer steps than the most
        return max([*ready, lo])



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


def fresh_points_detail(kind: str, bad_step: int | None, sampler) -> str | None:
    """For a run that ended as ``kind`` (a `RESULTS` name) at ``bad_step``: why a loss
    jumped at a redraw of held points (``sampler.resample_every`` = k > 1 and ``bad_step``
    a multiple of k), where the advice for a diverging optimiser misleads: the loss of the
    held points was low, so the parameters fit those points and not the points between
    them, which a second-order phase that solves each hold's points does readily. None
    for any other end."""
    k = sampler.hold
    if kind != "diverged" or k <= 1 or bad_step % k:
        return None
    return (f"The jump came at step {bad_step}, the first step on freshly drawn points "
            f"(sampler.resample_every: {k}), not from a growing update: the network fits the "
            "points it holds and not those between them. Draw more points per hold "
            "(sampler.batch), hold them for fewer steps, raise a natural-gradient phase's "
            "damping, or use a smaller network")


def result_message(result, detail: str | None) -> str:
    """The message of how a run ended (a `RESULTS` member); a ``detail`` (`FitResult.detail`)
    replaces its advice: the messages read "what happened; what was kept. What to do"."""
    return result.value if detail is None else f"{result.value.partition('. ')[0]}. {detail}"


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
            # curvature y.s, the self-scaling factor tau and the search's trials of the step
            for name in ("step_size", "curvature", "scaling"):
                if name in m:
                    rec[name] = float(m[name][i])
            if "trials" in m:
                rec["trials"] = int(m["trials"][i])
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
