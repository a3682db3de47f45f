r"""A floor on a periodic solution's oscillation over a region: the term that keeps a
limit-cycle problem (the unknown one period in the phase $s \in [0, 1)$) off its steady
solutions.

A steady flow solves the phase equations $f\,\partial_s\mathbf u + N(\mathbf u) = 0$ for
every frequency $f$, so a loss made of residuals alone has the steady flows among its
zeros. A condition at one point (`pinnkit.problems.dfg2`'s ``anchor``) removes them only
locally: a network can meet it with an oscillation confined to the point's neighbourhood,
whose residual costs the mean-square loss little (measured on DFG 2D-2: 106 000 Adam
steps kept the steady wake, docs/benchmarks.md). `OscillationFloor` asks for the
oscillation at *every* point of a region,

$$r(\mathbf x) = \max\!\Big(0,\ a - \sqrt{\operatorname{Var}_s\,w(s, \mathbf x) + \epsilon^2}\Big),
\qquad \operatorname{Var}_s w = \frac1K\sum_{k} \big(w(s_k, \mathbf x) - \bar w(\mathbf x)\big)^2,$$

$w$ a field (``fields``, e.g. the cross-flow velocity $v$), $s_k = \theta + k/K$ equally
spaced phases (the row's own offset $\theta$): the trapezoidal rule, exact for the
variance of a trigonometric polynomial of degree $< K/2$. $r = 0$ wherever the phase
standard deviation is at least $a$, so any limit cycle that oscillates that much over the
whole region is a zero of the loss, and a steady flow costs $a$ at every point. The
standard deviation, not the variance: the variance's gradient vanishes with the
oscillation (a steady network would be a stationary point of the term: measured, the
variance form's loss stayed at its floor for 1 500 Adam steps on DFG 2D-2), the
deviation's does not, so whatever small oscillation there is gets amplified, as an
instability would; $\epsilon = 10^{-3}a$ keeps the square root's gradient finite. Choose
the region where the solution oscillates everywhere (for DFG 2D-2 the finite-element
field's standard deviation of $v$ over a period is $\ge 0.23$ m/s on
$[0.4, 1.2] \times [0.1, 0.3]$) and $a$ below that.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .terms import AbstractRowTerm

EPS = 1e-3
r"""$\epsilon / a$: the smoothing of the standard deviation at zero oscillation."""


class OscillationFloor(AbstractRowTerm):
    r"""The oscillation floor (module docstring) at fixed points of a region.

    **Arguments:**
    - `points`: ``(n, d)`` rows ``[x_1..x_d, theta]``: spatial coordinates in the domain's
      order without the phase, and the offset $\theta \in [0, 1/K)$ of the row's phases.
    - `floor`: $a > 0$, the least phase standard deviation asked of each field (its units).
    - `fields`: the oscillating fields; one residual entry each.
    - `phases`: $K \ge 4$, phases per row.
    - `phase_axis`: the phase's index among the network's inputs (0: ``t`` first).
    The rows are used in full every step (``where = "data"``, sharded; ``n`` must be
    divisible by the number of devices), like `CircleFlux`'s.
    """

    points: np.ndarray = eqx.field(converter=np.asarray)
    floor: float = eqx.field(static=True, default=0.1)
    fields: tuple[str, ...] = eqx.field(static=True, default=("v",))
    phases: int = eqx.field(static=True, default=8)
    phase_axis: int = eqx.field(static=True, default=0)
    where: str = eqx.field(static=True, default="data")

    def __check_init__(self):
        p = self.points
        if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] < 2 or not np.all(np.isfinite(p)):
            raise ValueError("OscillationFloor points must be a finite, non-empty (n, d + 1) array "
                             f"of [x_1..x_d, theta]: actual shape={p.shape}")
        if not (math.isfinite(self.floor) and self.floor > 0) or self.phases < 4 or not self.fields:
            raise ValueError(f"OscillationFloor needs floor > 0, phases >= 4 and a field: actual "
                             f"floor={self.floor}, phases={self.phases}, fields={self.fields}")

    def rows(self) -> np.ndarray:
        """The term's batch: the points with their phase offsets, ``(n, d + 1)``."""
        return self.points

    def network_residual(self, net: Callable, layout, row: Array, coeffs) -> Float[Array, " k"]:
        """The shortfall of each field's phase standard deviation at ``row`` (module docstring)."""
        s = row[-1] + jnp.arange(self.phases, dtype=row.dtype) / self.phases
        x = jnp.broadcast_to(row[:-1], (self.phases, row.shape[0] - 1))
        y = jax.vmap(net)(jnp.insert(x, self.phase_axis, s, axis=1))
        w = y[:, jnp.array([layout.out(k) for k in self.fields])]
        var = jnp.mean((w - jnp.mean(w, axis=0, keepdims=True)) ** 2, axis=0)
        return jnp.maximum(self.floor - jnp.sqrt(var + (EPS * self.floor) ** 2), 0.0)


def box_points(box, n: int, phases: int, seed: int = 0, name: str = "box") -> Float[np.ndarray, "n d1"]:
    """``n`` scrambled-Halton points of the box ``[[lo_1, hi_1], ...]`` with a phase offset
    in $[0, 1/K)$ each: `OscillationFloor`'s rows. ``name``: the box's name in errors."""
    from scipy.stats import qmc

    box = np.asarray(box, np.float64)
    if box.ndim != 2 or box.shape[1] != 2 or not np.all(box[:, 0] < box[:, 1]):
        raise ValueError(f"{name}={box.tolist()} must be [[lo, hi], ...] (one pair per spatial "
                         "coordinate) with lo < hi, e.g. [[0.4, 1.2], [0.1, 0.3]]")
    u = qmc.Halton(box.shape[0] + 1, scramble=True, seed=seed).random(n)
    return np.concatenate([box[:, 0] + u[:, :-1] * (box[:, 1] - box[:, 0]), u[:, -1:] / phases], axis=1)


def oscillation_terms(floor: float, box, points: int, phases: int = 8) -> dict[str, OscillationFloor]:
    """A limit-cycle problem's optional term: ``{}`` for ``floor`` 0, else ``{"oscillation":
    OscillationFloor}`` at ``points`` points of ``box``. Errors name the problem parameters
    ``oscillation``, ``oscillation_box`` and ``oscillation_points``."""
    if isinstance(floor, bool) or not isinstance(floor, int | float) \
            or not (math.isfinite(floor) and floor >= 0):
        raise ValueError(f"oscillation={floor!r} must be a number >= 0: the least phase standard "
                         "deviation of v over oscillation_box (m/s); 0 leaves the term out")
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise ValueError(f"oscillation_points={points!r} must be an integer >= 1, e.g. 256")
    if not floor:
        return {}
    return {"oscillation": OscillationFloor(box_points(box, points, phases, name="oscillation_box"),
                                            float(floor), phases=phases)}
