"""Approximate distance functions and DistanceDirichlet: zero on the pieces, positive
inside, normalised to first order, exact boundary values, and derivatives through the
Taylor engine equal to nested autodiff (float64, rtol 1e-10: both are exact up to
rounding, summing the same terms in different orders), also near corners."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import Autodiff, Layout, Taylor
from pinnkit.geometry import (
    Ball,
    Cuboid,
    Disk,
    DistanceDirichlet,
    Polygon,
    Rectangle,
    adf,
    difference,
    signed_adf,
)
from pinnkit.geometry.distance import normalised, side_point
from pinnkit.nn.nets import build_mlp_network

L_SHAPE = [[-1, -1], [0, -1], [0, 0], [1, 0], [1, 1], [-1, 1]]


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def _channel():
    return difference(Rectangle([0, 0], [2.2, 0.41], names={"left": "inlet", "right": "outlet",
                                                            "bottom": "walls", "top": "walls"}),
                      Disk([0.2, 0.2], 0.05, name="cylinder"))


SHAPES = {
    "hole": lambda: difference(Rectangle([-1, -1], [1, 1]), Disk([0.3, 0.2], 0.4, name="hole")),
    "lshape": lambda: Polygon(L_SHAPE),
    "ball_hole": lambda: difference(Cuboid([-1, -1, -1], [1, 1, 1]), Ball([0.2, 0.1, 0.0], 0.4)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_adf_zero_on_boundary_positive_inside(name, f64):
    shape = SHAPES[name]()
    phi = jax.vmap(adf(shape))
    key = jax.random.key(0)
    b = shape.sample(key, 2000, "boundary", jnp.float64)
    i = shape.sample(key, 2000, "interior", jnp.float64)
    assert float(jnp.max(jnp.abs(phi(b)))) < 1e-7  # points on the boundary up to rounding
    assert float(jnp.min(phi(i))) > 0
    s = jax.vmap(lambda x: signed_adf(shape, x))
    far = jnp.asarray([[3.0] * shape.dim])
    assert float(s(far)[0]) < 0 < float(jnp.min(s(i)))


def test_adf_normalised_to_first_order(f64):
    """phi(x + h n_in) / h -> 1 at boundary points away from corners (first order)."""
    shape = _channel()
    phi = adf(shape, ("inlet", "walls", "cylinder"))
    for piece in ("inlet", "walls", "cylinder"):
        x = shape.sample(jax.random.key(1), 400, piece, jnp.float64)
        n = jax.vmap(lambda p, piece=piece: shape.normal(p, piece))(x)
        # away from the corners (distance > 0.02 from every other part of the boundary)
        corner = np.asarray([[0, 0], [0, 0.41], [2.2, 0], [2.2, 0.41]])
        far = np.min(np.linalg.norm(np.asarray(x)[:, None, :] - corner[None], axis=2), axis=1) > 0.05
        h = 1e-6
        slope = jax.vmap(phi)(x - h * n) / h
        np.testing.assert_allclose(np.asarray(slope)[far], 1.0, atol=1e-4)
    out = shape.sample(jax.random.key(2), 200, "outlet", jnp.float64)
    mid = np.asarray(out[:, 1] > 0.05) & np.asarray(out[:, 1] < 0.36)
    assert float(jnp.min(jax.vmap(phi)(out)[mid])) > 0.01  # the free outlet is not forced


def test_distance_dirichlet_values_on_every_piece(f64):
    """u = parabolic inflow on the inlet, 0 on walls and cylinder, free on the outlet; the
    blend is exact on each piece whatever the network says."""
    shape = _channel()
    inflow = lambda x: jnp.stack([4 * 0.3 * x[1] * (0.41 - x[1]) / 0.41**2, 0.0 * x[0]])  # noqa: E731
    hd = DistanceDirichlet(shape, ("inlet", "walls", "cylinder"), ((0, 1), (0, 1), (0, 1)),
                           (inflow, None, None))
    y = jnp.asarray([0.7, -1.3, 2.0])
    for piece in ("inlet", "walls", "cylinder"):
        x = shape.sample(jax.random.key(3), 300, piece, jnp.float64)
        out = jax.vmap(lambda p: hd(p, y))(x)
        want = jax.vmap(inflow)(x) if piece == "inlet" else jnp.zeros((300, 2))
        np.testing.assert_allclose(out[:, :2], want, atol=1e-7)
        np.testing.assert_allclose(out[:, 2], 2.0)  # pressure untouched
    x = shape.sample(jax.random.key(4), 300, "outlet", jnp.float64)
    assert float(jnp.min(jnp.abs(jax.vmap(lambda p: hd(p, y))(x)[:, 0]))) > 0  # not forced
    with pytest.raises(ValueError, match="overlapping"):
        DistanceDirichlet(shape, ("boundary", "walls"), ((0,), (0,)), (None, None))


def test_normalised_factor_has_maximum_one_and_keeps_the_boundary_exact(f64):
    """`normalised` divides each constrained output's factor by its maximum over a sample
    (0.1 on this channel 0.41 high: the pieces' distances join by R-equivalence), so
    max D = 1 up to the sample and the rounding to two digits (checked on fresh points:
    within 10 %); the boundary data stay exact and the free output untouched."""
    shape = _channel()
    inflow = lambda x: jnp.stack([4 * 0.3 * x[1] * (0.41 - x[1]) / 0.41**2, 0.0 * x[0]])  # noqa: E731
    plain = DistanceDirichlet(shape, ("inlet", "walls", "cylinder"), ((0, 1), (0, 1), (0,)),
                              (inflow, None, None))
    hd = normalised(plain)
    assert [k for k, _ in hd.scale] == [0, 1] and all(0 < s < 0.5 for _, s in hd.scale)
    x = shape.sample(jax.random.key(7), 20000, "interior", jnp.float64)
    a0, d0 = jax.vmap(lambda p: plain.lifting(p, 3))(x)
    a, d = jax.vmap(lambda p: hd.lifting(p, 3))(x)
    np.testing.assert_array_equal(a, a0)  # the data's blend is not scaled
    assert 0.9 < float(jnp.max(d[:, 0])) < 1.1 and 0.9 < float(jnp.max(d[:, 1])) < 1.1
    np.testing.assert_allclose(np.asarray(d[:, :2]) * [s for _, s in hd.scale], d0[:, :2], rtol=1e-14)
    np.testing.assert_array_equal(d[:, 2], 1.0)
    y = jnp.asarray([0.7, -1.3, 2.0])
    for piece in ("inlet", "walls", "cylinder"):
        xb = shape.sample(jax.random.key(3), 300, piece, jnp.float64)
        out = jax.vmap(lambda p: hd(p, y))(xb)
        want = jax.vmap(inflow)(xb) if piece == "inlet" else jnp.zeros((300, 2))
        np.testing.assert_allclose(out[:, 0], want[:, 0], atol=1e-7)
        if piece != "cylinder":  # v is not prescribed on the cylinder here
            np.testing.assert_allclose(out[:, 1], want[:, 1], atol=1e-7)


def _residual(f):
    return jnp.stack([f["u"], f.partial("u", "x"), f.partial("u", "y"), f.laplacian("u"),
                      f.partial("u", "x", "y"), f.partial("u", "x", "x", "y")])


def _assert_close(got, ref, rtol=1e-10):
    got, ref = np.asarray(got), np.asarray(ref)
    scale = np.maximum(np.abs(ref).max(axis=0, keepdims=True), 1e-300)
    np.testing.assert_array_less(np.abs(got - ref) / scale, rtol)


@pytest.mark.slow
def test_taylor_through_distance_functions_matches_autodiff(f64):
    """A network with the ADF transform on the L-shape, derivatives to third order, at
    random interior points and at distances 1e-2 ... 1e-6 from the re-entrant corner
    (0, 0), a convex corner (1, 1) and the end of a trimmed edge (0, -1) (one compile
    per method: the generic rule's third-order rows are what the time goes into)."""
    shape = Polygon(L_SHAPE)
    g = lambda x: jnp.atleast_1d(jnp.sin(x[0]) * x[1])  # noqa: E731
    hd = DistanceDirichlet(shape, ("boundary",), ((0,),), (g,))
    net = build_mlp_network(("x", "y"), ("u",), width=6, depth=2, activation="tanh", init="glorot_normal",
                            bounds=((-1, -1), (1, 1)), transform=hd, key=jax.random.key(0), dtype=jnp.float64)
    pts = [np.asarray(shape.sample(jax.random.key(5), 8, "interior", jnp.float64))]
    for c, into in (((0.0, 0.0), (-1.0, 0.5)), ((1.0, 1.0), (-1.0, -0.7)), ((0.0, -1.0), (-0.6, 1.0))):
        d = np.asarray(into) / np.linalg.norm(into)
        pts.append(np.asarray([np.asarray(c) + r * d for r in (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)]))
    layout = Layout(("x", "y"), ("x", "y"), ("u",))
    x = jnp.asarray(np.concatenate(pts))
    run = lambda m: jax.jit(jax.vmap(lambda p: m.evaluate(lambda f, c: _residual(f), net, layout, p, {})))(x)  # noqa: E731
    got, ref = run(Taylor()), run(Autodiff())
    assert np.all(np.isfinite(np.asarray(ref)))
    # per group of points (interior, each corner): relative to the group's own scale, as
    # derivatives near a corner are orders of magnitude larger than elsewhere
    for rows in np.split(np.arange(x.shape[0]), np.cumsum([len(p) for p in pts])[:-1]):
        _assert_close(got[rows], ref[rows])


def test_what_happens_at_corners(f64):
    """Documented behaviour (docs/geometry.md): phi is continuous and zero at a corner, its
    second derivatives grow like 1/r towards a re-entrant corner, and exactly on the
    boundary values are exact while the guarded derivatives are zero, not NaN."""
    shape = Polygon(L_SHAPE)
    phi = adf(shape)
    d = jnp.asarray([-1.0, 1.0]) / math.sqrt(2)  # the bisector into the domain
    hess = lambda r: float(jnp.linalg.norm(jax.hessian(phi)(r * d)))  # noqa: E731
    ratio = hess(1e-4) / hess(1e-3)
    assert 3 < ratio < 30, ratio  # ~ r^-1
    assert float(phi(1e-8 * d)) < 1e-7
    on_edge = jnp.asarray([0.5, 0.0])
    assert float(phi(on_edge)) == 0.0
    assert np.all(np.isfinite(np.asarray(jax.grad(phi)(on_edge))))
    assert np.all(np.isfinite(np.asarray(jax.hessian(phi)(jnp.asarray([0.0, 0.0])))))


def _side_by_side(shape, x, cutters=None):
    """The signed ADF as written part by part (the reference): every part's level and
    trims on their own; with ``cutters=None`` each trimming operand's distance function
    again for each part, else once (in ``cutters``)."""
    from pinnkit.geometry.base import all_parts
    from pinnkit.geometry.distance import r_equiv
    from pinnkit.geometry.rfunctions import r_and, trimmed

    def cut(s):
        if cutters is None:
            return _side_by_side(s, x)
        if id(s) not in cutters:
            cutters[id(s)] = _side_by_side(s, x, cutters)
        return cutters[id(s)]

    def part(p):
        f, t = p.level(x)
        for s, sign, _ in p.trims:
            tc = -sign * cut(s)
            t = tc if t is None else r_and(t, tc)
        return trimmed(f, t)

    phi = r_equiv([part(p) for p in all_parts(shape)])
    return jnp.where(shape.sdf(x) < 0, phi, -phi)


def _same_as_side_by_side(shape, x):
    """Asserts that ``signed_adf(shape)`` equals `_side_by_side` (cutters shared) at the
    points ``x`` to float64 rounding, values, gradients and Hessians; returns it and a
    function giving a function's jaxpr size at one point."""
    got, ref = (lambda y: signed_adf(shape, y)), (lambda y: _side_by_side(shape, y, {}))
    jets = lambda f: jax.jit(jax.vmap(lambda y: (f(y), jax.grad(f)(y), jax.hessian(f)(y))))(x)  # noqa: E731
    for a, b in zip(jets(got), jets(ref), strict=True):
        assert np.all(np.isfinite(np.asarray(b)))
        _assert_close(np.asarray(a).reshape(len(x), -1), np.asarray(b).reshape(len(x), -1), rtol=1e-12)
    return got, lambda f: len(jax.make_jaxpr(f)(x[0]).jaxpr.eqns)


def test_stacked_sides_and_shared_cutters_equal_the_part_by_part_adf(f64):
    """Straight sides with the same trims are one stacked evaluation: the same function as
    side by side, to float64 rounding (1e-12 of each derivative's scale: a few dozen
    operations summed in another order, ~1e-15 each), values, gradients and Hessians,
    inside and outside. Each trimming operand's ADF is computed once per call, not once
    per part it trims: with the stacking, an 8th of the program (what the compile time of
    the hard-constraint configs is made of)."""
    from pinnkit.geometry import rotate, scale
    from pinnkit.geometry.distance import segment_groups

    plate = rotate(scale(Rectangle([-1, -1], [1, 1]), 1.3), 0.4)  # frames: world != local
    shape = difference(plate, Disk([0.2, -0.1], 0.3), Rectangle([-0.5, 0.3], [-0.1, 0.6]))
    groups, rest = segment_groups(shape, "boundary")
    # the plate's sides (trimmed by the cut) and the square hole's (by the disk, the plate)
    assert sorted((len(a[0]), len(t)) for a, t in groups) == [(4, 1), (4, 2)] and len(rest) == 1
    x = jax.random.uniform(jax.random.key(8), (48, 2), jnp.float64, -2.0, 2.0)
    assert 0 < int(jnp.sum(jax.vmap(shape.sdf)(x) < 0)) < len(x)  # inside and outside
    got, size = _same_as_side_by_side(shape, x)
    assert size(got) < 0.2 * size(lambda y: _side_by_side(shape, y)), size(got)


def test_faces_trimmed_as_one_vector_equal_the_part_by_part_adf(f64):
    """3-D: the parts of a run with the same trims (a box's faces, a cylinder's side and
    caps) are trimmed as one vector and planar faces levelled as one stacked evaluation
    (`trim_runs`, `rects_level`), also in a rotated and scaled frame: the same function
    as part by part to float64 rounding, values, gradients and Hessians, inside and
    outside; the cutting cylinder's program then feeds one operation per run instead of
    one per face (what XLA copied into every face's fusion)."""
    from pinnkit.geometry import Cylinder, rotate, scale
    from pinnkit.geometry.distance import trim_runs

    box = rotate(scale(Cuboid([0, 0, 0], [2.5, 0.41, 0.41]), 1.3), 0.4, axis=[1.0, 2.0, 0.5])
    cyl = rotate(scale(Cylinder([0.5, 0.2, 0.205], 0.05, 0.82), 1.3), 0.4, axis=[1.0, 2.0, 0.5])
    shape = difference(box, cyl)
    assert trim_runs(shape, "boundary") == ((0, 1, 2, 3, 4, 5), (6, 7, 8))
    lo, hi = (np.asarray(b) for b in shape.bbox())
    x = jnp.asarray(lo + (hi - lo) * np.asarray(jax.random.uniform(jax.random.key(3), (48, 3), jnp.float64)))
    rim = np.asarray(cyl.frame.to_world(jnp.asarray([[0.5, 0.25, 0.2]])))  # on the cylinder's side
    near = jnp.asarray(np.asarray(x[:8]) * 0.02 + rim)
    x = jnp.concatenate([x, near])  # a few points about the cylinder, where its trims matter
    inside = jax.vmap(shape.sdf)(x) < 0
    assert 0 < int(jnp.sum(inside)) < len(x)
    got, size = _same_as_side_by_side(shape, x)
    ref = lambda y: _side_by_side(shape, y, {})  # noqa: E731
    assert size(got) < 0.5 * size(ref), (size(got), size(ref))


def _step_inflow():
    """The backward-facing step of configs/flows/step.yaml, its inflow written for the
    inlet y in [1/2, 1] only (negative below it)."""
    shape = Polygon([[0, 0.5], [1, 0.5], [1, 0], [5, 0], [5, 1], [0, 1]],
                    names={"side0": "walls", "side1": "walls", "side2": "walls", "side3": "outlet",
                           "side4": "walls", "side5": "inlet"})
    inflow = lambda x: jnp.stack([16 * (x[1] - 0.5) * (1 - x[1]), 0.0 * x[0]])  # noqa: E731
    return shape, inflow, DistanceDirichlet(shape, ("inlet", "walls"), ((0, 1), (0, 1)), (inflow, None))


def test_side_data_read_on_the_side_exact_and_nonnegative_behind_the_step(f64):
    """A straight side's data are read at its smoothed closest point (`side_point`): the
    constrained field still equals the data on each piece (1e-12), and the lifting of a
    nonnegative profile stays nonnegative behind the step, where the profile's expression
    itself is negative (the blend used to carry it into the channel)."""
    shape, inflow, hd = _step_inflow()
    y = jnp.asarray([0.7, -1.3, 2.0])
    for piece in ("inlet", "walls"):
        x = shape.sample(jax.random.key(3), 400, piece, jnp.float64)
        out = jax.vmap(lambda p: hd(p, y))(x)
        want = jax.vmap(inflow)(x) if piece == "inlet" else jnp.zeros((400, 2))
        np.testing.assert_allclose(out[:, :2], want, rtol=0, atol=1e-12)
    x = shape.sample(jax.random.key(5), 20000, "interior", jnp.float64)
    lift = jax.vmap(lambda p: hd.lifting(p, 3)[0])(x)
    behind = np.asarray((x[:, 0] > 1) & (x[:, 1] < 0.5))
    assert behind.sum() > 1000
    assert float(jnp.min(jax.vmap(inflow)(x)[behind, 0])) < -1  # the expression there
    assert float(jnp.min(lift[:, 0])) >= 0
    assert float(jnp.min(lift[behind, 0])) > 0


def test_side_point_has_no_kink_line_behind_the_step(f64):
    """The lines through the inlet's ends cross the shape behind the step (y = 1/2 for
    x > 1): the second derivative of the inflow read at `side_point` across that line is
    continuous (its jump over 2h shrinks like h); read at the exact closest point (a
    clamp, the negative control) it jumps by O(1)."""
    _, inflow, _ = _step_inflow()
    a, b = np.asarray([0.0, 0.5]), np.asarray([0.0, 1.0])

    def clamp_point(p):
        s = jnp.clip(jnp.dot(p - a, b - a) / 0.25, 0.0, 1.0)
        return a + s * (b - a)

    def jumps(point, x0):
        gyy = jax.jit(jax.vmap(lambda p: jax.hessian(lambda q: inflow(point(q))[0])(p)[1, 1]))
        return [float(jnp.abs(jnp.diff(gyy(jnp.asarray([[x0, 0.5 - h], [x0, 0.5 + h]]))))[0])
                for h in (1e-3, 1e-4)]

    for x0 in (1.5, 3.0):
        smooth = jumps(lambda q: side_point(a, b, q), x0)
        assert smooth[1] < 0.2 * smooth[0] + 1e-9, smooth
        kink = jumps(clamp_point, x0)
        assert min(kink) > 1, kink
    on = jnp.asarray([[0.0, 0.5], [0.0, 0.75], [0.0, 1.0]])
    np.testing.assert_array_equal(jax.vmap(lambda q: side_point(a, b, q))(on), on)
