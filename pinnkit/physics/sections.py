r"""The volume flux through cross-sections of a 3-D flow as a loss term: `SectionFlux`.

A section is the disk of radius $R$ about a centre $\mathbf c$ perpendicular to a unit
normal $\mathbf n$. Its rule (`unit_disk_rule`, scaled by $R$) is Gauss–Legendre in the
radius with the area element $\rho\,d\rho$ times the trapezoidal rule in the angle: exact
for a profile polynomial in $r$ of degree $2n_r - 2$ times any angular mode below
$n_\theta$ (so for Poiseuille's parabola with any $n_r \ge 2$). A square section
(``shape="square"``, a square duct's cross-section) is the square of half-side $R$ with
sides along the two in-plane vectors of `section_frame`; its rule (`unit_square_rule`) is
the tensor Gauss–Legendre rule, exact for polynomials of degree $2n_r - 1$ in each
in-plane coordinate.

Why a term and not only a check: with no-slip imposed as a loss term, a systematic
outward normal velocity of a few thousandths of the peak costs the wall's mean square
almost nothing, yet over a long wall it drains a large part of the flow (the bent pipe
of docs/benchmarks.md lost 37 % of its flux that way, 94 % of it through the wall and 6 %
through a continuity sink). The flux through a section is an integral, so a small leak
everywhere upstream shows in it at full size; users of a duct flow know the flux that
enters (and, for branches, how it splits).
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


def unit_disk_rule(n_r: int = 8, n_theta: int = 32):
    """Nodes ``(n_r * n_theta, 2)`` and weights (summing to $\\pi$) of the unit disk's
    tensor rule (module docstring): Gauss–Legendre in $\\rho \\in (0, 1)$ with the area
    element $\\rho\\,d\\rho$, the trapezoidal rule in the angle."""
    if n_r < 1 or n_theta < 3:
        raise ValueError(f"a disk rule needs n_r >= 1 and n_theta >= 3: actual n_r={n_r}, n_theta={n_theta}")
    x, w = np.polynomial.legendre.leggauss(n_r)
    rho, wr = 0.5 * (x + 1), 0.5 * w
    th = 2 * math.pi * np.arange(n_theta) / n_theta
    rr, tt = np.meshgrid(rho, th, indexing="ij")
    nodes = np.stack([(rr * np.cos(tt)).ravel(), (rr * np.sin(tt)).ravel()], axis=1)
    weights = (wr[:, None] * rr * (2 * math.pi / n_theta)).ravel()
    return nodes, weights


def unit_square_rule(n: int = 8):
    """Nodes ``(n * n, 2)`` and weights (summing to 4) of the tensor Gauss–Legendre rule on
    $[-1, 1]^2$ (module docstring)."""
    if n < 1:
        raise ValueError(f"a square rule needs n >= 1 nodes per side: actual n={n}")
    x, w = np.polynomial.legendre.leggauss(n)
    xx, yy = np.meshgrid(x, x, indexing="ij")
    return np.stack([xx.ravel(), yy.ravel()], axis=1), np.outer(w, w).ravel()


SHAPES = {"disk": (unit_disk_rule, math.pi),
          "square": (lambda n_r, n_theta: unit_square_rule(n_r), 4.0)}
"""Section shapes: the unit shape's rule ``(n_r, n_theta) -> (nodes, weights)`` and its area."""


def section_frame(normal) -> np.ndarray:
    """``(3, 3)`` rows: the unit normal and two unit vectors spanning its plane."""
    n = np.asarray(normal, np.float64)
    n = n / np.linalg.norm(n)
    e1 = np.cross(n, np.eye(3)[np.argmin(np.abs(n))])  # any unit vector perpendicular to n
    e1 /= np.linalg.norm(e1)
    return np.stack([n, e1, np.cross(n, e1)])


