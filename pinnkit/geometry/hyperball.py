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

**Weighted interior points** (``sample_power`` $p > 0$): the interior density is
$\\propto (1 - \\|x - c\\|^2/R^2)^p$ instead of uniform. Then $t = r^2$ has the density
$\\propto t^{d/2 - 1}(1 - t)^p$, the Beta$(d/2, p + 1)$ law, so the same uniform
$q = F_{\\chi^2_d}(\\|g\\|^2)$ gives $r = \\sqrt{I^{-1}_{d/2,\\,p+1}(q)}$ ($I$ the
regularised incomplete beta function, a finite sum for integer $p$, inverted by bisection:
`beta_quantile`);
$p = 0$ is the uniform case above. Why: with a hard constraint $u = \\varphi N$,
$\\varphi = 1 - \\|x\\|^2$, the error of $u$ is $\\varphi$ times the error of $N$, so the
mean-square error of $u$ over the ball weights points by $\\varphi^2$ ($p = 2$). In high
dimension uniform points crowd into the shell $1 - r = O(1/d)$ where $\\varphi \\approx 0$
and the error of $u$ hardly shows; $p = 2$ moves them to where it does ($E[1 - r^2]$ is
$1/(d/2 + 1)$ uniform, $3/(d/2 + 3)$ with $p = 2$).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammainc, ndtri
from jaxtyping import Array, Float

from .._types import Point, Points
from .domains import AbstractUnitCubeDomain


class HyperBall(AbstractUnitCubeDomain):
    """The closed ball of ``radius`` about ``center`` in $d$ dimensions.

    Pieces: ``"interior"`` and ``"boundary"`` (the sphere $\\|x - c\\| = R$).

    **Arguments:**
    - `dim`: the dimension $d \\ge 1$.
    - `radius`: $R > 0$ (default 1).
    - `center`: $c$, ``dim`` floats (default the origin).
    - `coords`: coordinate names; default ``x0, x1, ...`` (``x, y, z`` up to 3-D).
    - `sample_power`: an integer $p \\ge 0$, interior points drawn with density
      $\\propto (1 - \\|x - c\\|^2/R^2)^p$ (module docstring); default 0, uniform.
    """

    radius: float = eqx.field(static=True)
    center: tuple[float, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)
    sample_power: float = eqx.field(static=True)

    def __init__(self, dim: int, radius: float = 1.0, center: Sequence[float] | None = None, coords=None,
                 sample_power: float = 0.0):
        if int(dim) != dim or dim < 1:
            raise ValueError(f"HyperBall needs an integer dimension >= 1: actual={dim!r}")
        dim = int(dim)
        self.radius = float(radius)
        self.center = (0.0,) * dim if center is None else tuple(float(c) for c in center)
        if coords is None:
            coords = ("x", "y", "z")[:dim] if dim <= 3 else tuple(f"x{i}" for i in range(dim))
        self.coords = tuple(coords)
        self.sample_power = float(sample_power)

    def __check_init__(self):
        if not (math.isfinite(self.sample_power) and self.sample_power >= 0
                and self.sample_power == int(self.sample_power)):
            raise ValueError(f"HyperBall sample_power must be an integer >= 0 (0: uniform points, 2: "
                             f"density ∝ (1 - |x|²)², where a hard constraint's error shows): "
                             f"actual={self.sample_power}")
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
        q = gammainc(0.5 * d, 0.5 * s)  # uniform on [0, 1), independent of the direction
        if self.sample_power == 0.0:
            r = q ** (1.0 / d)
        else:
            r = jnp.sqrt(beta_quantile(0.5 * d, int(self.sample_power) + 1, q))
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

    def inside(self, points):
        return None

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


def beta_quantile(a: float, b: int, q: Float[Array, "*shape"]) -> Float[Array, "*shape"]:
    """$t$ with $I_t(a, b) = q$: the Beta$(a, b)$ quantile for an integer $b \\ge 1$, by
    bisection on $[0, 1]$ ($k$ halvings, $k$ the dtype's mantissa bits + 2) of the finite sum
    $$I_t(a, b) = t^a \\sum_{j=0}^{b-1} \\frac{\\Gamma(a + j)}{\\Gamma(a)\\, j!}\\, (1 - t)^j.$$
    Not `jax.scipy.special.betainc`: its internal while loop does not trace inside
    `jax.shard_map` (jax 0.10), where the training step draws its points. Bisection, not
    Newton: the density vanishes or is unbounded at the ends."""
    if int(b) != b or b < 1:
        raise ValueError(f"beta_quantile needs an integer b >= 1: actual={b!r}")
    coef, coefs = 1.0, []
    for j in range(int(b)):  # Γ(a+j)/(Γ(a) j!) by its recurrence
        coefs.append(coef)
        coef *= (a + j) / (j + 1)

    def cdf(t):
        w = 1.0 - t
        return t**a * sum(c * w**j for j, c in enumerate(coefs))

    def halve(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        below = cdf(mid) < q
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    steps = jnp.finfo(q.dtype).nmant + 2
    lo, hi = jax.lax.fori_loop(0, steps, halve, (jnp.zeros_like(q), jnp.ones_like(q)))
    return 0.5 * (lo + hi)
