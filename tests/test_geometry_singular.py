"""Corner singular enrichment (pinnkit.geometry.singular): the corner's wedge and radius
found from any 2-D shape, the singular functions against their closed form (harmonic,
zero on the whole boundary, |grad| ~ rho^(lambda - 1)), derivatives through the Taylor
engine equal to nested autodiff (float64, rtol 1e-10: both exact up to rounding) near
the corner and what happens at it, bad corners refused, and the blend of data at a
vertex where two Dirichlet pieces meet."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from pinnkit.cli import main
from pinnkit.diffops import Autodiff, Layout, Taylor
from pinnkit.geometry import Disk, DistanceDirichlet, Polygon, Rectangle, difference, rotate, translate
from pinnkit.geometry.singular import Corner, CornerEnrichment, corner
from pinnkit.nn.nets import build_mlp_network

L_SHAPE = [[-1, -1], [0, -1], [0, 0], [1, 0], [1, 1], [-1, 1]]


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def _classic(x):
    """r^(2/3) sin(2 theta / 3), theta in [0, 3 pi / 2] from the edge y = 0, x > 0."""
    r, t = np.hypot(x[..., 0], x[..., 1]), np.arctan2(x[..., 1], x[..., 0])
    t = np.where(t < 0, t + 2 * np.pi, t)
    return r ** (2 / 3) * np.sin(2 * t / 3), t


@pytest.mark.parametrize("make", [
    lambda: Polygon(L_SHAPE),
    lambda: Polygon(L_SHAPE[::-1]),  # clockwise vertices
    lambda: difference(Rectangle([-1, -1], [1, 1]), Rectangle([0, -1], [1, 0])),  # CSG, shared walls
    lambda: difference(Rectangle([-1, -1], [1, 1]), Rectangle([0, -1.5], [1.5, 0])),
])
def test_corner_of_the_l_shape_from_any_construction(make):
    c = corner(make(), [0, 0])
    assert c.angle == pytest.approx(1.5 * math.pi, abs=1e-12)
    assert c.start % (2 * math.pi) == pytest.approx(0.0, abs=1e-12)  # the edge y = 0, x > 0
    assert c.radius == pytest.approx(1.0, abs=1e-12)  # the far ends of its edges and the outer square
    assert c.exponents == pytest.approx((2 / 3, 4 / 3))  # j pi / omega below 2


def test_corner_moves_with_the_shape():
    shape = translate(rotate(Polygon(L_SHAPE), 0.3), [2.0, -1.0])
    c = corner(shape, [2.0, -1.0], terms=3)
    assert c.angle == pytest.approx(1.5 * math.pi, abs=1e-9)
    assert c.start == pytest.approx(0.3, abs=1e-9)
    assert c.exponents == pytest.approx((2 / 3, 4 / 3, 2.0))


def test_corner_radius_stops_at_other_boundaries():
    # a hole of radius 0.2 at distance 0.5 from the corner: R = 0.5 - 0.2
    shape = difference(Polygon(L_SHAPE), Disk([-0.4, 0.3], 0.2))
    assert corner(shape, [0, 0]).radius == pytest.approx(0.3, abs=1e-6)
    # a convex corner: 120 degrees, lambda = 3/2 (the only non-integer exponent below 2)
    tri = Polygon([[0, 0], [1, 0], [-0.5, math.sqrt(3) / 2]])
    c = corner(tri, [0, 0])
    assert c.angle == pytest.approx(2 * math.pi / 3) and c.exponents == pytest.approx((1.5,))


@pytest.mark.parametrize("make,at,kw,match", [
    (lambda: Polygon(L_SHAPE), [0.5, 0.5], {}, "is not on the shape's boundary"),
    (lambda: Polygon(L_SHAPE), [0.5, 1.0], {}, "boundary is straight there"),
    (lambda: Polygon(L_SHAPE), [1.0, 1.0], {}, "no singular term below r\\^2"),
    (lambda: Polygon(L_SHAPE), [0, 0], {"radius": 1.5}, "radius: 1.5 must be > 0 and at most 1"),
    (lambda: Polygon(L_SHAPE), [0, 0], {"terms": 0}, "terms: expected an integer"),
    (lambda: Disk([0, 0], 1.0), [1.0, 0.0], {}, "curved boundary part"),
    (lambda: Polygon([[0, 0], [1, 0], [1, 1], [0, 0.001], [-1, 1], [-1, 0]]), [0, 0], {},
     "is not a corner"),  # not a vertex: (0, 0) lies on the straight bottom edge
])
def test_bad_corners_are_refused(make, at, kw, match):
    with pytest.raises(ValueError, match=match):
        corner(make(), at, what="network.singular.0", **kw)


def test_singular_functions_closed_form(f64):
    """S_1 = chi(rho) rho^(2/3) sin(2 theta/3) with chi = (1 - rho^2)^4 (R = 1), against
    numpy; zero on the whole boundary (rounding); without the cut-off (a huge R) both
    functions are harmonic (their Laplacian is rounding of its terms ~ rho^(lambda-2))."""
    shape = Polygon(L_SHAPE)
    c = corner(shape, [0, 0])
    x = np.asarray(shape.sample(jax.random.key(0), 512, "interior", jnp.float64))
    s, _ = _classic(x)
    rho2 = np.sum(x * x, 1)
    want = np.where(rho2 < 1, (1 - rho2) ** 4, 0.0) * s
    got = np.asarray(jax.vmap(c)(jnp.asarray(x)))
    np.testing.assert_allclose(got[:, 0], want, rtol=1e-12, atol=1e-15)
    b = shape.sample(jax.random.key(1), 4096, "boundary", jnp.float64)
    assert float(jnp.max(jnp.abs(jax.vmap(c)(b)))) < 1e-14
    wide = Corner(c.center, c.start, c.angle, 1e8, c.exponents)  # chi's own Laplacian ~ 16 rho^2 / R^2
    lap = jax.vmap(lambda p: jnp.trace(jax.hessian(wide)(p), axis1=1, axis2=2))(jnp.asarray(x))
    hess = jax.vmap(lambda p: jnp.max(jnp.abs(jax.hessian(wide)(p))))(jnp.asarray(x))
    assert float(jnp.max(jnp.abs(lap) / hess[:, None])) < 1e-12


def test_what_happens_at_the_corner(f64):
    """Documented (docs/geometry.md): S is continuous, 0 at the corner, its gradient grows
    like rho^(lambda_1 - 1) = rho^(-1/3) towards it, and exactly at it the guarded rules
    give 0 for every derivative (the true ones are infinite), never NaN."""
    c = corner(Polygon(L_SHAPE), [0, 0])
    d = jnp.asarray([-1.0, 1.0]) / math.sqrt(2)  # the bisector into the domain, theta = 3 pi / 4
    grad = lambda r: float(jnp.linalg.norm(jax.jacfwd(c)(r * d)[0]))  # noqa: E731
    lam = 2 / 3
    for r in (1e-3, 1e-5):  # sin(lam theta) = 1, cos = 0 on the bisector: |grad| = d/drho (chi rho^lam)
        want = lam * r ** (lam - 1) * (1 - r * r) ** 4 - 8 * r ** (lam + 1) * (1 - r * r) ** 3
        assert grad(r) == pytest.approx(want, rel=1e-12)
    at = jnp.zeros(2)
    assert np.all(np.asarray(c(at)) == 0)
    assert np.all(np.asarray(jax.jacfwd(c)(at)) == 0)
    assert np.all(np.asarray(jax.hessian(c)(at)) == 0)
    assert float(c(1e-12 * d)[0]) == pytest.approx(1e-8 * math.sin(math.pi / 2), rel=1e-9)


def _residual(f):
    return jnp.stack([f["u"], f.partial("u", "x"), f.partial("u", "y"), f.laplacian("u"),
                      f.partial("u", "x", "y"), f.partial("u", "x", "x", "y")])


@pytest.mark.slow
@pytest.mark.parametrize("with_base", [True, False])
def test_taylor_through_the_enrichment_matches_autodiff(with_base, f64):
    """A network with the enrichment after the L-shape's distance-function constraint (and
    alone), derivatives to third order, at random interior points, at rho = 1e-1 ... 1e-6
    from the corner along two directions and just inside the cut-off's rim."""
    shape = Polygon(L_SHAPE)
    g = lambda x: jnp.atleast_1d(jnp.sin(x[0]) * x[1])  # noqa: E731
    base = DistanceDirichlet(shape, ("boundary",), ((0,),), (g,)) if with_base else None
    c = corner(shape, [0, 0])
    tr = CornerEnrichment((c,), (0,), jnp.asarray([[0.7, -0.3]]), base)
    net = build_mlp_network(("x", "y"), ("u",), width=6, depth=2, activation="tanh", init="glorot_normal",
                            bounds=((-1, -1), (1, 1)), transform=tr, key=jax.random.key(0), dtype=jnp.float64)
    pts = [np.asarray(shape.sample(jax.random.key(5), 8, "interior", jnp.float64))]
    for into in ((-1.0, 0.5), (0.3, 0.9), (-0.2, -0.9)):
        d = np.asarray(into) / np.linalg.norm(into)
        pts.append(np.asarray([r * d for r in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)]))
    pts.append(np.asarray([[-0.999, 0.01], [-0.6, 0.79], [0.01, 0.9995]]))  # rho just below R = 1
    layout = Layout(("x", "y"), ("x", "y"), ("u",))
    x = jnp.asarray(np.concatenate(pts))
    run = lambda m: jax.jit(jax.vmap(lambda p: m.evaluate(lambda f, c: _residual(f), net, layout, p, {})))(x)  # noqa: E731
    got, ref = np.asarray(run(Taylor())), np.asarray(run(Autodiff()))
    assert np.all(np.isfinite(ref))
    # per point: derivatives near the corner are orders of magnitude larger than elsewhere
    scale = np.maximum(np.abs(ref).max(axis=1, keepdims=True), 1e-300)
    np.testing.assert_array_less(np.abs(got - ref) / scale, 1e-10)


