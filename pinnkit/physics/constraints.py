"""Hard constraints: output transforms that satisfy a condition exactly, whatever the
network outputs (a problem's ``hard_constraint``, used with ``network.hard_constraint:
true``). Every one is an `AbstractHardConstraint`; the final ones:

- `HardDirichlet` (here): boundary (and initial) values on a box, by a polynomial
  distance to its faces;
- `InitialValue` (here): initial values, which `InitialValue.restart` starts again at a
  later time (time marching, ``train.time_windows``);
- `pinnkit.geometry.distance.DistanceDirichlet`: Dirichlet data on any shape, by
  R-function distances (it lives with the distance functions, in geometry).

`AbstractHardConstraint` itself is defined in `pinnkit._constraint`, below physics and
geometry, so that geometry's constraint can subclass it; this module is its public home.

Time marching (`pinnkit.train.windows`) needs, at each window edge, the same constraint
with the previous window's state as its data; a transform declares that it can do so by
being an `AbstractTimeRestart`. Other hard constraints are exact in the first window and
imposed as a soft term after it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._constraint import AbstractHardConstraint as AbstractHardConstraint
from .._types import Point
from ..diffops import jets


class AbstractTimeRestart(AbstractHardConstraint):
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


class HardDirichlet(AbstractHardConstraint):
    """Exact Dirichlet values on a box: $y_i = g_i(x) + \\phi(x)\\, N_i(x)$ for the constrained
    outputs, with $\\phi(x) = \\prod_a \\frac{(x_a - l_a)(u_a - x_a)}{((u_a - l_a)/2)^2}$ over the
    constrained axes (zero on those faces, 1 at the centre).

    **Arguments:**
    - `lower`, `upper`: the box corners (all coordinates, in order).
    - `axes`: the coordinate indices whose faces carry the condition (e.g. all spatial).
    - `outputs`: output indices constrained.
    - `value`: optional ``g(x) -> (len(outputs),)``; default zero.
    - `t_axis`: for an initial condition $y(t_0, x) = g(x)$ pass the time axis here:
      $\\phi$ then also contains $(t - t_0)/(t_1 - t_0)$.
    """

    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)
    axes: tuple[int, ...] = eqx.field(static=True)
    outputs: tuple[int, ...] = eqx.field(static=True)
    value: Callable | None = eqx.field(static=True, default=None)
    t_axis: int | None = eqx.field(static=True, default=None)

    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        phi = jnp.ones((), x.dtype)
        for a in self.axes:
            lo, hi = self.lower[a], self.upper[a]
            phi = phi * (x[a] - lo) * (hi - x[a]) / ((hi - lo) / 2) ** 2
        if self.t_axis is not None:
            a = self.t_axis
            phi = phi * (x[a] - self.lower[a]) / (self.upper[a] - self.lower[a])
        idx = jnp.asarray(self.outputs)
        g = jnp.zeros((len(self.outputs),), x.dtype) if self.value is None else self.value(x)
        return y.at[idx].set(g + phi * y[idx])


@jets.taylor_rule(HardDirichlet)
def _hard_dirichlet_jet(
    hd: HardDirichlet, x_jet: jets.Jet, y_jet: jets.Jet, *, plan: jets.Plan, keep
) -> jets.Jet:
    # affine in y: hd(x, y) = A(x) + D(x) y with A = hd(x, 0) and D = d/dy hd(x, y) [1]
    # (= phi on the constrained outputs, 1 elsewhere). The x-only part goes through the
    # generic rule, which is cheap without y's rows; y enters by Leibniz's rule.
    def parts(x):
        zero = jnp.zeros_like(y_jet.value)
        a, d = jax.jvp(lambda y: hd(x, y), (zero,), (jnp.ones_like(zero),))
        return jnp.stack([a, d])

    ad = jets.generic(parts, (x_jet,), plan)
    def part(i: int) -> jets.Jet:
        value = ad.value[i]
        first = None if ad.first is None else ad.first[:, i]
        return jets.Jet(value, first, {k: r[i] for k, r in ad.rest.items()})

    a, d = part(0), part(1)
    return jets.add(a, jets.product(d, y_jet, plan))


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
