"""The sphere: area-uniform sampling, Gaussian quadrature, the unit-vector embedding and
the tangent-plane surface operators, against spherical-harmonic identities.

Float64 operator checks use tolerances of a few hundred ulps (the quantities are O(1)–O(30)
polynomials evaluated through one normalisation); Taylor vs the autodiff oracle uses
rtol 1e-10 like tests/test_diffops.py.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import Autodiff, Layout, Taylor
from pinnkit.nn.nets import build_mlp_network
from pinnkit.sphere import ops as S
from pinnkit.sphere.domain import Sphere, SphereEmbedding, gaussian_grid, williamson_errors


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


# Real spherical harmonics (unnormalised) as polynomials of the unit vector, with degree l.
HARMONICS = {
    "z (l=1)": (1, lambda x, y, z: z),
    "3z^2-1 (l=2)": (2, lambda x, y, z: 3 * z * z - 1),
    "xz (l=2, m=1)": (2, lambda x, y, z: x * z),
    "x^3-3xy^2 (l=3, m=3)": (3, lambda x, y, z: x**3 - 3 * x * y * y),
    "35z^4-30z^2+3 (l=4)": (4, lambda x, y, z: 35 * z**4 - 30 * z * z + 3),
    "z(x^4-6x^2y^2+y^4) (l=5, m=4)": (5, lambda x, y, z: z * (x**4 - 6 * x * x * y * y + y**4)),
}


def on_sphere(fn):
    """The 0-homogeneous extension $x \\mapsto fn(x/|x|)$, outputs as a vector."""

    def g(p):
        u = p / jnp.linalg.norm(p)
        return jnp.atleast_1d(fn(*u))

    return g


def probe_points(n=64, seed=0):
    """Random points, the two poles exactly, and points 1e-7 rad from the north pole."""
    rng = np.random.default_rng(seed)
    p = rng.normal(size=(n, 3))
    eps = 1e-7
    extra = np.array([[0, 0, 1.0], [0, 0, -1.0], [eps, 0, 1.0], [0, -eps, 1.0], [eps, eps, -1.0]])
    p = np.concatenate([p, extra])
    return p / np.linalg.norm(p, axis=1, keepdims=True)


LAYOUT = Layout(("x", "y", "z"), ("x", "y", "z"), ("u",))


def _eval(method, residual, net, layout, pts):
    return jax.jit(jax.vmap(lambda x: method.evaluate(lambda f, c: residual(f), net, layout, x, {})))(
        jnp.asarray(pts)
    )


@pytest.mark.parametrize("name", sorted(HARMONICS))
@pytest.mark.parametrize("method", [Taylor(), Autodiff()], ids=["taylor", "autodiff"])
def test_laplace_beltrami_of_harmonics(f64, name, method):
    """$\\Delta_S Y_{lm} = -l(l+1) Y_{lm}$, also at and 1e-7 from the poles."""
    deg, fn = HARMONICS[name]
    pts = probe_points()
    got = _eval(method, lambda f: S.laplace_beltrami(f, "u") + deg * (deg + 1) * f["u"], on_sphere(fn),
                LAYOUT, pts)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, 0.0, atol=1e-11 * deg * (deg + 1) * 8)


def test_divergence_of_gradient_is_laplacian(f64):
    """$\\nabla_S\\cdot\\nabla_S Y = \\Delta_S Y$ with the gradient fed as a Cartesian wind,
    plus a radial part (which the operators must ignore)."""
    deg, fn = HARMONICS["z(x^4-6x^2y^2+y^4) (l=5, m=4)"]
    layout = Layout(("x", "y", "z"), ("x", "y", "z"), ("wx", "wy", "wz", "u"))

    def net(p):
        n = p / jnp.linalg.norm(p)
        grad = jax.grad(lambda q: fn(*(q / jnp.linalg.norm(q))))(n)  # tangent at |q| = 1
        radial = 3.0 * n * (1 + n[0])  # a non-tangent part, 0-homogeneous
        return jnp.concatenate([grad + radial, fn(*n)[None]])

    res = _eval(Taylor(), lambda f: S.surface_divergence(f, ("wx", "wy", "wz")) + deg * (deg + 1) * f["u"],
                net, layout, probe_points())
    np.testing.assert_allclose(res, 0.0, atol=1e-10)


@pytest.mark.parametrize("alpha", [0.0, math.pi / 2 - 0.05, math.pi / 2])
def test_solid_body_rotation_operators(f64, alpha):
    """Solid-body rotation $\\mathbf v = \\Omega\\,\\mathbf k\\times\\mathbf n$ about a tilted axis
    (cross-polar for alpha near pi/2): divergence 0, vorticity $2\\Omega\\,\\mathbf k\\cdot\\mathbf n$,
    covariant self-advection $\\Omega^2 (\\mathbf k\\cdot\\mathbf n) P\\mathbf k$, advection of
    $z$ equal to $v_z$; a radial part added to the wind changes none of them."""
    om = 0.7
    k = np.array([-math.sin(alpha), 0.0, math.cos(alpha)])
    layout = Layout(("x", "y", "z"), ("x", "y", "z"), ("wx", "wy", "wz", "h"))

    def net(p):
        n = p / jnp.linalg.norm(p)
        return jnp.concatenate([om * jnp.cross(k, n) + (2.0 + n[2]) * n, n[2:3]])

    def residual(f):
        n = S.normal(f)
        v = S.wind(f, ("wx", "wy", "wz"))
        kn = jnp.dot(k, n)
        return jnp.concatenate(
            [
                jnp.stack([S.surface_divergence(f, ("wx", "wy", "wz")),
                           S.vorticity(f, ("wx", "wy", "wz")) - 2 * om * kn,
                           S.advection(f, "h", v) - v[2]]),
                S.wind_advection(f, ("wx", "wy", "wz")) - om**2 * kn * S.project(f, jnp.asarray(k)),
                v - om * jnp.cross(k, n),
            ]
        )

    res = _eval(Taylor(), residual, net, layout, probe_points())
    np.testing.assert_allclose(res, 0.0, atol=1e-12)


def test_network_embedding_taylor_matches_oracle(f64):
    """SphereEmbedding (generic rule) + MLP (fast rule): every derivative a climate residual
    uses, through third order and in time, Taylor == nested reverse mode at rtol 1e-10."""
    dom = Sphere(1.0, 0.0, 2.0)
    net = build_mlp_network(dom.coords, ("psi", "h"), width=12, depth=2, activation="tanh",
                            init="glorot_normal", bounds=None, input_map=SphereEmbedding(0.0, 2.0),
                            key=jax.random.key(0), dtype=jnp.float64)
    layout = Layout(dom.coords, ("x", "y", "z"), ("psi", "h"))

    def residual(f):
        scalars = [S.laplace_beltrami(f, "h"), f.partial("psi", "t"),
                   f.partial("psi", "x", "y", "z"), f.partial("h", "t", "x", "x")]
        return jnp.concatenate([S.surface_grad(f, "psi"), jnp.stack(scalars)])

    pts = dom.from_unit(jax.random.uniform(jax.random.key(1), (40, 4), jnp.float64), "interior")
    pts = jnp.concatenate([pts, jnp.asarray([[0.5, 0, 0, 1.0], [1.5, 0, 0, -1.0]])])
    got = np.asarray(_eval(Taylor(), residual, net, layout, pts))
    ref = np.asarray(_eval(Autodiff(), residual, net, layout, pts))
    scale = np.abs(ref).max(axis=0, keepdims=True)
    np.testing.assert_array_less(np.abs(got - ref) / scale, 1e-10)


def test_area_uniform_sampling():
    """Area-uniform: z = sin(lat) uniform on [-1, 1] (mean 0, mean z^2 = 1/3), x, y alike by
    symmetry; points on the sphere; the initial slice at t0. Tolerance 5 standard errors."""
    dom = Sphere(2.0, 0.0, 3.0)
    n = 200_000
    pts = np.asarray(dom.sample(jax.random.key(0), n), np.float64)
    np.testing.assert_allclose(np.linalg.norm(pts[:, 1:], axis=1), 2.0, rtol=1e-6)
    u = pts[:, 1:] / 2.0
    se1, se2 = math.sqrt(1 / 3 / n), math.sqrt((1 / 5 - 1 / 9) / n)
    for c in range(3):
        assert abs(u[:, c].mean()) < 5 * se1
        assert abs((u[:, c] ** 2).mean() - 1 / 3) < 5 * se2
    assert abs(pts[:, 0].mean() - 1.5) < 5 * 3 / math.sqrt(12 * n)
    init = np.asarray(dom.sample(jax.random.key(1), 16, "initial"))
    assert np.all(init[:, 0] == 0.0)
    with pytest.raises(ValueError, match="unknown domain piece"):
        dom.sample(jax.random.key(0), 4, "boundary")


def _monomial_integral(a, b, c):
    """$\\int_{S^2} x^a y^b z^c\\,dA$ (zero unless all even)."""
    if a % 2 or b % 2 or c % 2:
        return 0.0
    g = math.gamma
    return 2 * g((a + 1) / 2) * g((b + 1) / 2) * g((c + 1) / 2) / g((a + b + c + 3) / 2)


def test_gaussian_quadrature_exact_for_polynomials():
    """nlat = 6 integrates every monomial of degree <= 11 (so all products Y_lm Y_l'm' with
    l + l' <= 11) to rounding, and misses z^12 (negative control)."""
    lon, lat, w = gaussian_grid(6)
    LON, LAT = np.meshgrid(lon, lat, indexing="ij")
    x, y, z = np.cos(LAT) * np.cos(LON), np.cos(LAT) * np.sin(LON), np.sin(LAT)
    assert abs(w.sum() - 4 * math.pi) < 1e-13
    for deg in range(12):
        for a in range(deg + 1):
            for b in range(deg + 1 - a):
                c = deg - a - b
                got = np.sum(w * x**a * y**b * z**c)
                assert abs(got - _monomial_integral(a, b, c)) < 1e-13, (a, b, c)
    assert abs(np.sum(w * z**12) - _monomial_integral(0, 0, 12)) > 1e-6


def test_grid_and_williamson_errors():
    dom = Sphere(1.0, 0.0, 1.0)
    pts, shape = dom.grid(8, times=[0.0, 1.0])
    assert shape == (2, 16, 8) and pts.shape == (256, 4)
    np.testing.assert_allclose(np.linalg.norm(pts[:, 1:], axis=1), 1.0)
    _, _, w = gaussian_grid(8)
    ref = np.ones((16, 8))
    e = williamson_errors(ref * 1.01, ref, w)
    np.testing.assert_allclose([e["l1"], e["l2"], e["linf"]], 0.01, rtol=1e-12)
