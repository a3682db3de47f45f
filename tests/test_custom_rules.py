"""The custom-rule library at and near its singular points: values and derivatives up to
fourth order against exact Taylor coefficients, closed forms, finite differences, and
`jax.grad` of losses built on them."""

import functools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import (
    Autodiff,
    Layout,
    Taylor,
    cos_sqrt,
    exprel,
    log1p_over_x,
    polar,
    safe_atan2,
    safe_norm,
    safe_sqrt,
    sigmoid,
    sinc,
    sinc_sqrt,
    softplus,
    spherical,
    versin_over_x2,
)


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def _even(c):
    return lambda n: c(n // 2) if n % 2 == 0 else Fraction(0)


# name: (function, exact Taylor coefficients at 0, closed form, switch radius, safe lower bound)
SERIES = {
    "sinc": (sinc, _even(lambda m: Fraction((-1) ** m, math.factorial(2 * m + 1))),
             lambda x: jnp.sin(x) / x, 1.0),
    "versin_over_x2": (versin_over_x2,
                       _even(lambda m: Fraction((-1) ** m, math.factorial(2 * m + 2))),
                       lambda x: (1 - jnp.cos(x)) / x**2, 1.0),
    "exprel": (exprel, lambda n: Fraction(1, math.factorial(n + 1)),
               lambda x: jnp.expm1(x) / x, 1.0),
    "log1p_over_x": (log1p_over_x, lambda n: Fraction((-1) ** n, n + 1),
                     lambda x: jnp.log1p(x) / x, 0.4),
    "sinc_sqrt": (sinc_sqrt, lambda n: Fraction((-1) ** n, math.factorial(2 * n + 1)),
                  lambda s: jnp.sin(jnp.sqrt(s)) / jnp.sqrt(s), 1.0),
    "cos_sqrt": (cos_sqrt, lambda n: Fraction((-1) ** n, math.factorial(2 * n)),
                 lambda s: jnp.cos(jnp.sqrt(s)), 1.0),
}  # fmt: skip


def derivatives(f, xs, kmax):
    """``[f^(k)(x) for k in 0..kmax]`` for each x, by nested `jax.grad`: shape (kmax+1, n)."""
    return np.asarray(_derivatives_fn(f, kmax)(xs))


@functools.cache
def _derivatives_fn(f, kmax):
    gs = [f]
    for _ in range(kmax):
        gs.append(jax.grad(gs[-1]))
    return jax.jit(jax.vmap(lambda x: jnp.stack([g(x) for g in gs]), out_axes=1))


def series_reference(coeff, x: float, k: int, terms: int) -> float:
    """$f^{(k)}(x) = \\sum_n a_n n!/(n-k)! x^{n-k}$ in exact rational arithmetic."""
    xf = Fraction(x)
    return float(sum(coeff(n) * math.perm(n, k) * xf ** (n - k) for n in range(k, terms)))


@pytest.mark.parametrize("name", sorted(SERIES))
def test_series_rules(f64, name):
    """Orders 0-4 of each rule, float64 (one compiled evaluation at all points):

    - at 0, the removable singularity: exactly k! a_k;
    - near 0: the exact series, summed in rationals (120 terms: < 1e-20 for |x| <= 0.45);
    - just inside and outside the switch radius, and far: autodiff of the closed form,
      which itself loses up to k!/radius^k ulps to cancellation there (rtol 1e-11);
    - f^(k) against a central difference of f^(k-1), step h = eps^(1/3) (truncation
      h^2 |f^(k+2)|/6 ~ 1e-11, rounding eps/h ~ 4e-11 of the scale: rtol 1e-8).
    """
    fn, coeff, plain, radius = SERIES[name]
    near = [1e-9, -1e-4, 0.05, -0.3, 0.45]
    far = [radius * (1 - 1e-12), radius * (1 + 1e-12), 2.5, 7.0]
    if name == "log1p_over_x":  # safe for x > -1
        far += [-0.4 * (1 - 1e-12), -0.4 * (1 + 1e-12), -0.9]
    elif name in ("sinc", "versin_over_x2", "exprel"):  # safe for all x
        far += [-(1 - 1e-12), -(1 + 1e-12), -3.2]
    h = float(np.finfo(np.float64).eps) ** (1 / 3)
    fd = [0.0, 1e-7, -0.2, radius, 1.8]
    xs = [0.0, *near, *far, *fd, *(x + h for x in fd), *(x - h for x in fd)]
    d = derivatives(fn, jnp.asarray(xs), 4)
    assert np.isfinite(d).all()
    i = 1 + len(near) + len(far)
    np.testing.assert_allclose(d[:, 0], [float(coeff(k) * math.factorial(k)) for k in range(5)],
                               rtol=1e-14, atol=1e-15)  # fmt: skip
    ref = [[series_reference(coeff, x, k, 120) for x in near] for k in range(5)]
    np.testing.assert_allclose(d[:, 1 : 1 + len(near)], ref, rtol=1e-13, atol=1e-15)
    ref = derivatives(plain, jnp.asarray(far), 4)
    np.testing.assert_allclose(d[:, 1 + len(near) : i], ref, rtol=1e-11, atol=1e-13)
    n = len(fd)
    central = (d[:4, i + n : i + 2 * n] - d[:4, i + 2 * n :]) / (2 * h)
    np.testing.assert_allclose(d[1:, i : i + n], central, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("name", sorted(SERIES))
def test_series_rules_float32(name):
    """float32: finite everywhere, and within 100 k! delta^-k ulps of the float64 value
    (cancellation in the closed-form branch next to the switch bounds the error)."""
    fn, _, _, radius = SERIES[name]
    xs = [0.0, 1e-6, -0.3, 0.999 * radius, 1.001 * radius, 3.0]
    got = derivatives(fn, jnp.asarray(xs, jnp.float32), 4)
    assert got.dtype == np.float32 and np.isfinite(got).all()
    with jax.enable_x64(True):
        ref = derivatives(fn, jnp.asarray(xs, jnp.float64), 4)
    eps = float(np.finfo(np.float32).eps)
    for k in range(5):
        tol = 100 * math.factorial(k) * radius**-k * eps
        np.testing.assert_allclose(got[k], ref[k], rtol=tol, atol=tol * np.abs(ref[k]).max())


# ---- sigmoid and softplus ----------------------------------------------------------------


def test_sigmoid_softplus_tails(f64):
    """Every order up to 4 at |x| up to 800: finite, and equal to the identities in
    s = sigmoid(x), r = sigmoid(-x) (no cancellation): s' = s r, s'' = -s r tanh(x/2),
    s''' = s r (1 - 6 s r), s'''' = -s r tanh(x/2) (1 - 12 s r)."""
    xs = jnp.asarray([-800.0, -50.0, -3.0, 0.0, 0.7, 50.0, 800.0])
    s, r, t = jax.nn.sigmoid(xs), jax.nn.sigmoid(-xs), jnp.tanh(xs / 2)
    sig = [s, s * r, -s * r * t, s * r * (1 - 6 * s * r), -s * r * t * (1 - 12 * s * r)]
    got_sig = derivatives(sigmoid, xs, 4)
    got_sp = derivatives(softplus, xs, 4)
    assert np.isfinite(got_sig).all() and np.isfinite(got_sp).all()
    np.testing.assert_allclose(got_sig, np.stack(sig), rtol=1e-13, atol=0)
    np.testing.assert_allclose(got_sp[1:], np.stack(sig[:4]), rtol=1e-13, atol=0)
    np.testing.assert_allclose(got_sp[0], jax.nn.softplus(xs), rtol=1e-15)
    ref = derivatives(jax.nn.softplus, xs[2:5], 4)  # where JAX's own rule is accurate
    np.testing.assert_allclose(got_sp[:, 2:5], ref, rtol=1e-13, atol=1e-16)


# ---- sqrt, norm, angles ------------------------------------------------------------------


def test_safe_sqrt(f64):
    """sqrt^(k)(x) = (1/2)(-1/2)...(3/2-k) x^(1/2-k) for x > 0; 0 and zero derivatives
    at x <= 0 (the convention: the true ones are infinite)."""
    xs = jnp.asarray([1e-8, 0.25, 4.0, 0.0, -1.0])
    got = derivatives(safe_sqrt, xs, 4)
    assert np.isfinite(got).all()
    for k in range(5):
        c = math.prod(0.5 - j for j in range(k))
        np.testing.assert_allclose(got[k, :3], c * np.asarray(xs[:3]) ** (0.5 - k), rtol=1e-13)
    np.testing.assert_array_equal(got[:, 3:], 0.0)


@functools.cache
def _jacobians(f, kmax=4):
    """Jitted ``p -> (f(p), Df(p), ..., D^kmax f(p))`` by nested `jax.jacfwd`."""
    gs = [f]
    for _ in range(kmax):
        gs.append(jax.jacfwd(gs[-1]))
    return jax.jit(lambda p: tuple(g(p) for g in gs))


def _norm_axis0(a):
    return safe_norm(a, 0)


def test_safe_norm(f64):
    for t in _jacobians(safe_norm)(jnp.zeros(3)):  # value and derivatives 1-4: zero at 0
        np.testing.assert_array_equal(t, 0.0)
    np.testing.assert_array_equal(jax.grad(safe_norm)(jnp.zeros(3)), 0.0)
    for v in (jnp.array([1.0, -2.0, 2.0]), 1e-30 * jnp.array([3.0, 0.0, 4.0])):
        got, ref = _jacobians(safe_norm)(v)[:4], _jacobians(jnp.linalg.norm, 3)(v)
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-13)
    m = jnp.array([[3.0, 0.0], [4.0, 0.0]])  # columns: a vector and the zero vector
    value, jac = _jacobians(_norm_axis0, 1)(m)
    np.testing.assert_allclose(value, [5.0, 0.0])
    np.testing.assert_allclose(jac[:, :, 1], 0.0)
    np.testing.assert_allclose(jac[0, :, 0], [0.6, 0.8])


def plain_polar(p):
    return jnp.stack([jnp.sqrt(p[0] ** 2 + p[1] ** 2), jnp.arctan2(p[1], p[0])])


def plain_spherical(p):
    rho = jnp.sqrt(p[0] ** 2 + p[1] ** 2)
    r = jnp.sqrt(rho**2 + p[2] ** 2)
    return jnp.stack([r, jnp.arctan2(rho, p[2]), jnp.arctan2(p[1], p[0])])


def ours_polar(p):
    return jnp.stack(polar(p[0], p[1]))


def ours_spherical(p):
    return jnp.stack(spherical(p[0], p[1], p[2]))


def test_polar_and_spherical(f64):
    """Exact derivatives (orders 1-4) off the singular set against atan2/sqrt autodiff;
    finite, documented conventions at the origin and the poles."""

    for ours, plain, p in [
        (ours_polar, plain_polar, jnp.array([0.3, -1.2])),
        (ours_polar, plain_polar, jnp.array([-1e-5, 2e-5])),
        (ours_spherical, plain_spherical, jnp.array([0.4, -0.2, 0.9])),
        (ours_spherical, plain_spherical, jnp.array([1e-4, 2e-4, -1.0])),
    ]:
        kmax = 4 if plain is plain_polar else 3  # (keeps the compile short)
        for got, ref in zip(_jacobians(ours)(p), _jacobians(plain, kmax)(p), strict=False):
            np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12 * np.abs(ref).max())
    for t in _jacobians(ours_polar)(jnp.zeros(2)) + _jacobians(ours_spherical)(jnp.zeros(3)):
        assert np.isfinite(t).all()
    pole = jnp.array([0.0, 0.0, 2.0])
    np.testing.assert_allclose(ours_spherical(pole), [2.0, 0.0, 0.0])
    _, jac, hess, *_ = _jacobians(ours_spherical)(pole)
    np.testing.assert_allclose(jac, [[0, 0, 1], [0, 0, 0], [0, 0, 0]], atol=0)
    np.testing.assert_allclose(hess[0], np.diag([0.5, 0.5, 0.0]), rtol=1e-15)  # r: smooth
    assert all(np.isfinite(t).all() for t in _jacobians(ours_spherical)(pole))
    np.testing.assert_array_equal(jax.grad(lambda p: safe_atan2(p[1], p[0]))(jnp.zeros(2)), 0.0)


