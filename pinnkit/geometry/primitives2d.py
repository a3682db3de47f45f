"""2-D primitives: rectangle, ellipse, polygon (and triangle), with their boundary atoms
(segments, the ellipse); the disk is in `pinnkit.geometry.round`.

Default boundary names: rectangle ``left, right, bottom, top``; ellipse
``ellipse``; polygon ``side0, side1, ...`` (edge ``i`` from vertex ``i`` to ``i + 1``).
``name`` gives the whole boundary one name, ``names`` renames some (``{left: inlet}``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .base import AbstractAtom, AbstractShape, Frame, Part, check_point, check_positive, relabel, safe_norm

XY = ("x", "y")


class Segment(AbstractAtom):
    """The segment from ``a`` to ``b``; the primitive lies to its left (outward normal
    $(\\Delta y, -\\Delta x)/L$, counter-clockwise boundaries)."""

    stack_kind = "segment"  # stacked by `pinnkit.geometry.batched` (fields a, b)
    a: tuple[float, ...] = eqx.field(static=True)
    b: tuple[float, ...] = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def _ab(self, dtype):
        return jnp.asarray(self.a, dtype), jnp.asarray(self.b, dtype)

    def measure(self):
        return math.dist(self.a, self.b)

    def from_unit(self, u):
        a, b = self._ab(u.dtype)
        return a[None, :] + u[:, :1] * (b - a)[None, :]

    def normal(self, y):
        (ax, ay), (bx, by) = self.a, self.b
        L = self.measure()
        return jnp.asarray([(by - ay) / L, -(bx - ax) / L], y.dtype)

    def distance(self, y):
        a, b = self._ab(y.dtype)
        e = b - a
        h = jnp.clip(jnp.dot(y - a, e) / jnp.dot(e, e), 0.0, 1.0)
        return safe_norm(y - a - h * e)

    def level(self, y):
        # f: signed distance to the line, > 0 on the inner side; t = ((L/2)^2 - |y - c|^2)/L
        # is >= 0 on the disk with the segment as diameter (Sukumar & Srivastava 2022).
        a, b = self._ab(y.dtype)
        L = self.measure()
        e = (b - a) / L
        r = y - a
        f = e[0] * r[1] - e[1] * r[0]
        c = y - 0.5 * (a + b)
        return f, ((0.5 * L) ** 2 - jnp.dot(c, c)) / L


def _primitive_parts(atoms, labels, dim: int) -> tuple[Part, ...]:
    frame = Frame.identity(dim)
    return tuple(Part(a, n, frame) for a, n in zip(atoms, labels, strict=True))


class Rectangle(AbstractShape):
    """The rectangle $[\\text{lower}, \\text{upper}]$; exact signed distance. Boundary names
    ``left, right, bottom, top`` (renamed with ``name`` / ``names``)."""

    stack_kind = "box"  # stacked by `pinnkit.geometry.batched` (fields lower, upper)
    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)
    labels: tuple[str, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, lower, upper, name=None, names: Mapping | None = None, coords=XY):
        self.lower = check_point(lower, 2, "rectangle lower")
        self.upper = check_point(upper, 2, "rectangle upper")
        if not all(a < b for a, b in zip(self.lower, self.upper, strict=True)):
            raise ValueError(f"rectangle needs lower < upper in both coordinates: "
                             f"actual lower={list(self.lower)}, upper={list(self.upper)}")
        self.labels = relabel(("bottom", "right", "top", "left"), name, names, "rectangle")
        self.coords = tuple(coords)

    def sdf(self, x):
        lo, hi = jnp.asarray(self.lower, x.dtype), jnp.asarray(self.upper, x.dtype)
        q = jnp.abs(x - 0.5 * (lo + hi)) - 0.5 * (hi - lo)
        return safe_norm(jnp.maximum(q, 0.0)) + jnp.minimum(jnp.max(q), 0.0)

    def parts(self):
        (x0, y0), (x1, y1) = self.lower, self.upper
        corners = ((x0, y0), (x1, y0), (x1, y1), (x0, y1))
        segs = [Segment(corners[i], corners[(i + 1) % 4], d)
                for i, d in enumerate(("bottom", "right", "top", "left"))]
        return _primitive_parts(segs, self.labels, 2)

    def bbox(self):
        return self.lower, self.upper

    def measure(self):
        return math.prod(b - a for a, b in zip(self.lower, self.upper, strict=True))

    def exact_outside(self):
        return True


_ARC_TABLE = 2048  # nodes of the ellipse's arc-length table (spectrally accurate trapezoid)


class EllipseCurve(AbstractAtom):
    """The axis-aligned ellipse with semi-axes ``axes`` about ``center``, sampled uniformly
    in arc length through a table of the angle at equal arc-length steps."""

    center: tuple[float, ...] = eqx.field(static=True)
    axes: tuple[float, ...] = eqx.field(static=True)
    angles: tuple[float, ...] = eqx.field(static=True)  # theta at s = k/K of the perimeter
    perimeter: float = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(self, center, axes, name):
        a, b = axes
        th = np.linspace(0.0, 2 * np.pi, 8 * _ARC_TABLE + 1)
        speed = np.hypot(a * np.sin(th), b * np.cos(th))
        arc = np.concatenate([[0.0], np.cumsum(0.5 * (speed[1:] + speed[:-1]) * np.diff(th))])
        s = np.linspace(0.0, arc[-1], _ARC_TABLE + 1)
        self.center, self.axes, self.name = tuple(center), tuple(axes), name
        self.angles = tuple(float(v) for v in np.interp(s, arc, th))
        self.perimeter = float(arc[-1])

    def measure(self):
        return self.perimeter

    def from_unit(self, u):
        grid = jnp.arange(_ARC_TABLE + 1, dtype=u.dtype)
        th = jnp.interp(u[:, 0] * _ARC_TABLE, grid, jnp.asarray(self.angles, u.dtype))
        c, ax = jnp.asarray(self.center, u.dtype), jnp.asarray(self.axes, u.dtype)
        return c[None, :] + ax[None, :] * jnp.stack([jnp.cos(th), jnp.sin(th)], axis=1)

    def normal(self, y):
        g = (y - jnp.asarray(self.center, y.dtype)) / jnp.asarray(self.axes, y.dtype) ** 2
        return g / safe_norm(g)

    def distance(self, y):
        q = (y - jnp.asarray(self.center, y.dtype)) / jnp.asarray(self.axes, y.dtype)
        return min(self.axes) * jnp.abs(safe_norm(q) - 1.0)

    def level(self, y):
        # F = (1 - |q|^2)/2 normalised: F / sqrt(|grad F|^2 + (F/l)^2) has slope 1 on the
        # curve and stays smooth at the centre, where grad F = 0 (l = smaller semi-axis).
        ax = jnp.asarray(self.axes, y.dtype)
        r = y - jnp.asarray(self.center, y.dtype)
        F = 0.5 * (1.0 - jnp.sum((r / ax) ** 2))
        g = r / ax**2
        return F / jnp.sqrt(jnp.dot(g, g) + (F / min(self.axes)) ** 2), None


class Ellipse(AbstractShape):
    """The axis-aligned ellipse $\\sum_i ((x_i - c_i)/a_i)^2 \\le 1$ (rotate it with
    `pinnkit.geometry.rotate`). Signed distance: the bound
    $\\min_i a_i\\,(|(x - c)/a| - 1)$ (exact sign, $|\\cdot| \\le$ distance, exact for a
    circle). Boundary name ``ellipse``."""

    center: tuple[float, ...] = eqx.field(static=True)
    axes: tuple[float, ...] = eqx.field(static=True)
    labels: tuple[str, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, center, axes, name=None, names: Mapping | None = None, coords=XY):
        self.center = check_point(center, 2, "ellipse center")
        axes = check_point(axes, 2, "ellipse axes")
        self.axes = tuple(check_positive(a, "ellipse semi-axis") for a in axes)
        self.labels = relabel(("ellipse",), name, names, "ellipse")
        self.coords = tuple(coords)

    def sdf(self, x):
        q = (x - jnp.asarray(self.center, x.dtype)) / jnp.asarray(self.axes, x.dtype)
        return min(self.axes) * (safe_norm(q) - 1.0)

    def parts(self):
        return _primitive_parts([EllipseCurve(self.center, self.axes, "ellipse")], self.labels, 2)

    def bbox(self):
        return (tuple(c - a for c, a in zip(self.center, self.axes, strict=True)),
                tuple(c + a for c, a in zip(self.center, self.axes, strict=True)))

    def measure(self):
        return math.pi * self.axes[0] * self.axes[1]


MAX_VERTICES = 20_000  # vertices of one polygon (about 7 s to validate on one core)


def polygon_vertices(vertices, what: str = "polygon") -> tuple[tuple, tuple[int, ...]]:
    """Validated vertices, counter-clockwise: at least 3, finite, no zero-length edge, no
    spike (an edge folding back on the previous one), non-zero area, not
    self-intersecting. Raises `ValueError` naming the offending vertices/edges.

    **Returns:** ``(vertices, sides)``: the vertices counter-clockwise and, for each of
    their edges, the index of that edge in the order given."""
    try:
        v = np.asarray(vertices, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} vertices must be a list of [x, y] pairs: actual={vertices!r}") from None
    if v.ndim != 2 or v.shape[1] != 2 or v.shape[0] < 3 or not np.all(np.isfinite(v)):
        raise ValueError(f"{what} needs at least 3 finite [x, y] vertices: actual={vertices!r}")
    if v.shape[0] > MAX_VERTICES:
        raise ValueError(f"{what} of {v.shape[0]} vertices: at most {MAX_VERTICES} are accepted "
                         "(the build checks every pair of nearby edges for crossings); simplify the "
                         "outline, e.g. drop vertices closer than the resolution you need")
    n = v.shape[0]
    scale = float(np.max(np.ptp(v, axis=0)))
    e = np.roll(v, -1, axis=0) - v
    length = np.hypot(e[:, 0], e[:, 1])
    tiny = 1e-12 * max(scale, 1e-300)
    for i in np.flatnonzero(length <= tiny):
        raise ValueError(f"{what} is degenerate: vertices {i} and {(i + 1) % n} coincide at "
                         f"{v[i].tolist()}; remove the repeated vertex")
    hit = _first_crossing(v, tiny)
    if hit is not None:
        i, j = hit
        raise ValueError(
            f"{what} is self-intersecting: edge {i} ({v[i].tolist()} -> "
            f"{v[(i + 1) % n].tolist()}) meets edge {j} ({v[j].tolist()} -> "
            f"{v[(j + 1) % n].tolist()}); order the vertices along the boundary"
        )
    area = 0.5 * float(np.sum(v[:, 0] * np.roll(v[:, 1], -1) - np.roll(v[:, 0], -1) * v[:, 1]))
    if abs(area) <= 1e-12 * scale**2:
        raise ValueError(f"{what} is degenerate: its vertices {v.tolist()} enclose no area "
                         "(collinear); give a polygon with non-zero area")
    for i in range(n):
        j = (i + 1) % n
        cross = e[i, 0] * e[j, 1] - e[i, 1] * e[j, 0]
        if abs(cross) <= 1e-12 * length[i] * length[j] and np.dot(e[i], e[j]) < 0:
            raise ValueError(f"{what} is degenerate: edge {j} folds back onto edge {i} at vertex "
                             f"{j} {v[j].tolist()}; remove the spike")
    sides = tuple(range(n))
    if area < 0:  # reversed: edge k runs along the given edge (n - 2 - k) mod n
        v, sides = v[::-1], tuple((n - 2 - k) % n for k in range(n))
    return tuple((float(a), float(b)) for a, b in v), sides


_PAIRS = 1 << 20  # candidate edge pairs tested per numpy block


def _first_crossing(v: np.ndarray, tol: float) -> tuple[int, int] | None:
    """The first pair ``(i, j)``, ``i < j``, of non-adjacent edges that meet (as
    `_segments_meet` decides), or None. A sweep over the edges sorted by their lowest
    x: only pairs whose x-ranges overlap (within ``tol``) are tested, in vectorised
    blocks, so a polygon of $n$ vertices costs about O(n log n), not $n^2/2$ tests."""
    n = v.shape[0]
    p, q = v, np.roll(v, -1, axis=0)
    lo, hi = np.minimum(p, q), np.maximum(p, q)
    order = np.argsort(lo[:, 0], kind="stable")
    xs = lo[order, 0]
    # edge order[a] overlaps, in x, the edges order[a+1 : end[a]]
    end = np.searchsorted(xs, hi[order, 0] + 2 * tol, side="right")
    count = np.maximum(end - np.arange(n) - 1, 0)
    best = None
    starts = np.concatenate([[0], np.cumsum(count)])
    a0 = 0
    while a0 < n:  # blocks of sorted edges whose pairs number about _PAIRS
        a1 = int(np.searchsorted(starts, starts[a0] + _PAIRS, side="right"))
        a1 = min(max(a1 - 1, a0 + 1), n)
        c = count[a0:a1]
        a = np.repeat(np.arange(a0, a1), c)
        b = a + 1 + (np.arange(a.size) - np.repeat(starts[a0:a1] - starts[a0], c))
        i, j = order[a], order[b]
        i, j = np.minimum(i, j), np.maximum(i, j)
        near = (lo[i, 1] <= hi[j, 1] + 2 * tol) & (lo[j, 1] <= hi[i, 1] + 2 * tol)
        apart = (j - i >= 2) & ~((i == 0) & (j == n - 1))
        i, j = i[near & apart], j[near & apart]
        meet = _segments_meet_many(p[i], q[i], p[j], q[j], tol)
        if meet.any():
            k = np.lexsort((j[meet], i[meet]))[0]
            cand = (int(i[meet][k]), int(j[meet][k]))
            best = cand if best is None or cand < best else best
        a0 = a1
    return best


def _segments_meet_many(p, q, r, s, tol) -> np.ndarray:
    """`_segments_meet` over rows of ``(m, 2)`` arrays, the same tests elementwise."""
    def orient(a, b, c):
        return (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])

    def on(a, b, c):
        lo, hi = np.minimum(a, b) - tol, np.maximum(a, b) + tol
        return (lo[:, 0] <= c[:, 0]) & (c[:, 0] <= hi[:, 0]) & (lo[:, 1] <= c[:, 1]) & (c[:, 1] <= hi[:, 1])

    o1, o2, o3, o4 = orient(p, q, r), orient(p, q, s), orient(r, s, p), orient(r, s, q)
    big = np.max(np.abs(np.concatenate([p, q, r, s], axis=1)), axis=1)
    t = tol * np.maximum(1.0, big)
    cross = (((o1 > t) & (o2 < -t)) | ((o1 < -t) & (o2 > t))) & \
        (((o3 > t) & (o4 < -t)) | ((o3 < -t) & (o4 > t)))
    return cross | ((np.abs(o1) <= t) & on(p, q, r)) | ((np.abs(o2) <= t) & on(p, q, s)) | \
        ((np.abs(o3) <= t) & on(r, s, p)) | ((np.abs(o4) <= t) & on(r, s, q))


def _segments_meet(p, q, r, s, tol) -> bool:
    def orient(a, b, c):
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])

    def on(a, b, c):  # c on segment ab, given collinear
        return min(a[0], b[0]) - tol <= c[0] <= max(a[0], b[0]) + tol and \
            min(a[1], b[1]) - tol <= c[1] <= max(a[1], b[1]) + tol

    o1, o2, o3, o4 = orient(p, q, r), orient(p, q, s), orient(r, s, p), orient(r, s, q)
    t = tol * max(1.0, float(np.max(np.abs([p, q, r, s]))))
    if ((o1 > t and o2 < -t) or (o1 < -t and o2 > t)) and ((o3 > t and o4 < -t) or (o3 < -t and o4 > t)):
        return True
    return (abs(o1) <= t and on(p, q, r)) or (abs(o2) <= t and on(p, q, s)) or \
        (abs(o3) <= t and on(r, s, p)) or (abs(o4) <= t and on(r, s, q))


class Polygon(AbstractShape):
    """A simple polygon (non-convex allowed) with vertices in either orientation; exact
    signed distance (nearest edge, sign by the crossing number). Boundary names
    ``side0 ... side{n-1}`` in the order of the vertices as given (counter-clockwise
    after reorientation)."""

    vertices: tuple[tuple[float, float], ...] = eqx.field(static=True)
    sides: tuple[int, ...] = eqx.field(static=True)
    labels: tuple[str, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, vertices: Sequence, name=None, names: Mapping | None = None, coords=XY):
        self.vertices, self.sides = polygon_vertices(vertices)
        self.labels = relabel(tuple(f"side{i}" for i in self.sides), name, names, "polygon")
        self.coords = tuple(coords)

    def _edges(self, dtype):
        a = jnp.asarray(self.vertices, dtype)
        return a, jnp.roll(a, -1, axis=0)

    def sdf(self, x):
        a, b = self._edges(x.dtype)
        e, w = b - a, x[None, :] - a
        h = jnp.clip(jnp.sum(w * e, 1) / jnp.sum(e * e, 1), 0.0, 1.0)
        d2 = jnp.min(jnp.sum((w - h[:, None] * e) ** 2, 1))
        # crossing number of the ray from x towards +x (half-open rule at vertices)
        up = (a[:, 1] > x[1]) != (b[:, 1] > x[1])
        dy = jnp.where(up, e[:, 1], 1.0)
        cross = up & (x[0] < a[:, 0] + (x[1] - a[:, 1]) * e[:, 0] / dy)
        inside = jnp.sum(cross.astype(jnp.int32)) % 2 == 1
        d = jnp.where(d2 > 0, jnp.sqrt(jnp.where(d2 > 0, d2, 1.0)), 0.0)
        return jnp.where(inside, -d, d)

    def parts(self):
        v, n = self.vertices, len(self.vertices)
        segs = [Segment(v[i], v[(i + 1) % n], f"side{k}") for i, k in enumerate(self.sides)]
        return _primitive_parts(segs, self.labels, 2)

    def exact_outside(self):
        return True

    def bbox(self):
        v = np.asarray(self.vertices)
        return tuple(float(c) for c in v.min(0)), tuple(float(c) for c in v.max(0))

    def measure(self):
        v = np.asarray(self.vertices)
        return 0.5 * abs(float(np.sum(v[:, 0] * np.roll(v[:, 1], -1) - np.roll(v[:, 0], -1) * v[:, 1])))


def Triangle(a, b, c, name=None, names: Mapping | None = None, coords=XY) -> Polygon:
    """The triangle with vertices ``a, b, c`` (a `Polygon`; sides ``side0..side2``)."""
    return Polygon([a, b, c], name=name, names=names, coords=coords)
