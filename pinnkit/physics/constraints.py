"""Hard constraints: output transforms that satisfy a condition exactly, whatever the
network outputs (a problem's ``hard_constraint``, used with ``network.hard_constraint:
true``). Boundary values on a box: `pinnkit.HardDirichlet`; initial values:
`InitialValue`, whose `InitialValue.restart` starts it again at a later time (time
marching, ``train.time_windows``).

Time marching (`pinnkit.train.windows`) needs, at each window edge, the same constraint
with the previous window's state as its data; a transform declares that it can do so by
being an `AbstractTimeRestart`. Other hard constraints are exact in the first window and
imposed as a soft term after it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._types import Point


class AbstractTimeRestart(eqx.Module):
    """A hard initial condition on $[t_0, t_1]$ (an output transform ``(x, y) -> y``)
    that can start again on another interval."""

    @abc.abstractmethod
    def restart(self, t0: float, t1: float, value: Callable[[Point], Array]) -> AbstractTimeRestart:
        """The same constraint on $[t_0, t_1]$ with initial state ``value(x) -> (m,)``."""

    @abc.abstractmethod
    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        """The constrained output at ``x`` from the raw network output ``y``."""


class InitialValue(AbstractTimeRestart):
    """Exact initial condition $y_i(t_0, x) = g_i(x)$:
    $y_i(t, x) = g_i(x) + s_i\\,\\phi(t)\\,N_i(t, x)$ with $\\phi = (t - t_0)/(t_1 - t_0)$, or
    $\\phi = 1 - e^{-(t - t_0)/\\tau}$ when ``tau`` is given; $N$ is the network's output.
    Time is the first coordinate of a point (as in `pinnkit.SpaceTime` and a timed
    `pinnkit.Sphere`).

    **Arguments:**
    - `t0`, `t1`: the time interval.
    - `value`: ``g(x) -> (k,)`` for the point ``x`` (all coordinates, time first); on the
      sphere it must use only the unit vector $\\mathbf x/|\\mathbf x|$ so that fields
      stay 0-homogeneous.
    - `scales`: $s_i$, one per constrained output: the size of the change an O(1)
      network output stands for. With the linear ramp the network must output
      $N \\approx (t_1 - t_0)\\,\\partial_t y / s$ near $t_0$; for a fast local change (a
      bell moving its own width in $\\tau \\ll t_1 - t_0$) the saturating ramp keeps $N$
      O(1) over the whole interval.
    - `tau`: the saturating ramp's time scale, or None (default) for the linear ramp.
    - `outputs`: the indices of the constrained outputs (default None: all, ``k = m``);
      the others pass through unchanged.
    """

    t0: float = eqx.field(static=True)
    t1: float = eqx.field(static=True)
    value: Callable = eqx.field(static=True)
    scales: tuple[float, ...] = eqx.field(static=True)
    tau: float | None = eqx.field(static=True, default=None)
    outputs: tuple[int, ...] | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if not self.t0 < self.t1:
            raise ValueError(f"InitialValue needs t0 < t1: actual=({self.t0}, {self.t1})")
        if self.tau is not None and not self.tau > 0:
            raise ValueError(f"InitialValue needs tau > 0 or None: actual={self.tau}")
        if self.outputs is not None and len(self.outputs) != len(self.scales):
            raise ValueError(f"InitialValue needs one scale per constrained output: outputs={self.outputs}, "
                             f"scales={self.scales}")

    def restart(self, t0: float, t1: float, value: Callable) -> InitialValue:
        """The same constraint on $[t_0, t_1]$ from the state ``value(x) -> (m,)`` (all
        outputs: time marching, `pinnkit.train.windows`, passes the previous window's
        network at $t_0$)."""
        if self.outputs is not None:
            idx = self.outputs
            full = value
            value = lambda x: full(x)[jnp.asarray(idx)]  # noqa: E731
        return InitialValue(t0, t1, value, self.scales, self.tau, self.outputs)

    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        if self.tau is None:
            phi = (x[0] - self.t0) / (self.t1 - self.t0)
        else:
            phi = 1.0 - jnp.exp(-(x[0] - self.t0) / self.tau)
        s = jnp.asarray(self.scales, y.dtype)
        if self.outputs is None:
            return self.value(x) + phi * s * y
        idx = jnp.asarray(self.outputs)
        return y.at[idx].set(self.value(x) + phi * s * y[idx])


def exact_lift_fields(problem, n: int = 64) -> tuple[str, ...]:
    """The fields whose hard-constraint lift is the exact solution: with a zero network
    the constraint gives $y_k = g_k(x)$, and where $g_k = u^*_k$ (``problem.reference``)
    at ``n`` sampled interior points (relative to $\\max(1, |u^*_k|)$: $10^{-5}$ in
    float32, $10^{-10}$ in float64) the network starts at the answer, so the reported
    error measures the lift, not training. A field whose exact solution vanishes at
    every sample (a zero lift of a zero solution) is not counted.

    Returns ``()`` when the problem has no hard constraint or no pointwise reference (a
    numerical reference on the host, `pinnkit.physics.host.HostFunction`, is never a
    lift). ``problem``: a `pinnkit.Problem`."""
    import jax

    from .host import HostFunction

    hc, ref = problem.hard_constraint, problem.reference
    if hc is None or ref is None or isinstance(ref, HostFunction):
        return ()
    dtype = jnp.asarray(0.0).dtype
    pts = problem.domain.sample(jax.random.key(1), n, "interior", dtype)
    zero = jnp.zeros((len(problem.out_names),), dtype)
    lift = jax.vmap(lambda x: hc(x, zero))(pts)  # y = g + phi * 0
    exact = jax.vmap(ref)(pts)
    tol = 1e-5 if dtype == jnp.float32 else 1e-10
    out = []
    for k, name in enumerate(problem.out_names):
        scale = float(jnp.max(jnp.abs(exact[:, k])))
        if scale > 0 and float(jnp.max(jnp.abs(lift[:, k] - exact[:, k]))) <= tol * max(1.0, scale):
            out.append(name)
    return tuple(out)
