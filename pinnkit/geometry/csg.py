"""Constructive solid geometry: union, intersection, difference.

Signed distances combine by $\\min$ (union), $\\max$ (intersection) and
$\\max(d_A, -d_B)$ (difference): the sign is exact; the magnitude is exact outside a
union and a bound elsewhere ($|d| \\le$ the distance; docs/geometry.md).

Boundary names survive: each operand's parts keep their names and are *trimmed* to the
points on the result's boundary, which for a part of operand $A$ are those outside the
other operands of a union, inside those of an intersection; for $A \\setminus B$, the
parts of $A$ outside $B$ and the parts of $B$ (flipped: their outward normal points into
$B$) inside $A$. Where two operands' surfaces coincide (within a few ulp) the outward
normals decide: two rectangles side by side share a wall that is no boundary of their
union (opposite normals: dropped from both), while collinear bottom edges are (same
normals: kept once, from the first operand).
"""

from __future__ import annotations

import jax.numpy as jnp

from .base import AbstractShape, Part, all_parts


def _trimmed(p: Part, extra: tuple, flip: bool = False) -> Part:
    return Part(p.atom, p.name, p.frame, p.flip != flip, p.trims + extra)


def _operands(shapes, what: str) -> tuple[AbstractShape, ...]:
    shapes = tuple(shapes)
    if len(shapes) < 2:
        raise ValueError(f"{what} needs at least two shapes: actual={len(shapes)}")
    for s in shapes:
        if not isinstance(s, AbstractShape):
            raise ValueError(f"{what} combines pinnkit.geometry shapes, not {type(s).__name__}")
    coords = {s.coords for s in shapes}
    if len(coords) != 1:
        raise ValueError(f"{what} of shapes with different coordinates: {sorted(coords)}; "
                         "combine shapes of one dimension with the same coordinate names")
    return shapes


def _hull(boxes):
    lo = tuple(min(b[0][i] for b in boxes) for i in range(len(boxes[0][0])))
    hi = tuple(max(b[1][i] for b in boxes) for i in range(len(boxes[0][0])))
    return lo, hi


class Union(AbstractShape):
    """$A_1 \\cup A_2 \\cup \\dots$ (two or more shapes)."""

    shapes: tuple[AbstractShape, ...]

    def __init__(self, *shapes: AbstractShape):
        self.shapes = _operands(shapes, "union")

    @property
    def coords(self):  # type: ignore[override]
        return self.shapes[0].coords

    def sdf(self, x):
        return jnp.min(jnp.stack([s.sdf(x) for s in self.shapes]))

    def parts(self):
        out = []
        for i, s in enumerate(self.shapes):  # a coincident outer surface counts once: for the first
            others = tuple((o, 1.0, int(i < j)) for j, o in enumerate(self.shapes) if j != i)
            out += [_trimmed(p, others) for p in all_parts(s)]
        return tuple(out)

    def bbox(self):
        return _hull([s.bbox() for s in self.shapes])

    def measure(self):
        return None


class Intersection(AbstractShape):
    """$A_1 \\cap A_2 \\cap \\dots$ (two or more shapes; their bounding boxes must meet)."""

    shapes: tuple[AbstractShape, ...]

    def __init__(self, *shapes: AbstractShape):
        self.shapes = _operands(shapes, "intersection")
        lo, hi = self.bbox()
        if not all(a < b for a, b in zip(lo, hi, strict=True)):
            raise ValueError(
                "the intersection is empty: the shapes' bounding boxes do not overlap "
                f"(their common box is lower={list(lo)}, upper={list(hi)}); move or enlarge them"
            )

    @property
    def coords(self):  # type: ignore[override]
        return self.shapes[0].coords

    def sdf(self, x):
        return jnp.max(jnp.stack([s.sdf(x) for s in self.shapes]))

    def parts(self):
        out = []
        for i, s in enumerate(self.shapes):
            others = tuple((o, -1.0, int(i < j)) for j, o in enumerate(self.shapes) if j != i)
            out += [_trimmed(p, others) for p in all_parts(s)]
        return tuple(out)

    def bbox(self):
        boxes = [s.bbox() for s in self.shapes]
        d = len(boxes[0][0])
        return (tuple(max(b[0][i] for b in boxes) for i in range(d)),
                tuple(min(b[1][i] for b in boxes) for i in range(d)))

    def measure(self):
        return None


class Difference(AbstractShape):
    """$A \\setminus B$: ``base`` with ``cut`` removed (``cut`` may be a `Union`)."""

    base: AbstractShape
    cut: AbstractShape

    def __init__(self, base: AbstractShape, cut: AbstractShape):
        self.base, self.cut = _operands((base, cut), "difference")

    @property
    def coords(self):  # type: ignore[override]
        return self.base.coords

    def sdf(self, x):
        return jnp.maximum(self.base.sdf(x), -self.cut.sdf(x))

    def parts(self):
        # where the two surfaces coincide, the base's surface stays if the cut lies beyond it
        outer = tuple(_trimmed(p, ((self.cut, 1.0, -1),)) for p in all_parts(self.base))
        inner = tuple(_trimmed(p, ((self.base, -1.0, 0),), flip=True) for p in all_parts(self.cut))
        return outer + inner

    def bbox(self):
        return self.base.bbox()

    def measure(self):
        return None


def union(*shapes: AbstractShape) -> Union:
    return Union(*shapes)


def intersection(*shapes: AbstractShape) -> Intersection:
    return Intersection(*shapes)


def difference(base: AbstractShape, *cuts: AbstractShape) -> AbstractShape:
    """``base`` minus every shape in ``cuts`` (applied in order)."""
    if not cuts:
        raise ValueError("difference needs at least two shapes: a base and what to cut from it")
    out = base
    for c in cuts:
        out = Difference(out, c)
    return out
