"""Self-scaled dense quasi-Newton methods: SSBFGS and SSBroyden (Urbán, Stefanou & Pons
2025; Kiyani, Shukla, Urbán, Darbon & Karniadakis 2025), for small networks in float64.

Both keep a dense approximation $H_k \\approx \\nabla^2 L^{-1}$ over the flattened
parameters (`jax.flatten_util.ravel_pytree` order), start from $H_0 = I$ and step
$$d_k = -H_k g_k, \\qquad s_k = \\alpha_k d_k, \\qquad \\theta_{k+1} = \\theta_k + s_k,$$
with $\\alpha_k$ from a strong-Wolfe line search. With $y_k = g_{k+1} - g_k$ the inverse
update of the self-scaled Broyden family (both papers; the inverse-Hessian form of
Al-Baali's self-scaling class) is
$$H_{k+1} = \\frac{1}{\\tau_k}\\Big(H_k - \\frac{H_k y_k y_k^\\top H_k}{y_k^\\top H_k y_k}
+ \\varphi_k v_k v_k^\\top\\Big) + \\frac{s_k s_k^\\top}{y_k^\\top s_k}, \\qquad
v_k = \\sqrt{y_k^\\top H_k y_k}\\Big(\\frac{s_k}{y_k^\\top s_k} - \\frac{H_k y_k}{y_k^\\top
H_k y_k}\\Big),$$
where $\\varphi_k = 1$ is BFGS and $\\varphi_k = 0$ DFP. The scalars use
$$b_k = \\frac{s_k^\\top B_k s_k}{y_k^\\top s_k} = \\frac{-\\alpha_k s_k^\\top g_k}{y_k^\\top s_k}
\\;(B_k s_k = -\\alpha_k g_k), \\quad h_k = \\frac{y_k^\\top H_k y_k}{y_k^\\top s_k}, \\quad
a_k = b_k h_k - 1 \\ge 0.$$

- **SSBFGS**: $\\varphi_k = 1$, $\\tau_k = \\min(1, 1/b_k)$ (the Oren-Luenberger factor,
  capped at 1 so that the scaling only ever enlarges $H$).
- **SSBroyden**: the Broyden parameter of the direct form
  $\\vartheta_k = \\max(\\vartheta_k^-, \\min(\\vartheta_k^+, (1-b_k)/b_k))$ with
  $c_k = \\sqrt{a_k/(1+a_k)}$, $\\rho_k^- = \\min(1, h_k(1-c_k))$,
  $\\vartheta_k^- = (\\rho_k^- - 1)/a_k$, $\\vartheta_k^+ = 1/\\rho_k^-$; then
  $\\sigma_k = 1 + a_k\\vartheta_k$, $\\varphi_k = (1-\\vartheta_k)/(1+a_k\\vartheta_k)$ and
  $\\tau_k = \\tau_k^{\\rm SSBFGS}\\min(\\sigma_k^{-1/(P-1)}, 1/\\vartheta_k)$ if
  $\\vartheta_k > 0$, else $\\min(\\tau_k^{\\rm SSBFGS}\\sigma_k^{-1/(P-1)}, \\sigma_k)$.
  Where $a_k = 0$ (then $v_k = 0$ and every member of the family coincides) $\\vartheta_k = 0$.

Line search: optax's `scale_by_zoom_linesearch` (Nocedal & Wright Algorithms 3.5/3.6,
the one the ``lbfgs`` phase uses; `pinnkit.optim.linesearch.zoom_linesearch`, the same
steps with the objective traced once), reused because it takes exactly what the training
step passes an L-BFGS phase (``value``, ``grad``, ``value_fn``), guarantees
$y_k^\\top s_k > 0$ when the curvature condition holds, and returns the value *and
gradient* at the accepted point, so $y_k$ costs no extra evaluation. Its state is
part of this one.

Safeguards: the update is skipped (``skipped`` += 1, $H$ kept) when
$y_k^\\top s_k \\le \\epsilon \\|y_k\\|\\|s_k\\|$ (scale-free curvature test, $\\epsilon$ =
``curvature_eps``, default the dtype's machine epsilon); $H$ is reset to $I$
(``resets`` += 1) when $d_k$ is not a finite descent direction (then $d_k = -g_k$) or the
updated $H$ is not finite; a non-finite step is not taken.

Memory: $H$ is $P \\times P$; `dense_memory_bytes` gives the peak (three such matrices)
and `check_dense_memory` raises a `ConfigError` naming the parameter count when it
would not fit (``max_memory_bytes``, default half of the device's memory).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Float, Int

from ..errors import ConfigError
from .linesearch import zoom_linesearch, zoom_search

# The update holds the state's H, the updated H and one P x P temporary at once.
_DENSE_COPIES = 3


class SelfScaledState(NamedTuple):
    """State of `ssbfgs` / `ssbroyden`; every field is an array, so checkpoints save it.

    ``inv_hessian``: $H_k$, ``(P, P)``; ``linesearch``: the zoom line search's state
    (its ``grad`` is $g_{k+1}$ of the last step). Metrics of the last step:
    ``step_size`` $\\alpha_k$, ``curvature`` $y_k^\\top s_k$, ``tau`` $\\tau_k$, ``phi``
    $\\varphi_k$ (1 and 1 when the update was skipped); counters ``skipped`` and
    ``resets`` over the phase."""

    count: Int[Array, ""]
    inv_hessian: Float[Array, "P P"]
    linesearch: optax.ScaleByZoomLinesearchState
    step_size: Float[Array, ""]
    curvature: Float[Array, ""]
    tau: Float[Array, ""]
    phi: Float[Array, ""]
    skipped: Int[Array, ""]
    resets: Int[Array, ""]


def dense_memory_bytes(n_params: int, dtype=jnp.float64) -> int:
    """Peak bytes of the dense inverse Hessian of ``n_params`` parameters: three
    ``(P, P)`` matrices of ``dtype`` (the state's, the updated one, one temporary)."""
    return _DENSE_COPIES * int(n_params) ** 2 * np.dtype(dtype).itemsize


def device_memory_bytes(device: jax.Device | None = None) -> int:
    """Memory of ``device`` (default: the first): an accelerator's ``bytes_limit``, or
    the host's physical memory for a CPU (which reports no memory statistics)."""
    device = jax.devices()[0] if device is None else device
    stats = device.memory_stats()
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"])
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 2**10:.0f} KiB"


