"""Training: one jitted, `shard_map`-parallel step, scanned over chunks of steps.

The step is ``jit(value_and_grad(shard_map(loss)))`` on a mesh with a ``"data"`` axis
(DESIGN.md §4): inside the `shard_map`, each device evaluates the per-term mean squares
on its own points and `pmean`s them; the gradient is taken outside, so autodiff inserts
the all-reduce for the replicated parameters. ``train.chunk`` steps run per dispatch
(`jax.lax.scan`); between chunks the host logs, checks for non-finite losses, evaluates
and checkpoints. The step key is ``fold_in(train_key, step)``: the random stream does
not depend on chunking, so a resumed run follows the uninterrupted trajectory.
"""

from __future__ import annotations

import enum
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

from . import checkpoint as ckpt
from .build import Phase, Run
from .errors import PinnkitError, RunDirError
from .parallel import is_main_process, replicate, shard_rows


class RESULTS(enum.Enum):
    """How a training run ended; the value is the message."""

    successful = "completed all steps"
    nonfinite_loss = (
        "the loss became NaN or infinite; the last finite parameters were kept. Lower the "
        "learning rate, add optim.phases.N.clip_norm, or check the problem's coefficients"
    )
    interrupted = "stopped by a signal; resume with --resume"


class TrainingError(PinnkitError, RuntimeError):
    """Raised by `fit(..., throw=True)` when training did not complete."""


class TrainState(eqx.Module):
    """Trainable parameters (the arrays of ``(network, coeffs)`` selected by the trainable
    mask), the current phase's optimiser state, and the global step."""

    params: object
    opt_state: object
    step: jax.Array


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


def trainable_spec(run: Run):
    """Filter tree over ``(network, coeffs)``: network arrays and trainable coefficients."""
    net_spec = jax.tree_util.tree_map(eqx.is_inexact_array, run.network)
    coeff_spec = {k: (k in run.problem.trainable) for k in run.problem.coeffs}
    return (net_spec, coeff_spec)


def split_model(run: Run):
    """``(params, static)`` halves of the initial ``(network, coeffs)``."""
    return eqx.partition((run.network, dict(run.problem.coeffs)), trainable_spec(run))


def make_loss(run: Run, static) -> Callable:
    """``loss(params, key, arrays) -> (total, terms)``: the global weighted loss.

    ``arrays`` are the sampler's host arrays, sharded ``P("data")``.
    """
    problem, sampler, method, mesh = run.problem, run.sampler, run.method, run.mesh
    n_dev = mesh.size

    def per_device(params, key, arrays):
        net, coeffs = eqx.combine(params, static)
        batch = sampler.local_batch(key, problem, arrays, n_dev, run.dtype)
        terms = problem.loss_terms(net, coeffs, batch, method)
        return jax.lax.pmean(terms, "data")

    sharded = jax.shard_map(
        per_device, mesh=mesh, in_specs=(P(), P(), P("data")), out_specs=P()
    )

    def loss(params, key, arrays):
        terms = sharded(params, key, arrays)
        total = sum(run.weights[k] * terms[k] for k in sorted(terms))
        return total, terms

    return loss


def make_chunk(loss: Callable, phase: Phase, n_steps: int, train_key) -> Callable:
    """``chunk(state, arrays) -> (state, metrics)``, ``n_steps`` optimiser steps in one
    dispatch. ``metrics`` holds per-step ``loss`` and term losses, shape ``(n_steps,)``,
    measured before each step's update."""
    opt = phase.optimizer
    line_search = phase.kind == "lbfgs"

    @eqx.filter_jit
    def chunk(state: TrainState, arrays):
        def body(state: TrainState, _):
            key = jax.random.fold_in(train_key, state.step)
            (total, terms), grads = jax.value_and_grad(loss, has_aux=True)(
                state.params, key, arrays
            )
            if line_search:  # the zoom line search re-evaluates the same loss
                updates, opt_state = opt.update(
                    grads, state.opt_state, state.params, value=total, grad=grads,
                    value_fn=lambda p: loss(p, key, arrays)[0],
                )
            else:
                updates, opt_state = opt.update(grads, state.opt_state, state.params)
            params = optax.apply_updates(state.params, updates)
            return TrainState(params, opt_state, state.step + 1), {"loss": total, **terms}

        return jax.lax.scan(body, state, None, length=n_steps)

    return chunk