def test_blend_at_a_vertex_is_the_meeting_pieces_data(f64):
    """Where two Dirichlet pieces meet (both distances 0) the lifting is the mean of
    their data, not of every piece's: exact for compatible data at the L-shape's vertices."""
    shape = Polygon(L_SHAPE, names={"side0": "bottom", "side1": "notch", "side2": "notch",
                                    "side3": "right", "side4": "top", "side5": "left"})
    data = {"bottom": lambda x: 1.0 + x[0] ** 2, "notch": lambda x: 1.0 + 0 * x[0],
            "right": lambda x: 1.0 + x[1], "top": lambda x: 1.5 + 0.5 * x[0],
            "left": lambda x: 1.5 - 0.5 * x[1]}
    pieces = tuple(data)
    hd = DistanceDirichlet(shape, pieces, ((0,),) * len(pieces),
                           tuple((lambda x, f=f: jnp.atleast_1d(f(x))) for f in data.values()))
    u = jax.vmap(lambda p: hd(p, jnp.asarray([5.0]))[0])
    verts = jnp.asarray([[-1, -1], [0, -1], [0, 0], [1, 0], [1, 1], [-1, 1]], jnp.float64)
    want = np.asarray([2.0, 1.0, 1.0, 1.0, 2.0, 1.0])  # the data of the two sides at each vertex
    np.testing.assert_allclose(np.asarray(u(verts)), want, rtol=1e-15)