# ---- gradients of losses through the rules ------------------------------------------------


def test_grad_of_loss_through_rules(f64):
    """A loss whose points include every singular point has a finite gradient equal to
    a central difference (step eps^(1/3); rtol 1e-7)."""
    xs = jnp.asarray([0.0, 1e-9, -0.4, 0.8, 2.0])
    vs = jnp.asarray([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, -2.0, 0.5]])

    def loss(w):
        z = w * xs
        total = jnp.sum(sinc(z) ** 2 + versin_over_x2(z) + exprel(z) + log1p_over_x(0.5 * z))
        total += jnp.sum(sinc_sqrt(z**2) + cos_sqrt(z**2) + softplus(z) + sigmoid(z) ** 2)
        total += jnp.sum(safe_sqrt(z**2)) + jnp.sum(jnp.sin(safe_norm(w * vs)))
        sph = spherical(*(w * vs).T)
        return total + jnp.sum(polar(*(w * vs[:, :2]).T)[1] ** 2 + sph[1] + sph[2] ** 2)

    w, h = 0.7, float(np.finfo(np.float64).eps) ** (1 / 3)
    g = jax.jit(jax.grad(loss))(w)
    assert np.isfinite(g)
    loss = jax.jit(loss)
    np.testing.assert_allclose(g, (loss(w + h) - loss(w - h)) / (2 * h), rtol=1e-7)


