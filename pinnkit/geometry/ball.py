"""The ball $\\{x \\in \\mathbb{R}^d : \\|x - c\\| \\le R\\}$ in any dimension, sampled exactly.

Rejection sampling from the bounding box fails beyond a few dimensions (the ball fills a
fraction $\\pi^{d/2} / (\\Gamma(d/2 + 1)\\, 2^d)$ of its box: $2 \\cdot 10^{-70}$ at
$d = 100$), so `HyperBall.from_unit` maps the unit cube onto the ball directly, as every
domain does (`pinnkit.geometry.domains`): with $g = \\Phi^{-1}(u)$ componentwise (standard
normal), $g / \\|g\\|$ is uniform on the unit sphere and independent of
$\\|g\\|^2 \\sim \\chi^2_d$, so $F_{\\chi^2_d}(\\|g\\|^2)$ is uniform on $[0, 1)$ and
independent of the direction, and

$$x = c + R\\, F_{\\chi^2_d}(\\|g\\|^2)^{1/d}\\, \\frac{g}{\\|g\\|}$$

is uniform in the ball (the radius of a uniform point has $P(r \\le \\rho) = \\rho^d$):
Gaussian direction times $U^{1/d}$ radius, from $d$ unit-cube coordinates (so Sobol
points work too). The boundary (``"boundary"``, the sphere) is $c + R\\, g / \\|g\\|$.
$F_{\\chi^2_d}(s) = P(d/2, s/2)$, the regularised lower incomplete gamma function.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammainc, ndtri

from .._types import Point, Points
from .domains import AbstractDomain


class HyperBall(AbstractDomain):
    """The closed ball of ``radius`` about ``center`` in $d$ dimensions.

    Pieces: ``"interior"`` and ``"boundary"`` (the sphere $\\|x - c\\| = R$).

    **Arguments:**
    - `dim`: the dimension $d \\ge 1$.
    - `radius`: $R > 0$ (default 1).
    - `center`: $c$, ``dim`` floats (default the origin).
    - `coords`: coordinate names; default ``x0, x1, ...`` (``x, y, z`` up to 3-D).
    """

    radius: float = eqx.field(static=True)
    center: tuple[float, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, dim: int, radius: float = 1.0, center: Sequence[float] | None = None, coords=None):
        if int(dim) != dim or dim < 1:
            raise ValueError(f"HyperBall needs an integer dimension >= 1: actual={dim!r}")
        dim = int(dim)
        self.radius = float(radius)
        self.center = (0.0,) * dim if center is None else tuple(float(c) for c in center)
        if coords is None:
            coords = ("x", "y", "z")[:dim] if dim <= 3 else tuple(f"x{i}" for i in range(dim))
        self.coords = tuple(coords)

    def __check_init__(self):
        if not (math.isfinite(self.radius) and self.radius > 0):
            raise ValueError(f"HyperBall radius must be finite and > 0: actual={self.radius}")
        if len(self.center) != len(self.coords):
            raise ValueError(
                f"HyperBall needs one centre coordinate and one name per dimension: "
                f"center has {len(self.center)}, coords={len(self.coords)}"
            )
        if len(set(self.coords)) != len(self.coords):
            raise ValueError(f"HyperBall coordinate names must be distinct: {self.coords}")

    def pieces(self) -> tuple[str, ...]:
        return ("interior", "boundary")

    def bounds(self):
        r = self.radius
        return tuple(c - r for c in self.center), tuple(c + r for c in self.center)

    def from_unit(self, u, piece):
        self.check_piece(piece)
        d = self.dim
        # keep u off 0 and 1, where the normal quantile is infinite
        tiny = jnp.finfo(u.dtype).eps
        g = ndtri(jnp.clip(u, tiny, 1.0 - tiny))
        s = jnp.sum(g * g, axis=1, keepdims=True)
        direction = g / jnp.sqrt(s)
        c = jnp.asarray(self.center, u.dtype)[None, :]
        if piece == "boundary":
            return c + self.radius * direction
        r = gammainc(0.5 * d, 0.5 * s) ** (1.0 / d)
        return c + self.radius * r * direction

    def normal(self, x: Point, piece: str) -> Point:
        self.check_piece(piece)
        if piece == "interior":
            raise ValueError("normal() needs a boundary piece, not 'interior'")
        v = x - jnp.asarray(self.center, x.dtype)
        return v / jnp.sqrt(jnp.sum(v * v))

    def contains(self, x: Point):
        v = x - jnp.asarray(self.center, x.dtype)
        tol = 10 * jnp.finfo(x.dtype).eps
        return jnp.sum(v * v) <= (self.radius**2) * (1.0 + tol)

    def grid(self, resolution: int | Sequence[int]) -> tuple[Points, tuple[int, ...]]:
        """The evaluation set: ``resolution**2`` points uniform in the ball (numpy, float64,
        a fixed seed), shape ``(n,)``. Not a tensor grid: a grid over the bounding box has
        ``resolution**d`` points and lies mostly outside the ball in high dimension."""
        res = resolution if isinstance(resolution, int) else int(np.prod(resolution))
        n = res * res if isinstance(resolution, int) else res
        rng = np.random.default_rng(20241201)
        g = rng.standard_normal((n, self.dim))
        direction = g / np.linalg.norm(g, axis=1, keepdims=True)
        r = rng.uniform(size=(n, 1)) ** (1.0 / self.dim)
        return np.asarray(self.center)[None, :] + self.radius * r * direction, (n,)

    def grid_size(self, resolution: int) -> int:
        return resolution * resolution
