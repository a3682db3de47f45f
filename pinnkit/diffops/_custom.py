"""Custom derivative rules: functions whose derivatives of every order stay finite (and,
where they exist, exact) at removable singularities and at the origin and poles of polar
and spherical coordinates.

Every rule is a `jax.custom_jvp`: forward mode composes (so the `Taylor` method, `jacfwd`
and `jax.hessian` work through them) and reverse mode comes by transposition, so
`jax.grad` of a loss built on any derivative of them works too. None is a `custom_vjp`,
which would forbid forward mode (docs/diffops.md, custom rules); no backward
pass here needed one.

Two families:

**Removable singularities** (`sinc`, `versin_over_x2`, `exprel`, `log1p_over_x`,
`sinc_sqrt`, `cos_sqrt`): analytic at the singular point $x_0 = 0$, so every derivative
exists there. The $k$-th derivative is evaluated by the Taylor series
$f^{(k)}(x) = \\sum_{n \\ge k} a_n \\frac{n!}{(n-k)!} x^{n-k}$ for $|x| < \\delta$ and by
autodiff of the closed form elsewhere (where its cancellation is bounded by $\\sim k!
/\\delta^k$ ulps); the double-`where` pattern keeps the branch not taken finite. The
derivative rule of $f^{(k)}$ is $f^{(k+1)}$, built on demand, so any order is exact.

**Non-differentiable points** (`safe_sqrt` at 0, `safe_norm` at 0, `safe_atan2` and the
angles of `polar` / `spherical` at the origin and on the polar axis): there the true
derivative is infinite or undefined; the rules return the value and **zero** for every
derivative at exactly that point (the minimum-norm subgradient for the norm), so a loss
that touches the point has a finite gradient, and they are exact everywhere else. For a
smooth radial function, do not compose with `safe_norm` (the chain rule through the
convention is wrong at $r = 0$): write it as a function of $r^2$, e.g.
$\\sin(r)/r$ = `sinc_sqrt(r**2)`, $\\cos r$ = `cos_sqrt(r**2)`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

# ---------------------------------------------------------------------------------------
# Removable singularities: series near 0, closed form elsewhere


class _SeriesRule:
    """$f$ with Taylor coefficients ``coeff(n)`` at 0 and closed form ``plain``.

    ``radius`` ($\\delta$) is where the closed form takes over; ``terms`` is how many terms
    of the series of each derivative are summed: enough that the first omitted one is
    below double precision at $|x| = \\delta$ for the first few orders.
    """

    def __init__(self, plain: Callable, coeff: Callable[[int], Fraction], radius: float, terms: int):
        self.plain, self.coeff, self.radius, self.terms = plain, coeff, radius, terms
        self._cache: dict[int, Callable[[Array], Array]] = {}

    def derivative(self, k: int) -> Callable[[Array], Array]:
        """$x \\mapsto f^{(k)}(x)$, itself with a `custom_jvp` rule $f^{(k+1)}(x)\\,\\dot x$."""
        if k not in self._cache:
            self._cache[k] = self._build(k)
        return self._cache[k]

    def _build(self, k: int) -> Callable[[Array], Array]:
        # coefficients of f^(k): a_{m+k} (m+k)!/m!, exact, then rounded once
        series = [float(self.coeff(m + k) * math.perm(m + k, k)) for m in range(self.terms)]
        plain_k = self.plain
        for _ in range(k):
            plain_k = functools.partial(_elementwise_derivative, plain_k)

        @jax.custom_jvp
        def f(x):
            near = jnp.abs(x) < self.radius
            x_near = jnp.where(near, x, 0.0)
            x_far = jnp.where(near, 2.0 * self.radius, x)  # any point where plain is finite
            return jnp.where(near, _polynomial(series, x_near), plain_k(x_far))

        @f.defjvp
        def f_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return f(x), self.derivative(k + 1)(x) * t

        return f


def _elementwise_derivative(g: Callable, x: Array) -> Array:
    return jax.jvp(g, (x,), (jnp.ones_like(x),))[1]


def _polynomial(coeffs: list[float], x: Array) -> Array:
    """$\\sum_m c_m x^m$ by Horner's rule, in $x^2$ when the polynomial is even or odd."""
    if not any(coeffs[1::2]):
        return _horner(coeffs[0::2], x * x)
    if not any(coeffs[0::2]):
        return x * _horner(coeffs[1::2], x * x)
    return _horner(coeffs, x)


def _horner(coeffs: list[float], x: Array) -> Array:
    # one scan at trace time: nested rules evaluate several series per order
    return jnp.polyval(jnp.asarray(coeffs[::-1], x.dtype), x)


def _even(coeff: Callable[[int], Fraction]) -> Callable[[int], Fraction]:
    """Coefficients of $g(x^2)$ from those of $g$."""
    return lambda n: coeff(n // 2) if n % 2 == 0 else Fraction(0)


def _float(x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))


