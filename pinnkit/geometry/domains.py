"""Geometry: where a problem lives, its named boundaries, and how to sample them.

Every piece of a domain (its interior, one named boundary, the union of boundaries, the
initial slice of a space-time domain) is the image of the unit cube $[0, 1)^d$, with
$d$ = the number of coordinates, under a piecewise-smooth map ``from_unit(u, piece)``.
Random uniform sampling and quasi-random (Sobol) sampling are then the same code:
draw points in the unit cube, map them. Boundary unions are sampled in proportion to
the measure (length/area) of each face.
"""


import abc
import math
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from equinox import AbstractVar
from jaxtyping import Array, Bool, Float

from .._types import Point, Points
from ._memo import memo
from .rejection import oversample, select

# Conventional face names, by dimension, for the (min, max) end of each coordinate.
_FACE_ALIASES = {
    1: (("left", "right"),),
    2: (("left", "right"), ("bottom", "top")),
    3: (("left", "right"), ("front", "back"), ("bottom", "top")),
}


class AbstractDomain(eqx.Module):
    """A region of $\\mathbb{R}^d$ with named coordinates and named boundary pieces.

    Abstract methods only (its few concrete helpers are never overridden). How a domain is
    sampled is its type, one of two: `AbstractUnitCubeDomain` (every piece the image of
    the unit cube) or `AbstractRejectionDomain` (pieces kept from candidates); samplers
    ask the type, and both answer `unit_rows` and `points`.
    """

    coords: AbstractVar[tuple[str, ...]]

    @property
    def dim(self) -> int:
        return len(self.coords)

    @property
    def spatial_coords(self) -> tuple[str, ...]:
        """The coordinates a spatial operator (Laplacian, divergence) acts on: all but ``t``."""
        return tuple(c for c in self.coords if c != "t")

    def axis(self, name: str) -> int:
        """Index of coordinate ``name`` in a point."""
        try:
            return self.coords.index(name)
        except ValueError:
            raise ValueError(
                f"unknown coordinate {name!r}: this domain's coordinates are {self.coords}"
            ) from None

    @abc.abstractmethod
    def pieces(self) -> tuple[str, ...]:
        """Names of the samplable pieces: ``"interior"`` first, then the boundaries."""

    @abc.abstractmethod
    def normal(self, x: Point, piece: str) -> Point:
        """Outward unit normal at a point ``x`` of boundary ``piece``."""

    @abc.abstractmethod
    def contains(self, x: Point) -> Bool[Array, ""]:
        """Whether ``x`` lies in the closed domain."""

    @abc.abstractmethod
    def bounds(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``(lower, upper)``: the bounding box, used for input normalisation and grids."""

    @abc.abstractmethod
    def unit_rows(self, n: int, piece: str) -> int:
        """How many unit-cube rows `points` needs for ``n`` points of ``piece``."""

    @abc.abstractmethod
    def points(self, u: Float[Array, "m d"], piece: str, n: int) -> Points:
        """``n`` points of ``piece`` from ``unit_rows(n, piece)`` unit-cube rows ``u``
        (fixed shapes: usable inside `jax.jit` and `shard_map`)."""

    @abc.abstractmethod
    def inside(self, points) -> np.ndarray | None:
        """Which of ``points`` (numpy ``(n, dim)``, e.g. an evaluation grid over the bounding
        box) lie in the domain; None when the domain fills its bounding box."""

    @abc.abstractmethod
    def grid(self, resolution: int | Sequence[int]) -> tuple[Points, tuple[int, ...]]:
        """Evaluation points: ``(points, shape)``, points of shape ``(prod(shape), dim)``
        (numpy, float64), so that ``values.reshape(shape)`` is a field (`tensor_grid` for
        most domains)."""

    @abc.abstractmethod
    def grid_size(self, resolution: int) -> int:
        """Points of ``grid(resolution)`` without building it (the memory plan asks)."""

    def check_piece(self, piece: str) -> None:
        # a set built once per domain: a polygon has a piece per side, asked once each
        if piece not in memo(self, "piece set", lambda: frozenset(self.pieces())):
            from ..errors import did_you_mean, name_list

            raise ValueError(
                f"unknown domain piece {piece!r}:{did_you_mean(piece, self.pieces())} This "
                f"{type(self).__name__} has {name_list(self.pieces())}"
            )

    def sample(self, key, n: int, piece: str = "interior", dtype=jnp.float32) -> Points:
        """``n`` points drawn uniformly (by measure) on ``piece``. Shape ``(n, dim)``."""
        self.check_piece(piece)
        u = jax.random.uniform(key, (self.unit_rows(n, piece), self.dim), dtype=dtype)
        return self.points(u, piece, n)


class AbstractUnitCubeDomain(AbstractDomain):
    """A domain each of whose pieces is the image of the unit cube $[0, 1)^d$ under
    ``from_unit`` (boxes, the sphere, the $d$-ball): uniform and Sobol points are mapped
    unit-cube points, one row per point."""

    @abc.abstractmethod
    def from_unit(self, u: Float[Array, "n d"], piece: str) -> Points:
        """Maps unit-cube points ``u`` (shape ``(n, dim)``) onto ``piece``."""

    def unit_rows(self, n: int, piece: str) -> int:
        return n

    def points(self, u: Float[Array, "m d"], piece: str, n: int) -> Points:
        return self.from_unit(u, piece)


class AbstractRejectionDomain(AbstractDomain):
    """A domain sampled by rejection (`pinnkit.geometry.rejection`): ``candidates`` maps
    unit-cube rows into a simpler set around a piece and says which lie on it; a piece
    keeps the first ``n`` of enough candidates. A piece whose `acceptance` is 1 (nothing
    rejected) takes one row per point, as an image of the unit cube would."""

    @abc.abstractmethod
    def acceptance(self, piece: str) -> float:
        """Expected fraction of `candidates` that lie on ``piece`` (1: no rejection)."""

    @abc.abstractmethod
    def candidates(self, u: Float[Array, "m d"], piece: str) -> tuple[Points, Bool[Array, " m"]]:
        """Candidate points from unit-cube rows ``u`` and whether each lies on ``piece``."""

    def unit_rows(self, n: int, piece: str) -> int:
        """``n`` without rejection, else enough that a shortfall has probability below 1e-9."""
        p = self.acceptance(piece)
        return n if p >= 1.0 else oversample(n, p)

    def points(self, u: Float[Array, "m d"], piece: str, n: int) -> Points:
        if self.acceptance(piece) >= 1.0:
            return self.candidates(u, piece)[0]
        x, keep = self.candidates(u, piece)
        return select(x, keep, n)


def tensor_grid(bounds, resolution: int | Sequence[int]) -> tuple[Points, tuple[int, ...]]:
    """A tensor grid over the box ``bounds = (lower, upper)``, ``indexing="ij"``: ``(points,
    shape)``, points of shape ``(prod(shape), dim)`` (numpy, float64)."""
    lo, hi = bounds
    res = [resolution] * len(lo) if isinstance(resolution, int) else list(resolution)
    axes = [np.linspace(a, b, r) for a, b, r in zip(lo, hi, res, strict=True)]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=-1), tuple(res)


class Box(AbstractUnitCubeDomain):
    """The axis-aligned box $\\prod_i [\\text{lower}_i, \\text{upper}_i]$ in 1–3 D (any D works
    with generic face names).

    Boundary names: ``"<c>_min"`` / ``"<c>_max"`` for every coordinate ``c``; in 1-D also
    ``left, right``; in 2-D ``left, right, bottom, top`` (x then y); in 3-D
    ``left, right, front, back, bottom, top``; and ``"boundary"``, the union of all faces.

    **Arguments:**
    - `lower`, `upper`: the corners (floats, one per coordinate), ``lower < upper``.
    - `coords`: coordinate names; default ``("x", "y", "z")[:dim]``.
    """

    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, lower: Sequence[float], upper: Sequence[float], coords=None):
        self.lower = tuple(float(v) for v in lower)
        self.upper = tuple(float(v) for v in upper)
        if coords is None:
            names = ("x", "y", "z") if len(self.lower) <= 3 else tuple(
                f"x{i}" for i in range(len(self.lower))
            )
            coords = names[: len(self.lower)]
        self.coords = tuple(coords)

    def __check_init__(self):
        if not (len(self.lower) == len(self.upper) == len(self.coords)) or not self.lower:
            raise ValueError(
                f"Box needs one lower bound, one upper bound and one name per coordinate: "
                f"lower={self.lower}, upper={self.upper}, coords={self.coords}"
            )
        for c, a, b in zip(self.coords, self.lower, self.upper, strict=True):
            if not (math.isfinite(a) and math.isfinite(b) and a < b):
                raise ValueError(
                    f"Box coordinate {c!r} needs finite lower < upper: actual=({a}, {b})"
                )
        if len(set(self.coords)) != len(self.coords):
            raise ValueError(f"Box coordinate names must be distinct: {self.coords}")

    # faces ---------------------------------------------------------------------------
    def faces(self) -> dict[str, tuple[int, int]]:
        """Map face name -> ``(axis, side)``, side 0 = lower end, 1 = upper end."""
        out = {}
        aliases = _FACE_ALIASES.get(self.dim)
        for i, c in enumerate(self.coords):
            out[f"{c}_min"] = (i, 0)
            out[f"{c}_max"] = (i, 1)
            if aliases:
                out[aliases[i][0]] = (i, 0)
                out[aliases[i][1]] = (i, 1)
        return out

    def pieces(self) -> tuple[str, ...]:
        return ("interior", "boundary", *self.faces())

    def bounds(self):
        return self.lower, self.upper

    def _face_measure(self, axis: int) -> float:
        return math.prod(
            b - a for j, (a, b) in enumerate(zip(self.lower, self.upper, strict=True)) if j != axis
        )

    def from_unit(self, u, piece):
        self.check_piece(piece)
        # (1, d) rows: explicit broadcasting against the (n, d) unit points.
        lo = jnp.asarray(self.lower, u.dtype)[None, :]
        hi = jnp.asarray(self.upper, u.dtype)[None, :]
        if piece == "interior":
            return lo + u * (hi - lo)
        if piece == "boundary":
            return self._union_from_unit(u, lo, hi)
        axis, side = self.faces()[piece]
        x = lo + u * (hi - lo)
        return x.at[:, axis].set(hi[0, axis] if side else lo[0, axis])

    def _union_from_unit(self, u, lo, hi):
        # Face chosen by u[:, 0] in proportion to its measure; the chosen face's own fixed
        # coordinate then frees u's column `axis` (reused, rescaled, for the position
        # along the first free coordinate when axis != 0).
        d = self.dim
        measures = [self._face_measure(i) for i in range(d) for _ in (0, 1)]
        total = sum(measures)
        edges = jnp.asarray([sum(measures[: k + 1]) / total for k in range(2 * d)], u.dtype)
        face = jnp.minimum(jnp.searchsorted(edges, u[:, 0], side="right"), 2 * d - 1)
        starts = jnp.concatenate([jnp.zeros((1,), u.dtype), edges[:-1]])
        widths = edges - starts
        s = (u[:, 0] - starts[face]) / widths[face]  # uniform on [0,1) again
        s = jnp.clip(s, 0.0, 1.0)
        axis = face // 2
        side = face % 2
        v = u.at[:, 0].set(s)
        # Move the recycled coordinate s into the fixed axis's slot's place: columns are
        # permuted so that column 0 feeds coordinate `axis` (which is then overwritten).
        cols = jnp.arange(d)
        src = jnp.where(cols[None, :] == axis[:, None], 0, cols[None, :])
        src = jnp.where(cols[None, :] == 0, axis[:, None], src)
        v = jnp.take_along_axis(v, src, axis=1)
        x = lo + v * (hi - lo)
        fixed = jnp.where(side == 1, hi[0, axis], lo[0, axis])
        return jnp.where(cols[None, :] == axis[:, None], fixed[:, None], x)

    def normal(self, x, piece):
        self.check_piece(piece)
        if piece == "interior":
            raise ValueError("normal() needs a boundary piece, not 'interior'")
        lo = jnp.asarray(self.lower, x.dtype)
        hi = jnp.asarray(self.upper, x.dtype)
        if piece == "boundary":
            # The face the point is on: the smallest distance to a face (corners: the
            # first axis wins, a measure-zero set).
            dist = jnp.stack([x - lo, hi - x], axis=-1).ravel()  # (2d,) ordered axis-major
            k = jnp.argmin(jnp.abs(dist))
            axis, side = k // 2, k % 2
        else:
            axis, side = self.faces()[piece]
        sign = jnp.where(side == 1, 1.0, -1.0).astype(x.dtype)
        return jnp.zeros_like(x).at[axis].set(sign)

    def contains(self, x):
        lo = jnp.asarray(self.lower, x.dtype)
        hi = jnp.asarray(self.upper, x.dtype)
        return jnp.all((x >= lo) & (x <= hi))

    def inside(self, points):
        return None

    def grid(self, resolution):
        return tensor_grid(self.bounds(), resolution)

    def grid_size(self, resolution):
        return resolution**self.dim


def Interval(lower: float, upper: float, coord: str = "x") -> Box:
    """The 1-D box ``[lower, upper]`` with boundaries ``left`` and ``right``."""
    return Box((lower,), (upper,), (coord,))


class SpaceTime(AbstractRejectionDomain):
    """The cylinder $[t_0, t_1] \\times \\Omega$ for a spatial domain $\\Omega$.

    Coordinates: ``("t", *space.coords)``. Pieces: ``"interior"``, ``"initial"`` (the slice
    $t = t_0$, sampled over $\\Omega$), and every boundary of ``space`` (sampled over all
    $t$), including its ``"boundary"`` union. ``space`` is a `Box` or any shape of
    `pinnkit.geometry`, sampled uniformly in $t$ and as ``space`` is in space: by rejection
    over a shape; over an image of the unit cube (a box) nothing is rejected (acceptance 1),
    so its points are the image of the unit cube as before.
    """

    space: AbstractDomain
    t0: float = eqx.field(static=True)
    t1: float = eqx.field(static=True)

    def __init__(self, space: AbstractDomain, t0: float, t1: float):
        self.space = space
        self.t0 = float(t0)
        self.t1 = float(t1)

    def __check_init__(self):
        if "t" in self.space.coords:
            raise ValueError(f"the spatial domain already has a 't' coordinate: {self.space.coords}")
        if not (math.isfinite(self.t0) and math.isfinite(self.t1) and self.t0 < self.t1):
            raise ValueError(f"SpaceTime needs finite t0 < t1: actual=({self.t0}, {self.t1})")

    @property
    def coords(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("t", *self.space.coords)

    def pieces(self):
        return ("interior", "initial", *self.space.pieces()[1:])

    def bounds(self):
        lo, hi = self.space.bounds()
        return (self.t0, *lo), (self.t1, *hi)

    def normal(self, x, piece):
        self.check_piece(piece)
        if piece == "initial":
            return jnp.zeros_like(x).at[0].set(-1.0)
        return jnp.concatenate([jnp.zeros((1,), x.dtype), self.space.normal(x[1:], piece)])

    def contains(self, x):
        return (x[0] >= self.t0) & (x[0] <= self.t1) & self.space.contains(x[1:])

    def _space_piece(self, piece: str) -> str:
        return "interior" if piece == "initial" else piece

    def acceptance(self, piece):
        self.check_piece(piece)
        if isinstance(self.space, AbstractRejectionDomain):
            return self.space.acceptance(self._space_piece(piece))
        return 1.0

    def candidates(self, u, piece):
        self.check_piece(piece)
        t = self.t0 + u[:, :1] * (self.t1 - self.t0)
        if piece == "initial":
            t = jnp.full_like(t, self.t0)
        v, sp = u[:, 1:], self._space_piece(piece)
        if isinstance(self.space, AbstractRejectionDomain):
            x, keep = self.space.candidates(v, sp)
        else:  # an image of the unit cube: every candidate is a point
            x, keep = self.space.from_unit(v, sp), jnp.ones((u.shape[0],), bool)
        return jnp.concatenate([t, x], axis=1), keep

    def inside(self, points):
        return self.space.inside(points[:, 1:])

    def grid(self, resolution):
        return tensor_grid(self.bounds(), resolution)

    def grid_size(self, resolution):
        return resolution**self.dim
