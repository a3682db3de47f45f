"""Training: `fit`, the host loop around the compiled chunks (`pinnkit.train.step`).

For each phase of the run, chunks of ``run.chunk`` steps are compiled once (ahead of
time: a ``compiling ...`` line says how long it took, and rates exclude it; a later phase
with the same program, `pinnkit.train.step.chunk_program`, runs them with its own numbers
and compiles nothing) and run one after another; between chunks the host logs
(``metrics.jsonl``), checks the losses, evaluates, checkpoints, and looks at signals and
the clock. The step key is ``fold_in(train_key, step)``, so a resumed run follows the
uninterrupted trajectory.

How a run ends is a `RESULTS` member (diffrax's pattern: the value is the message):
all steps done, a phase's tolerance met at the last phase, a non-finite or diverging
loss (``run.divergence_factor`` over the best loss so far: the last good state is kept
and checkpointed), a callback's stop (`pinnkit.train.callbacks`: early stopping), the
``run.max_time`` wall or ``run.max_cpu_time`` CPU seconds spent (`TimeBudget`: a chunk
that would overrun them is shortened to the steps that fit, ending where a hold of the
sampler's points ends), or a signal.

The same code runs in every process of a multi-process job (`pinnkit.parallel.distributed`):
the mesh spans all processes' devices, each process places only its own rows of the
point sets, only process 0 writes files, and the host-side decisions that could differ
between processes (stop on a signal or the clock, which checkpoint) are agreed.
"""

from __future__ import annotations

import enum
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import PinnkitError, RunDirError
from ..parallel.distributed import Watchdog, agree_any, broadcast_from_main, to_host
from ..parallel.mesh import is_main_process, replicate
from . import checkpoint as ckpt
from .accumulate import AUTO, resolve_accumulate
from .callbacks import Callback, TrainInfo, extra_metrics, notify, with_extra
from .loss import make_loss
from .plan import check_accumulate
from .records import (
    Log,
    LossMonitor,
    TimeBudget,
    TrainClock,
    append_lines,
    fresh_points_detail,
    log_records,
    next_multiple,
    result_message,
    truncate_metrics,
)
from .spec import Run
from .step import (
    bounded,
    chunk_args,
    chunk_program,
    init_extra,
    initial_state,
    make_chunk,
    make_redraw,
    nan_loss,
    point_arrays,
    redraw_between_chunks,
    redraw_steps,
    split_model,
    train_key,
)

_TrainClock = TrainClock  # the name the evaluation-clock tests use


class RESULTS(enum.Enum):
    """How a training run ended; the value is the message."""

    successful = "completed all steps"
    converged = (
        "the last optimiser phase met its stopping tolerance (optim.phases.N.tol / grad_tol) "
        "before its last step"
    )
    nonfinite_loss = (
        "the loss became NaN or infinite; the last finite parameters were kept. Lower the "
        "learning rate, add optim.phases.N.clip_norm, or check the problem's coefficients"
    )
    diverged = (
        "the loss grew by more than train.divergence_factor over its best value; the last "
        "parameters before that chunk were kept. Lower the learning rate, add "
        "optim.phases.N.clip_norm, or raise train.divergence_factor if the growth is expected"
    )
    early_stopped = (
        "a callback ended the run (train.early_stopping: the watched metric stopped "
        "improving; summary.json's stopped_by says which); the parameters of that step were kept"
    )
    max_time = (
        "stopped at train.max_time (wall seconds) or train.max_cpu_time (CPU seconds); "
        "resume with --resume to continue"
    )
    interrupted = "stopped by a signal; resume with --resume"

    @property
    def failed(self) -> bool:
        """Training went wrong (a non-zero exit status of ``pinnkit train``)."""
        return self in (RESULTS.nonfinite_loss, RESULTS.diverged)


class TrainingError(PinnkitError, RuntimeError):
    """Raised by `fit(..., throw=True)` when the loss became non-finite or diverged."""


@dataclass
class FitResult:
    """What `fit` returns (never a tuple)."""

    network: object
    coeffs: dict
    result: RESULTS
    step: int
    history: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    steps_per_s: float = float("nan")
    bad_step: int | None = None
    detail: str | None = None  # what the result's message cannot know (`fresh_points_detail`)
    timed_steps: int = 0  # the steps that steps_per_s times (every chunk, compilation excluded)
    cpu_s: float = 0.0  # process CPU seconds of the fit
    stop_reason: str | None = None  # a callback's, when result is early_stopped
    # seconds spent compiling each phase's chunks (`phase_names` keys), wall and process CPU,
    # and the wall seconds of the first chunk compiled (what a user waits for step 1)
    compile_s: dict[str, float] = field(default_factory=dict)
    compile_cpu_s: dict[str, float] = field(default_factory=dict)
    first_compile_s: float | None = None
    accumulate: int = 1  # micro-batches per step (``"auto"`` resolved)