# Radii and term counts: for the entire functions (a_n ~ 1/n!) the first omitted term of
# any low derivative's series is ~ 1/24! at |x| = 1; for log(1+x)/x (radius of
# convergence 1) 0.4^64 64^4 ~ 6e-19. The radius is as large as that allows because the
# closed form's k-th derivative just past it cancels ~k!/radius^k ulps (float32 matters).
_SINC = _SeriesRule(
    lambda x: jnp.sin(x) / x,
    _even(lambda m: Fraction((-1) ** m, math.factorial(2 * m + 1))),
    radius=1.0,
    terms=24,
)
_VERSIN = _SeriesRule(
    lambda x: 2.0 * jnp.square(jnp.sin(0.5 * x)) / (x * x),  # 1 - cos x without cancellation
    _even(lambda m: Fraction((-1) ** m, math.factorial(2 * m + 2))),
    radius=1.0,
    terms=24,
)
_EXPREL = _SeriesRule(
    lambda x: jnp.expm1(x) / x,
    lambda n: Fraction(1, math.factorial(n + 1)),
    radius=1.0,
    terms=24,
)
_LOG1P = _SeriesRule(
    lambda x: jnp.log1p(x) / x,
    lambda n: Fraction((-1) ** n, n + 1),
    radius=0.4,
    terms=64,
)
_SINC_SQRT = _SeriesRule(
    lambda s: jnp.sin(jnp.sqrt(s)) / jnp.sqrt(s),
    lambda n: Fraction((-1) ** n, math.factorial(2 * n + 1)),
    radius=1.0,
    terms=16,
)
_COS_SQRT = _SeriesRule(
    lambda s: jnp.cos(jnp.sqrt(s)),
    lambda n: Fraction((-1) ** n, math.factorial(2 * n)),
    radius=1.0,
    terms=18,
)


def sinc(x: ArrayLike) -> Array:
    """$\\operatorname{sinc} x = \\sin(x)/x$, with value 1 at 0 (unnormalised: `jnp.sinc` is
    $\\sin(\\pi x)/(\\pi x)$).

    Identity: $\\sum_{m \\ge 0} (-1)^m x^{2m}/(2m+1)!$ for $|x| < 1$, $\\sin(x)/x$ beyond.
    Safe range: all real $x$; derivatives of every order exact at 0 ($f''(0) = -1/3$,
    $f^{(4)}(0) = 1/5$).
    """
    return _SINC.derivative(0)(_float(x))


def versin_over_x2(x: ArrayLike) -> Array:
    """$(1 - \\cos x)/x^2$, with value $1/2$ at 0.

    Identity: $\\sum_{m \\ge 0} (-1)^m x^{2m}/(2m+2)!$ for $|x| < 1$, $2\\sin^2(x/2)/x^2$
    beyond (no cancellation in $1 - \\cos x$). Safe range: all real $x$.
    """
    return _VERSIN.derivative(0)(_float(x))


def exprel(x: ArrayLike) -> Array:
    """$(e^x - 1)/x$, with value 1 at 0 (SciPy's `exprel`).

    Identity: $\\sum_{n \\ge 0} x^n/(n+1)!$ for $|x| < 1$, `expm1(x)/x` beyond. Safe range:
    $x$ below the overflow of $e^x$ (about 88 in float32, 709 in float64).
    """
    return _EXPREL.derivative(0)(_float(x))


def log1p_over_x(x: ArrayLike) -> Array:
    """$\\log(1 + x)/x$, with value 1 at 0.

    Identity: $\\sum_{n \\ge 0} (-1)^n x^n/(n+1)$ for $|x| < 0.4$, `log1p(x)/x` beyond.
    Safe range: $x > -1$ (NaN below, like `log1p`).
    """
    return _LOG1P.derivative(0)(_float(x))


def sinc_sqrt(s: ArrayLike) -> Array:
    """$\\sin(\\sqrt s)/\\sqrt s$: the radial function $\\sin(r)/r$ as a function of
    $s = r^2$, which makes it smooth at the origin in every coordinate.

    Identity: $\\sum_{n \\ge 0} (-1)^n s^n/(2n+1)!$ for $|s| < 1$, closed form beyond.
    Safe range: $s > -1$ (meant for $s = r^2 \\ge 0$).
    """
    return _SINC_SQRT.derivative(0)(_float(s))


def cos_sqrt(s: ArrayLike) -> Array:
    """$\\cos\\sqrt s$: the radial function $\\cos r$ as a function of $s = r^2$.

    Identity: $\\sum_{n \\ge 0} (-1)^n s^n/(2n)!$ for $|s| < 1$, closed form beyond.
    Safe range: $s > -1$ (meant for $s = r^2 \\ge 0$).
    """
    return _COS_SQRT.derivative(0)(_float(s))


# ---------------------------------------------------------------------------------------
# Softplus and sigmoid: stable at both tails, to every order


@jax.custom_jvp
def sigmoid(x: ArrayLike) -> Array:
    """$\\sigma(x) = 1/(1 + e^{-x})$ with the rule $\\sigma' = \\sigma(x)\\,\\sigma(-x)$.

    Writing $1 - \\sigma(x)$ as $\\sigma(-x)$ avoids its cancellation for large $x$, and the
    rule is again made of `sigmoid`, so every derivative is a polynomial in $\\sigma(\\pm x)$
    with no overflow. Safe range: all real $x$.
    """
    return jax.nn.sigmoid(x)


