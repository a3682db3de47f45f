"""3-D primitives: box (`Cuboid`), cylinder, extruded polygon, with their boundary atoms
(planar rectangles, cylinder sides, flat caps); the ball is in `pinnkit.geometry.round`.

Default boundary names: cuboid ``left, right`` ($x$), ``front, back`` ($y$),
``bottom, top`` ($z$) as on a 3-D `pinnkit.geometry.domains.Box`; cylinder (axis
$z$; rotate it for another axis) ``side, bottom, top``; extruded polygon ``side0 ...``
(one per polygon edge), ``bottom, top``. All signed distances are exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .base import AbstractAtom, AbstractShape, Frame, Part, check_point, check_positive, relabel, safe_norm
from .primitives2d import Polygon

XYZ = ("x", "y", "z")


def _parts(atoms, labels) -> tuple[Part, ...]:
    frame = Frame.identity(3)
    return tuple(Part(a, n, frame) for a, n in zip(atoms, labels, strict=True))


def _slab(s, length):
    """Trimming function of $[0, L]$: $((L/2)^2 - (s - L/2)^2)/L \\ge 0$ on it."""
    return ((0.5 * length) ** 2 - (s - 0.5 * length) ** 2) / length


def _extruded_sdf(d2, x, z0, z1):
    """Exact distance to $\\Omega_2 \\times [z_0, z_1]$ from the 2-D distance ``d2``."""
    w = jnp.stack([d2, jnp.abs(x[2] - 0.5 * (z0 + z1)) - 0.5 * (z1 - z0)])
    return jnp.minimum(jnp.max(w), 0.0) + safe_norm(jnp.maximum(w, 0.0))


def rect_rows(parts: Sequence[Part]) -> tuple[np.ndarray, ...]:
    """World-frame rows ``(origin, u1, u2, normal, l1, l2)`` of parts whose atoms are
    `Rect3` (``u1, u2``: unit edge directions, ``normal``: the direction in which $f$
    decreases, flipped for a subtracted primitive; ``l1, l2``: edge lengths), for
    `rects_level`. Float64 on the host."""
    rows = []
    for p in parts:
        a, f = p.atom, p.frame
        rot, s = np.asarray(f.rotation), f.scale
        l1, l2 = math.hypot(*a.e1), math.hypot(*a.e2)
        o = s * (rot @ np.asarray(a.origin)) + np.asarray(f.shift)
        n = rot @ np.asarray(a.normal_) * (-1.0 if p.flip else 1.0)
        rows.append((o, rot @ (np.asarray(a.e1) / l1), rot @ (np.asarray(a.e2) / l2), n, s * l1, s * l2))
    return tuple(np.asarray(col) for col in zip(*rows, strict=True))


def rects_level(o, u1, u2, n, l1, l2, x):
    """`Part.level` of the rectangles of `rect_rows` at one world point ``x``, as vectors:
    what `Rect3.level` gives part by part (in world units, a frame's scale applied to its
    distances)."""
    from .rfunctions import r_and

    r = x[None, :] - o
    s1, s2 = jnp.sum(r * u1, axis=1), jnp.sum(r * u2, axis=1)
    return -jnp.sum(r * n, axis=1), r_and(_slab(s1, l1), _slab(s2, l2))


class Rect3(AbstractAtom):
    """The planar rectangle $o + s_1 e_1 + s_2 e_2$, $s_i \\in [0, 1]$ ($e_1 \\perp e_2$),
    outward normal ``normal_``."""

    stack_rows = staticmethod(rect_rows)
    stack_level = staticmethod(rects_level)

    origin: tuple[float, ...] = eqx.field(static=True)
    e1: tuple[float, ...] = eqx.field(static=True)
    e2: tuple[float, ...] = eqx.field(static=True)
    normal_: tuple[float, ...] = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def _frame(self, y):
        o = jnp.asarray(self.origin, y.dtype)
        l1, l2 = math.hypot(*self.e1), math.hypot(*self.e2)
        u1, u2 = (jnp.asarray(e, y.dtype) / n for e, n in ((self.e1, l1), (self.e2, l2)))
        r = y - o
        return jnp.dot(r, u1), jnp.dot(r, u2), l1, l2, r

    def measure(self):
        return math.hypot(*self.e1) * math.hypot(*self.e2)

    def from_unit(self, u):
        o, e1, e2 = (jnp.asarray(v, u.dtype)[None, :] for v in (self.origin, self.e1, self.e2))
        return o + u[:, :1] * e1 + u[:, 1:2] * e2

    def normal(self, y):
        return jnp.asarray(self.normal_, y.dtype)

    def distance(self, y):
        s1, s2, l1, l2, r = self._frame(y)
        n = jnp.asarray(self.normal_, y.dtype)
        d1 = jnp.maximum(jnp.abs(s1 - 0.5 * l1) - 0.5 * l1, 0.0)
        d2 = jnp.maximum(jnp.abs(s2 - 0.5 * l2) - 0.5 * l2, 0.0)
        return safe_norm(jnp.stack([d1, d2, jnp.dot(r, n)]))

    def level(self, y):
        from .rfunctions import r_and

        s1, s2, l1, l2, r = self._frame(y)
        return -jnp.dot(r, jnp.asarray(self.normal_, y.dtype)), r_and(_slab(s1, l1), _slab(s2, l2))


class CylinderSide(AbstractAtom):
    """The side $\\rho = r$, $z \\in [z_0, z_1]$ of a cylinder along $z$ through ``axis``."""

    axis: tuple[float, ...] = eqx.field(static=True)  # (x, y) of the axis
    radius: float = eqx.field(static=True)
    z0: float = eqx.field(static=True)
    z1: float = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def _rz(self, y):
        q = y[:2] - jnp.asarray(self.axis, y.dtype)
        return q, y[2] - self.z0

    def measure(self):
        return 2 * math.pi * self.radius * (self.z1 - self.z0)

    def from_unit(self, u):
        th = 2 * jnp.pi * u[:, 0]
        x = self.axis[0] + self.radius * jnp.cos(th)
        y = self.axis[1] + self.radius * jnp.sin(th)
        return jnp.stack([x, y, self.z0 + u[:, 1] * (self.z1 - self.z0)], axis=1)

    def normal(self, y):
        q, _ = self._rz(y)
        return jnp.concatenate([q / safe_norm(q), jnp.zeros((1,), y.dtype)])

    def distance(self, y):
        q, s = self._rz(y)
        h = self.z1 - self.z0
        dz = jnp.maximum(jnp.abs(s - 0.5 * h) - 0.5 * h, 0.0)
        return safe_norm(jnp.stack([safe_norm(q) - self.radius, dz]))

    def level(self, y):
        q, s = self._rz(y)
        return (self.radius**2 - jnp.dot(q, q)) / (2 * self.radius), _slab(s, self.z1 - self.z0)


class FlatCap(AbstractAtom):
    """A flat cap at height ``z`` (outward normal $\\pm e_z$, ``up``) over a 2-D region:
    a disk (``radius`` about ``axis``) or a polygon (``vertices``, with ``triangles`` for
    area-uniform sampling)."""

    z: float = eqx.field(static=True)
    up: bool = eqx.field(static=True)
    name: str = eqx.field(static=True)
    axis: tuple[float, ...] | None = eqx.field(static=True, default=None)
    radius: float | None = eqx.field(static=True, default=None)
    polygon: Polygon | None = None
    triangles: tuple = eqx.field(static=True, default=())

    def measure(self):
        return math.pi * self.radius**2 if self.polygon is None else self.polygon.measure()

    def from_unit(self, u):
        if self.polygon is None:
            rho, th = self.radius * jnp.sqrt(u[:, 1]), 2 * jnp.pi * u[:, 0]
            xy = jnp.stack([self.axis[0] + rho * jnp.cos(th), self.axis[1] + rho * jnp.sin(th)], axis=1)
        else:
            tri = np.asarray(self.triangles)  # (T, 3, 2)
            e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
            area = 0.5 * np.abs(e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0])
            edges = jnp.asarray(np.cumsum(area) / area.sum(), u.dtype)
            k = jnp.minimum(jnp.searchsorted(edges, u[:, 0], side="right"), len(tri) - 1)
            starts = jnp.concatenate([jnp.zeros((1,), u.dtype), edges[:-1]])
            s = jnp.clip((u[:, 0] - starts[k]) / (edges - starts)[k], 0.0, 1.0)
            a, b, c = (jnp.asarray(tri[:, i], u.dtype)[k] for i in range(3))
            r1 = jnp.sqrt(s)[:, None]
            xy = (1 - r1) * a + r1 * (1 - u[:, 1:2]) * b + r1 * u[:, 1:2] * c
        return jnp.concatenate([xy, jnp.full((u.shape[0], 1), self.z, u.dtype)], axis=1)

    def normal(self, y):
        return jnp.asarray([0.0, 0.0, 1.0 if self.up else -1.0], y.dtype)

    def _outside2(self, y):
        if self.polygon is None:
            return jnp.maximum(safe_norm(y[:2] - jnp.asarray(self.axis, y.dtype)) - self.radius, 0.0)
        return jnp.maximum(self.polygon.sdf(y[:2]), 0.0)

    def distance(self, y):
        return safe_norm(jnp.stack([self._outside2(y), y[2] - self.z]))

    def level(self, y):
        f = (self.z - y[2]) if self.up else (y[2] - self.z)
        if self.polygon is None:
            q = y[:2] - jnp.asarray(self.axis, y.dtype)
            return f, (self.radius**2 - jnp.dot(q, q)) / (2 * self.radius)
        from .distance import signed_adf

        return f, signed_adf(self.polygon, y[:2])


class Cuboid(AbstractShape):
    """The box $[\\text{lower}, \\text{upper}] \\subset \\mathbb{R}^3$ as a shape (for CSG;
    a lone box is better a `pinnkit.geometry.domains.Box`). Names ``left, right, front, back,
    bottom, top``."""

    stack_kind = "box"  # stacked by `pinnkit.geometry.batched` (fields lower, upper)
    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)
    labels: tuple[str, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, lower, upper, name=None, names: Mapping | None = None, coords=XYZ):
        self.lower = check_point(lower, 3, "box lower")
        self.upper = check_point(upper, 3, "box upper")
        if not all(a < b for a, b in zip(self.lower, self.upper, strict=True)):
            raise ValueError(f"box needs lower < upper in every coordinate: actual lower="
                             f"{list(self.lower)}, upper={list(self.upper)}")
        self.labels = relabel(("left", "right", "front", "back", "bottom", "top"), name, names, "box")
        self.coords = tuple(coords)

    def sdf(self, x):
        lo, hi = jnp.asarray(self.lower, x.dtype), jnp.asarray(self.upper, x.dtype)
        q = jnp.abs(x - 0.5 * (lo + hi)) - 0.5 * (hi - lo)
        return safe_norm(jnp.maximum(q, 0.0)) + jnp.minimum(jnp.max(q), 0.0)

    def parts(self):
        lo, hi = np.asarray(self.lower), np.asarray(self.upper)
        size = hi - lo
        atoms = []
        for axis, (neg, pos) in enumerate((("left", "right"), ("front", "back"), ("bottom", "top"))):
            a, b = [i for i in range(3) if i != axis]
            e1, e2 = np.eye(3)[a] * size[a], np.eye(3)[b] * size[b]
            for side, name in ((0, neg), (1, pos)):
                o = lo.copy()
                o[axis] = hi[axis] if side else lo[axis]
                n = np.eye(3)[axis] * (1.0 if side else -1.0)
                atoms.append(Rect3(*(tuple(float(c) for c in v) for v in (o, e1, e2, n)), name))
        return _parts(atoms, self.labels)

    def bbox(self):
        return self.lower, self.upper

    def measure(self):
        return math.prod(b - a for a, b in zip(self.lower, self.upper, strict=True))

    def exact_outside(self):
        return True


class Cylinder(AbstractShape):
    """The solid cylinder of ``radius`` and ``height`` along $z$ centred at ``center``.
    Names ``side, bottom, top``."""

    center: tuple[float, ...] = eqx.field(static=True)
    radius: float = eqx.field(static=True)
    height: float = eqx.field(static=True)
    labels: tuple[str, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, center, radius, height, name=None, names: Mapping | None = None, coords=XYZ):
        self.center = check_point(center, 3, "cylinder center")
        self.radius = check_positive(radius, "cylinder radius")
        self.height = check_positive(height, "cylinder height")
        self.labels = relabel(("side", "bottom", "top"), name, names, "cylinder")
        self.coords = tuple(coords)

    def _z(self):
        return self.center[2] - 0.5 * self.height, self.center[2] + 0.5 * self.height

    def sdf(self, x):
        d2 = safe_norm(x[:2] - jnp.asarray(self.center[:2], x.dtype)) - self.radius
        return _extruded_sdf(d2, x, *self._z())

    def parts(self):
        z0, z1 = self._z()
        ax, r = self.center[:2], self.radius
        atoms = [CylinderSide(ax, r, z0, z1, "side"), FlatCap(z0, False, "bottom", ax, r),
                 FlatCap(z1, True, "top", ax, r)]
        return _parts(atoms, self.labels)

    def bbox(self):
        c, r, h = self.center, self.radius, self.height
        return (c[0] - r, c[1] - r, c[2] - h / 2), (c[0] + r, c[1] + r, c[2] + h / 2)

    def measure(self):
        return math.pi * self.radius**2 * self.height


def ear_clip(vertices: Sequence[tuple[float, float]]) -> tuple:
    """Triangles ``((a, b, c), ...)`` of a simple counter-clockwise polygon (ear clipping)."""
    v = [np.asarray(p, float) for p in vertices]
    idx, tris = list(range(len(v))), []

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    while len(idx) > 3:
        for k in range(len(idx)):
            i, j, m = idx[k - 1], idx[k], idx[(k + 1) % len(idx)]
            if cross(v[i], v[j], v[m]) <= 0:
                continue  # reflex or flat
            inside = any(
                cross(v[i], v[j], v[q]) >= 0 and cross(v[j], v[m], v[q]) >= 0 and cross(v[m], v[i], v[q]) >= 0
                for q in idx if q not in (i, j, m)
            )
            if not inside:
                tris.append((i, j, m))
                idx.pop(k)
                break
        else:
            raise ValueError("polygon triangulation failed (is it simple?)")
    tris.append(tuple(idx))
    return tuple(tuple(tuple(float(c) for c in v[t]) for t in tri) for tri in tris)


class ExtrudedPolygon(AbstractShape):
    """A simple polygon (in $x, y$) extruded over $z \\in [z_0, z_1]$. Names
    ``side0 ... side{n-1}`` (edge $i$ of the polygon as given), ``bottom, top``."""

    polygon: Polygon
    z0: float = eqx.field(static=True)
    z1: float = eqx.field(static=True)
    labels: tuple[str, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, vertices, z0, z1, name=None, names: Mapping | None = None, coords=XYZ):
        self.polygon = Polygon(vertices, coords=tuple(coords)[:2])
        self.z0, self.z1 = float(z0), float(z1)
        if not (math.isfinite(self.z0) and math.isfinite(self.z1) and self.z0 < self.z1):
            raise ValueError(f"extrusion needs finite z0 < z1: actual=({z0}, {z1})")
        sides = tuple(f"side{k}" for k in self.polygon.sides)
        self.labels = relabel((*sides, "bottom", "top"), name, names, "extrusion")
        self.coords = tuple(coords)

    def sdf(self, x):
        return _extruded_sdf(self.polygon.sdf(x[:2]), x, self.z0, self.z1)

    def parts(self):
        v, h = self.polygon.vertices, self.z1 - self.z0
        atoms = []
        for i, k in enumerate(self.polygon.sides):
            a, b = v[i], v[(i + 1) % len(v)]
            e = (b[0] - a[0], b[1] - a[1])
            L = math.hypot(*e)
            atoms.append(Rect3((a[0], a[1], self.z0), (e[0], e[1], 0.0), (0.0, 0.0, h),
                               (e[1] / L, -e[0] / L, 0.0), f"side{k}"))
        tris = ear_clip(v)
        atoms += [FlatCap(self.z0, False, "bottom", polygon=self.polygon, triangles=tris),
                  FlatCap(self.z1, True, "top", polygon=self.polygon, triangles=tris)]
        return _parts(atoms, self.labels)

    def bbox(self):
        lo, hi = self.polygon.bbox()
        return (*lo, self.z0), (*hi, self.z1)

    def measure(self):
        return self.polygon.measure() * (self.z1 - self.z0)
