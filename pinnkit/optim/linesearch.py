"""The strong-Wolfe zoom line search with one evaluation of the objective per iteration.

`zoom_linesearch` is optax's `optax.scale_by_zoom_linesearch` (Nocedal & Wright
Algorithms 3.5/3.6 with Hager & Zhang's approximate decrease test; the same update
protocol ``update(updates, state, params, *, value, grad, value_fn)``, the same state
`optax.ScaleByZoomLinesearchState`, the same arithmetic in the same order, so the same
steps to the bit), restructured for the size of the compiled program.

optax's iteration is ``lax.cond(interval_found, zoom, search)`` where each branch
chooses its trial step *and* evaluates the objective's value and gradient there: the
traced objective (on a PINN, the whole residual program) is in the program twice, and
XLA compiles both copies (XLA:CPU inlines every call, so a shared function does not
help). Here an iteration is split where the branches meet the objective: the trial step
of the branch that runs (``_search_point`` or ``_zoom_point``: scalars), one evaluation of
``value_and_grad`` at it, then the branch's bookkeeping on the result (``_search_update``,
``_zoom_update``: scalars and ``where`` on the gradient). The objective appears once.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

# optax's defaults for scale_by_zoom_linesearch, which pinnkit does not change
_TOL, _INCREASE, _APPROX_DEC_RTOL, _INTERVAL_THRESHOLD = 0.0, 2.0, 1e-6, 1e-5
# the "grow" initial guess: the last accepted step times this, at most 1
_GROW = 1.25


class _Search(NamedTuple):
    """The loop's state (optax's ``ZoomLinesearchState``, field for field)."""

    count: Any
    params: Any
    updates: Any
    stepsize_guess: Any
    stepsize: Any
    value: Any
    grad: Any
    slope: Any
    value_init: Any
    slope_init: Any
    decrease_error: Any
    curvature_error: Any
    error: Any
    interval_found: Any
    done: Any
    failed: Any
    low: Any
    value_low: Any
    slope_low: Any
    high: Any
    value_high: Any
    slope_high: Any
    cubic_ref: Any
    value_cubic_ref: Any
    safe_stepsize: Any
    safe_value: Any
    safe_grad: Any


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """Critical point of the cubic through (a, fa), (b, fb), (c, fc) with slope fpa at a
    (NaN when there is none: the caller then ignores it)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    d1 = jnp.array([[dc**2, -(db**2)], [-(dc**3), db**3]])
    A, B = jnp.dot(d1, jnp.array([fb - fa - fpa * db, fc - fa - fpa * dc]),
                   precision=jax.lax.Precision.HIGHEST) / denom  # noqa: N806
    return a + (-B + jnp.sqrt(B * B - 3.0 * A * fpa)) / (3.0 * A)


def _quadmin(a, fa, fpa, b, fb):
    """Critical point of the quadratic through (a, fa), (b, fb) with slope fpa at a."""
    db = b - a
    B = (fb - fa - fpa * db) / (db**2)  # noqa: N806
    return a - fpa / (2.0 * B)


class _Zoom(NamedTuple):
    """The search's pieces (`_zoom`): ``init(params)`` the transformation's state;
    ``start(updates, params, value, grad, prev_stepsize)`` the loop's first state;
    ``trial(s)`` the step to evaluate next; ``after(s, trial, value, grad)`` the state
    after that evaluation; ``finish(s, state)`` the step size and the transformation's
    new state from the loop's last state."""

    init: Any
    start: Any
    trial: Any
    after: Any
    finish: Any


