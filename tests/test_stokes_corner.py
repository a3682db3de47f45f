"""Stokes corner modes (`pinnkit.geometry.stokes_corner`): the Dean–Montagnon exponents,
each mode a Stokes solution with its pressure, divergence-free and no-slip on both edges
with the cut-off, the corners found on a flow's shape, and the Taylor rule through the
enrichment against nested autodiff."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import Autodiff, Layout, Taylor
from pinnkit.errors import ConfigError
from pinnkit.geometry.stokes_corner import StokesCorner, StokesCornerEnrichment, stokes_exponents
from pinnkit.nn.nets import build_mlp_network
from pinnkit.problems.flow import incompressible_flow

STEP = {"polygon": {"vertices": [[0, 0.5], [1, 0.5], [1, 0], [5, 0], [5, 1], [0, 1]],
                    "names": {"side0": "walls", "side1": "walls", "side2": "walls", "side3": "outlet",
                              "side4": "walls", "side5": "inlet"}}}


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def _step(corner_modes=True):
    return incompressible_flow(STEP, {"inlet": ["16*(y - 0.5)*(1 - y)", 0], "walls": 0}, nu=0.01,
                               corner_modes=corner_modes)


def test_exponents_of_the_re_entrant_right_angle_and_none_for_convex_corners():
    """Moffatt (1964), 270 degrees: 0.544484 (even stream function) and 0.908529 (odd); a
    convex corner (90 degrees) has no real exponent below 2 but the integer 1."""
    modes = stokes_exponents(1.5 * math.pi)
    assert [p for _, p in modes] == ["even", "odd"]
    np.testing.assert_allclose([lam for lam, _ in modes], [0.5444837368, 0.9085291898], rtol=1e-9)
    assert stokes_exponents(0.5 * math.pi) == ()


def _derivs(c, x):
    jac = jax.jacfwd(c)(x)  # (3, J, 2)
    lap = jnp.trace(jax.jacfwd(jax.jacfwd(c))(x), axis1=-2, axis2=-1)  # (3, J)
    return jac, lap


@pytest.mark.parametrize("angle", [1.5 * math.pi, 1.25 * math.pi, 1.9 * math.pi])
def test_every_mode_is_a_stokes_flow_with_its_pressure(angle, f64):
    """With the cut-off pushed far away (R = 1e4, so chi's derivatives are 1e-8 of the
    mode's at r ~ 0.1), nu Lap u - grad p = 0 and div u = 0 to rounding, relative to nu |Lap u|."""
    c = StokesCorner((0.3, -0.2), 0.7, angle, 1e4, stokes_exponents(angle), 0.02)
    for phi in (-0.45 * angle, 0.0, 0.3 * angle):
        x = jnp.asarray(c.center) + 0.1 * jnp.asarray([math.cos(0.7 + phi), math.sin(0.7 + phi)])
        jac, lap = _derivs(c, x)
        scale = c.nu * jnp.abs(lap[:2]).max(axis=0) + 1e-300
        res = jnp.stack([c.nu * lap[0] - jac[2, :, 0], c.nu * lap[1] - jac[2, :, 1]])
        assert float(jnp.max(jnp.abs(res) / scale[None, :])) < 1e-6
        div = jac[0, :, 0] + jac[1, :, 1]
        assert float(jnp.max(jnp.abs(div) / jnp.abs(jac[:2]).max(axis=(0, 2)))) < 1e-12


def test_the_step_gets_its_corner_and_the_walls_stay_exact(f64):
    """The step's one re-entrant corner (1, 0.5), R = 0.5; with trained coefficients the
    constrained velocity is still 0 on both edges and the cut-off's rim, divergence-free
    inside the disk; the plain recipe (corner_modes off) is unchanged."""
    prob = _step()
    h = prob.hard_constraint
    assert isinstance(h, StokesCornerEnrichment) and len(h.corners) == 1
    c = h.corners[0]
    assert c.center == (1.0, 0.5) and c.radius == pytest.approx(0.5)
    assert c.angle == pytest.approx(1.5 * math.pi)
    assert not isinstance(_step(False).hard_constraint, StokesCornerEnrichment)
    h = StokesCornerEnrichment(h.corners, h.base, jnp.asarray([0.7, -0.4]))
    y = jnp.asarray([0.3, -0.2, 0.1])
    for wall in ([0.6, 0.5], [0.999, 0.5], [1.0, 0.2], [1.0, 0.001], [3.0, 0.0]):
        np.testing.assert_allclose(h(jnp.asarray(wall), y)[:2], 0.0, atol=1e-15)
    feats = lambda x: c(x)  # noqa: E731
    for x in ([1.2, 0.3], [0.9, 0.7], [1.05, 0.52]):
        jac = jax.jacfwd(feats)(jnp.asarray(x))
        assert float(jnp.max(jnp.abs(jac[0, :, 0] + jac[1, :, 1]))) < 1e-12 * float(jnp.abs(jac).max())
    rim = jnp.asarray([1.0 + 0.5 * math.cos(-0.3), 0.5 + 0.5 * math.sin(-0.3)])
    np.testing.assert_allclose(c(rim), 0.0, atol=1e-15)


def _residual(f):
    return jnp.stack([f["u"], f["v"], f["p"], f.partial("u", "x"), f.partial("v", "y"), f.partial("p", "x"),
                      f.laplacian("u"), f.laplacian("v"), f.partial("u", "x", "x", "y")])


@pytest.mark.slow
def test_taylor_through_the_enrichment_matches_autodiff(f64):
    """A network under the step's constraint with corner modes, derivatives to third order,
    at interior points and at r = 1e-1 ... 1e-5 from the corner: the Taylor rule equals
    nested autodiff to 1e-10 of each point's largest derivative."""
    h = _step().hard_constraint
    tr = StokesCornerEnrichment(h.corners, h.base, jnp.asarray([0.7, -0.4]))
    net = build_mlp_network(("x", "y"), ("u", "v", "p"), width=6, depth=2, activation="tanh",
                            init="glorot_normal", bounds=((0, 0), (5, 1)), transform=tr,
                            key=jax.random.key(0), dtype=jnp.float64)
    d = np.asarray([1.0, 1.0]) / math.sqrt(2)  # into the fluid along the bisector
    near = [np.asarray([1.0, 0.5]) + r * np.asarray(v) for r in (1e-1, 1e-3, 1e-5)
            for v in (d, [0.0, 1.0], [-0.6, 0.8])]
    x = jnp.asarray(np.concatenate([np.asarray([[0.5, 0.75], [2.0, 0.3], [1.3, 0.6]]), np.asarray(near)]))
    layout = Layout(("x", "y"), ("x", "y"), ("u", "v", "p"))
    run = lambda m: jax.jit(jax.vmap(lambda p: m.evaluate(lambda f, c: _residual(f), net, layout, p, {})))(x)  # noqa: E731
    got, ref = np.asarray(run(Taylor())), np.asarray(run(Autodiff()))
    assert np.all(np.isfinite(ref))
    scale = np.maximum(np.abs(ref).max(axis=1, keepdims=True), 1e-300)
    np.testing.assert_array_less(np.abs(got - ref) / scale, 1e-10)


def test_corner_modes_with_a_curl_constraint_are_refused():
    """The modes add to the velocity's value; a velocity that is a curl of the network
    (hard_velocity: stream) cannot take them: one paragraph naming the key and the fix."""
    with pytest.raises(ConfigError, match=r"corner_modes.*hard_velocity: all"):
        incompressible_flow(STEP, {"inlet": ["16*(y - 0.5)*(1 - y)", 0], "walls": 0}, nu=0.01,
                            hard_velocity="stream", corner_modes=True)
    with pytest.raises(ConfigError, match="corner_modes: expected true or false"):
        incompressible_flow(STEP, {"inlet": ["16*(y - 0.5)*(1 - y)", 0], "walls": 0}, nu=0.01,
                            corner_modes="no")


def test_corner_weight_scales_momentum_and_continuity_near_the_corner_only(f64):
    """corner_weight: beta multiplies momentum and continuity by min(1, r/R)^beta about the
    step's corner (R = 0.5), the boundary terms untouched; beta = 1 is the default; a bad
    weight is one paragraph naming the key."""
    flow = lambda w: incompressible_flow(STEP, {"inlet": ["16*(y - 0.5)*(1 - y)", 0], "walls": 0},  # noqa: E731
                                         nu=0.01, corner_weight=w)
    plain, weighted = flow(0.0), flow(1.0)
    field = lambda x: jnp.stack([jnp.sin(x[0]) * x[1], jnp.cos(x[1]) * x[0], x[0] * x[1] ** 2])  # noqa: E731
    pts = jnp.asarray([[1.1, 0.5], [1.0, 0.6], [1.3, 0.8], [0.5, 0.9], [3.0, 0.2]])
    batch = {k: pts for k in plain.terms}  # every term at the same points; two are compared
    a = plain.residuals(field, plain.coeffs, batch, Autodiff())
    b = weighted.residuals(field, weighted.coeffs, batch, Autodiff())
    r = np.hypot(pts[:, 0] - 1.0, pts[:, 1] - 0.5)
    w = np.minimum(r / 0.5, 1.0)
    for name in ("momentum", "continuity"):
        np.testing.assert_allclose(b[name], a[name] * w[:, None], rtol=1e-12, atol=1e-15)
    assert np.all(w[:2] < 0.5) and np.all(np.abs(np.asarray(a["continuity"][:2])) > 1e-3)  # where it acts
    for name in ("inlet", "walls", "outlet"):
        np.testing.assert_array_equal(b[name], a[name])
    default = incompressible_flow(STEP, {"inlet": ["16*(y - 0.5)*(1 - y)", 0], "walls": 0}, nu=0.01)
    got = default.residuals(field, default.coeffs, batch, Autodiff())
    for name in ("momentum", "continuity"):  # the default: beta 1, the auto radius (0.5 here)
        np.testing.assert_array_equal(got[name], b[name])
    for bad in (-1.0, float("nan"), True, "1"):
        with pytest.raises(ConfigError, match="corner_weight"):
            flow(bad)


def test_corner_radius_is_a_length_capped_at_the_admissible_radius(f64):
    """corner_radius: R shrinks the weight's disk (the step's corner admits 0.5): points beyond
    0.25 keep their full residual; a length above 0.5 is the same as 0.5; a bad value is one
    paragraph naming the key."""
    flow = lambda rad: incompressible_flow(STEP, {"inlet": ["16*(y - 0.5)*(1 - y)", 0], "walls": 0},  # noqa: E731
                                           nu=0.01, corner_weight=2.0, corner_radius=rad)
    full, half, capped = flow(0.5), flow(0.25), flow(0.9)
    field = lambda x: jnp.stack([jnp.sin(x[0]) * x[1], jnp.cos(x[1]) * x[0], x[0] * x[1] ** 2])  # noqa: E731
    pts = jnp.asarray([[1.1, 0.5], [1.0, 0.6], [1.2, 0.65], [1.3, 0.8], [3.0, 0.2]])
    batch = {k: pts for k in full.terms}
    a, b, c = (f.residuals(field, f.coeffs, batch, Autodiff()) for f in (full, half, capped))
    r = np.hypot(pts[:, 0] - 1.0, pts[:, 1] - 0.5)
    ratio = (np.minimum(r / 0.25, 1.0) / np.minimum(r / 0.5, 1.0)) ** 2  # weights' ratio, beta = 2
    np.testing.assert_allclose(b["momentum"], a["momentum"] * ratio[:, None], rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(c["momentum"], a["momentum"])
    assert ratio[-1] == 1.0 and ratio[0] == 4.0
    for bad in (0.0, -0.2, float("inf"), True, "half"):
        with pytest.raises(ConfigError, match="corner_radius"):
            flow(bad)


def test_local_radii_cover_the_asked_fraction_of_the_area(f64):
    """'auto': the corners' sectors cover 15 % of the shape, capped at each corner's largest
    radius. The L-bend (area 3, one 270-degree corner admitting 1): sqrt(0.45 / (3 pi / 4))
    exactly (polygon area in closed form); a channel less a square (no closed-form area:
    the sampler's Sobol estimate of its share of the bounding box, 2^16 points)."""
    from pinnkit.geometry.stokes_corner import local_radii, reentrant_corners
    from pinnkit.problems.expression import read_domain

    sides = {f"side{i}": "walls" for i in range(6)}
    bend = read_domain({"polygon": {"vertices": [[0, 0], [2, 0], [2, 2], [1, 2], [1, 1], [0, 1]],
                                    "names": sides}}, "d")
    corners = reentrant_corners(bend, {"walls"}, 0.02)
    assert len(corners) == 1 and corners[0].radius == pytest.approx(1.0)
    np.testing.assert_allclose(local_radii(bend, corners), [math.sqrt(0.45 / (0.75 * math.pi))], rtol=1e-12)
    walls = {k: "walls" for k in ("left", "right", "bottom", "top")}
    square = {"rectangle": {"lower": [1, 0.3], "upper": [1.2, 0.5], "name": "sq"}}
    chan = read_domain({"difference": [{"rectangle": {"lower": [0, 0], "upper": [3, 1], "names": walls}},
                                       square]}, "d")
    corners = reentrant_corners(chan, {"walls", "sq"}, 0.02)
    assert len(corners) == 4
    np.testing.assert_allclose(local_radii(chan, corners), [0.2] * 4, rtol=1e-12)  # 15 %: 0.217, capped
    np.testing.assert_allclose(local_radii(chan, corners, cover=0.05),
                               [math.sqrt(0.05 * 2.96 / (4 * 0.75 * math.pi))] * 4, rtol=2e-3)


def _star(n: int):
    """A star polygon of ``n`` vertices, radii 1 and 0.6 alternating: the n/2 inner vertices
    are re-entrant corners (6.25 rad at n = 1000), every side a wall."""
    from pinnkit.geometry import Polygon

    th = 2 * np.pi * np.arange(n) / n
    r = np.where(np.arange(n) % 2 == 0, 1.0, 0.6)
    return Polygon(np.stack([r * np.cos(th), r * np.sin(th)], 1).tolist(), name="walls")


def _one_by_one(shape, points):
    """The search the old way: `corner` (which scans every part) at each point, refusals skipped."""
    from pinnkit.geometry.singular import corner

    out = []
    for v in points:
        try:
            c = corner(shape, v, terms=1)
        except ValueError:
            continue
        if c.angle > math.pi + 1e-9 and stokes_exponents(c.angle):
            out.append((c.center, c.start + 0.5 * c.angle, c.angle, c.radius))
    return sorted(out)


@pytest.mark.parametrize("case", ["star", "csg"])
def test_reentrant_corners_are_corner_at_each_vertex_in_one_pass(f64, case):
    """`reentrant_corners` searches all candidates at once (`pinnkit.geometry.singular.wedges`)
    and finds what `corner` finds vertex by vertex: the same centres, bisectors, angles and
    largest radii, on a 40-vertex star (radius set by the neighbouring edges) and on a
    channel less a notch, a disk (a curved part nearest to the notch's corners) and a square
    touching another at a corner (separate pieces: refused there, 6 corners
    elsewhere)."""
    from pinnkit.geometry.stokes_corner import reentrant_corners
    from pinnkit.problems.expression import read_domain

    if case == "star":
        shape = _star(40)
        points = np.round(shape.vertices, 9)  # the search's vertices: its keys, to 1e-9
    else:
        shape = read_domain({"difference": [
            {"rectangle": {"lower": [0, 0], "upper": [3, 1], "name": "walls"}},
            {"rectangle": {"lower": [0.8, 0.6], "upper": [1.2, 1], "name": "walls"}},
            {"disk": {"center": [1.0, 0.35], "radius": 0.2, "name": "walls"}},
            {"rectangle": {"lower": [2.0, 0.4], "upper": [2.2, 0.6], "name": "walls"}},
            {"rectangle": {"lower": [2.2, 0.6], "upper": [2.4, 0.8], "name": "walls"}}]}, "d")
        points = [[0.8, 0.6], [1.2, 0.6], [2.0, 0.4], [2.2, 0.4], [2.0, 0.6], [2.2, 0.6], [2.4, 0.6],
                  [2.2, 0.8], [2.4, 0.8], [0, 0], [3, 1]]
    old = _one_by_one(shape, points)
    new = sorted((c.center, c.bisector, c.angle, c.radius) for c in reentrant_corners(shape, {"walls"}, 0.01))
    assert len(new) == len(old) == (20 if case == "star" else 8)
    assert [c for c, *_ in new] == [c for c, *_ in old]
    np.testing.assert_allclose([r for _, *r in new], [r for _, *r in old], rtol=1e-12)
    if case == "csg":  # the notch's two corners see the disk first (0.120 < its sides' 0.4)
        np.testing.assert_allclose([r for *_, r in new[:2]], [math.hypot(0.2, 0.25) - 0.2] * 2, rtol=1e-12)


def test_reentrant_corners_of_a_thousand_vertex_star(f64):
    """All 500 re-entrant corners of a 1000-vertex star: one batched pass over the parts
    (one corner at a time, each scanning all 1000 parts, took 30 CPU s; the timing is
    `scripts/bench_geometry.py --corners`)."""
    from pinnkit.geometry.stokes_corner import reentrant_corners

    shape = _star(1000)
    found = reentrant_corners(shape, {"walls"}, 0.01)
    v = np.asarray(shape.vertices)
    inner = {tuple(p) for p in np.round(v[np.hypot(v[:, 0], v[:, 1]) < 0.8], 9).tolist()}
    assert len(found) == 500 and {c.center for c in found} == inner
    # the two edges meet at 2 pi - 0.0314; the disk reaches the nearest other part
    np.testing.assert_allclose([c.angle for c in found], found[0].angle, rtol=1e-9)
    assert 6.2 < found[0].angle < 2 * math.pi and all(0 < c.radius < 0.41 for c in found)