@sigmoid.defjvp
def _sigmoid_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return sigmoid(x), sigmoid(x) * sigmoid(-x) * t


@jax.custom_jvp
def softplus(x: ArrayLike) -> Array:
    """$\\log(1 + e^x)$, evaluated as `logaddexp(x, 0)`, with the rule $\\text{softplus}' =$
    `sigmoid` above. Safe range: all real $x$, every order."""
    return jnp.logaddexp(x, 0.0)


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), sigmoid(x) * t


# ---------------------------------------------------------------------------------------
# Square roots, norms and angles: finite at their non-differentiable points


def _safe_inverse(x: Array) -> Array:
    """$1/x$ for $x > 0$ and 0 at $x \\le 0$ (double `where`: no inf, no NaN in either branch)."""
    pos = x > 0
    return jnp.where(pos, 1.0 / jnp.where(pos, x, 1.0), 0.0)


@jax.custom_jvp
def safe_sqrt(x: ArrayLike) -> Array:
    """$\\sqrt{x}$ for $x > 0$; 0 with **zero derivatives** for $x \\le 0$.

    Identity: $(\\sqrt x)' = \\tfrac12 x^{-1/2}$ (exact for $x > 0$; true derivatives are
    infinite at 0, the rule gives 0 there). Safe range: all real $x$, every order.
    """
    return jnp.sqrt(jnp.maximum(x, 0.0))


@safe_sqrt.defjvp
def _safe_sqrt_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = safe_sqrt(x)
    return y, 0.5 * _safe_inverse(y) * t


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def safe_norm(v: ArrayLike, axis: int = -1) -> Array:
    """Euclidean norm $\\|v\\|$ along `axis`, with gradient $v/\\|v\\|$ for $v \\ne 0$ and
    **zero** (the minimum-norm subgradient) and zero higher derivatives at $v = 0$.

    Identity: $d\\|v\\| = \\langle v/\\|v\\|, dv\\rangle$. Safe range: any $v$ (the norm of
    $|v| \\gtrsim 10^{19}$ in float32 overflows, as `jnp.linalg.norm` does).
    """
    return jnp.sqrt(jnp.sum(jnp.square(v), axis=axis))


@safe_norm.defjvp
def _safe_norm_jvp(axis, primals, tangents):
    (v,), (t,) = primals, tangents
    n = safe_norm(v, axis)
    unit = v * jnp.expand_dims(_safe_inverse(n), axis)
    return n, jnp.sum(unit * t, axis=axis)


@jax.custom_jvp
def safe_atan2(y: ArrayLike, x: ArrayLike) -> Array:
    """$\\operatorname{atan2}(y, x) \\in (-\\pi, \\pi]$ with zero derivatives at $(0, 0)$.

    Identity: $d\\theta = (x\\,dy - y\\,dx)/(x^2 + y^2)$ (undefined at the origin, where the
    rule gives 0; `jnp.arctan2`'s gives NaN). Value at the origin: 0. Safe range: all
    $(y, x)$, every order.
    """
    return jnp.arctan2(y, x)


@safe_atan2.defjvp
def _safe_atan2_jvp(primals, tangents):
    (y, x), (ty, tx) = primals, tangents
    inv_r2 = _safe_inverse(x * x + y * y)
    return safe_atan2(y, x), (x * ty - y * tx) * inv_r2


def polar(x: ArrayLike, y: ArrayLike) -> tuple[Array, Array]:
    """$(r, \\theta)$ of the point $(x, y)$: $r = \\sqrt{x^2 + y^2}$, $\\theta =
    \\operatorname{atan2}(y, x)$.

    Exact derivatives away from the origin; at the origin $r = \\theta = 0$ with zero
    derivatives (`safe_norm`, `safe_atan2`).
    """
    x, y = _float(x), _float(y)
    return safe_norm(jnp.stack([x, y], axis=-1)), safe_atan2(y, x)


def spherical(x: ArrayLike, y: ArrayLike, z: ArrayLike) -> tuple[Array, Array, Array]:
    """$(r, \\theta, \\varphi)$: radius, polar angle from $+z$ ($[0, \\pi]$) and azimuth
    ($(-\\pi, \\pi]$), with $\\theta = \\operatorname{atan2}(\\rho, z)$, $\\rho = \\sqrt{x^2+y^2}$.

    Exact derivatives off the $z$ axis. On the axis (the poles) $\\varphi = 0$ and the
    $x, y$ derivatives of $\\theta$ and $\\varphi$ are zero (the $z$ derivative of $\\theta$,
    $-\\rho/r^2 = 0$, is exact); at the origin all angles and derivatives are 0.
    """
    x, y, z = _float(x), _float(y), _float(z)
    rho = safe_norm(jnp.stack([x, y], axis=-1))
    return safe_norm(jnp.stack([x, y, z], axis=-1)), safe_atan2(rho, z), safe_atan2(y, x)
