"""The round primitive in any dimension: the ball $|x - c| \\le r$ (`Disk` in 2-D, `Ball`
in 3-D) and its boundary, the sphere $|x - c| = r$ (`RoundSurface`: a circle or a
2-sphere). One class of methods (`AbstractRound`); the two names differ only in their
dimension and default boundary name (``circle``, ``sphere``).
"""

import math
from collections.abc import Mapping

import equinox as eqx
import jax.numpy as jnp
from equinox import AbstractVar

from .base import AbstractAtom, AbstractShape, Frame, Part, check_point, check_positive, relabel, safe_norm

_SURFACE = {2: "circle", 3: "sphere"}


class RoundSurface(AbstractAtom):
    """The sphere of ``radius`` about ``center`` in ``len(center)`` = 2 or 3 dimensions,
    sampled uniformly in arc length (the angle) or area (Archimedes' map: uniform height
    and longitude)."""

    stack_kind = "round"  # stacked by `pinnkit.geometry.batched` (fields center, radius)
    center: tuple[float, ...] = eqx.field(static=True)
    radius: float = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def measure(self):
        return 2 * math.pi * self.radius if len(self.center) == 2 else 4 * math.pi * self.radius**2

    def from_unit(self, u):
        lon = 2 * jnp.pi * u[:, 0]
        if len(self.center) == 2:
            unit = jnp.stack([jnp.cos(lon), jnp.sin(lon)], axis=1)
        else:
            z = 2 * u[:, 1] - 1
            rho = jnp.sqrt(jnp.clip(1 - z * z, 0.0, 1.0))
            unit = jnp.stack([rho * jnp.cos(lon), rho * jnp.sin(lon), z], axis=1)
        return jnp.asarray(self.center, u.dtype)[None, :] + self.radius * unit

    def normal(self, y):
        r = y - jnp.asarray(self.center, y.dtype)
        return r / safe_norm(r)

    def distance(self, y):
        return jnp.abs(safe_norm(y - jnp.asarray(self.center, y.dtype)) - self.radius)

    def level(self, y):
        r = y - jnp.asarray(self.center, y.dtype)
        return (self.radius**2 - jnp.dot(r, r)) / (2 * self.radius), None


class AbstractRound(AbstractShape):
    """The ball $|x - c| \\le r$ in $d$ = ``len(center)`` dimensions; exact signed
    distance $|x - c| - r$, measure $\\pi^{d/2} r^d / \\Gamma(d/2 + 1)$."""

    stack_kind = "round"  # stacked by `pinnkit.geometry.batched` (fields center, radius)
    center: AbstractVar[tuple[float, ...]]
    radius: AbstractVar[float]
    labels: AbstractVar[tuple[str, ...]]

    def sdf(self, x):
        return safe_norm(x - jnp.asarray(self.center, x.dtype)) - self.radius

    def parts(self):
        d = len(self.center)
        atom = RoundSurface(self.center, self.radius, _SURFACE[d])
        return (Part(atom, self.labels[0], Frame.identity(d)),)

    def exact_outside(self):
        return True

    def bbox(self):
        c, r = self.center, self.radius
        return tuple(v - r for v in c), tuple(v + r for v in c)

    def measure(self):
        d = len(self.center)
        return math.pi ** (d / 2) * self.radius**d / math.gamma(d / 2 + 1)


def _round(dim: int, what: str, center, radius, name, names):
    return (check_point(center, dim, f"{what} center"), check_positive(radius, f"{what} radius"),
            relabel((_SURFACE[dim],), name, names, what))


class Disk(AbstractRound):
    """The disk $|x - c| \\le r$ in 2-D. Boundary name ``circle``."""

    center: tuple[float, ...] = eqx.field(static=True)
    radius: float = eqx.field(static=True)
    labels: tuple[str, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, center, radius, name=None, names: Mapping | None = None, coords=("x", "y")):
        self.center, self.radius, self.labels = _round(2, "disk", center, radius, name, names)
        self.coords = tuple(coords)


class Ball(AbstractRound):
    """The ball $|x - c| \\le r$ in 3-D. Boundary name ``sphere``."""

    center: tuple[float, ...] = eqx.field(static=True)
    radius: float = eqx.field(static=True)
    labels: tuple[str, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, center, radius, name=None, names: Mapping | None = None, coords=("x", "y", "z")):
        self.center, self.radius, self.labels = _round(3, "ball", center, radius, name, names)
        self.coords = tuple(coords)