def check_dense_memory(n_params: int, dtype, max_memory_bytes: float | None = None,
                       name: str = "ssbfgs") -> None:
    """Raises `ConfigError` if the dense matrix of ``n_params`` would need more than
    ``max_memory_bytes`` (``None``: half of `device_memory_bytes`)."""
    need = dense_memory_bytes(n_params, dtype)
    if max_memory_bytes is None:
        limit, where = device_memory_bytes() // 2, "half of this device's memory"
    else:
        limit, where = max_memory_bytes, "the limit given"
    if need > limit:
        raise ConfigError(
            f"the {name} phase keeps a dense {n_params} x {n_params} inverse Hessian: with "
            f"{n_params:,} trainable parameters in {np.dtype(dtype).name} it needs "
            f"{_size(need)} ({_DENSE_COPIES} copies of {_size(need / _DENSE_COPIES)}), more than "
            f"the {_size(limit)} available ({where}). Use an lbfgs phase (kind: lbfgs), whose "
            f"memory grows like the parameter count, or a smaller network."
        )


def _broyden_scalars(b, h, n: int, broyden: bool):
    """``(tau, phi)`` of the module docstring from $b_k$, $h_k$ and $P$."""
    tau_bfgs = jnp.minimum(1.0, 1.0 / b)
    if not broyden:
        return tau_bfgs, jnp.ones_like(b)
    a = jnp.maximum(b * h - 1.0, 0.0)  # >= 0 by Cauchy-Schwarz; clip rounding below 0
    degenerate = a <= jnp.finfo(a.dtype).eps
    a_ = jnp.where(degenerate, 1.0, a)  # only used where a > 0
    c = jnp.sqrt(a_ / (1.0 + a_))
    rho_minus = jnp.minimum(1.0, h * (1.0 - c))
    theta = jnp.maximum((rho_minus - 1.0) / a_, jnp.minimum(1.0 / rho_minus, (1.0 - b) / b))
    theta = jnp.where(degenerate, 0.0, theta)
    sigma = 1.0 + a * theta
    power = sigma ** (-1.0 / (n - 1)) if n > 1 else jnp.ones_like(sigma)
    theta_ = jnp.where(theta > 0, theta, 1.0)
    tau = jnp.where(theta > 0, tau_bfgs * jnp.minimum(power, 1.0 / theta_),
                    jnp.minimum(tau_bfgs * power, sigma))
    return tau, (1.0 - theta) / sigma


class SelfScaled(NamedTuple):
    """`ssbfgs` / `ssbroyden`: an optax transformation (``init``, ``update``) and
    ``search_step(state, params, value_and_grad, reuse=None) -> (updates, state, aux)``,
    the same update with the loss at ``params`` evaluated inside the line search's loop,
    so that a training step's program holds the loss once; ``reusable(state)``: whether
    the state's value and gradient are the objective's at the parameters its step moved
    to (``reuse`` of the next `search_step`, when the objective has not changed)."""

    init: Callable
    update: Callable
    search_step: Callable
    reusable: Callable


