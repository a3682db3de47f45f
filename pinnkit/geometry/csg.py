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

from . import batched
from .base import AbstractShape, Part, all_parts, memo


def _trimmed(p: Part, extra: tuple, flip: bool = False) -> Part:
    return Part(p.atom, p.name, p.frame, p.flip != flip, p.trims + extra)


# Each part of an operand is trimmed by every other operand: n^2 (part, trim) pairs, which
# the rejection test normalises and the distance functions trace (docs/geometry.md).
MAX_OPERANDS = 2000


def _operands(shapes, what: str) -> tuple[AbstractShape, ...]:
    shapes = tuple(shapes)
    if len(shapes) < 2:
        raise ValueError(f"{what} needs at least two shapes: actual={len(shapes)}")
    if len(shapes) > MAX_OPERANDS:
        raise ValueError(
            f"{what} of {len(shapes)} shapes: at most {MAX_OPERANDS} shapes are combined in one "
            "list (each is trimmed by all the others, n^2 pairs); merge the shapes into fewer, "
            "larger ones (a polygon for many touching pieces) or nest smaller lists")
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
        return jnp.min(batched.stacked_sdf(self.shapes, x))

    def exact_outside(self):
        return all(s.exact_outside() for s in self.shapes)

    def split_trim(self, sign, tie):
        # outside a union = outside each operand (min_j d_j > eps iff every d_j > eps)
        if sign < 0:
            return super().split_trim(sign, tie)
        return tuple(t for s in self.shapes for t in s.split_trim(sign, tie))

    def parts(self):
        out = []
        # a coincident outer surface counts once: for the first (tie 1 against later ones)
        earlier = [(o, 1.0, 0) for o in self.shapes]
        later = [(o, 1.0, 1) for o in self.shapes]
        for i, s in enumerate(self.shapes):
            others = (*earlier[:i], *later[i + 1:])
            out += [_trimmed(p, others) for p in all_parts(s)]
        return tuple(out)

    def bbox(self):
        return memo(self, "bbox", lambda: _hull([s.bbox() for s in self.shapes]))

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
        return jnp.max(batched.stacked_sdf(self.shapes, x))

    def split_trim(self, sign, tie):
        # inside an intersection = inside each operand
        if sign > 0 or tie:
            return super().split_trim(sign, tie)
        return tuple(t for s in self.shapes for t in s.split_trim(sign, 0))

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

    def split_trim(self, sign, tie):
        # inside A \ B = inside A and outside B (max(dA, -dB) < -eps iff dA < -eps, dB > eps)
        if sign > 0 or tie:
            return super().split_trim(sign, tie)
        return self.base.split_trim(-1.0, 0) + self.cut.split_trim(1.0, 0)

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
    """``base`` minus every shape in ``cuts``: ``Difference(base, Union(*cuts))`` for two
    or more cuts, the same set and boundary names as cutting them one after the other,
    whose parts and distance functions would grow with the square (and worse) of the
    number of cuts, each cut being trimmed by the chain of all before it."""
    if not cuts:
        raise ValueError("difference needs at least two shapes: a base and what to cut from it")
    return Difference(base, cuts[0] if len(cuts) == 1 else Union(*cuts))