def _zoom(max_linesearch_steps: int, slope_rtol: float, curv_rtol: float,
          initial_guess_strategy: str) -> _Zoom:
    if initial_guess_strategy not in ("one", "keep", "grow"):
        raise ValueError(f"Unknown initial guess strategy: {initial_guess_strategy}")

    def decrease_error(stepsize, value_step, slope_step, value_init, slope_init):
        error = value_step - value_init - slope_rtol * stepsize * slope_init  # Armijo
        approx = slope_step - (2 * slope_rtol - 1.0) * slope_init  # Hager & Zhang (23)
        approx = jnp.maximum(approx, value_step - value_init - _APPROX_DEC_RTOL * jnp.abs(value_init))
        error = jnp.maximum(jnp.minimum(approx, error), 0.0)
        return jnp.where(jnp.isnan(error), jnp.inf, error)

    def curvature_error(slope_step, slope_init):
        error = jnp.maximum(jnp.abs(slope_step) - curv_rtol * jnp.abs(slope_init), 0.0)
        return jnp.where(jnp.isnan(error), jnp.inf, error)

    def search_point(s: _Search):
        """Algorithm 3.5's trial: the guess, then doubling."""
        return jnp.where(s.count == 0, s.stepsize_guess, _INCREASE * s.stepsize)

    def zoom_point(s: _Search):
        """Algorithm 3.6's trial inside [low, high]: cubic, else quadratic, else bisection."""
        delta = jnp.abs(s.high - s.low)
        left, right = jnp.minimum(s.high, s.low), jnp.maximum(s.high, s.low)
        cubic = _cubicmin(s.low, s.value_low, s.slope_low, s.high, s.value_high, s.cubic_ref,
                          s.value_cubic_ref)
        use_cubic = (cubic > left + 0.2 * delta) & (cubic < right - 0.2 * delta)
        quad = _quadmin(s.low, s.value_low, s.slope_low, s.high, s.value_high)
        use_quad = (~use_cubic) & (quad > left + 0.1 * delta) & (quad < right - 0.1 * delta)
        use_bisection = (~use_cubic) & (~use_quad)
        middle = jnp.where(use_cubic, cubic, s.cubic_ref)
        middle = jnp.where(use_quad, quad, middle)
        middle = jnp.where(use_bisection, (s.low + s.high) / 2.0, middle)
        return middle

    def search_update(s: _Search, new, value, grad, slope) -> _Search:
        """Algorithm 3.5 after the evaluation at its trial ``new`` (`search_point`)."""
        dec = decrease_error(new, value, slope, s.value_init, s.slope_init)
        curv = curvature_error(slope, s.slope_init)
        error = jnp.maximum(dec, curv)
        safe = optax.tree.where(dec <= _TOL, [new, value, grad],
                                [s.safe_stepsize, s.safe_value, s.safe_grad])
        set_high = (dec > 0.0) | ((value >= s.value) & (s.count > 0))
        set_low = (slope >= 0.0) & (~set_high)
        low, value_low, slope_low, high, value_high, slope_high = optax.tree.where(
            set_low, [new, value, slope, s.stepsize, s.value, s.slope],
            [s.stepsize, s.value, s.slope, new, value, slope])
        interval_found = set_high | set_low | (error <= _TOL)
        done = error <= _TOL  # no max_learning_rate: never stopped by it
        failed = (s.count + 1 >= max_linesearch_steps) & (~done)
        new_s = _Search(optax.safe_increment(s.count), s.params, s.updates, s.stepsize_guess, new, value,
                        grad, slope, s.value_init, s.slope_init, dec, curv, error,
                        jnp.asarray(interval_found), jnp.asarray(done), jnp.asarray(failed), low, value_low,
                        slope_low, high, value_high, slope_high, low, value_low, *safe)
        return optax.tree.cast_like(new_s, other_tree=s)

    def zoom_update(s: _Search, middle, value, grad, slope) -> _Search:
        """Algorithm 3.6 after the evaluation at its trial ``middle`` (`zoom_point`)."""
        too_small = jnp.abs(s.high - s.low) <= _INTERVAL_THRESHOLD
        dec = decrease_error(middle, value, slope, s.value_init, s.slope_init)
        curv = curvature_error(slope, s.slope_init)
        error = jnp.maximum(dec, curv)
        update_safe = (dec <= _TOL) & (value < s.safe_value)
        safe = optax.tree.where(update_safe, [middle, value, grad],
                                [s.safe_stepsize, s.safe_value, s.safe_grad])
        done = error <= _TOL
        set_high_to_middle = (dec > 0.0) | (value >= s.value_low)
        set_high_to_low = (slope * (s.high - s.low) >= 0.0) & (~set_high_to_middle)
        set_low_to_middle = ~set_high_to_middle
        high = optax.tree.where(set_high_to_middle, [middle, value, slope],
                                [s.high, s.value_high, s.slope_high])
        high = optax.tree.where(set_high_to_low, [s.low, s.value_low, s.slope_low], high)
        low = optax.tree.where(set_low_to_middle, [middle, value, slope], [s.low, s.value_low, s.slope_low])
        cubic_ref = optax.tree.where(set_high_to_middle | set_high_to_low, [s.high, s.value_high],
                                     [s.low, s.value_low])
        presumably_failed = jnp.asarray((s.count + 1) >= max_linesearch_steps) | (too_small & (safe[0] > 0.0))
        new_s = _Search(optax.safe_increment(s.count), s.params, s.updates, s.stepsize_guess, middle, value,
                        grad, slope, s.value_init, s.slope_init, dec, curv, error, s.interval_found, done,
                        presumably_failed & ~done, *low, *high, *cubic_ref, *safe)
        return optax.tree.cast_like(new_s, other_tree=s)

    def try_safe_step(s: _Search) -> _Search:
        """Out of iterations: the last step with sufficient decrease, if any."""
        stepsize, value, grad = optax.tree.where(
            (s.safe_stepsize > 0.0) | jnp.isinf(s.decrease_error),
            [s.safe_stepsize, s.safe_value, s.safe_grad], [s.stepsize, s.value, s.grad])
        return optax.tree.cast_like(s._replace(stepsize=stepsize, grad=grad, value=value), other_tree=s)

    def start(updates, params, value, grad, prev_stepsize) -> _Search:
        if initial_guess_strategy == "one":
            guess = jnp.asarray(1.0)
        elif initial_guess_strategy == "keep":
            guess = prev_stepsize
        else:  # "grow": a little past the last step, so that a longer one is found again
            guess = jnp.where(prev_stepsize > 0, jnp.minimum(1.0, _GROW * prev_stepsize), 1.0)
        val_dtype = jnp.real(jnp.empty((), jax.tree.leaves(params)[0].dtype)).dtype
        slope = optax.tree.real(optax.tree.vdot(updates, grad))
        zero, inf = jnp.asarray(0.0), jnp.asarray(jnp.inf)
        return _Search(jnp.asarray(0), params, updates, guess, jnp.asarray(0.0, dtype=val_dtype),
                       jnp.array(value, dtype=val_dtype), grad, slope, value, slope, inf, inf, inf,
                       jnp.asarray(False), jnp.asarray(False), jnp.asarray(False), zero, value, slope,
                       zero, value, slope, zero, value, zero, value, grad)

    def init(params) -> optax.ScaleByZoomLinesearchState:
        val_dtype = jnp.real(jnp.empty((), jax.tree.leaves(params)[0].dtype)).dtype
        return optax.ScaleByZoomLinesearchState(
            learning_rate=jnp.asarray(1.0, dtype=val_dtype), value=jnp.asarray(jnp.inf, dtype=val_dtype),
            grad=optax.tree.zeros_like(params),
            info=optax.ZoomLinesearchInfo(num_linesearch_steps=jnp.asarray(0),
                                          decrease_error=jnp.asarray(jnp.inf),
                                          curvature_error=jnp.asarray(jnp.inf)))

    def trial(s: _Search):
        return jax.lax.cond(s.interval_found, zoom_point, search_point, s)

    def after(s: _Search, trial, value, grad) -> _Search:
        slope = optax.tree.real(optax.tree.vdot(optax.tree.conj(grad), s.updates))
        s = jax.lax.cond(s.interval_found, zoom_update, search_update, s, trial, value, grad, slope)
        return jax.lax.cond(s.failed, try_safe_step, lambda s: s, s)

    def finish(final: _Search, state):
        info = optax.ZoomLinesearchInfo(num_linesearch_steps=final.count, decrease_error=final.decrease_error,
                                        curvature_error=final.curvature_error)
        new_state = optax.ScaleByZoomLinesearchState(final.stepsize, final.value, final.grad, info)
        return final.stepsize, optax.tree.cast_like(new_state, other_tree=state)

    return _Zoom(init, start, trial, after, finish)


