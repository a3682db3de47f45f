"""Live training curves: the records of ``metrics.jsonl`` fed to scalar writers while the
run trains (``logging.tensorboard``, ``logging.wandb``, ``logging.mlflow``: `pinnkit.run.loggers`).

``metrics.jsonl`` stays the record: a `RecordFollower` thread reads the lines the
training loop appends (every ``logging.every_s`` seconds, and once more at the end) and
turns each into scalars (`record_scalars`): per-term losses and loss weights, the
learning rate, the natural gradient's step size, evaluation errors and learnt
coefficients. A writer for another service implements `AbstractScalarWriter`
(``scalars(step, values)`` and ``close()``). The final evaluation's errors and metrics
are written to every writer at the run's last step (`LiveLog.close`), with or without
``train.eval_every``.

On ``--resume`` the loop first cuts ``metrics.jsonl`` back to its checkpoint (a new
file); the follower waits for that file and skips the records before the checkpoint,
which the interrupted process already wrote, and the TensorBoard writer purges what that
process wrote after it (``purge_step``). Time windows (``train.time_windows``) log to
``RUN/windows/w{k}/metrics.jsonl``, followed with their global step offset.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import loggers
from .loggers import AbstractScalarWriter as AbstractScalarWriter
from .loggers import TensorBoardWriter as TensorBoardWriter
from .loggers import writers as make_writers


def _flat(prefix: str, value, out: dict[str, float]) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        out[prefix] = float(value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _flat(f"{prefix}/{k}", v, out)


def record_scalars(record: Mapping, learning_rate: Callable[[int, int], float | None] | None = None
                   ) -> dict[str, float]:
    """The scalars of one ``metrics.jsonl`` record: ``loss/total``, ``loss/<term>``,
    ``weight/<term>``, ``learning_rate`` (from ``learning_rate(step, phase)``, None for a
    phase without one), ``step_size``; an evaluation record's ``eval/rel_l2/<field>``,
    ``eval/linf/<field>``, ``eval/metrics/...`` and ``coeff/<name>``."""
    out: dict[str, float] = {}
    if "loss" in record:
        out["loss/total"] = float(record["loss"])
        _flat("loss", record.get("terms", {}), out)
        _flat("weight", record.get("weights", {}), out)
        if "step_size" in record:
            out["step_size"] = float(record["step_size"])
        lr = learning_rate(record["step"], record.get("phase", 0)) if learning_rate else None
        if lr is not None:
            out["learning_rate"] = float(lr)
    if "eval" in record:
        ev = dict(record["eval"])
        _flat("coeff", ev.pop("coeffs", {}), out)
        _flat("eval", ev, out)
    return out


@dataclass
class _Source:
    path: Path
    offset: int  # global step of the file's step 0
    skip_below: int = 0  # steps the interrupted process already wrote (resume)
    wait_inode: int | None = None  # read only once the loop has replaced this file
    pos: int = 0
    inode: int | None = None
    seen: set = field(default_factory=set)


class RecordFollower:
    """Reads new complete lines of the sources' JSONL files (`poll`), hands each record
    (step made global) to ``sink``; `start` polls every ``every_s`` seconds in a
    daemon thread, `stop` polls a last time and joins it."""

    def __init__(self, sources: list[_Source], sink: Callable[[dict], None], every_s: float = 2.0):
        self.sources, self.sink, self.every_s = sources, sink, every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poll(self) -> None:
        with self._lock:
            for s in self.sources:
                self._read(s)

    def _read(self, s: _Source) -> None:
        try:
            st = s.path.stat()
        except FileNotFoundError:
            return
        if s.wait_inode is not None:
            if st.st_ino == s.wait_inode:
                return
            s.wait_inode = None
        if st.st_ino != s.inode or st.st_size < s.pos:  # a new file (the resume cut)
            s.inode, s.pos = st.st_ino, 0
        if st.st_size == s.pos:
            return
        with open(s.path, "rb") as fh:
            fh.seek(s.pos)
            chunk = fh.read()
        end = chunk.rfind(b"\n") + 1  # complete lines only
        s.pos += end
        for line in chunk[:end].decode().splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            key = ("eval" in rec, rec.get("step", -1))
            if rec.get("step", 0) < s.skip_below or key in s.seen:
                continue
            s.seen.add(key)
            self.sink({**rec, "step": s.offset + rec["step"]})

    def _loop(self):
        while not self._stop.wait(self.every_s):
            self.poll()

    def start(self) -> RecordFollower:
        self._thread = threading.Thread(target=self._loop, name="pinnkit-live-log", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.poll()


class LiveLog:
    """A follower and its writer, started by `start_live_logging`; `close` when training ends."""

    def __init__(self, follower: RecordFollower, writer: AbstractScalarWriter):
        self.follower, self.writer = follower, writer

    def close(self, final: tuple[int, dict] | None = None) -> None:
        """Stops following; ``final``: ``(step, evaluation)`` of the run's final
        evaluation (``rel_l2``, ``linf``, ``metrics``), written last as ``eval/...`` scalars."""
        try:
            self.follower.stop()
            if final is not None:
                self.writer.scalars(final[0], record_scalars({"eval": final[1]}))
        finally:
            self.writer.close()


def _resume_step(run_dir: Path) -> int:
    from ..train import checkpoint as ckpt

    found = ckpt.latest_valid(run_dir / "checkpoints")
    return int(found[1]["step"]) if found else 0


def start_live_logging(run, out: Path, resume: bool, writer: AbstractScalarWriter | None = None
                       ) -> LiveLog | None:
    """Starts following ``out``'s metrics for ``run`` (a `pinnkit.run.build.Run`) into
    ``writer`` (default: those ``cfg.logging`` asks for, `pinnkit.run.loggers.writers`);
    None when there is nothing to log to. Call before training, on process 0 only."""
    cfg = run.config
    if writer is None and not loggers.wanted(cfg.logging):
        return None
    windows = cfg.train.time_windows
    dirs = [(out, 0)] if windows == 1 else [(out / "windows" / f"w{k}", k * run.total_steps)
                                            for k in range(windows)]
    sources = []
    for d, offset in dirs:
        path = d / "metrics.jsonl"
        s = _Source(path, offset)
        if resume and path.exists():  # fit cuts it back to the checkpoint: wait for that
            s.wait_inode, s.skip_below = path.stat().st_ino, _resume_step(d)
        sources.append(s)
    started = [s.offset + s.skip_below for s in sources if s.wait_inode is not None]
    if writer is None:
        writer = make_writers(cfg, out, purge_step=max(started) if started else None)
    phases = run.phases
    rates = [_rate(ph) for ph in phases]

    def learning_rate(step: int, phase: int):
        fn = rates[min(phase, len(rates) - 1)]
        return None if fn is None else fn(step % run.total_steps - phases[min(phase, len(phases) - 1)].start)

    def sink(rec):
        writer.scalars(rec["step"], record_scalars(rec, learning_rate))

    follower = RecordFollower(sources, sink, cfg.logging.every_s)
    return LiveLog(follower.start(), writer)


def _rate(phase) -> Callable[[int], float] | None:
    """``step -> learning rate`` of a built phase: the rate its optimiser was built with
    (`AbstractPhase.learning_rate`; None for L-BFGS and the natural gradient, which choose
    their steps)."""
    sched = phase.learning_rate
    if sched is None:
        return None
    return (lambda k: float(sched(k))) if callable(sched) else (lambda k: float(sched))
