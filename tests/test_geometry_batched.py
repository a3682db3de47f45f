"""Vectorised CSG (`pinnkit.geometry.batched`): the stacked path gives the numbers of the
operand-by-operand path on small trees, and large trees build and sample correctly."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.geometry import Disk, Rectangle, batched, difference, union
from pinnkit.geometry.base import all_parts
from pinnkit.geometry.config import build_domain
from pinnkit.geometry.csg import Difference

EPS32 = float(jnp.finfo(jnp.float32).eps)


def _disks(n, names=None):
    """``n`` disks on a grid, overlapping their neighbours, two of them coincident."""
    out = []
    for i in range(n):
        c = [0.3 * (i % 5), 0.3 * (i // 5)]
        out.append(Disk(c, 0.2, name=None if names is None else names(i)))
    out.append(Disk([0.0, 0.0], 0.2, name=None if names is None else "twin"))  # coincides with 0
    return out


def _per_part_keep(shape, x, k, eps):
    """The reference: each candidate tested by its own part's `Part.keep`."""
    parts = shape.piece_parts("boundary")
    keeps = jnp.stack([jax.vmap(lambda y, p=p: p.keep(y, eps))(x) for p in parts])
    return np.asarray(keeps[k, jnp.arange(x.shape[0])])


def test_stacked_sdf_equals_the_operand_by_operand_min():
    shapes = _disks(12) + [Rectangle([0.1 * i, 0.0], [0.1 * i + 0.5, 0.4]) for i in range(6)]
    x = jax.random.uniform(jax.random.key(0), (200, 2), minval=-0.5, maxval=1.8)
    got = jax.vmap(lambda p: jnp.min(batched.stacked_sdf(shapes, p)))(x)
    want = jax.vmap(lambda p: jnp.min(jnp.stack([s.sdf(p) for s in shapes])))(x)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    grad = jax.vmap(jax.grad(lambda p: jnp.min(batched.stacked_sdf(shapes, p))))(x)
    ref = jax.vmap(jax.grad(lambda p: jnp.min(jnp.stack([s.sdf(p) for s in shapes]))))(x)
    np.testing.assert_allclose(grad, ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("make", [
    lambda: union(*_disks(12)),
    lambda: difference(Rectangle([-0.4, -0.4], [1.5, 1.1]), *_disks(9)),
    lambda: union(*[Rectangle([0.5 * i, 0.0], [0.5 * i + 0.5, 1.0]) for i in range(6)],  # shared walls
                  Disk([1.5, 1.0], 0.3)),
])
def test_vectorised_candidates_keep_what_each_part_keeps(make):
    shape = make()
    assert batched.vectorise(shape, "boundary")
    u = jax.random.uniform(jax.random.key(1), (600, 2))
    x, keep = batched.candidates(shape, u, "boundary")
    k, v = batched.choose_parts(shape, u, "boundary")
    parts = shape.piece_parts("boundary")
    # the candidates are the parts' own points (identity frames: the same arithmetic)
    ref_x = jnp.stack([p.from_unit(v) for p in parts])[k, jnp.arange(u.shape[0])]
    np.testing.assert_allclose(x, ref_x, rtol=0, atol=1e-6)
    ref = _per_part_keep(shape, x, k, shape._eps(jnp.float32))
    np.testing.assert_array_equal(np.asarray(keep), ref)
    assert 0 < ref.sum() < ref.size  # both kept and rejected candidates were tested


def test_difference_of_many_cuts_is_the_chain_of_cuts():
    plate = Rectangle([0, 0], [2, 1], names={"left": "inlet"})
    holes = [Disk([0.4, 0.5], 0.2, name="a"), Disk([0.7, 0.5], 0.2, name="b"),
             Disk([1.5, 0.5], 0.1, name="a")]
    flat = difference(plate, *holes)
    chain = Difference(Difference(Difference(plate, holes[0]), holes[1]), holes[2])
    assert flat.pieces() == chain.pieces()
    u = jax.random.uniform(jax.random.key(2), (4000, 2))
    for piece in flat.pieces():
        xf, kf = flat.candidates(u, piece)
        xc, kc = chain.candidates(u, piece)
        np.testing.assert_allclose(xf, xc, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(kf, kc)


def test_thousand_disk_union_builds_and_samples_its_named_boundaries():
    n = 1000
    spec = {"union": [{"disk": {"center": [0.1 * (i % 40), 0.1 * (i // 40)], "radius": 0.07,
                                "name": f"d{i}"}} for i in range(n)]}
    shape = build_domain(spec)
    assert len(shape.pieces()) == n + 2
    centers = np.asarray([[0.1 * (i % 40), 0.1 * (i // 40)] for i in range(n)])
    for i in (517, 999):
        pts = np.asarray(shape.sample(jax.random.key(i), 64, f"d{i}"), np.float64)
        r = np.linalg.norm(pts - centers[i], axis=1)
        np.testing.assert_allclose(r, 0.07, rtol=0, atol=16 * EPS32)  # on its circle
        others = np.linalg.norm(pts[:, None, :] - np.delete(centers, i, 0)[None], axis=2) - 0.07
        assert others.min() > -1e-6  # inside no other disk: the part of the boundary it is
    # a disk overlapping 4 neighbours keeps 4 arcs of 1 - 4 * 2 asin(0.05/0.07)/(2 pi) of its circle
    inner = 1.0 - 4 * 2 * math.asin(0.05 / 0.07) / (2 * math.pi)
    assert abs(shape.acceptance("d517") - inner) < 0.05


def test_acceptance_once_per_tree_agrees_with_the_per_piece_estimate():
    from pinnkit.geometry.rejection import estimate_acceptance

    shape = union(*_disks(20, names=lambda i: f"h{i}"))
    assert batched.per_tree(shape)
    for piece in ("boundary", "h0", "h7", "h19"):
        ref = estimate_acceptance(shape, piece)
        got = shape.acceptance(piece)
        # lowered by <= 3 standard errors of its >= 2^10 candidates, never raised
        assert ref - 4 * math.sqrt(ref * (1 - ref) / 2**10) - 0.01 <= got <= ref + 0.01, piece


def test_a_side_trimmed_by_a_union_of_many_holes_keeps_what_its_part_keeps():
    """One side of a plate minus 40 holes, half of them cut into that side: a single part
    whose trim is the holes' union (with the coincident-surface rule), which the
    vectorised test splits into its disks (was: the union's nearest-part normal for each
    candidate, 80 traced operations, a 1000-hole plate > 120 s to build)."""
    holes = [Disk([0.05 + 0.1 * i, 0.0 if i % 2 else 0.5], 0.04, name="holes") for i in range(40)]
    shape = difference(Rectangle([0, 0], [4, 1]), *holes)
    assert batched.vectorise(shape, "bottom") and len(shape.piece_parts("bottom")) == 1
    u = jax.random.uniform(jax.random.key(3), (2000, 2))
    x, keep = batched.candidates(shape, u, "bottom")
    (part,) = shape.piece_parts("bottom")
    ref = np.asarray(jax.vmap(lambda y: part.keep(y, shape._eps(jnp.float32)))(x))
    np.testing.assert_array_equal(np.asarray(keep), ref)
    # the bottom keeps what the 20 half-disks cut into it leave: 4 - 20 * 0.08
    np.testing.assert_allclose(ref.mean(), (4 - 20 * 0.08) / 4, atol=0.03)


def test_a_shapes_methods_are_plain_bound_methods():
    """Equinox makes ``module.method`` a `BoundMethod` module, whose construction flattens
    the module: on a 1000-disk union each method call cost the whole tree (35 CPU s of
    its acceptance estimates). Shapes hand out plain methods, which transforms still take."""
    import types

    shape = union(*_disks(12))
    assert type(shape.sdf) is types.MethodType and type(shape.pieces) is types.MethodType
    x = jnp.asarray([[0.0, 0.0], [5.0, 5.0]])
    np.testing.assert_array_equal(jax.jit(jax.vmap(shape.sdf))(x) < 0, [True, False])


def test_trims_far_away_are_dropped_and_splits_are_exact():
    shape = difference(Rectangle([0, 0], [10, 1]), *[Disk([0.5 + i, 0.5], 0.2) for i in range(10)])
    parts = all_parts(shape)
    full = sum(len(p.trims) for p in parts)
    kept = sum(len(batched.keep_trims(shape, p)) for p in parts)
    # each hole part keeps only the plate (it lies inside it) once split: nothing else is near
    assert kept < full / 4
    hole = [p for p in parts if p.flip][3]
    assert [type(s).__name__ for s, _, _ in batched.keep_trims(shape, hole)] == ["Rectangle"]


def test_polygon_distance_is_one_stacked_evaluation_with_the_same_numbers():
    from pinnkit.geometry import Polygon, rotate
    from pinnkit.geometry.distance import part_adf, piece_adf, r_equiv, segment_groups

    th = np.linspace(0, 2 * np.pi, 40, endpoint=False)
    r = 1.0 + 0.3 * np.cos(5 * th)
    for poly in (Polygon(np.stack([r * np.cos(th), r * np.sin(th)], 1)),
                 rotate(Polygon(np.stack([r * np.cos(th), r * np.sin(th)], 1)), 0.3)):
        assert segment_groups(poly, "boundary")[1] == ()  # every side in one group
        parts = poly.piece_parts("boundary")
        x = jax.random.uniform(jax.random.key(3), (50, 2), minval=-0.6, maxval=0.6)

        def ref(p, parts=parts):
            return r_equiv([part_adf(q, p) for q in parts])

        def adf(p, poly=poly):
            return piece_adf(poly, "boundary", p)

        got = jax.vmap(adf)(x)
        np.testing.assert_allclose(got, jax.vmap(ref)(x), rtol=2e-6, atol=1e-7)
        g = jax.vmap(jax.grad(adf))(x)
        np.testing.assert_allclose(g, jax.vmap(jax.grad(ref))(x), rtol=1e-5, atol=1e-6)


def test_unknown_piece_names_a_few_and_the_closest():
    from pinnkit.geometry import Polygon

    th = np.linspace(0, 2 * np.pi, 500, endpoint=False)
    poly = Polygon(np.stack([np.cos(th), np.sin(th)], 1))
    with pytest.raises(ValueError) as e:
        poly.check_piece("sde123")
    msg = str(e.value)
    assert "Did you mean 'side123'?" in msg and "and 490 more" in msg and len(msg) < 400, msg


def test_limits_are_refused_up_front_naming_the_key():
    from pinnkit.errors import ConfigError
    from pinnkit.geometry import DistanceDirichlet
    from pinnkit.geometry.config import GeometryError

    many = {"union": [{"disk": {"center": [0.01 * i, 0], "radius": 1}} for i in range(2001)]}
    with pytest.raises(GeometryError,
                       match=r"problem\.params\.domain\.union: union of 2001 shapes: at most 2000"):
        build_domain(many)
    th = np.linspace(0, 2 * np.pi, 20001, endpoint=False)
    with pytest.raises(GeometryError,
                       match=r"domain\.polygon: polygon of 20001 vertices: at most 20000"):
        build_domain({"polygon": {"vertices": np.stack([np.cos(th), np.sin(th)], 1).tolist()}})
    with pytest.raises(ConfigError,
                       match=r"network\.hard_constraint: .* 2450 \(part, trimming operand\) pairs"):
        fifty = union(*[Disk([0.1 * i, 0], 0.08) for i in range(50)])
        DistanceDirichlet(fifty, ("boundary",), ((0,),), (None,))


def test_ten_thousand_vertex_polygon_builds_samples_and_takes_a_hard_constraint():
    """Issue 38's large input (its build time is measured by scripts/bench_geometry.py
    --build, not here): every side is a piece, points lie on their side, the boundary's
    distance function vanishes there and is positive inside. Parts, atoms and frames
    hand out plain methods (a `BoundMethod` module per access cost ~1 CPU s here)."""
    import types

    from pinnkit.geometry.distance import adf

    n = 10_000
    th = np.linspace(0, 2 * np.pi, n, endpoint=False)
    r = 1.0 + 0.3 * np.cos(7 * th)
    verts = np.stack([r * np.cos(th), r * np.sin(th)], 1)
    shape = build_domain({"polygon": {"vertices": verts.tolist()}})
    assert len(shape.pieces()) == n + 2
    part = shape.piece_parts("side17")[0]
    assert all(type(m) is types.MethodType for m in (part.normal, part.atom.measure, part.frame.vector))
    side = np.asarray(shape.sample(jax.random.key(0), 32, "side17"), np.float64)
    a, b = verts[17], verts[18]
    cross = (b - a)[0] * (side - a)[:, 1] - (b - a)[1] * (side - a)[:, 0]
    np.testing.assert_allclose(cross / np.linalg.norm(b - a), 0.0, atol=16 * EPS32)
    phi = jax.jit(jax.vmap(adf(shape)))
    np.testing.assert_allclose(phi(jnp.asarray(side)), 0.0, atol=1e-5)
    assert float(phi(jnp.zeros((1, 2)))[0]) > 0.0  # the centre: inside (an ADF, not the distance)