def _running(s: _Search):
    return ~(s.done | s.failed)


def zoom_linesearch(max_linesearch_steps: int, slope_rtol: float = 1e-4, curv_rtol: float = 0.9,
                    initial_guess_strategy: str = "keep") -> optax.GradientTransformationExtraArgs:
    """`optax.scale_by_zoom_linesearch` (module docstring) with ``max_learning_rate``
    None, ``tol`` 0, ``increase_factor`` 2, ``approx_dec_rtol`` 1e-6 and
    ``stepsize_precision`` 1e-5 (optax's defaults), evaluating ``value_fn`` once per
    iteration. ``initial_guess_strategy``: ``"keep"`` (the last accepted step, optax's
    default), ``"one"``, or ``"grow"`` (pinnkit's: 1.25 times the last accepted step, at
    most 1; 1 after a step of 0)."""
    z = _zoom(max_linesearch_steps, slope_rtol, curv_rtol, initial_guess_strategy)

    def update(updates, state, params, *, value, grad, value_fn, **extra):
        if extra:
            raise TypeError(f"zoom_linesearch.update: unexpected arguments {sorted(extra)}")
        value_and_grad = jax.value_and_grad(value_fn)

        def body(s: _Search) -> _Search:
            t = z.trial(s)
            return z.after(s, t, *value_and_grad(optax.tree.add_scale(s.params, t, s.updates)))

        final = jax.lax.while_loop(_running, body, z.start(updates, params, value, grad, state.learning_rate))
        stepsize, state = z.finish(final, state)
        return optax.tree.scale(stepsize, updates), state

    return optax.GradientTransformationExtraArgs(z.init, update)