def find_checkpoint(ck_dir: Path | None) -> tuple[Path, dict] | None:
    """The newest valid checkpoint, chosen by process 0 (damaged files are skipped with a
    warning) and the same on every process."""
    if ck_dir is None:
        return None
    found, err = None, None
    if is_main_process():
        try:  # checkpoints that are all damaged: refused, never taken for "no checkpoint"
            found = ckpt.newest_valid(ck_dir)
        except RunDirError as e:
            err = e
    step = int(broadcast_from_main(np.int64(-2 if err else found[1]["step"] if found else -1)))
    if err is not None:
        raise err
    if step == -2:
        raise RunDirError(f"process 0 found the checkpoints in {ck_dir} damaged (see its message)")
    if step < 0:
        return None
    path = ckpt.checkpoint_path(ck_dir, step)
    return (path, found[1]) if found else (path, ckpt.read_header(path)[0])


def _restore(run: Run, found, params, extra):
    """``(step, phase, params, opt_state, extra)`` from a checkpoint (host arrays: any
    mesh). A run without extra state reads checkpoints of the two-part format."""
    path, head = found
    if "model_sha256" in head and head["model_sha256"] not in ckpt.model_hashes(run.record):
        raise RunDirError(
            f"{path} was written for another problem, network or numerics section than the "
            "current config; resume with the run's own config.yaml or start a new run folder"
        )
    if ckpt.is_model_only(head):
        raise RunDirError(
            f"{path} holds the trained model without its optimiser state (a copy written by "
            "`pinnkit slim`): it can be evaluated, plotted, predicted and exported, not resumed. "
            "Resume the original run folder, or train anew into another --out folder."
        )
    phase = int(head["phase"])
    ph = run.phases[min(phase, len(run.phases) - 1)]
    _, (params, opt_state, extra) = ckpt.load(path, (params, ph.init(params), extra))
    return int(head["step"]), phase, params, opt_state, extra


def phase_names(run: Run) -> list[str]:
    """The phases' names in `FitResult.compile_s`: the kind (``adam``), with the phase's
    index added when two phases share a kind (``adam.0``, ``adam.2``)."""
    kinds = [ph.kind for ph in run.phases]
    return [k if kinds.count(k) == 1 else f"{k}.{i}" for i, k in enumerate(kinds)]


def phase_at(run: Run, step: int) -> int:
    """The index of the optimiser phase that step ``step`` runs in (the last one past the end)."""
    for i, ph in enumerate(run.phases):
        if step < ph.end:
            return i
    return len(run.phases) - 1


