"""Shapes of pinnkit.geometry: measures, signed distances, normals, named boundaries.

Monte Carlo measures use 2^16 scrambled Sobol candidates; the tolerance 4 sigma,
sigma = sqrt(p (1 - p) / 2^16) of the acceptance p times the candidates' measure
(quasi-random points do better than that, so the test is not flaky).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.geometry import (
    Ball,
    Cuboid,
    Cylinder,
    Disk,
    Ellipse,
    ExtrudedPolygon,
    Polygon,
    Rectangle,
    Triangle,
    TriangleMesh,
    difference,
    intersection,
    rotate,
    scale,
    translate,
    union,
)

N_MC = 2**16

L_SHAPE = [[-1, -1], [0, -1], [0, 0], [1, 0], [1, 1], [-1, 1]]


def _ellipse_perimeter(a, b):  # Ramanujan II is not exact; adaptive quadrature is
    from scipy.integrate import quad

    return quad(lambda t: math.hypot(a * math.sin(t), b * math.cos(t)), 0, 2 * math.pi, epsabs=1e-13)[0]


PRIMITIVES = {
    "rectangle": (Rectangle([0, 0], [2, 0.5]), 1.0, 5.0),
    "disk": (Disk([0.3, -0.2], 0.7), math.pi * 0.49, 2 * math.pi * 0.7),
    "ellipse": (Ellipse([0, 0], [1.0, 0.4]), math.pi * 0.4, _ellipse_perimeter(1.0, 0.4)),
    "polygon": (Polygon(L_SHAPE), 3.0, 8.0),
    "triangle": (Triangle([0, 0], [1, 0], [0, 2]), 1.0, 3 + math.sqrt(5)),
    "box": (Cuboid([0, 0, 0], [1, 2, 0.5]), 1.0, 7.0),
    "ball": (Ball([0.1, 0.2, 0.3], 0.7), 4 / 3 * math.pi * 0.7**3, 4 * math.pi * 0.49),
    "cylinder": (Cylinder([0, 0, 0], 0.5, 2.0), math.pi * 0.5, 2 * math.pi + math.pi * 0.5),
    "extrusion": (ExtrudedPolygon(L_SHAPE, 0, 1), 3.0, 8.0 + 6.0),
}


def _sigma(shape, piece, exact_total):
    p = shape.acceptance(piece)
    return exact_total / max(p, 1e-12) * math.sqrt(p * (1 - p) / N_MC)


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_measures_exact_and_monte_carlo(name):
    shape, vol, area = PRIMITIVES[name]
    assert shape.measure() == pytest.approx(vol, rel=1e-12)
    assert shape.boundary_measure() == pytest.approx(area, rel=1e-9)
    assert abs(shape.estimate("interior", N_MC) - vol) <= 4 * _sigma(shape, "interior", vol) + 1e-12


def _rect_minus_disk():
    return difference(Rectangle([0, 0], [2.2, 0.41], names={"left": "inlet", "right": "outlet",
                                                            "bottom": "walls", "top": "walls"}),
                      Disk([0.2, 0.2], 0.05, name="cylinder"))


def test_csg_measures_by_monte_carlo():
    """Area and boundary lengths of CSG shapes against hand-computed values."""
    ch = _rect_minus_disk()
    area = 2.2 * 0.41 - math.pi * 0.05**2
    assert abs(ch.estimate() - area) <= 4 * _sigma(ch, "interior", area)
    assert ch.estimate("cylinder") == pytest.approx(2 * math.pi * 0.05, rel=1e-12)  # untrimmed: all kept
    # two unit squares overlapping in [1, 1.5] x [0, 1]: area 2 - 0.5, perimeter 2*2.5 + 2
    u = union(Rectangle([0, 0], [1.5, 1]), Rectangle([1, 0], [2.5, 1]))
    assert abs(u.estimate() - 2.5) <= 4 * _sigma(u, "interior", 2.5)
    for piece, exact in (("bottom", 2.5), ("left", 1.0), ("right", 1.0), ("boundary", 7.0)):
        got = u.estimate(piece)
        assert abs(got - exact) <= 4 * _sigma(u, piece, exact) + 1e-9, (piece, got)
    # a disk cut by a half-plane box: half the disk, boundary pi r + 2 r
    half = intersection(Disk([0, 0], 1.0), Rectangle([-2, 0], [2, 2], name="cut"))
    assert abs(half.estimate() - math.pi / 2) <= 4 * _sigma(half, "interior", math.pi / 2)
    assert abs(half.estimate("circle") - math.pi) <= 4 * _sigma(half, "circle", math.pi)
    assert abs(half.estimate("cut") - 2.0) <= 4 * _sigma(half, "cut", 2.0)


def test_named_boundaries_survive_csg():
    ch = _rect_minus_disk()
    assert set(ch.pieces()) == {"interior", "boundary", "inlet", "outlet", "walls", "cylinder"}
    key = jax.random.key(0)
    x = np.asarray(ch.sample(key, 2000, "inlet"))
    assert np.all(x[:, 0] == 0.0) and x[:, 1].min() >= 0 and x[:, 1].max() <= 0.41
    w = np.asarray(ch.sample(key, 2000, "walls"))
    low, high = np.isclose(w[:, 1], 0.0), np.isclose(w[:, 1], 0.41)
    assert np.all(low | high) and low.any() and high.any()
    c = np.asarray(ch.sample(key, 2000, "cylinder"))
    np.testing.assert_allclose(np.hypot(c[:, 0] - 0.2, c[:, 1] - 0.2), 0.05, rtol=1e-5)
    # a hole that sticks out of the plate: only its inner arc is boundary
    cut = difference(Rectangle([0, 0], [1, 1]), Disk([1.0, 0.5], 0.25, name="notch"))
    arc = np.asarray(cut.sample(key, 4000, "notch"))
    assert arc[:, 0].max() <= 1.0 and abs(cut.estimate("notch") - math.pi * 0.25) < 4 * _sigma(
        cut, "notch", math.pi * 0.25)
    right = np.asarray(cut.sample(key, 4000, "right"))
    assert np.all(np.abs(right[:, 1] - 0.5) >= 0.25 - 1e-6)  # the notch's chord is gone
    with pytest.raises(ValueError, match="not boundary names"):
        Rectangle([0, 0], [1, 1], names={"lefft": "inlet"})


def test_sdf_sign_and_magnitude():
    d = Disk([0.0, 0.0], 1.0)
    pts = jnp.asarray([[0.0, 0.0], [0.5, 0.0], [2.0, 0.0], [0.0, -3.0]])
    np.testing.assert_allclose(jax.vmap(d.sdf)(pts), [-1.0, -0.5, 1.0, 2.0], atol=1e-7)
    r = Rectangle([0, 0], [2, 1])
    pts = jnp.asarray([[1.0, 0.5], [1.0, 0.1], [3.0, 0.5], [3.0, 2.0], [-1.0, -1.0]])
    np.testing.assert_allclose(jax.vmap(r.sdf)(pts), [-0.5, -0.1, 1.0, math.sqrt(2), math.sqrt(2)], atol=1e-6)
    poly = Polygon(L_SHAPE)  # re-entrant corner at the origin
    pts = jnp.asarray([[0.5, -0.5], [-0.5, -0.5], [0.5, 0.5], [2.0, 0.0]])
    np.testing.assert_allclose(jax.vmap(poly.sdf)(pts), [0.5, -0.5, -0.5, 1.0], atol=1e-6)
    # the exact distance of a cuboid / extrusion / cylinder at points with known answers
    box = Cuboid([0, 0, 0], [1, 1, 1])
    np.testing.assert_allclose(box.sdf(jnp.asarray([2.0, 2.0, 0.5])), math.sqrt(2), rtol=1e-6)
    cyl = Cylinder([0, 0, 0], 1.0, 2.0)
    np.testing.assert_allclose(cyl.sdf(jnp.asarray([2.0, 0.0, 2.0])), math.sqrt(2), rtol=1e-6)
    ext = ExtrudedPolygon(L_SHAPE, 0, 1)
    np.testing.assert_allclose(ext.sdf(jnp.asarray([0.5, -0.5, 0.5])), 0.5, rtol=1e-6)
    # CSG / ellipse: exact sign; bound |sdf| <= distance (the distance to the ellipse's
    # nearest point along the major axis is 1, the bound gives min(a, b) * 1 = 0.4)
    e = Ellipse([0, 0], [1.0, 0.4])
    v = float(e.sdf(jnp.asarray([2.0, 0.0])))
    assert 0 < v <= 1.0
    ch = _rect_minus_disk()
    xs = ch.sample(jax.random.key(3), 4000, "interior")
    assert float(jnp.max(jax.vmap(ch.sdf)(xs))) < 0
    np.testing.assert_allclose(ch.sdf(jnp.asarray([0.2, 0.2])), 0.05, rtol=1e-5)  # centre of the hole


def _outward(shape, piece, x):
    """Finite-difference outward normal: gradient of the sdf a step inside (exact SDFs)."""
    return jax.vmap(lambda p: shape.normal(p, piece))(x)


@pytest.mark.parametrize("name", ["rectangle", "disk", "ellipse", "polygon", "ball", "cylinder", "extrusion"])
def test_normals_are_unit_outward_and_match_the_sdf_gradient(name):
    shape = PRIMITIVES[name][0]
    x = shape.sample(jax.random.key(1), 2000, "boundary")
    n = _outward(shape, "boundary", x)
    np.testing.assert_allclose(np.linalg.norm(n, axis=1), 1.0, rtol=1e-5)
    # a step h outside along n raises the sdf by h (first order; exact for these shapes
    # except the ellipse bound, whose gradient is still normal) and inside lowers it
    h = 1e-3
    up = jax.vmap(shape.sdf)(x + h * n) - jax.vmap(shape.sdf)(x - h * n)
    assert float(jnp.min(up)) > 0
    if name != "ellipse":
        corner = np.asarray(jnp.abs(up - 2 * h) > 1e-4)
        assert corner.mean() < 0.01  # only points within h of a corner or edge differ


def test_normals_analytic_after_csg_and_transforms():
    ch = _rect_minus_disk()
    c = ch.sample(jax.random.key(2), 500, "cylinder")
    n = _outward(ch, "cylinder", c)
    np.testing.assert_allclose(n, -(c - jnp.asarray([[0.2, 0.2]])) / 0.05, atol=2e-4)  # into the hole
    w = ch.sample(jax.random.key(2), 500, "walls")
    n = _outward(ch, "walls", w)
    np.testing.assert_allclose(n[:, 1], np.where(np.asarray(w[:, 1]) > 0.2, 1.0, -1.0))
    # a rotated, scaled, translated square: normals rotate with it, measures scale
    sq = translate(scale(rotate(Rectangle([-1, -1], [1, 1]), math.pi / 6), 0.5), [3.0, 1.0])
    assert sq.measure() == pytest.approx(1.0)
    assert sq.boundary_measure() == pytest.approx(4.0)
    r = sq.sample(jax.random.key(0), 200, "right")
    n = _outward(sq, "right", r)
    want = np.tile([math.cos(math.pi / 6), math.sin(math.pi / 6)], (200, 1))
    np.testing.assert_allclose(n, want, atol=1e-6)
    np.testing.assert_allclose(jax.vmap(sq.sdf)(r), 0.0, atol=1e-6)
    x3 = rotate(Cylinder([0, 0, 0], 0.5, 2.0), math.pi / 2, axis=[1, 0, 0])  # axis along -y
    top = x3.sample(jax.random.key(0), 100, "top")
    np.testing.assert_allclose(_outward(x3, "top", top), np.tile([0, -1.0, 0], (100, 1)), atol=1e-6)


def test_sampling_is_uniform_on_boundary_and_interior():
    """Arc-length uniformity on an eccentric ellipse and area uniformity in a polygon:
    the fraction of points in a region matches its share of the measure (4 sigma)."""
    e = Ellipse([0, 0], [1.0, 0.3])
    x = np.asarray(e.sample(jax.random.key(0), 20000, "boundary"))
    quad = (x[:, 0] > 0.5)  # arc with x > 0.5: share by quadrature
    from scipy.integrate import quad as integrate

    t0 = math.acos(0.5)
    arc = integrate(lambda t: math.hypot(math.sin(t), 0.3 * math.cos(t)), -t0, t0)[0]
    share = arc / e.boundary_measure()
    assert abs(quad.mean() - share) < 4 * math.sqrt(share * (1 - share) / 20000)
    p = Polygon(L_SHAPE)
    y = np.asarray(p.sample(jax.random.key(1), 20000, "interior"))
    third = (y[:, 0] < 0) & (y[:, 1] < 0)  # one of the three unit squares
    assert abs(third.mean() - 1 / 3) < 4 * math.sqrt(2 / 9 / 20000)
    assert np.asarray(jax.vmap(p.sdf)(jnp.asarray(y))).max() < 0


@pytest.mark.parametrize("vertices,match", [
    ([[0, 0], [1, 1], [1, 0], [0, 1]], "self-intersecting"),
    ([[0, 0], [1, 0], [2, 0]], "no area"),
    ([[0, 0], [1, 0], [1, 0], [0, 1]], "coincide"),
    ([[0, 0], [1, 0]], "at least 3"),
])
def test_bad_polygons_are_rejected(vertices, match):
    with pytest.raises(ValueError, match=match):
        Polygon(vertices)


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="radius must be finite and > 0"):
        Disk([0, 0], -1.0)
    with pytest.raises(ValueError, match="lower < upper"):
        Rectangle([0, 0], [0, 1])
    with pytest.raises(ValueError, match="intersection is empty"):
        intersection(Disk([0, 0], 1.0), Disk([5, 0], 1.0))
    lens = intersection(Disk([0, 0], 1.0), Rectangle([0.9, 0.9], [2, 2]))  # boxes meet, shapes do not
    with pytest.raises(ValueError, match="interior is empty"):
        lens.acceptance("interior")
    with pytest.raises(ValueError, match="different coordinates"):
        union(Disk([0, 0], 1.0), Ball([0, 0, 0], 1.0))


def _torus_mesh(sections=(24, 12)):
    import trimesh

    t = trimesh.creation.torus(major_radius=1.0, minor_radius=0.4, major_sections=sections[0],
                               minor_sections=sections[1])
    return t


def test_triangle_mesh_inside_distance_sampling(tmp_path):
    t = _torus_mesh()
    path = tmp_path / "torus.stl"
    t.export(path)
    m = TriangleMesh.from_file(path)
    # STL stores float32 vertices: the volume and area agree to float32 rounding
    assert m.measure() == pytest.approx(t.volume, rel=1e-6)
    assert m.boundary_measure() == pytest.approx(t.area, rel=1e-6)
    assert abs(m.estimate() - t.volume) <= 4 * _sigma(m, "interior", t.volume)
    pts = np.random.default_rng(0).uniform(-1.5, 1.5, (300, 3)) * [1, 1, 0.4]
    sd = np.asarray(jax.vmap(m.sdf)(jnp.asarray(pts, jnp.float32)))
    np.testing.assert_allclose(sd, m.host_signed_distance(pts), atol=2e-6)
    np.testing.assert_array_equal(sd < 0, m.host_contains(pts))
    b = m.sample(jax.random.key(0), 1000, "boundary")
    np.testing.assert_allclose(jax.vmap(m.sdf)(b), 0.0, atol=1e-6)
    n = jax.vmap(lambda p: m.normal(p, "surface"))(b)
    # outward: stepping along n leaves the solid
    assert bool(jnp.all(jax.vmap(m.sdf)(b + 1e-3 * n) > 0))


def test_bad_meshes_are_rejected(tmp_path):
    import trimesh

    open_box = trimesh.creation.box()
    open_box.update_faces(np.arange(len(open_box.faces)) != 0)
    path = tmp_path / "open.stl"
    open_box.export(path)
    with pytest.raises(ValueError, match="not watertight"):
        TriangleMesh.from_file(path)
    with pytest.raises(ValueError, match="not found"):
        TriangleMesh.from_file(tmp_path / "missing.stl")