def _self_scaled(broyden: bool, max_linesearch_steps: int, slope_rtol: float, curv_rtol: float,
                 curvature_eps: float | None, max_memory_bytes: float | None,
                 step_guess: str = "unit") -> SelfScaled:
    name = "ssbroyden" if broyden else "ssbfgs"
    if max_linesearch_steps < 1:
        raise ValueError(f"need max_linesearch_steps >= 1: actual={max_linesearch_steps}")
    if step_guess not in ("unit", "last"):
        raise ValueError(f"step_guess: expected 'unit' or 'last', got {step_guess!r}")
    # "one": quasi-Newton's unit step is the natural guess; "grow": near the last accepted one
    guess = {"unit": "one", "last": "grow"}[step_guess]
    linesearch = zoom_linesearch(max_linesearch_steps, slope_rtol=slope_rtol, curv_rtol=curv_rtol,
                                 initial_guess_strategy=guess)
    search = zoom_search(max_linesearch_steps, slope_rtol=slope_rtol, curv_rtol=curv_rtol,
                         initial_guess_strategy=guess)

    def init(params) -> SelfScaledState:
        flat, _ = ravel_pytree(params)
        n, dtype = flat.shape[0], flat.dtype
        check_dense_memory(n, dtype, max_memory_bytes, name)
        zero, one, izero = jnp.zeros((), dtype), jnp.ones((), dtype), jnp.zeros((), jnp.int32)
        return SelfScaledState(izero, jnp.eye(n, dtype=dtype), linesearch.init(flat),
                               zero, zero, one, one, izero, izero)

    def direction(state: SelfScaledState, g):
        """$d_k = -H_k g_k$, and whether it is a finite descent direction (else $-g_k$)."""
        d = -(state.inv_hessian @ g)  # not (-H) @ g: a negated copy of H first
        # g = 0 (an exact stationary point) is no reason to reset; the step is then 0
        descent = jnp.all(jnp.isfinite(d)) & ((d @ g < 0) | jnp.all(g == 0))
        return jnp.where(descent, d, -g), descent

    def updated(state: SelfScaledState, g, descent, s, ls_state, value):
        """The step and the new state from the line search's step $s_k$ along the direction
        (``g``, ``value``: the gradient and the loss at the parameters)."""
        n, dtype = g.shape[0], g.dtype
        # Each pass over the (P, P) matrix is the cost here (90 MB at P = 3363, ~10 ms on
        # one core): H is read by the two products and once by the elementwise update,
        # which XLA fuses with the reset to I (h_mat, never formed: H @ y is taken from H
        # itself), where forming h_mat, -H and the outer products took 4x the traffic
        # (docs/benchmarks.md, issue 32, session 26). The same arithmetic: I @ y = y.
        eye = jnp.eye(n, dtype=dtype)
        eps = jnp.finfo(dtype).eps if curvature_eps is None else curvature_eps
        h_mat = jnp.where(descent, state.inv_hessian, eye)
        alpha, g_new = ls_state.learning_rate, ls_state.grad
        y = g_new - g
        ys, yy, ss = y @ s, y @ y, s @ s
        hy = jnp.where(descent, state.inv_hessian @ y, y)
        yhy = y @ hy
        curved = ys > eps * jnp.sqrt(yy * ss)
        ys_ = jnp.where(curved, ys, 1.0)  # the update below is only kept where curved
        yhy_ = jnp.where(curved & (yhy > 0), yhy, 1.0)
        tau, phi = _broyden_scalars(-alpha * (s @ g) / ys_, yhy_ / ys_, n, broyden)
        w = s / ys_ - hy / yhy_  # v_k = sqrt(yHy) w
        new = (h_mat - jnp.outer(hy, hy) / yhy_ + (phi * yhy_) * jnp.outer(w, w)) / tau
        new = new + jnp.outer(s, s) / ys_

        step_ok = jnp.all(jnp.isfinite(s)) & jnp.all(jnp.isfinite(g_new))
        # new is finite where its factors are (H is: I, or an update that passed this
        # check), short of an overflow past 1e308: checked on the vectors and scalars,
        # so that the matrix is formed once, in the pass that writes it
        factors = (hy, w, s, tau, phi, 1.0 / yhy_, phi * yhy_, 1.0 / tau, 1.0 / ys_)
        new_ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(v)) for v in factors]))
        use = curved & step_ok
        h_next = jnp.where(use, new, h_mat)
        reset = (use & ~new_ok) | ~step_ok
        h_next = jnp.where(reset, eye, h_next)
        s = jnp.where(step_ok, s, 0.0)
        # a step not taken leaves the parameters, so the state's loss and gradient are theirs
        ls_state = ls_state._replace(value=jnp.where(step_ok, ls_state.value, value),
                                     grad=jnp.where(step_ok, g_new, g))
        one = jnp.ones((), dtype)
        new_state = SelfScaledState(
            count=optax.safe_int32_increment(state.count),
            inv_hessian=h_next,
            linesearch=ls_state,
            step_size=jnp.where(step_ok, alpha, 0.0).astype(dtype),
            curvature=ys.astype(dtype),
            tau=jnp.where(use & new_ok, tau, one),
            phi=jnp.where(use & new_ok, phi, one),
            skipped=state.skipped + (step_ok & ~curved).astype(jnp.int32),
            resets=state.resets + (reset | ~descent).astype(jnp.int32),
        )
        return s, new_state

    def update(grads, state: SelfScaledState, params, *, value, value_fn, grad=None):
        flat, unravel = ravel_pytree(params)
        g, _ = ravel_pytree(grads if grad is None else grad)
        d, descent = direction(state, g)
        s, ls_state = linesearch.update(d, state.linesearch, flat, value=value, grad=g,
                                        value_fn=lambda th: value_fn(unravel(th)))
        s, new_state = updated(state, g, descent, s, ls_state, value)
        return unravel(s), new_state

    def search_step(state: SelfScaledState, params, value_and_grad, reuse=None):
        """`update` with the loss at ``params`` evaluated in the line search's loop
        (`pinnkit.optim.linesearch.zoom_search`): ``value_and_grad(params) -> ((value,
        aux), grads)``. Returns ``(updates, state, aux)``: the new state's
        ``linesearch.value`` and ``linesearch.grad`` are the loss and its gradient at the
        point the step moved to (at ``params`` if it took none), ``aux`` is the one there.

        ``reuse`` (a traced bool, `reusable`): where it holds the loss and gradient at
        ``params`` are the state's (the objective has not changed since the last step) and
        are not evaluated again: one evaluation fewer a step, the same trajectory."""
        flat, unravel = ravel_pytree(params)

        def flat_vg(th):
            out, g = value_and_grad(unravel(th))
            return out, ravel_pytree(g)[0]

        known = None if reuse is None else (reuse, state.linesearch.value, state.linesearch.grad)
        r = search(flat_vg, flat, lambda g: direction(state, g), state.linesearch, known)
        s, new_state = updated(state, r.grad, r.extra, r.step, r.state, r.value)
        return unravel(s), new_state, r.aux

    def reusable(state: SelfScaledState):
        """Whether the state's value and gradient are the loss's at the parameters its last
        step moved to: a step was taken (not the phase's first) with a step size > 0 (a
        non-finite step is not taken and is 0)."""
        return (state.count > 0) & (state.step_size > 0)

    return SelfScaled(init, update, search_step, reusable)