def fit(
    run: Run,
    *,
    out_dir: str | Path | None = None,
    resume: bool | str = False,
    should_stop: Callable[[], bool] = lambda: False,
    evaluate: Callable | None = None,
    callbacks: Sequence[Callback] = (),
    progress: bool = True,
    throw: bool = True,
    accumulate: int | str = 1,
    remat: str = "none",
    donate: bool = False,
    stall_timeout: float = 0.0,
    max_chunk_s: float | None = None,
) -> FitResult:
    """Trains ``run`` to its last step (or until it stops: `RESULTS`).

    Runs unchanged in every process of a multi-process job: all of them compute, only
    process 0 writes files, and host-side decisions (stop, which checkpoint) are agreed.

    **Arguments:**
    - `run`: a `pinnkit.train.spec.Run` (e.g. from `pinnkit.run.build.build_run`).
    - `out_dir`: run directory; if given, ``metrics.jsonl`` and ``checkpoints/`` are
      written there (process 0 only).
    - `resume`: ``True``: continue from the newest valid checkpoint in ``out_dir`` (error
      if none); ``"auto"``: the same if one exists, else start from step 0. Damaged
      checkpoints are skipped with a warning. The checkpoint may come from any number of
      devices or processes; the checkpoint and step are printed.
    - `should_stop`: polled between chunks (signal handlers set it); when true on any
      process, every process writes-or-waits for one checkpoint at the same step and
      `RESULTS.interrupted` is returned.
    - `evaluate`: optional ``(network, coeffs) -> dict`` called every
      ``run.eval_every`` steps on every process; its result is logged as
      ``{"step", "eval", "wall_s", "cpu_s"}``, the last two the training clock: wall and
      process CPU seconds since this call began (set-up and compilation included), less
      the time spent in earlier evaluations and this one. A resumed run's clock starts
      again at 0. Time-to-accuracy figures are read from these records.
    - `callbacks`: `pinnkit.train.callbacks.Callback` objects, called in order after each
      chunk (``on_chunk``), each evaluation (``on_eval``; their ``metrics`` join the
      evaluation's under ``"metrics"``, and callbacks alone make evaluations happen) and
      at each phase's end (``on_phase_end``); a ``should_stop`` that says true ends the
      run with `RESULTS.early_stopped`. Unlike ``should_stop`` above (a signal: the run
      is to be resumed), this is the run's own end.
    - `throw`: raise `TrainingError` on a non-finite or diverging loss instead of returning.
    - `accumulate`: split each step's batch into this many micro-batches (gradient
      accumulation; the same step, in less memory); ``"auto"``: as many as make the
      step's working set fit one core's cache where that is faster
      (`pinnkit.train.accumulate`; 1 off CPUs), recorded in the result's ``accumulate``.
    - `remat`: ``"none"``, ``"dots"`` or ``"full"``: rematerialise the per-device
      residuals in the backward pass (`jax.checkpoint`).
    - `donate`: donate the train state to each chunk (one copy of parameters and
      optimiser state less on device; a host copy is kept for the rollback).
    - `stall_timeout`: seconds a compiled chunk may take before the process exits with
      an error (a hung peer); 0 disables.
    - `max_chunk_s`: wall seconds a chunk should take at most, so that a signal is
      honoured within them (``pinnkit train``: a quarter of ``--grace-period``); None: no
      limit. A phase whose chunks take a step limit (`pinnkit.train.step.bounded`: a
      tolerance or a line search, whose steps can take seconds) runs its first chunk as
      one step and every later one as the steps that fit by the last chunk's wall seconds
      per step, on the same compiled program (the trajectory does not depend on it). A
      first-order phase's chunk of ``train.chunk`` steps is not shortened.

    **Returns:** a `FitResult`; ``network``/``coeffs`` are the last good parameters.
    """
    t_start, cpu_start = time.perf_counter(), time.process_time()
    clock = TrainClock()
    callbacks = tuple(callbacks)
    out = Path(out_dir) if out_dir is not None else None
    ck_dir = out / "checkpoints" if out is not None else None
    if out is not None and is_main_process():
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RunDirError(f"cannot create {out}: {e.strerror or e}") from None
    metrics_path = out / "metrics.jsonl" if out is not None else None
    params, static = split_model(run)
    arrays = point_arrays(run)
    if accumulate == AUTO:  # K from the step's working set (one extra compilation, CPU only)
        accumulate = resolve_accumulate(run, accumulate, make_loss(run, static, remat=remat),
                                        replicate(params, run.mesh), arrays, init_extra(run),
                                        progress=progress)
    check_accumulate(run, accumulate)
    loss = make_loss(run, static, accumulate=accumulate, remat=remat)
    key = train_key(run)
    total = run.total_steps

    step, opt_state, phase_of_state = 0, None, None
    extra = init_extra(run)
    if resume:
        found = find_checkpoint(ck_dir)
        if found is None and resume != "auto":
            raise RunDirError(f"--resume: no valid checkpoint in {ck_dir}; start without --resume")
        if found is not None:
            step, phase_of_state, params, opt_state, extra = _restore(run, found, params, extra)
            truncate_metrics(metrics_path, step)
            ph = run.phases[min(phase_of_state, len(run.phases) - 1)]
            if progress and is_main_process():
                print(f"pinnkit: resuming from {found[0]} at step {step}/{total} "
                      f"(phase {phase_of_state}: {ph.kind})", file=sys.stderr, flush=True)
    log = Log(total, step, progress)
    params = replicate(params, run.mesh)

    history: list[dict] = []
    result = RESULTS.successful
    names, compile_s, compile_cpu_s, first_compile_s = phase_names(run), {}, {}, None
    # compiled chunks by program (`chunk_program`), then by size: phases that differ only in
    # numbers (`AbstractPhase.numbers`, arguments of the chunk) share them
    programs: dict[tuple, dict[int, Callable]] = {}
    timed_steps, timed_s = 0, 0.0
    next_ckpt = next_multiple(step, run.checkpoint_every)
    next_eval = next_multiple(step, run.eval_every)
    state = None
    bad_step = None
    watchdog = Watchdog(stall_timeout)
    monitor = LossMonitor(run.divergence_factor)
    budget = TimeBudget(run.max_time, run.max_cpu_time) if (
        run.max_time is not None or run.max_cpu_time is not None) else None
    latest_eval: dict = {}
    stopper: Callback | None = None
    loss_now = float("nan")

    def info(pi: int, ph) -> TrainInfo:
        wall_s, cpu_s = clock.elapsed()
        network_, coeffs_ = eqx.combine(state.params, static)
        return TrainInfo(step, total, pi, ph.kind, loss_now, latest_eval, wall_s, cpu_s,
                         network_, coeffs_)

    def compile_now(pi: int, what: str, fn, *args):
        """``(fn compiled for args, wall seconds)``: tracing, lowering and XLA's
        compilation, counted in the phase's compile time (and the budget's)."""
        b0 = budget.now() if budget is not None else None
        c0, w0 = time.process_time(), time.perf_counter()
        compiled = log.compiling(what, lambda: fn.lower(*args).compile())
        if budget is not None:
            budget.compiled(pi, b0)
        took = time.perf_counter() - w0
        compile_s[names[pi]] = compile_s.get(names[pi], 0.0) + took
        compile_cpu_s[names[pi]] = compile_cpu_s.get(names[pi], 0.0) + time.process_time() - c0
        return compiled, took

    def save(state_, phase_idx):
        if ck_dir is None or not is_main_process():
            return
        head = ckpt.manifest(run.record, phase=phase_idx, n_devices=run.mesh.size,
                             n_processes=jax.process_count(), seed=run.seed)
        ckpt.save(ck_dir, int(state_.step), (state_.params, state_.opt_state, state_.extra),
                  head, keep=run.checkpoint_keep)

    try:
        for pi, ph in enumerate(run.phases):
            if step >= ph.end:
                continue
            # the phase's optimiser state: the resumed one in the phase it was saved in, else anew
            state = initial_state(run, ph, params, step=step, extra=extra,
                                  opt_state=opt_state if phase_of_state == pi else None)
            phase_of_state = pi
            last = nan_loss(run.dtype)  # the previous step's loss, for a phase's tolerance
            met = False
            per_step = None  # wall seconds per step of the phase's last chunk (max_chunk_s)
            entered = step  # chunks of a bounded phase end on the grid of run.chunk steps from here
            # adaptive point sets redrawn between chunks: each chunk's program without them
            between, redraw = redraw_between_chunks(run, ph, step, run.chunk), None
            chunks = programs.setdefault(chunk_program(run, ph, redraw=not between), {})
            if chunks:  # an earlier phase's programs: this phase compiles nothing for them
                compile_s.setdefault(names[pi], 0.0)
                compile_cpu_s.setdefault(names[pi], 0.0)
            while step < ph.end:
                if agree_any(should_stop()):  # every process stops at the same step
                    result = RESULTS.interrupted
                    break
                n = min(run.chunk, ph.end - step)
                if bounded(ph):  # back on the grid after a shortened chunk (no compilation)
                    n = min(n, run.chunk - (step - entered) % run.chunk)
                if between:  # after a chunk a budget shortened: end before the next redraw
                    n = min([n, *(d - step for d in redraw_steps(run, ph, step + 1)[:1])])
                # the chunk's input: the redraw due at its first step made (before the budget
                # sizes the chunk, so that it counts the redraw's time)
                ready = state
                if between and bool(run.adaptive.due(np.int64(step))):
                    if redraw is None:
                        redraw, _ = compile_now(pi, f"phase {pi} ({ph.kind}), adaptive points' redraw",
                                                make_redraw(run, loss, key), state)
                    ready = redraw(state)
                if budget is not None:  # the same size on every process (a collective)
                    n = budget.chunk_size(pi, n, chunks, step, loss.sampler.hold)
                    n = int(broadcast_from_main(np.int64(n)))
                    if n == 0:  # spent, or not one more step fits
                        result = RESULTS.max_time
                        break
                limit = n  # the steps to take: fewer where a chunk could outlast the grace period
                if max_chunk_s is not None and bounded(ph):  # the same limit on every process
                    fits = 1 if per_step is None else int(max_chunk_s // per_step)
                    limit = int(broadcast_from_main(np.int64(min(n, max(1, fits)))))
                # a bounded phase runs fewer steps on a longer program it has, at its limit
                size = min([k for k in chunks if k >= n], default=n) if bounded(ph) else n
                args = chunk_args(ph, run.dtype, size, last, limit)
                if size not in chunks:  # compiled ahead of time, so that rates exclude it
                    fn = make_chunk(loss, ph, size, key, run=run, donate=donate, redraw=not between)
                    chunks[size], took = compile_now(pi, f"phase {pi} ({ph.kind}), {size}-step chunk",
                                                     fn, arrays, state, *args)
                    first_compile_s = took if first_compile_s is None else first_compile_s
                backup = to_host(state) if donate else None
                watchdog.arm(f"steps {step}-{step + limit}")
                t0, c0 = time.perf_counter(), budget.now() if budget is not None else None
                new_state, m = chunks[size](arrays, ready, *args)
                m = jax.device_get(m)
                watchdog.disarm()
                dt = time.perf_counter() - t0
                taken = int(new_state.step) - step if bounded(ph) else n
                if budget is not None:
                    budget.ran(pi, taken, c0)
                per_step = dt / max(taken, 1)
                timed_steps, timed_s = timed_steps + taken, timed_s + dt
                bad = monitor.first_bad(m["loss"][:taken])
                if bad is not None:
                    bad_step = step + bad[0]
                    log_records(metrics_path, history, m, step, pi, run.log_every, total, upto=bad_step)
                    result = RESULTS[bad[1]]
                    if donate:  # the input buffers were reused: restore the host copy
                        state = replicate(backup, run.mesh)
                    break
                log_records(metrics_path, history, m, step, pi, run.log_every, total,
                            upto=step + taken)
                before, state, step = step, new_state, step + taken
                if ph.stops_early:
                    last = np.asarray(m["loss"][taken - 1], run.dtype)
                    met = taken < limit
                if met and pi < len(run.phases) - 1:  # the next phase starts at its own step
                    step = ph.end
                    state = eqx.tree_at(lambda s: s.step, state, jnp.asarray(step, jnp.int32))
                loss_now = float(m["loss"][taken - 1])
                log.update(step, step - before, loss_now, timed_steps / max(timed_s, 1e-9))
                if callbacks:
                    stopper = stopper or notify(callbacks, "on_chunk", info(pi, ph))
                if (evaluate is not None or callbacks) and next_eval and step >= next_eval:
                    wall_s, cpu_s = clock.pause()
                    net_, coeffs_ = eqx.combine(state.params, static)
                    latest_eval = with_extra(evaluate(net_, coeffs_) if evaluate else {},
                                             extra_metrics(callbacks, net_, coeffs_))
                    clock.resume()
                    if latest_eval:
                        rec = {"step": step, "eval": latest_eval,
                               "wall_s": round(wall_s, 3), "cpu_s": round(cpu_s, 3)}
                        history.append(rec)
                        append_lines(metrics_path, [rec])
                    next_eval = next_multiple(step, run.eval_every)
                    if callbacks:
                        stopper = stopper or notify(callbacks, "on_eval", info(pi, ph))
                if next_ckpt and step >= next_ckpt and step < total:
                    save(state, pi)
                    next_ckpt = next_multiple(step, run.checkpoint_every)
                if callbacks and agree_any(stopper is not None):  # every process stops here
                    result = RESULTS.early_stopped
                    break
                if met:
                    break
            params, opt_state, extra = state.params, state.opt_state, state.extra
            if met and pi == len(run.phases) - 1:
                result = RESULTS.converged
            if callbacks:
                asked = notify(callbacks, "on_phase_end", info(pi, ph))
                if (agree_any(asked is not None) and result is RESULTS.successful
                        and pi < len(run.phases) - 1):  # a stop after the last phase changes nothing
                    stopper, result = stopper or asked, RESULTS.early_stopped
            if result not in (RESULTS.successful, RESULTS.converged):
                break
    finally:
        watchdog.disarm()
        log.close()

    # The phase whose optimiser state `state` holds, so that a resume restores it.
    last_phase = phase_of_state if phase_of_state is not None else phase_at(run, step)
    if state is None:  # resumed at the end: nothing to do (the checkpoint's optimiser state)
        state = initial_state(run, run.phases[last_phase], params, step=step, extra=extra,
                              opt_state=opt_state)
    save(state, last_phase)
    network, coeffs = eqx.combine(state.params, static)
    res = FitResult(
        network=network,
        coeffs=coeffs,
        result=result,
        step=int(state.step),
        history=history,
        wall_s=time.perf_counter() - t_start,
        steps_per_s=timed_steps / timed_s if timed_s > 0 else float("nan"),
        bad_step=bad_step,
        detail=fresh_points_detail(result.name, bad_step, loss.sampler),
        timed_steps=timed_steps,
        cpu_s=time.process_time() - cpu_start,
        stop_reason=stopper.stop_reason() if result is RESULTS.early_stopped and stopper else None,
        compile_s=compile_s,
        compile_cpu_s=compile_cpu_s,
        first_compile_s=first_compile_s,
        accumulate=accumulate,
    )
    if throw and result.failed:
        raise TrainingError(f"step {bad_step}: {result_message(result, res.detail)}")
    return res