class SectionFlux(AbstractRowTerm):
    r"""The flux through each cross-section of `sections` against its target:

    $$r = \frac{1}{|S|}\Big(\int_S \mathbf u\cdot\mathbf n\,dA - Q\Big),$$

    $S$ the disk $|\mathbf x - \mathbf c| < R$, $(\mathbf x - \mathbf c)\cdot\mathbf n = 0$
    (area $\pi R^2$; or the square of half-side $R$, area $4R^2$): the mean normal
    velocity's deviation over the section (a velocity, the scale of the boundary terms'
    residuals), from the network's *values* at the rule's nodes (module docstring). The
    sections must lie inside the flow: one that crosses a wall would count whatever the
    network extrapolates outside.

    **Arguments:**
    - `sections`: ``(n, 8)`` rows ``[c_x, c_y, c_z, n_x, n_y, n_z, R, Q]``: centre, normal
      (any length; the flux counts along it), radius and target flux.
    - `fields`: the velocity's three components, in coordinate order; default ``("u", "v", "w")``.
    - `n_r`, `n_theta`: the rule's nodes in the radius and the angle (a square: ``n_r``
      per side, ``n_theta`` unused).
    - `shape`: ``"disk"`` (default) or ``"square"`` (`SHAPES`).
    The rows are used in full every step (``where = "data"``, like `CircleFlux`'s).
    """

    sections: np.ndarray = eqx.field(converter=np.asarray)
    fields: tuple[str, ...] = eqx.field(static=True, default=("u", "v", "w"))
    n_r: int = eqx.field(static=True, default=8)
    n_theta: int = eqx.field(static=True, default=32)
    shape: str = eqx.field(static=True, default="disk")
    where: str = eqx.field(static=True, default="data")

    def __check_init__(self):
        s = self.sections
        if s.ndim != 2 or s.shape[0] == 0 or s.shape[1] != 8 or not np.all(np.isfinite(s)) \
                or np.any(s[:, 6] <= 0) or np.any(np.linalg.norm(s[:, 3:6], axis=1) == 0):
            raise ValueError("SectionFlux sections must be a finite, non-empty (n, 8) array of "
                             f"[c_x, c_y, c_z, n_x, n_y, n_z (non-zero), R > 0, Q]: actual shape={s.shape}")
        if len(self.fields) != 3 or self.n_r < 1 or self.n_theta < 3 or self.shape not in SHAPES:
            raise ValueError(f"SectionFlux needs three velocity fields, n_r >= 1, n_theta >= 3 and a shape "
                             f"of {sorted(SHAPES)}: actual fields={self.fields}, n_r={self.n_r}, "
                             f"n_theta={self.n_theta}, shape={self.shape!r}")

    def rows(self) -> np.ndarray:
        """The term's batch, ``(n, 14)``: centre, the frame of `section_frame` (normal and
        two in-plane unit vectors), radius, target."""
        s = np.asarray(self.sections, np.float64)
        frames = np.stack([section_frame(n).ravel() for n in s[:, 3:6]])
        return np.concatenate([s[:, :3], frames, s[:, 6:8]], axis=1)

    def network_residual(self, net: Callable, layout, row: Array, coeffs) -> Float[Array, "1"]:
        """The mean normal velocity's deviation over the section of ``row`` (class docstring), ``(1,)``."""
        rule, unit_area = SHAPES[self.shape]
        nodes, weights = rule(self.n_r, self.n_theta)
        nodes, weights = jnp.asarray(nodes, row.dtype), jnp.asarray(weights, row.dtype)
        n, e1, e2, radius, target = row[3:6], row[6:9], row[9:12], row[12], row[13]
        pts = row[None, :3] + radius * (nodes[:, :1] * e1[None] + nodes[:, 1:] * e2[None])
        y = jax.vmap(net)(pts)
        un = sum(y[:, layout.out(k)] * n[i] for i, k in enumerate(self.fields))
        area = unit_area * radius**2
        return jnp.atleast_1d((radius**2 * jnp.sum(weights * un) - target) / area)
