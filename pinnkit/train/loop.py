"""Training: one jitted, `shard_map`-parallel step, scanned over chunks of steps.

The step is ``jit(value_and_grad(shard_map(loss)))`` on a mesh with a ``"data"`` axis
(docs/architecture.md): inside the `shard_map`, each device evaluates the per-term mean squares
on its own points and `pmean`s them; the gradient is taken outside, so autodiff inserts
the all-reduce for the replicated parameters. ``train.chunk`` steps run per dispatch
(`jax.lax.scan`); between chunks the host logs, checks for non-finite losses, evaluates
and checkpoints. The step key is ``fold_in(train_key, step)``: the random stream does
not depend on chunking, so a resumed run follows the uninterrupted trajectory.

The same code runs in every process of a multi-process job (`pinnkit.parallel.distributed`):
the mesh spans all processes' devices, each process places only its own rows of the
point sets, only process 0 writes files, and the one host-side decision that could
differ between processes (stop on a signal) is agreed by all-gather between chunks.

Training state beyond parameters and optimiser state lives in ``TrainState.extra``
(adaptive loss weights, adaptive point sets) and is updated at the start of each step by
`make_adapt`; the loss reads it through `loss_context`.

Large problems: ``accumulate`` splits each step into micro-batches (scanned, so memory
follows the micro-batch), ``remat`` wraps the per-device loss in `jax.checkpoint`,
``donate`` reuses the state's buffers across chunks; `plan` reports the compiled
memory without training.
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

from ..errors import ConfigError, PinnkitError, RunDirError
from ..parallel.distributed import Watchdog, agree_any, broadcast_from_main, to_host
from ..parallel.mesh import is_main_process, replicate, shard_rows
from ..run import checkpoint as ckpt
from ..run.build import Phase, Run
from .weighting import grad_norms, per_term_grads


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
    mask), the current phase's optimiser state, the global step, and ``extra`` training
    state that survives phase changes: adaptive loss weights (``"weights"``,
    `pinnkit.train.weighting`) and adaptive point sets (``"points"``, `pinnkit.train.adaptive`);
    empty for a plain run."""

    params: object
    opt_state: object
    step: jax.Array
    extra: dict = eqx.field(default_factory=dict)


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
    timed_steps: int = 0  # the steps that steps_per_s times (chunks after their compile)


def trainable_spec(run: Run):
    """Filter tree over ``(network, coeffs)``: network arrays and trainable coefficients."""
    net_spec = jax.tree_util.tree_map(eqx.is_inexact_array, run.network)
    coeff_spec = {k: (k in run.problem.trainable) for k in run.problem.coeffs}
    return (net_spec, coeff_spec)


def split_model(run: Run):
    """``(params, static)`` halves of the initial ``(network, coeffs)``."""
    return eqx.partition((run.network, dict(run.problem.coeffs)), trainable_spec(run))


REMAT = ("none", "dots", "full")


def _remat_policy(remat: str):
    if remat == "dots":  # keep matmul outputs, recompute the elementwise work
        return jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return None  # "full": keep only the inputs


def check_accumulate(run: Run, accumulate: int) -> None:
    """Raises `ConfigError` unless every per-device batch splits into ``accumulate``
    equal micro-batches."""
    n_dev = run.mesh.size
    if accumulate < 1:
        raise ConfigError(f"accumulate={accumulate}: expected an integer >= 1")
    for name, n in sorted(per_device_batch(run).items()):
        if n % accumulate:
            raise ConfigError(
                f"accumulate={accumulate}: term {name!r} has {n} points per device "
                f"({n * n_dev} over {n_dev} devices), not divisible into {accumulate} "
                f"micro-batches; use an accumulate that divides {n} or change sampler.batch"
            )


def per_device_batch(run: Run) -> dict[str, int]:
    """Points (or observations) per device for each term, per step."""
    n_dev = run.mesh.size if run.mesh is not None else 1
    out = {}
    for name, term in sorted(run.problem.terms.items()):
        n = term.rows().shape[0] if term.where == "data" else run.sampler.batch[name]
        out[name] = n // n_dev
    return out