# ---------------------------------------------------------------- host-side loop


class _Log:
    """Progress output: a tqdm bar on a terminal, plain lines otherwise."""

    def __init__(self, total: int, start: int, enabled: bool):
        self.bar = None
        self.enabled = enabled and is_main_process()
        if self.enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, unit="step", dynamic_ncols=True)

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


def _phase_at(run: Run, step: int) -> int:
    for i, ph in enumerate(run.phases):
        if step < ph.end:
            return i
    return len(run.phases) - 1


def _append_lines(path: Path | None, records: list[dict]) -> None:
    if path is None or not records or not is_main_process():
        return
    try:
        with open(path, "a") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    except OSError as e:
        raise RunDirError(f"cannot append to {path}: {e.strerror or e}") from None


def fit(
    run: Run,
    *,
    out_dir: str | Path | None = None,
    resume: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    evaluate: Callable | None = None,
    progress: bool = True,
    throw: bool = True,
) -> FitResult:
    """Trains ``run`` to ``train.steps`` (or until stopped / non-finite).

    **Arguments:**
    - `run`: from `build_run`.
    - `out_dir`: run directory; if given, ``metrics.jsonl`` and ``checkpoints/`` are
      written there (process 0 only).
    - `resume`: continue from the newest valid checkpoint in ``out_dir``.
    - `should_stop`: polled between chunks (signal handlers set it); when true, a
      checkpoint is written and `RESULTS.interrupted` returned.
    - `evaluate`: optional ``(network, coeffs) -> dict`` called every
      ``train.eval_every`` steps; its result is logged.
    - `throw`: raise `TrainingError` on a non-finite loss instead of returning.

    **Returns:** a `FitResult`; ``network``/``coeffs`` are the last finite parameters.
    """
    cfg = run.config
    t_start = time.perf_counter()
    out = Path(out_dir) if out_dir is not None else None
    ck_dir = out / "checkpoints" if out is not None else None
    if out is not None and is_main_process():
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RunDirError(f"cannot create {out}: {e.strerror or e}") from None
    metrics_path = out / "metrics.jsonl" if out is not None else None
    params, static = split_model(run)
    key = jax.random.key(cfg.train.seed)
    points_key, train_key = jax.random.fold_in(key, 1), jax.random.fold_in(key, 2)
    arrays = run.sampler.host_arrays(points_key, run.problem, run.dtype)
    arrays = shard_rows({k: jnp.asarray(v) for k, v in arrays.items()}, run.mesh)
    loss = make_loss(run, static)

    step, opt_state, phase_of_state = 0, None, None
    if resume:
        found = ckpt.latest_valid(ck_dir) if ck_dir is not None else None
        if found is None:
            raise RunDirError(
                f"--resume: no valid checkpoint in {ck_dir}; start without --resume"
            )
        path, head = found
        ph = run.phases[min(head["phase"], len(run.phases) - 1)]
        template = (params, ph.optimizer.init(params))
        _, (params, opt_state) = ckpt.load(path, template)
        step, phase_of_state = int(head["step"]), int(head["phase"])
        _truncate_metrics(metrics_path, step)
    params = replicate(params, run.mesh)

    history: list[dict] = []
    result = RESULTS.successful
    compiled: set = set()
    timed_steps, timed_s = 0, 0.0
    total = run.total_steps
    log = _Log(total, step, progress)
    next_ckpt = _next_multiple(step, cfg.checkpoint.every)
    next_eval = _next_multiple(step, cfg.train.eval_every)
    state = None
    bad_step = None

    def save(state_, phase_idx):
        if ck_dir is None or not is_main_process():
            return
        ckpt.save(
            ck_dir, int(state_.step), (state_.params, state_.opt_state),
            {"phase": phase_idx, "n_devices": run.mesh.size, "seed": cfg.train.seed},
            keep=cfg.checkpoint.keep,
        )

    try:
        for pi, ph in enumerate(run.phases):
            if step >= ph.end:
                continue
            if opt_state is None or phase_of_state != pi:
                opt_state = ph.optimizer.init(params)
            state = replicate(TrainState(params, opt_state, jnp.asarray(step, jnp.int32)), run.mesh)
            phase_of_state = pi
            chunks: dict[int, Callable] = {}
            while step < ph.end:
                if should_stop():
                    result = RESULTS.interrupted
                    break
                n = min(cfg.train.chunk, ph.end - step)
                if n not in chunks:
                    chunks[n] = make_chunk(loss, ph, n, train_key)
                t0 = time.perf_counter()
                new_state, m = chunks[n](state, arrays)
                m = jax.device_get(m)
                dt = time.perf_counter() - t0
                if (pi, n) in compiled:
                    timed_steps, timed_s = timed_steps + n, timed_s + dt
                compiled.add((pi, n))
                finite = np.isfinite(m["loss"])
                if not finite.all():
                    bad_step = step + int(np.argmin(finite))
                    _log_records(
                        metrics_path, history, m, step, pi, cfg.train.log_every, total, upto=bad_step
                    )
                    result = RESULTS.nonfinite_loss
                    break
                _log_records(metrics_path, history, m, step, pi, cfg.train.log_every, total)
                state, step = new_state, step + n
                rate = timed_steps / timed_s if timed_s > 0 else n / dt
                log.update(step, n, float(m["loss"][-1]), rate)
                if evaluate is not None and next_eval and step >= next_eval:
                    rec = {"step": step, "eval": evaluate(*_model(state, static))}
                    history.append(rec)
                    _append_lines(metrics_path, [rec])
                    next_eval = _next_multiple(step, cfg.train.eval_every)
                if next_ckpt and step >= next_ckpt and step < total:
                    save(state, pi)
                    next_ckpt = _next_multiple(step, cfg.checkpoint.every)
            params, opt_state = state.params, state.opt_state
            if result is not RESULTS.successful:
                break
    finally:
        log.close()

    if state is None:  # resumed at the end: nothing to do
        state = replicate(TrainState(params, opt_state, jnp.asarray(step, jnp.int32)), run.mesh)
    # The phase whose optimiser state `state` holds, so that a resume restores it.
    save(state, phase_of_state if phase_of_state is not None else _phase_at(run, step))
    network, coeffs = _model(state, static)
    res = FitResult(
        network=network,
        coeffs=coeffs,
        result=result,
        step=int(state.step),
        history=history,
        wall_s=time.perf_counter() - t_start,
        steps_per_s=timed_steps / timed_s if timed_s > 0 else float("nan"),
        bad_step=bad_step,
    )
    if throw and result is RESULTS.nonfinite_loss:
        raise TrainingError(f"step {bad_step}: {result.value}")
    return res


def _model(state: TrainState, static):
    return eqx.combine(state.params, static)


def _next_multiple(step: int, every: int) -> int:
    return 0 if every <= 0 else (step // every + 1) * every


def _log_records(path, history, m, start, phase, every, total, upto=None):
    """Per-step records for the steps of this chunk that fall on the logging cadence."""
    n = len(m["loss"])
    recs = []
    for i in range(n):
        s = start + i
        if upto is not None and s >= upto:
            break
        if s % every == 0 or s == total - 1:
            terms = {k: float(v[i]) for k, v in sorted(m.items()) if k != "loss"}
            recs.append({"step": s, "phase": phase, "loss": float(m["loss"][i]), "terms": terms})
    history.extend(recs)
    _append_lines(path, recs)


def _truncate_metrics(path: Path | None, step: int) -> None:
    """Drops records of steps >= ``step`` (written after the checkpoint we resume from)."""
    if path is None or not path.exists() or not is_main_process():
        return
    kept = [
        line for line in path.read_text().splitlines()
        if line.strip() and json.loads(line).get("step", math.inf) < step
    ]
    ckpt.atomic_write_bytes(path, ("\n".join(kept) + "\n" if kept else "").encode())
