"""Similarity transforms of shapes: translate, rotate, scale (uniform, so that signed
distances stay distances: $d_{T\\Omega}(x) = s\\, d_\\Omega(T^{-1} x)$).

A non-uniform scale would turn distances into bounds of unknown quality; use an
`Ellipse` or a `Rectangle` / `Cuboid` of the wanted sizes instead.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from .base import AbstractShape, Frame, Part, all_parts, check_point, check_positive


class Transformed(AbstractShape):
    """``shape`` mapped by ``frame`` ($x = s R y + b$)."""

    shape: AbstractShape
    frame: Frame

    def __init__(self, shape: AbstractShape, frame: Frame):
        if not isinstance(shape, AbstractShape):
            raise ValueError(f"transforms apply to pinnkit.geometry shapes, not {type(shape).__name__}")
        if isinstance(shape, Transformed):  # one frame, not a chain
            shape, frame = shape.shape, shape.frame.then(frame)
        self.shape, self.frame = shape, frame

    @property
    def coords(self):  # type: ignore[override]
        return self.shape.coords

    def sdf(self, x):
        return self.frame.scale * self.shape.sdf(self.frame.to_local(x))

    def parts(self):
        return tuple(
            Part(p.atom, p.name, p.frame.then(self.frame), p.flip,
                 tuple((Transformed(o, self.frame), s, tie) for o, s, tie in p.trims))
            for p in all_parts(self.shape)
        )

    def exact_outside(self):
        return self.shape.exact_outside()

    def bbox(self):
        lo, hi = self.shape.bbox()
        corners = np.asarray(list(itertools.product(*zip(lo, hi, strict=True))))
        r, s, b = np.asarray(self.frame.rotation), self.frame.scale, np.asarray(self.frame.shift)
        world = s * corners @ r.T + b
        return tuple(float(v) for v in world.min(0)), tuple(float(v) for v in world.max(0))

    def measure(self):
        m = self.shape.measure()
        return None if m is None else m * self.frame.scale ** self.dim


def _about(shape: AbstractShape, r: np.ndarray, s: float, center) -> Transformed:
    d = shape.dim
    c = np.zeros(d) if center is None else np.asarray(check_point(center, d, "transform center"))
    shift = c - s * (r @ c)  # x = s R (y - c) + c
    return Transformed(shape, Frame(tuple(tuple(float(v) for v in row) for row in r), float(s),
                                    tuple(float(v) for v in shift)))


def translate(shape: AbstractShape, offset: Sequence[float]) -> Transformed:
    """``shape`` moved by ``offset`` (one number per coordinate)."""
    d = shape.dim
    offset = check_point(offset, d, "translate offset")
    return Transformed(shape, Frame(Frame.identity(d).rotation, 1.0, offset))


def rotate(shape: AbstractShape, angle: float, axis: Sequence[float] | None = None,
           center: Sequence[float] | None = None) -> Transformed:
    """``shape`` rotated by ``angle`` (radians, counter-clockwise; in 3-D about ``axis``
    by the right-hand rule) about ``center`` (default the origin)."""
    a = float(angle)
    if not math.isfinite(a):
        raise ValueError(f"rotate angle must be a finite number of radians: actual={angle!r}")
    if shape.dim == 2:
        if axis is not None:
            raise ValueError("rotate: a 2-D rotation has no axis; remove `axis`")
        r = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    else:
        if axis is None:
            raise ValueError("rotate: a 3-D rotation needs an `axis`, e.g. [0, 0, 1]")
        k = np.asarray(check_point(axis, 3, "rotate axis"))
        if np.linalg.norm(k) == 0:
            raise ValueError("rotate axis must be a non-zero vector")
        k = k / np.linalg.norm(k)
        K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        r = np.eye(3) + math.sin(a) * K + (1 - math.cos(a)) * (K @ K)  # Rodrigues
    return _about(shape, r, 1.0, center)


def scale(shape: AbstractShape, factor: float, center: Sequence[float] | None = None) -> Transformed:
    """``shape`` scaled by ``factor`` > 0 (uniform) about ``center`` (default the origin)."""
    s = check_positive(factor, "scale factor")
    return _about(shape, np.eye(shape.dim), s, center)