def ssbfgs(max_linesearch_steps: int = 25, slope_rtol: float = 1e-4, curv_rtol: float = 0.9,
           curvature_eps: float | None = None, max_memory_bytes: float | None = None,
           step_guess: str = "unit") -> SelfScaled:
    """Self-scaled BFGS (module docstring). The returned update is the step $s_k$ itself
    (apply it with `optax.apply_updates`; no learning rate).

    ``update(grads, state, params, *, value, value_fn, grad=None)``: ``grads`` =
    $\\nabla L$ at ``params`` (``grad``, when given, is used instead: the L-BFGS call of the
    training step passes both), ``value`` = $L$ at ``params``, ``value_fn(params) -> L``.

    **Arguments:**
    - `max_linesearch_steps`: zoom iterations per step (default 25).
    - `slope_rtol`, `curv_rtol`: the strong-Wolfe constants $c_1$, $c_2$ (1e-4, 0.9).
    - `curvature_eps`: $\\epsilon$ of the skip test; ``None``: the dtype's machine epsilon.
    - `max_memory_bytes`: `init` raises `ConfigError` past it (``None``: half the device's).
    - `step_guess`: the line search's first trial: ``"unit"`` (default) $\\alpha = 1$, or
      ``"last"``: 1.25 times the last accepted $\\alpha$, at most 1 (where most steps
      accept a shorter one, the first trial is then accepted instead of zoomed into).
    """
    return _self_scaled(False, max_linesearch_steps, slope_rtol, curv_rtol, curvature_eps,
                        max_memory_bytes, step_guess)


def ssbroyden(max_linesearch_steps: int = 25, slope_rtol: float = 1e-4, curv_rtol: float = 0.9,
              curvature_eps: float | None = None, max_memory_bytes: float | None = None,
              step_guess: str = "unit") -> SelfScaled:
    """Self-scaled Broyden (module docstring): `ssbfgs` with the Broyden parameter
    $\\vartheta_k$ and the scaling $\\tau_k$ chosen per step. Arguments as `ssbfgs`."""
    return _self_scaled(True, max_linesearch_steps, slope_rtol, curv_rtol, curvature_eps,
                        max_memory_bytes, step_guess)
