"""Adding a CSG primitive is its class plus one line in the table of shapes
(`pinnkit.geometry.config.SHAPES`; docs/architecture.md, "A CSG primitive"): a square
defined here, registered by that one line, is built from YAML, combined by CSG, sampled by
rejection, named, outlined and given a distance function with no other file touched."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.geometry import config
from pinnkit.geometry.base import AbstractShape, Frame, Part, check_point, check_positive, relabel, safe_norm
from pinnkit.geometry.distance import adf
from pinnkit.geometry.domains import AbstractRejectionDomain
from pinnkit.geometry.outline import outline
from pinnkit.geometry.primitives2d import Segment


class Square(AbstractShape):
    """The axis-aligned square of side ``side`` about ``center``; boundary ``square``."""

    center: tuple[float, ...] = eqx.field(static=True)
    side: float = eqx.field(static=True)
    labels: tuple[str, ...] = eqx.field(static=True)
    coords: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, center, side, name=None, names=None, coords=("x", "y")):
        self.center = check_point(center, 2, "square center")
        self.side = check_positive(side, "square side")
        self.labels = relabel(("square",) * 4, name, names, "square")
        self.coords = tuple(coords)

    def sdf(self, x):
        q = jnp.abs(x - jnp.asarray(self.center, x.dtype)) - 0.5 * self.side
        return safe_norm(jnp.maximum(q, 0.0)) + jnp.minimum(jnp.max(q), 0.0)

    def parts(self):
        (cx, cy), h = self.center, 0.5 * self.side
        c = ((cx - h, cy - h), (cx + h, cy - h), (cx + h, cy + h), (cx - h, cy + h))
        return tuple(Part(Segment(c[i], c[(i + 1) % 4], "square"), n, Frame.identity(2))
                     for i, n in enumerate(self.labels))

    def bbox(self):
        h = 0.5 * self.side
        return tuple(v - h for v in self.center), tuple(v + h for v in self.center)

    def measure(self):
        return self.side**2


@pytest.fixture
def square_registered(monkeypatch):
    # the one line a new primitive adds to geometry/config.py (KINDS follows from it on import)
    monkeypatch.setitem(config.SHAPES, "square", Square)
    monkeypatch.setattr(config, "KINDS", (*config.SHAPES, *config.CSG, *config.TRANSFORMS))


def test_a_new_primitive_needs_one_registry_line(square_registered):
    assert config.parameters("square") == (("center", "side"), ("name", "names"))
    assert config.dimension("square") == 2
    dom = config.build_domain({"difference": [
        {"rectangle": {"lower": [0, 0], "upper": [4, 2]}},
        {"square": {"center": [2, 1], "side": "1/2", "name": "hole"}}]})
    assert isinstance(dom, AbstractRejectionDomain)
    assert dom.pieces() == ("interior", "boundary", "bottom", "right", "top", "left", "hole")

    # float64 points: on the hole to rounding (64 ulp of the diagonal is the on-boundary test)
    with jax.enable_x64(True):
        hole = dom.sample(jax.random.key(0), 256, "hole", jnp.float64)
        inner = dom.sample(jax.random.key(1), 256, "interior", jnp.float64)
        sq = Square((2, 1), 0.5)
        assert np.abs(np.asarray(jax.vmap(sq.sdf)(hole))).max() < 1e-12
        assert np.asarray(jax.vmap(sq.sdf)(inner)).min() > 0  # none inside the hole
        # the hard constraint's distance function: zero on the hole, positive inside
        phi = jax.vmap(adf(dom, ("hole",)))
        assert np.abs(np.asarray(phi(hole))).max() < 1e-12 and np.asarray(phi(inner)).min() > 0
    # interior area 8 - 1/4 by Monte Carlo over 2^16 points: acceptance p = 0.97, standard
    # error sqrt(p (1 - p) / 2^16) = 6.7e-4 of the box's 8, i.e. 5.4e-3; 4 sigma
    assert dom.estimate("interior") == pytest.approx(7.75, abs=0.022)
    # the hole's parts are trimmed by the rectangle but lie inside it: nothing is rejected
    assert dom.acceptance("hole") == 1.0 and math.isclose(dom.estimate("hole"), 2.0)
    loops = outline(dom)
    assert len(loops) == 2  # the rectangle and the square hole