def make_loss(run: Run, static, *, accumulate: int = 1, remat: str = "none") -> Callable:
    """``loss(params, key, arrays, micro, ctx) -> (total, aux)``: the global weighted loss
    of micro-batch ``micro`` (``0 <= micro < accumulate``; the whole batch when
    ``accumulate == 1``). ``aux["terms"]`` holds the per-term losses, ``aux["causal"]``
    the causal slice weights of each causal term (if any). ``ctx`` (`loss_context`)
    carries the current loss weights, causal tolerance and adaptive point sets.

    ``arrays`` are the sampler's arrays, sharded ``P("data")``. With accumulation each
    device uses rows ``[micro·m, (micro+1)·m)`` of its local arrays, ``m = n_local /
    accumulate``; the mean over equal micro-batches of their means is the full mean.
    ``remat`` wraps the per-device loss in `jax.checkpoint` (``"dots"``: save only
    matmul outputs; ``"full"``: save nothing), trading recomputation for memory.
    """
    problem, sampler, method, mesh = run.problem, run.sampler, run.method, run.mesh
    n_dev = mesh.size
    k = accumulate
    # Fresh uniform draws need a different key per micro-batch; fixed points and the
    # Sobol shift (one per step) must not change with k.
    fold_micro = k > 1 and sampler.resample and sampler.method == "uniform"

    causal = run.weighting.causal if run.weighting is not None else None

    def residuals_fn(params, batch):
        net, coeffs = eqx.combine(params, static)
        return problem.residuals(net, coeffs, batch, method)

    if remat != "none":
        residuals_fn = jax.checkpoint(residuals_fn, policy=_remat_policy(remat))

    def local_batch(key, arrays, points, micro):
        arrays = dict(arrays, **points)  # adaptive sets replace the sampler's points
        if k > 1:
            arrays = {
                name: jax.lax.dynamic_slice_in_dim(a, micro * (a.shape[0] // k), a.shape[0] // k)
                for name, a in arrays.items()
            }
        if fold_micro:
            key = jax.random.fold_in(key, micro)
        batch = sampler.local_batch(key, problem, arrays, n_dev * k, run.dtype)
        return dict(batch, **{name: arrays[name] for name in points})

    def per_device(params, key, arrays, points, micro, tol):
        batch = local_batch(key, arrays, points, micro)
        terms, weights = {}, {}
        for name, r in residuals_fn(params, batch).items():
            r2 = jnp.sum(r**2, axis=-1)
            if causal is not None and name in causal.terms:
                t = batch[name][:, causal.t_axis]
                terms[name], weights[name] = causal.reduce(r2, t, tol)
            else:
                terms[name] = jax.lax.pmean(jnp.mean(r2), "data")
        return terms, weights

    sharded = jax.shard_map(
        per_device, mesh=mesh, in_specs=(P(), P(), P("data"), P("data"), P(), P()), out_specs=P()
    )

    def loss(params, key, arrays, micro=0, ctx=None):
        ctx = ctx if ctx is not None else loss_context(run, {}, 0)
        terms, weights = sharded(params, key, arrays, ctx["points"], jnp.asarray(micro, jnp.int32),
                                 ctx["tol"])
        lam = ctx["weights"]
        total = sum(lam[k_] * terms[k_] for k_ in sorted(terms))
        aux = {"terms": terms, "causal": weights} if weights else {"terms": terms}
        return total, aux

    loss.local_batch = local_batch  # reused by the NTK traces and adaptive sampling
    loss.residuals_fn = residuals_fn
    loss.static = static
    return loss


def loss_context(run: Run, extra: dict, step) -> dict:
    """What the loss needs from the training state at ``step``: the loss weights (the
    adaptive ones in ``extra["weights"]``, else the fixed ``run.weights``), the causal
    tolerance, and the adaptive point sets."""
    w = run.weighting
    tol = w.causal.tol_at(step, run.total_steps) if w is not None and w.causal else jnp.zeros(())
    return {"weights": extra.get("weights", run.weights), "tol": tol,
            "points": extra.get("points", {})}


def accumulated(loss: Callable, accumulate: int) -> tuple[Callable, Callable]:
    """``(value_and_grad, value)`` of the loss averaged over ``accumulate`` micro-batches.

    ``value_and_grad(params, key, arrays, ctx) -> ((total, aux), grads)``. The micro-batches
    run one after another in a `jax.lax.scan`, so only one micro-batch's activations are
    alive at a time: memory scales with the micro-batch, not the batch.
    """
    vg = jax.value_and_grad(loss, has_aux=True)
    if accumulate == 1:
        return (lambda p, key, arrays, ctx: vg(p, key, arrays, 0, ctx),
                lambda p, key, arrays, ctx: loss(p, key, arrays, 0, ctx)[0])

    def mean_over_micro(f, p, key, arrays, ctx):
        shapes = jax.eval_shape(f, p, key, arrays, 0, ctx)
        zero = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

        def body(acc, j):
            return jax.tree_util.tree_map(jnp.add, acc, f(p, key, arrays, j, ctx)), None

        acc, _ = jax.lax.scan(body, zero, jnp.arange(accumulate))
        return jax.tree_util.tree_map(lambda x: x / accumulate, acc)

    def value_and_grad(p, key, arrays, ctx):
        return mean_over_micro(vg, p, key, arrays, ctx)

    def value(p, key, arrays, ctx):
        return mean_over_micro(lambda *a: loss(*a)[0], p, key, arrays, ctx)

    return value_and_grad, value


def make_chunk(loss: Callable, phase: Phase, n_steps: int, train_key, *, accumulate: int = 1,
               donate: bool = False, run: Run | None = None,
               gauss_newton: Callable | None = None) -> Callable:
    """``chunk(arrays, state) -> (state, metrics)``, ``n_steps`` optimiser steps in one
    dispatch. ``metrics`` holds per-step ``loss``, ``terms`` (term losses), and when
    present ``weights`` (adaptive loss weights) and ``causal`` (slice weights), leading
    axis ``n_steps``, measured before each step's update; a natural-gradient phase adds
    ``step_size``, the step's line-search η*. Given ``run``, each step first
    updates ``state.extra`` (`make_adapt`). With ``donate`` the input state's buffers are
    reused for the output (the caller must not touch the input state afterwards).
    ``gauss_newton`` (`pinnkit.optim.make_gauss_newton`) is required by, and only used
    for, a ``natural_gradient`` phase (fixed loss weights, no causal weights or adaptive
    points: `pinnkit.run.build` rejects those combinations)."""
    opt = phase.optimizer
    line_search = phase.kind == "lbfgs"
    natural = phase.kind == "natural_gradient"
    if natural and (gauss_newton is None or accumulate != 1):
        raise ConfigError("a natural_gradient phase needs the Gramian function and accumulate=1")
    value_and_grad, value = accumulated(loss, accumulate)
    adapt = make_adapt(run, loss, update_weights=not line_search) if run is not None else None

    @eqx.filter_jit(donate="all-except-first" if donate else "none")
    def chunk(arrays, state: TrainState):
        def body(state: TrainState, _):
            key = jax.random.fold_in(train_key, state.step)
            extra = state.extra
            if adapt is not None:
                extra = adapt(state.params, key, arrays, extra, state.step)
            ctx = loss_context(run, extra, state.step) if run is not None else None
            if natural:  # Gramian and gradient in one pass; line search on the same loss
                total, terms, gram, grads = gauss_newton(state.params, key, arrays)
                updates, opt_state = opt.update(
                    grads, state.opt_state, state.params, gramian=gram,
                    value_fn=lambda p: value(p, key, arrays, ctx), value=total,
                )
                params = optax.apply_updates(state.params, updates)
                metrics = {"loss": total, "terms": terms, "step_size": opt_state.step_size}
                return TrainState(params, opt_state, state.step + 1, extra), metrics
            (total, aux), grads = value_and_grad(state.params, key, arrays, ctx)
            if line_search:  # the zoom line search re-evaluates the same loss
                updates, opt_state = opt.update(
                    grads, state.opt_state, state.params, value=total, grad=grads,
                    value_fn=lambda p: value(p, key, arrays, ctx),
                )
            else:
                updates, opt_state = opt.update(grads, state.opt_state, state.params)
            params = optax.apply_updates(state.params, updates)
            metrics = {"loss": total, **aux}
            if "weights" in extra:
                metrics["weights"] = extra["weights"]
            return TrainState(params, opt_state, state.step + 1, extra), metrics

        return jax.lax.scan(body, state, None, length=n_steps)

    return chunk


def init_extra(run: Run) -> dict:
    """``TrainState.extra`` at step 0: adaptive loss weights and adaptive point sets
    (deterministic from ``train.seed``); ``{}`` for a plain run."""
    extra = {}
    if run.weighting is not None and run.weighting.adaptive:
        extra["weights"] = run.weighting.init(run.dtype)
    if run.adaptive is not None:
        key = jax.random.fold_in(jax.random.key(run.config.train.seed), 3)
        extra["points"] = run.adaptive.init(key, run.problem, run.dtype)
    return extra


def make_adapt(run: Run, loss: Callable, *, update_weights: bool = True) -> Callable:
    """``adapt(params, key, arrays, extra, step) -> extra``: the per-step update of the
    extra training state, run inside the scanned step before the gradient.

    - adaptive loss weights (`pinnkit.train.weighting`), at steps ``≡ 0 mod update_every``,
      unless ``update_weights`` is false (L-BFGS phases keep them fixed);
    - adaptive point sets (`pinnkit.train.adaptive`), at steps ``> 0``, ``≡ 0 mod every``
      (and ``< until_step`` when set).

    Both use only replicated or ``psum``-ed quantities: the result is identical on
    every device.
    """
    w, ad, problem, mesh = run.weighting, run.adaptive, run.problem, run.mesh
    n_dev = mesh.size

    def ntk_per_device(params, key, arrays, points, tol):
        batch = loss.local_batch(key, arrays, points, jnp.asarray(0, jnp.int32))
        # Every s-th point, s = N // ntk_points: the same global subset for any device
        # count whenever s divides the per-device batch.
        sub = {k: v[:: max(1, v.shape[0] * n_dev // w.ntk_points)] for k, v in batch.items()}
        # Varying copies of the replicated parameters: otherwise the transpose of the
        # implicit broadcast would psum the Jacobian rows over devices before squaring.
        params = jax.tree_util.tree_map(lambda x: jax.lax.pcast(x, "data", to="varying"), params)
        jac = jax.jacrev(lambda p: loss.residuals_fn(p, sub))(params)
        sq = {k: sum(jnp.sum(j**2) for j in jax.tree_util.tree_leaves(jac[k])) for k in jac}
        return {k: jax.lax.psum(v, "data") / (sub[k].shape[0] * n_dev) for k, v in sq.items()}

    ntk = jax.shard_map(ntk_per_device, mesh=mesh, in_specs=(P(), P(), P("data"), P("data"), P()),
                        out_specs=P())

    def weights_update(params, key, arrays, extra, step):
        def update(lam):
            ctx = loss_context(run, dict(extra, weights=lam), step)
            if w.kind == "grad_norm":
                terms_fn = lambda p: loss(p, key, arrays, 0, ctx)[1]["terms"]  # noqa: E731
                stats = grad_norms(per_term_grads(terms_fn, params))
            else:
                stats = ntk(params, key, arrays, ctx["points"], ctx["tol"])
            return w.smooth(lam, w.target(stats))

        return jax.lax.cond(step % w.update_every == 0, update, lambda lam: lam, extra["weights"])

    def score_per_device(params, name, cands):
        sub = problem.without([k for k in problem.terms if k != name])
        net, coeffs = eqx.combine(params, loss.static)
        r = sub.residuals(net, coeffs, {name: cands}, run.method)[name]
        return jnp.sqrt(jnp.sum(r**2, axis=-1))

    def points_update(params, key, extra, step):
        def update(points):
            akey = jax.random.fold_in(key, 0x52414400)
            new = {}
            for i, name in enumerate(ad.terms):
                cands = ad.candidates(akey, problem, name, run.dtype)
                score = jax.shard_map(
                    lambda p, c, name=name: score_per_device(p, name, c), mesh=mesh,
                    in_specs=(P(), P("data")), out_specs=P("data"),
                )(params, cands)
                new[name] = ad.select(jax.random.fold_in(akey, 1 + i), points[name], cands, score)
            return new

        return jax.lax.cond(ad.due(step), update, lambda pts: pts, extra["points"])

    def adapt(params, key, arrays, extra, step):
        extra = dict(extra)
        if update_weights and "weights" in extra:
            extra["weights"] = weights_update(params, key, arrays, extra, step)
        if "points" in extra:
            extra["points"] = points_update(params, key, extra, step)
        return extra

    return adapt


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
    resume: bool | str = False,
    should_stop: Callable[[], bool] = lambda: False,
    evaluate: Callable | None = None,
    progress: bool = True,
    throw: bool = True,
    accumulate: int = 1,
    remat: str = "none",
    donate: bool = False,
    stall_timeout: float = 0.0,
) -> FitResult:
    """Trains ``run`` to ``train.steps`` (or until stopped / non-finite).

    Runs unchanged in every process of a multi-process job: all of them compute, only
    process 0 writes files, and host-side decisions (stop, which checkpoint) are agreed.

    **Arguments:**
    - `run`: from `build_run`.
    - `out_dir`: run directory; if given, ``metrics.jsonl`` and ``checkpoints/`` are
      written there (process 0 only).
    - `resume`: ``True``: continue from the newest valid checkpoint in ``out_dir`` (error
      if none); ``"auto"``: the same if one exists, else start from step 0. Damaged
      checkpoints are skipped with a warning. The checkpoint may come from any number of
      devices or processes.
    - `should_stop`: polled between chunks (signal handlers set it); when true on any
      process, every process writes-or-waits for one checkpoint at the same step and
      `RESULTS.interrupted` is returned.
    - `evaluate`: optional ``(network, coeffs) -> dict`` called every
      ``train.eval_every`` steps on every process; its result is logged as
      ``{"step", "eval", "wall_s", "cpu_s"}``, the last two the training clock: wall and
      process CPU seconds since this call began (set-up and compilation included), less
      the time spent in earlier evaluations and this one. A resumed run's clock starts
      again at 0. Time-to-accuracy figures are read from these records.
    - `throw`: raise `TrainingError` on a non-finite loss instead of returning.
    - `accumulate`: split each step's batch into this many micro-batches (gradient
      accumulation; the same step, in less memory).
    - `remat`: ``"none"``, ``"dots"`` or ``"full"``: rematerialise the per-device loss
      in the backward pass (`jax.checkpoint`).
    - `donate`: donate the train state to each chunk (one copy of parameters and
      optimiser state less on device; a host copy is kept for the non-finite rollback).
    - `stall_timeout`: seconds a compiled chunk may take before the process exits with
      an error (a hung peer); 0 disables.

    **Returns:** a `FitResult`; ``network``/``coeffs`` are the last finite parameters.
    """
    cfg = run.config
    t_start = time.perf_counter()
    clock = _TrainClock()
    if remat not in REMAT:
        raise ConfigError(f"remat={remat!r}: expected one of {', '.join(REMAT)}")
    check_accumulate(run, accumulate)
    if accumulate > 1 and any(ph.kind == "natural_gradient" for ph in run.phases):
        raise ConfigError(
            f"accumulate={accumulate}: a natural_gradient phase forms its Gramian from the whole "
            "batch at once; use accumulate=1 (its networks are small) or another optimiser"
        )
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
    loss = make_loss(run, static, accumulate=accumulate, remat=remat)
    train_key = jax.random.fold_in(jax.random.key(cfg.train.seed), 2)

    step, opt_state, phase_of_state = 0, None, None
    extra = init_extra(run)
    if resume:
        found = find_checkpoint(ck_dir)
        if found is None and resume != "auto":
            raise RunDirError(
                f"--resume: no valid checkpoint in {ck_dir}; start without --resume"
            )
        if found is not None:
            step, phase_of_state, params, opt_state, extra = _restore(run, found, params, extra)
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
    watchdog = Watchdog(stall_timeout)

    def save(state_, phase_idx):
        if ck_dir is None or not is_main_process():
            return
        head = ckpt.manifest(cfg.to_dict(), phase=phase_idx, n_devices=run.mesh.size,
                             n_processes=jax.process_count(), seed=cfg.train.seed)
        ckpt.save(ck_dir, int(state_.step), (state_.params, state_.opt_state, state_.extra),
                  head, keep=cfg.checkpoint.keep)

    try:
        for pi, ph in enumerate(run.phases):
            if step >= ph.end:
                continue
            if opt_state is None or phase_of_state != pi:
                opt_state = ph.optimizer.init(params)
            state = replicate(TrainState(params, opt_state, jnp.asarray(step, jnp.int32), extra),
                              run.mesh)
            phase_of_state = pi
            chunks: dict[int, Callable] = {}
            while step < ph.end:
                if agree_any(should_stop()):  # every process stops at the same step
                    result = RESULTS.interrupted
                    break
                n = min(cfg.train.chunk, ph.end - step)
                if n not in chunks:
                    chunks[n] = make_chunk(loss, ph, n, train_key, accumulate=accumulate,
                                           donate=donate, run=run,
                                           gauss_newton=_gauss_newton(run, static, ph))
                backup = to_host(state) if donate else None
                t0 = time.perf_counter()
                if (pi, n) in compiled:  # not while compiling: that may take long
                    watchdog.arm(f"steps {step}-{step + n}")
                new_state, m = chunks[n](arrays, state)
                m = jax.device_get(m)
                watchdog.disarm()
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
                    if donate:  # the input buffers were reused: restore the host copy
                        state = replicate(backup, run.mesh)
                    break
                _log_records(metrics_path, history, m, step, pi, cfg.train.log_every, total)
                state, step = new_state, step + n
                rate = timed_steps / timed_s if timed_s > 0 else n / dt
                log.update(step, n, float(m["loss"][-1]), rate)
                if evaluate is not None and next_eval and step >= next_eval:
                    wall_s, cpu_s = clock.pause()
                    rec = {"step": step, "eval": evaluate(*_model(state, static)),
                           "wall_s": round(wall_s, 3), "cpu_s": round(cpu_s, 3)}
                    clock.resume()
                    history.append(rec)
                    _append_lines(metrics_path, [rec])
                    next_eval = _next_multiple(step, cfg.train.eval_every)
                if next_ckpt and step >= next_ckpt and step < total:
                    save(state, pi)
                    next_ckpt = _next_multiple(step, cfg.checkpoint.every)
            params, opt_state, extra = state.params, state.opt_state, state.extra
            if result is not RESULTS.successful:
                break
    finally:
        watchdog.disarm()
        log.close()

    if state is None:  # resumed at the end: nothing to do
        state = replicate(TrainState(params, opt_state, jnp.asarray(step, jnp.int32), extra),
                          run.mesh)
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
        timed_steps=timed_steps,
    )
    if throw and result is RESULTS.nonfinite_loss:
        raise TrainingError(f"step {bad_step}: {result.value}")
    return res


def point_arrays(run: Run) -> dict:
    """The sampler's arrays (fixed points, Sobol base sets, observations), sharded
    ``P("data")`` over ``run.mesh``. Every process builds the same host arrays from the
    seed; each places only the rows of its own devices."""
    key = jax.random.key(run.config.train.seed)
    host = run.sampler.host_arrays(jax.random.fold_in(key, 1), run.problem, run.dtype, run.mesh.size)
    return shard_rows(host, run.mesh)


def find_checkpoint(ck_dir: Path | None) -> tuple[Path, dict] | None:
    """The newest valid checkpoint, chosen by process 0 (damaged files are skipped with a
    warning) and the same on every process."""
    if ck_dir is None:
        return None
    found = ckpt.latest_valid(ck_dir) if is_main_process() else None
    step = int(broadcast_from_main(np.int64(found[1]["step"] if found else -1)))
    if step < 0:
        return None
    path = ckpt.checkpoint_path(ck_dir, step)
    return (path, found[1]) if found else (path, ckpt.read_header(path)[0])


def _restore(run: Run, found, params, extra):
    """``(step, phase, params, opt_state, extra)`` from a checkpoint (host arrays: any
    mesh). A run without extra state reads checkpoints of the two-part format."""
    path, head = found
    want = ckpt.manifest(run.config.to_dict(), phase=0, n_devices=0, n_processes=0, seed=0)
    if head.get("model_sha256", want["model_sha256"]) != want["model_sha256"]:
        raise RunDirError(
            f"{path} was written for another problem, network or numerics section than the "
            "current config; resume with the run's own config.yaml or start a new run folder"
        )
    phase = int(head["phase"])
    ph = run.phases[min(phase, len(run.phases) - 1)]
    _, (params, opt_state, extra) = ckpt.load(path, (params, ph.optimizer.init(params), extra))
    return int(head["step"]), phase, params, opt_state, extra


def plan(run: Run, *, accumulate: int = 1, remat: str = "none", donate: bool = False) -> dict:
    """What a run would do, without training (``pinnkit train --dry-run``): the mesh,
    the per-device batch of each term, the parameter count, and XLA's memory estimate
    of the compiled chunk of the first phase (``compiled.memory_analysis()``)."""
    if remat not in REMAT:
        raise ConfigError(f"remat={remat!r}: expected one of {', '.join(REMAT)}")
    check_accumulate(run, accumulate)
    params, static = split_model(run)
    n_params = sum(int(np.size(x)) for x in jax.tree_util.tree_leaves(params))
    arrays = point_arrays(run)
    loss = make_loss(run, static, accumulate=accumulate, remat=remat)
    ph = run.phases[0]
    n = min(run.config.train.chunk, ph.steps)
    train_key = jax.random.fold_in(jax.random.key(run.config.train.seed), 2)
    params = replicate(params, run.mesh)
    state = replicate(TrainState(params, ph.optimizer.init(params), jnp.asarray(0, jnp.int32),
                                 init_extra(run)), run.mesh)
    chunk = make_chunk(loss, ph, n, train_key, accumulate=accumulate, donate=donate, run=run,
                       gauss_newton=_gauss_newton(run, static, ph))
    t0 = time.perf_counter()
    compiled = chunk.lower(arrays, state).compile()
    compile_s = time.perf_counter() - t0
    mem = compiled.compiled.memory_analysis()  # eqx wraps jax.stages.Compiled
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "generated_code_size_in_bytes")
    memory = {f: int(getattr(mem, f, 0) or 0) for f in fields} if mem is not None else {}
    if memory:
        memory["peak_estimate_bytes"] = (memory["argument_size_in_bytes"] + memory["output_size_in_bytes"]
                                         - memory["alias_size_in_bytes"] + memory["temp_size_in_bytes"])
    devs = run.mesh.devices.ravel()
    per_dev = per_device_batch(run)
    return {
        "mesh": {"axis": "data", "size": run.mesh.size, "platform": devs[0].platform,
                 "processes": jax.process_count(),
                 "devices_per_process": len([d for d in devs if d.process_index == jax.process_index()])},
        "per_device_batch": per_dev,
        **({"sampling_acceptance": acc} if (acc := run.sampler.acceptance(run.problem)) else {}),
        "micro_batch": {k: v // accumulate for k, v in per_dev.items()},
        "accumulate": accumulate,
        "remat": remat,
        "donate": donate,
        "parameters": n_params,
        "chunk_steps": n,
        "phase": ph.kind,
        "compile_s": round(compile_s, 3),
        "memory_per_device": memory,
    }


def _gauss_newton(run: Run, static, ph: Phase) -> Callable | None:
    """The Gramian function of a natural-gradient phase (None for the others)."""
    if ph.kind != "natural_gradient":
        return None
    from ..optim import make_gauss_newton

    return make_gauss_newton(run, static)


class _TrainClock:
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
            terms = {k: float(v[i]) for k, v in sorted(m["terms"].items())}
            rec = {"step": s, "phase": phase, "loss": float(m["loss"][i]), "terms": terms}
            if "weights" in m:
                rec["weights"] = {k: float(v[i]) for k, v in sorted(m["weights"].items())}
            if "step_size" in m:  # natural gradient: the line search's eta*
                rec["step_size"] = float(m["step_size"][i])
            if "causal" in m:
                rec["causal"] = {k: [float(x) for x in v[i]] for k, v in sorted(m["causal"].items())}
            recs.append(rec)
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
