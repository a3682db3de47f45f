"""Energy natural gradient / Gauss-Newton steps (Müller & Zeinhofer 2023), for small
networks, preferably in float64.

The loss is a weighted sum of mean squares, $L(\\theta) = \\sum_k w_k \\frac{1}{N_k}
\\sum_{i} \\|r_k(x_i; \\theta)\\|^2$. With $J_k = \\partial r_k / \\partial \\theta$ (all points
of term $k$ stacked), the Gramian
$$G = 2 \\sum_k \\frac{w_k}{N_k} J_k^\\top J_k \\quad (P \\times P)$$
is the Gauss-Newton matrix, the exact Hessian of $L$ where the residuals are linear in
$\\theta$; for a linear PDE operator it is the energy inner product's Gramian pulled back to
parameter space (the *energy natural gradient*). The step is
$$\\theta \\leftarrow \\theta + \\eta^* d, \\quad d = -(G + \\lambda I)^{-1} \\nabla L, \\quad
\\lambda = \\text{damping} \\cdot \\operatorname{tr}(G)/P,$$
with $\\eta^*$ the best of the grid $\\eta \\in \\{1, 2^{-1}, \\dots, 2^{-(\\text{grid}-1)}\\}$
(one loss evaluation each); $\\eta = 1$ is the Gauss-Newton minimiser of a linear model.

Safeguard (Levenberg-Marquardt, ``safeguard=True``; off by default, which is the
published method): a step is taken only if the best point of the grid lowers the loss.
Otherwise the parameters stay and the damping is multiplied by 10
($\\lambda = \\mu\\cdot\\text{damping}\\cdot\\operatorname{tr}(G)/P$, $\\mu \\leftarrow 10\\mu$;
with ``damping = 0``, $\\mu$ scales $10^{-10}$), which shortens and turns the next
direction toward the gradient; every accepted step divides $\\mu$ by 10, down to 1. Without
it a nearly singular Gramian (few points per parameter, or far from a solution) gives a
direction so long that even the grid's shortest step raises the loss by orders of
magnitude (measured: 2.8e-2 -> 23 in one step on a 79-parameter net). While every step
lowers the loss, $\\mu$ stays 1 and the steps are those of the plain method; a run
that spends steps at the grid's shortest $\\eta$ (logged as ``step_size``) is one where
the safeguard changes the trajectory.

Sharding: each device forms $J^\\top J$ and $J^\\top r$ of its own points, and the two are
`psum`med over the ``data`` axis (`pinnkit.train.loss.Loss.gauss_newton`): the Gramian never
needs the other devices' Jacobians, and 1 or 4 devices run the same code. Cost: one reverse pass per
point for $J$, $O(N P^2)$ for $G$ and $O(P^3)$ for the Cholesky solve, so this is for
networks of a few thousand parameters.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree
from jaxtyping import Array


class NaturalGradientState(NamedTuple):
    """``count``: steps taken; ``step_size``: the last $\\eta^*$."""

    count: Array
    step_size: Array


class LazyGramianState(NamedTuple):
    """`NaturalGradientState` plus ``factor``, the upper Cholesky factor of the damped
    Gramian $G + \\lambda I$ formed at the last refresh, and ``age``, the steps taken with
    it (``refresh`` > 1; a separate type so that checkpoints of the plain method keep their
    layout); ``step_size`` 0 marks a refused step."""

    count: Array
    step_size: Array
    factor: Array
    age: Array


def refreshes(state: LazyGramianState, refresh: int) -> Array:
    """Whether the step at ``state`` forms a new Gramian: the factor has served
    ``refresh`` steps, or the last step was refused (the phase's first step is both)."""
    return (state.age >= refresh) | (state.step_size == 0)


class SafeguardedState(NamedTuple):
    """`NaturalGradientState` plus ``damping_scale``, the Levenberg-Marquardt multiplier
    $\\mu \\ge 1$ (``safeguard=True``; a separate type so that checkpoints of the plain
    method keep their layout); ``step_size`` 0 marks a rejected step."""

    count: Array
    step_size: Array
    damping_scale: Array


def natural_gradient(damping: float | Array = 1e-10, grid: int = 20, safeguard: bool = False,
                     refresh: int = 1) -> optax.GradientTransformationExtraArgs:
    """The damped Gauss-Newton step with a grid line search (module docstring).

    ``update(grads, state, params, *, gramian, value_fn, value=None)``: ``grads`` =
    $\\nabla L$ (same tree as ``params``), ``gramian`` = $G$ over the flattened parameters
    (`jax.flatten_util.ravel_pytree` order), ``value_fn(params) -> L``, ``value`` = $L$ at
    ``params``; with ``safeguard`` (and ``value`` given) a step that does not lower it is
    rejected (module docstring), else the grid's best step is always taken.

    ``refresh`` = $k > 1$: the lazy (chord) Gauss-Newton method. The damped Gramian is
    factored on a refresh step (`refreshes`: every $k$-th, and after a refused step;
    ``gramian`` is read only there) and the steps between solve with that factor and
    their own gradient, $d_t = -(G_{t_0} + \\lambda I)^{-1}\\nabla L(\\theta_t)$, so the
    caller needs the Jacobian pass only on refresh steps. A step with an old factor whose
    best trial point does not lower the loss (``value``) is refused (the parameters
    stay) and the next step refreshes; a refresh step moves as the plain method does.
    The factor ($P \\times P$) is optimiser state, and so in checkpoints. Not with
    ``safeguard``.
    """
    # numbers are checked here; arrays (a training phase's traced inputs) by the phase's config
    if grid < 1 or (isinstance(damping, int | float) and damping < 0):
        raise ValueError(f"need damping >= 0 and grid >= 1: actual=({damping}, {grid})")
    if refresh < 1 or (refresh > 1 and safeguard):
        raise ValueError(f"need refresh >= 1, and 1 with the safeguard: actual={refresh}")

    def init(params):
        flat, _ = ravel_pytree(params)
        count, eta = jnp.zeros((), jnp.int32), jnp.zeros((), flat.dtype)
        if safeguard:
            return SafeguardedState(count, eta, jnp.ones((), flat.dtype))
        if refresh > 1:  # step_size 0: the first step refreshes
            factor = jnp.zeros((flat.size, flat.size), flat.dtype)
            return LazyGramianState(count, eta, factor, jnp.zeros((), jnp.int32))
        return NaturalGradientState(count, eta)

    def update(grads, state, params=None, *, gramian, value_fn, value=None, **extra):
        del extra
        flat, unravel = ravel_pytree(params)
        g, _ = ravel_pytree(grads)
        n = flat.shape[0]
        scale = damping  # the plain method; the safeguard multiplies it by mu (1 until a rejection)
        if safeguard:  # escalations need a base also when damping is 0
            mu = state.damping_scale
            scale = jnp.where(mu > 1, jnp.maximum(damping, 1e-10), damping) * mu

        def factorise():  # upper Cholesky factor of G + lambda I
            lam = scale * jnp.trace(gramian) / n
            return jax.scipy.linalg.cho_factor(gramian + lam * jnp.eye(n, dtype=flat.dtype))[0]

        if refresh > 1:
            fresh = refreshes(state, refresh)
            chol = jax.lax.cond(fresh, factorise, lambda: state.factor)
        else:
            chol = factorise()
        d = -jax.scipy.linalg.cho_solve((chol, False), g)
        etas = 2.0 ** -jnp.arange(grid, dtype=flat.dtype)
        losses = jax.lax.map(lambda eta: value_fn(unravel(flat + eta * d)), etas)
        losses = jnp.where(jnp.isfinite(losses), losses, jnp.inf)
        best = jnp.argmin(losses)
        count = optax.safe_int32_increment(state.count)
        if refresh > 1:  # an old factor's step must lower the loss, and no step may be non-finite
            lower = jnp.asarray(True) if value is None else losses[best] < value
            ok = jnp.isfinite(losses[best]) & (fresh | lower)
            eta = jnp.where(ok, etas[best], 0.0)
            age = jnp.where(fresh, 1, state.age + 1)
            return unravel(eta * d), LazyGramianState(count, eta, chol, age)
        if not safeguard:
            return unravel(etas[best] * d), NaturalGradientState(count, etas[best])
        ok = jnp.asarray(True) if value is None else losses[best] < value
        eta = jnp.where(ok, etas[best], 0.0)
        mu = jnp.where(ok, jnp.maximum(mu / 10, 1.0), jnp.minimum(mu * 10, 1e30))
        return unravel(eta * d), SafeguardedState(count, eta, mu)

    return optax.GradientTransformationExtraArgs(init, update)