# ----------------------------------------------------------- bad configs through the CLI


def _lshape_cfg(domain, at):
    return {
        "problem": {"name": "expression", "params": {
            "domain": domain, "fields": ["u"], "equations": {"pde": "-lap(u) - 1"},
            "conditions": {"wall": {"where": "boundary", "dirichlet": 0}}}},
        "network": {"width": 4, "depth": 1, "hard_constraint": True, "singular": [{"at": at}]},
        "sampler": {"batch": {"pde": 16}},
        "train": {"steps": 1}, "checkpoint": {"every": 0}, "eval": {"resolution": 5},
    }


@pytest.mark.parametrize("domain,at,fix", [
    ({"polygon": {"vertices": L_SHAPE}}, [0.5, 0.5], "is not on the shape's boundary"),
    ({"polygon": {"vertices": L_SHAPE}}, [0.5, 1.0], "not a corner: the boundary is straight there"),
    ({"polygon": {"vertices": L_SHAPE}}, [1.0, 1.0], "remove it or set terms explicitly"),
    ({"disk": {"center": [0, 0], "radius": 1}}, [1.0, 0.0], "lies on the curved boundary part"),
])
def test_bad_corner_in_a_config_exits_2_naming_the_key(tmp_path, capsys, domain, at, fix):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_lshape_cfg(domain, at)))
    rc = main(["train", str(path), "--out", str(tmp_path / "run"), "--no-plots", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert "Traceback" not in err and "\n\n" not in err  # one paragraph
    flat = " ".join(err.split()).replace("- ", "-")  # the CLI wraps lines, also at hyphens
    assert "network.singular.0" in flat and fix in flat, flat


def test_corner_on_a_box_problem_exits_2(tmp_path, capsys):
    """A built-in problem on a `Box` (not a geometry shape) names the key and what it needs."""
    path = tmp_path / "bad.yaml"
    path.write_text("problem: {name: poisson2d}\nnetwork: {width: 4, depth: 1, singular: [{at: [0, 0]}]}\n"
                    "train: {steps: 1}\ncheckpoint: {every: 0}\n")
    rc = main(["train", str(path), "--out", str(tmp_path / "run"), "--no-plots", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    flat = " ".join(err.split())
    assert "Traceback" not in err and "network.singular.0" in flat, flat
    assert "needs a 2-D geometry shape" in flat, flat