def test_grad_of_derivative_loss_at_singular_point(f64):
    """Training a residual that contains derivatives of a rule at its singular point:
    u(x, y) = sinc_sqrt(w (x^2 + y^2)) = 1 - w r^2/6 + w^2 r^4/120 - ..., so at the origin
    Laplacian(u) = -2w/3, d/dw (Laplacian u)^2 = 8w/9, and u_xxxx = w^2/5 (Taylor method;
    the oracle agrees on the Laplacian)."""

    class Radial:
        def __init__(self, w):
            self.w = w

        def __call__(self, p):
            return jnp.stack([sinc_sqrt(self.w * (p[0] ** 2 + p[1] ** 2))])

    layout = Layout(("x", "y"), ("x", "y"), ("u",))
    lap = lambda f: f.laplacian("u")
    w = 0.8
    loss = lambda w_: Taylor().evaluate(lap, Radial(w_), layout, jnp.zeros(2)) ** 2
    value, grad = jax.jit(jax.value_and_grad(loss))(w)
    np.testing.assert_allclose([value, grad], [4 * w**2 / 9, 8 * w / 9], rtol=1e-13)
    np.testing.assert_allclose(Autodiff().evaluate(lap, Radial(w), layout, jnp.zeros(2)), -2 * w / 3)
    u4 = Taylor().evaluate(lambda f: f.partial("u", "x", "x", "x", "x"), Radial(w), layout, jnp.zeros(2))
    np.testing.assert_allclose(u4, w**2 / 5, rtol=1e-13)
