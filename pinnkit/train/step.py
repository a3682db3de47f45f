"""The compiled unit of training: ``n`` steps of one phase scanned in one dispatch.

A step is: key ``fold_in(train_key, step)`` (``step // k`` when `Sampler.every` = k holds
each draw of points for k steps; the stream does not depend on chunking, so a resumed run
follows the uninterrupted trajectory); the update of the extra training
state (`make_adapt`: adaptive loss weights, adaptive point sets); the phase's update
(`AbstractPhase.step` on the `Loss`). The chunk returns per-step metrics measured before
each update; the host loop (`pinnkit.train.loop`) logs them and checks them between
chunks.

A phase with a stopping tolerance (``tol``: relative loss change, ``grad_tol``: gradient
norm) is checked *inside* the scan: from the first step that meets it, the remaining
steps of the chunk leave the state unchanged (``lax.cond``), so the stop is exact to the
step, and a second-order method is never asked to step from a converged point (where a
line search divides by vanishing changes). The same branch ends a chunk of a phase with
a tolerance or a line search (`bounded`) at a step limit given at run time, so that the
host loop runs shorter chunks on the same program. A first-order phase's step has no
such branch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..parallel.mesh import replicate, shard_rows
from .loss import Loss
from .phases import AbstractPhase
from .spec import Run
from .weighting import grad_norms


class TrainState(eqx.Module):
    """Trainable parameters (the arrays of ``(network, coeffs)`` selected by the trainable
    mask), the current phase's optimiser state, the global step, and ``extra`` training
    state that survives phase changes: adaptive loss weights (``"weights"``,
    `pinnkit.train.weighting`) and adaptive point sets (``"points"``, `pinnkit.train.adaptive`);
    empty for a plain run. Checkpoints store ``(params, opt_state, extra)``."""

    params: object
    opt_state: object
    step: jax.Array
    extra: dict = eqx.field(default_factory=dict)


def trainable_spec(run: Run):
    """Filter tree over ``(network, coeffs)``: network arrays and trainable coefficients."""
    net_spec = jax.tree_util.tree_map(eqx.is_inexact_array, run.network)
    coeff_spec = {k: (k in run.problem.trainable) for k in run.problem.coeffs}
    return (net_spec, coeff_spec)


def split_model(run: Run):
    """``(params, static)`` halves of the initial ``(network, coeffs)``."""
    return eqx.partition((run.network, dict(run.problem.coeffs)), trainable_spec(run))


def train_key(run: Run):
    """The key whose ``fold_in(·, step)`` is the key of each step."""
    return jax.random.fold_in(jax.random.key(run.seed), 2)


def point_arrays(run: Run) -> dict:
    """The sampler's arrays (fixed points, Sobol base sets, observations), sharded
    ``P("data")`` over ``run.mesh``. Every process builds the same host arrays from the
    seed; each places only the rows of its own devices."""
    key = jax.random.key(run.seed)
    host = run.sampler.host_arrays(jax.random.fold_in(key, 1), run.problem, run.dtype, run.mesh.size)
    return shard_rows(host, run.mesh)


def init_extra(run: Run) -> dict:
    """``TrainState.extra`` at step 0: adaptive loss weights and adaptive point sets
    (deterministic from ``run.seed``); ``{}`` for a plain run."""
    extra = {}
    if run.weighting is not None and run.weighting.adaptive:
        extra["weights"] = run.weighting.init(run.dtype)
    if run.adaptive is not None:
        key = jax.random.fold_in(jax.random.key(run.seed), 3)
        extra["points"] = run.adaptive.init(key, run.problem, run.dtype)
    return extra


def initial_state(run: Run, phase: AbstractPhase, params, *, step: int | None = None,
                  extra: dict | None = None, opt_state=None) -> TrainState:
    """The `TrainState` that ``phase``'s chunks start from, replicated over ``run.mesh``:
    the one place that builds it (`fit` at each phase's start and at a resumed end, the
    dry run `pinnkit.train.plan`, the benchmark scripts).

    - ``params``: the trainable arrays of ``(network, coeffs)`` (`split_model`), in
      ``run.dtype``; replicated first, so that ``phase.init`` sees the arrays the chunk will.
    - ``opt_state``: the phase's optimiser state; None: ``phase.init(params)`` (a phase
      entered anew). A resumed run passes the checkpoint's.
    - ``step``: the global step, stored as an int32 scalar array (shape ``()``); None:
      ``phase.start``.
    - ``extra``: the training state that survives phase changes (adaptive loss weights,
      adaptive point sets); None: `init_extra` (step 0's, deterministic from ``run.seed``).
    """
    params = replicate(params, run.mesh)
    if opt_state is None:
        opt_state = phase.init(params)
    step = phase.start if step is None else step
    extra = init_extra(run) if extra is None else extra
    return replicate(TrainState(params, opt_state, jnp.asarray(step, jnp.int32), extra), run.mesh)


def make_adapt(run: Run, loss: Loss, *, update_weights: bool = True,
               steps: tuple[int, int] | None = None, points: bool = True) -> Callable:
    """``adapt(params, key, arrays, extra, step) -> extra``: the per-step update of the
    extra training state, run inside the scanned step before the phase's update.

    - adaptive loss weights (`pinnkit.train.weighting`), at steps ``≡ 0 mod update_every``,
      unless ``update_weights`` is false (the phase's ``updates_weights``);
    - adaptive point sets (`pinnkit.train.adaptive`), at steps ``> 0``, ``≡ 0 mod every``
      (and ``< until_step`` when set). Given ``steps``, the ``[start, end)`` global steps
      the update can run at (a phase's), a redraw that cannot happen there
      (``until_step <= start``, e.g. a quasi-Newton phase after the redraws stopped) is
      left out of the program: its residuals at the candidate points would be compiled
      for nothing. ``points=False`` leaves the redraw out too: the host loop runs it
      between chunks (`make_redraw`, `redraw_between_chunks`).

    Both use only replicated or ``psum``-ed quantities (`Loss`): the result is identical
    on every device.
    """
    w, ad = run.weighting, run.adaptive
    redraws = _redraws_in(run, None if steps is None else steps[0], points)

    def weights_update(params, key, arrays, extra, step):
        def update(lam):
            ctx = loss.context(dict(extra, weights=lam), step)
            if w.kind == "grad_norm":
                stats = grad_norms(loss.term_grads(params, key, arrays, ctx))
            else:
                stats = loss.ntk_traces(params, key, arrays, ctx["points"], ctx["tol"])
            return w.smooth(lam, w.target(stats))

        return jax.lax.cond(step % w.update_every == 0, update, lambda lam: lam, extra["weights"])

    def points_update(params, key, extra, step):
        return jax.lax.cond(ad.due(step), lambda pts: redraw_points(run, loss, params, key, pts),
                            lambda pts: pts, extra["points"])

    def adapt(params, key, arrays, extra, step):
        extra = dict(extra)
        if update_weights and "weights" in extra:
            extra["weights"] = weights_update(params, key, arrays, extra, step)
        if "points" in extra and redraws:
            extra["points"] = points_update(params, key, extra, step)
        return extra

    return adapt


def redraw_points(run: Run, loss: Loss, params, key, points: dict) -> dict:
    """The adaptive point sets redrawn (`pinnkit.train.adaptive`) with the step key ``key``:
    each term's candidates scored by its residual norms under ``params``."""
    ad, akey = run.adaptive, jax.random.fold_in(key, 0x52414400)
    new = {}
    for i, name in enumerate(ad.terms):
        cands = ad.candidates(akey, run.problem, name, run.dtype)
        score = loss.residual_norms(params, name, cands, key)
        new[name] = ad.select(jax.random.fold_in(akey, 1 + i), points[name], cands, score)
    return new


def step_key(loss: Loss, key, step):
    """The key of global step ``step`` (``fold_in(key, step // every)`` when the sampler
    holds its draws for ``every`` steps)."""
    every = loss.sampler.hold
    return jax.random.fold_in(key, step if every == 1 else step // every)


def redraw_steps(run: Run, phase: AbstractPhase, start: int) -> range:
    """The steps from ``start`` to ``phase``'s end at which the adaptive point sets are
    redrawn (`pinnkit.train.adaptive.Adaptive.due`); empty without them."""
    ad = run.adaptive
    if ad is None:
        return range(0)
    stop = phase.end if ad.until_step is None else min(phase.end, ad.until_step)
    return range(-(-max(start, 1) // ad.every) * ad.every, stop, ad.every)  # d > 0, d >= start


def redraw_between_chunks(run: Run, phase: AbstractPhase, start: int, chunk: int) -> bool:
    """Whether the host loop redraws ``phase``'s adaptive point sets between chunks
    (`make_redraw`) instead of inside every chunk's program: when each step the sets are
    redrawn at (`pinnkit.train.adaptive.Adaptive.due`) from ``start``, the step this run
    enters the phase at, to the phase's end is the first step of a ``chunk``-step chunk,
    and the adaptive loss weights (updated before the redraw within a step) are not
    updated at any of those steps. Then a redraw happens before the same step, from the
    same state and key, as inside the chunk, and the chunks' program leaves out the
    residuals at the candidate points (on the DFG 3-D config, half of the first chunk's
    optimised program: docs/benchmarks.md, issue 32)."""
    ad, w = run.adaptive, run.weighting
    if ad is None:
        return False
    due = redraw_steps(run, phase, start)
    if any((d - start) % chunk for d in due):
        return False
    weights = w is not None and w.adaptive and phase.updates_weights
    return not (weights and any(d % w.update_every == 0 for d in due))


def make_redraw(run: Run, loss: Loss, key) -> Callable:
    """``redraw(state) -> state``: ``state.extra["points"]`` redrawn at ``state.step``
    with that step's key, as `make_adapt`'s update does inside a step (the host loop calls
    it only at steps where a redraw is due: `redraw_between_chunks`)."""

    @eqx.filter_jit
    def redraw(state: TrainState) -> TrainState:
        key_s = step_key(loss, key, state.step)
        extra = dict(state.extra, points=redraw_points(run, loss, state.params, key_s, state.extra["points"]))
        return TrainState(state.params, state.opt_state, state.step, extra)

    return redraw


def _met(phase: AbstractPhase, m: dict, last) -> jax.Array:
    """Whether step metrics ``m`` meet the phase's tolerance, ``last`` the previous step's
    loss (NaN at the phase's first step: no comparison). A rejected natural-gradient step
    (``step_size`` 0) moved nothing and does not count as a small change."""
    met = jnp.zeros((), bool)
    if phase.tol is not None:
        moved = m["step_size"] > 0 if "step_size" in m else jnp.ones((), bool)
        change = jnp.abs(m["loss"] - last) <= phase.tol * jnp.abs(last)
        met = met | (moved & change)
    if phase.grad_tol is not None:
        met = met | (m["grad_norm"] <= phase.grad_tol)
    return met


def held(loss: Loss, run: Run | None, phase: AbstractPhase) -> Loss:
    """``loss`` marked `Loss.points_held` when ``run``'s adaptive point sets are not redrawn
    during ``phase`` (it starts after their ``until_step``): its objective is then one
    function of the parameters if nothing else changes it (`Loss.fixed`)."""
    if run is not None and run.adaptive is not None and not redraw_steps(run, phase, phase.start):
        return dataclasses.replace(loss, points_held=True)
    return loss


def make_chunk(loss: Loss, phase: AbstractPhase, n_steps: int, key, *, run: Run | None = None,
               donate: bool = False, redraw: bool = True) -> Callable:
    """``chunk(arrays, state, numbers) -> (state, metrics)``: ``n_steps`` steps of ``phase`` in one
    dispatch (``key``: `train_key`). ``metrics`` holds per-step ``loss``, ``terms`` (term
    losses), and when present ``weights`` (adaptive loss weights), ``causal`` (slice
    weights) and what the phase adds (``step_size``, ``grad_norm``), leading axis
    ``n_steps``, measured before each step's update. Given ``run``, each step first
    updates ``state.extra`` (`make_adapt`; ``redraw=False``: without the adaptive point
    sets' redraw, which the caller then runs between chunks, `make_redraw`). With
    ``donate`` the input state's buffers are reused for the output (the caller must not
    touch the input state afterwards).

    The chunk takes the phase's `numbers` (`chunk_args`) as arrays: its program is traced
    with ``phase.at(numbers)``, so that a phase with the same `chunk_program` runs on it
    with its own numbers.

    A phase with a tolerance or a line search (`bounded`) makes ``chunk(arrays, state,
    numbers, last, limit)`` with ``last`` the loss of the step before (NaN: none) and ``limit`` the
    most steps to take (``<= n_steps``; a traced integer, so that a shorter chunk runs on
    the same program: the host loop shortens chunks that would outlast a signal's grace
    period), and adds ``metrics["active"]``: False for the steps after the tolerance was
    met or the limit reached, which left the state unchanged (``state.step`` counts only
    the steps taken).
    """
    if phase.gauss_newton and loss.accumulate != 1:
        from ..errors import ConfigError

        raise ConfigError(f"a {phase.kind} phase forms its Gramian from the whole batch: "
                          "it needs accumulate=1")
    adapt = (make_adapt(run, loss, update_weights=phase.updates_weights, steps=(phase.start, phase.end),
                        points=redraw)
             if run is not None else None)
    loss = held(loss, run, phase)

    def one_step(arrays, state: TrainState, numbers):
        # held for `every` steps: the points it draws (`Sampler`), and its other draws
        key_s = step_key(loss, key, state.step)
        extra = state.extra
        if adapt is not None:
            extra = adapt(state.params, key_s, arrays, extra, state.step)
        ctx = loss.context(extra, state.step)
        params, opt_state, metrics = phase.at(numbers).step(loss, state.params, state.opt_state,
                                                            key_s, arrays, ctx)
        if "weights" in extra:
            metrics["weights"] = extra["weights"]
        return TrainState(params, opt_state, state.step + 1, extra), metrics

    jit = eqx.filter_jit(donate="all-except-first" if donate else "none")
    if not bounded(phase):
        @jit
        def chunk(arrays, state: TrainState, numbers):
            return jax.lax.scan(lambda s, _: one_step(arrays, s, numbers), state, None, length=n_steps)

        return chunk

    # One trace of the step for both of its uses below: `jax.jit` caches the traced program
    # (by function and argument types), so the cond's branch reuses what `eval_shape` traced
    # (tracing the step twice was half of an SSBroyden chunk's tracing and lowering).
    step_once = jax.jit(one_step)

    @jit
    def stopping_chunk(arrays, state: TrainState, numbers, last, limit):
        shapes = jax.eval_shape(step_once, arrays, state, numbers)[1]
        idle = jax.tree_util.tree_map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype)
                                      if jnp.issubdtype(s.dtype, jnp.inexact)
                                      else jnp.zeros(s.shape, s.dtype), shapes)

        def body(carry, i):
            state, last, done = carry
            done = done | (i >= limit)

            def take(state):
                new, m = step_once(arrays, state, numbers)
                return new, m, _met(phase.at(numbers), m, last)

            new, m, met = jax.lax.cond(done, lambda s: (s, idle, jnp.ones((), bool)), take, state)
            m = dict(m, active=~done)
            return (new, jnp.where(done, last, m["loss"]), done | met), m

        init = (state, jnp.asarray(last, loss.dtype), jnp.zeros((), bool))
        (state, _, _), m = jax.lax.scan(body, init, jnp.arange(n_steps, dtype=jnp.int32))
        return state, m

    return stopping_chunk


def nan_loss(dtype) -> np.ndarray:
    """``last`` for a phase's first chunk: no previous loss."""
    return np.asarray(np.nan, dtype)


def bounded(phase: AbstractPhase) -> bool:
    """Whether ``phase``'s chunks take ``(last, limit)`` (`make_chunk`): a phase with a
    stopping tolerance, or with a line search (second-order steps, seconds each on a
    large problem, where one chunk can outlast a signal's grace period)."""
    return phase.stops_early or phase.line_search


def chunk_args(phase: AbstractPhase, dtype, n_steps: int, last=None, limit: int | None = None) -> tuple:
    """The arguments after ``(arrays, state)`` of ``phase``'s ``n_steps``-step chunk:
    ``(numbers,)``, the phase's `numbers` as arrays of ``dtype``, or ``(numbers, last,
    limit)`` for a `bounded` phase (defaults: no previous loss, the whole chunk)."""
    numbers = {k: np.asarray(v, dtype) for k, v in phase.numbers.items()}
    if not bounded(phase):
        return (numbers,)
    return (numbers, nan_loss(dtype) if last is None else last, np.int32(n_steps if limit is None else limit))


def chunk_program(run: Run, phase: AbstractPhase, redraw: bool = True) -> tuple:
    """What the program of ``make_chunk(loss, phase, n, key, run=run, redraw=redraw)``
    depends on besides ``n`` and the phase's `numbers` (a chunk's arguments): equal for
    two phases of ``run`` whose chunks of ``n`` steps can run on one compiled program
    (`AbstractPhase.program`, and whether the adaptive point sets' redraw is in it:
    `make_adapt`)."""
    return (phase.program, _redraws_in(run, phase.start, redraw))


def _redraws_in(run: Run, start: int | None, points: bool) -> bool:
    """Whether a program for the steps from ``start`` (None: any) redraws the adaptive
    point sets in its step: there are some, ``points`` asks for it, and the redraws have
    not stopped (``until_step``) by ``start``."""
    ad = run.adaptive
    return ad is not None and points and (start is None or ad.until_step is None or start < ad.until_step)