class Searched(NamedTuple):
    """What `zoom_search`'s search returns: the objective's ``value`` and ``grad`` at the
    parameters and ``extra`` from the direction there; the ``step`` taken (the direction
    times the step size); the line search's new ``state``, whose ``value`` and ``grad``
    are the objective's at the point accepted, and ``aux`` there."""

    value: Any
    grad: Any
    extra: Any
    step: Any
    state: Any
    aux: Any


def zoom_search(max_linesearch_steps: int, slope_rtol: float = 1e-4, curv_rtol: float = 0.9,
                initial_guess_strategy: str = "keep"):
    """`zoom_linesearch` with the objective's evaluation at the parameters themselves in the
    same loop: ``search(value_and_grad, params, direction, state, known=None) ->
    Searched``, where ``value_and_grad(p) -> ((value, aux), grad)``, ``direction(grad) ->
    (updates, extra)`` (the quasi-Newton direction from the gradient at ``params``;
    ``extra``: any arrays it wants back) and ``state`` the line search's state
    (`optax.ScaleByZoomLinesearchState`, as `zoom_linesearch`'s ``init`` makes it).

    The loop's first iteration evaluates at ``params`` and starts the search along the
    direction, every later one evaluates at a trial step: the objective is traced and
    compiled once per step of the optimiser, where ``value_and_grad`` before the
    line search and the search's own evaluation would be two copies. The same steps as
    the two to the bit (the same arithmetic).

    ``known``: ``(use, value, grad)`` at ``params`` from elsewhere (``use`` a traced bool;
    for example the last search's at the point it accepted, when the objective has not
    changed since): where ``use`` holds, the loop starts at its first trial. The ``aux``
    returned is the accepted point's; if that is ``params`` itself (no step) while ``known``
    was used, one more iteration evaluates there for it (the same call in the program)."""
    z = _zoom(max_linesearch_steps, slope_rtol, curv_rtol, initial_guess_strategy)

    def search(value_and_grad, params, direction, state, known=None) -> Searched:
        vg = jax.jit(value_and_grad)  # traced once: eval_shape's trace is the loop's
        (v_shape, aux_shape), g_shape = jax.eval_shape(vg, params)
        zeros = partial(jax.tree.map, lambda a: jnp.zeros(a.shape, a.dtype))
        value0, aux0, grad0 = zeros(v_shape), zeros(aux_shape), zeros(g_shape)
        extra0 = zeros(jax.eval_shape(lambda g: direction(g)[1], grad0))
        s0 = z.start(optax.tree.zeros_like(params), params, value0, grad0, state.learning_rate)
        no, yes = jnp.zeros((), bool), jnp.ones((), bool)
        # carry: the search, whether it started, (value, grad, extra) at params, and the
        # aux (with whether it is known) at the search's safe point and at its accepted one
        carry0 = (s0, no, (value0, grad0, extra0), (aux0, no), (aux0, no))
        if known is not None:
            use, value, grad = known

            def given():
                updates, extra = direction(grad)
                return (z.start(updates, params, value, grad, state.learning_rate), yes,
                        (value, grad, extra), (aux0, no), (aux0, no))

            carry0 = jax.lax.cond(use, given, lambda: carry0)

        def pick(c, a, b):
            return jax.tree.map(partial(jnp.where, c), a, b)

        def body(carry):
            s, started, at_params, safe, at = carry
            searching = started & _running(s)  # else params: the start, or the aux for no step
            t = jax.lax.cond(searching, z.trial, lambda s: jnp.zeros_like(s.stepsize), s)
            point = jax.lax.cond(searching, lambda: optax.tree.add_scale(s.params, t, s.updates),
                                 lambda: params)
            (value, aux), grad = vg(point)

            def begin(s, at_params, safe, at):
                updates, extra = direction(grad)
                return (z.start(updates, params, value, grad, state.learning_rate),
                        (value, grad, extra), (aux, yes), (aux, yes))

            def go_on(s, at_params, safe, at):
                s = z.after(s, t, value, grad)
                safe = pick(s.safe_stepsize == t, (aux, yes), safe)  # this trial became the safe one
                return s, at_params, safe, pick(s.stepsize == t, (aux, yes), safe)

            def at_start(s, at_params, safe, at):
                return s, at_params, safe, (aux, yes)

            branch = jnp.where(~started, 0, jnp.where(searching, 1, 2))
            s, at_params, safe, at = jax.lax.switch(branch, (begin, go_on, at_start), s, at_params, safe, at)
            return s, yes, at_params, safe, at

        final, _, (value, grad, extra), _, (aux, _) = jax.lax.while_loop(
            lambda c: ~c[1] | _running(c[0]) | ~c[4][1], body, carry0)
        stepsize, state = z.finish(final, state)
        return Searched(value, grad, extra, optax.tree.scale(stepsize, final.updates), state, aux)

    return search
