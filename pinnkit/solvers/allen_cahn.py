r"""Reference solution of the Allen–Cahn benchmark (P6) by Fourier spectral ETDRK4.

$$u_t = d\,u_{xx} + r(u - u^3),\quad x \in [-1, 1) \text{ periodic},\quad
u(x, 0) = x^2\cos(\pi x),\qquad d = 10^{-4},\ r = 5.$$

**Method.** Fourier collocation in $x$ on $x_j = -1 + 2j/n$; in Fourier space
$\hat u_t = L\hat u + \hat N(u)$ with the diagonal linear part $L = -d k^2 + r$ and
$N(u) = -r u^3$. Time stepping is the exponential time-differencing RK4 scheme of Cox &
Matthews (2002) with the phi-functions evaluated by the contour integrals of Kassam &
Trefethen (2005, SIAM J. Sci. Comput. 26:1214), the method of Chebfun's `spin`. Why
ETDRK4: the linear part (stiff on fine grids, $d k_{\max}^2 \approx 4\times10^3$ at
$n = 4096$) is integrated exactly, the cubic term is smooth
and mildly stiff at most ($|\partial_u N| \le 15$ near $u = \pm 1$), so no implicit solves
are needed (a diffrax implicit solver would form a dense $n\times n$ Jacobian) and the
fixed step can be large: the time error is ~2e-11 at $h = 10^{-3}$ and ~3e-10 at
$2\times10^{-3}$ (fourth order, measured against $h = 5\times10^{-5}$).

**Resolution.** Two features limit the spatial accuracy.
(i) The periodic extension of $u_0$ has a kink at $x = \pm1$ ($u_0'(\pm1) = \mp 2$), so
Fourier coefficients start as $k^{-2}$ and are only smoothed by $e^{-d k^2 t}$: errors are
algebraic at early times (space-time relative L2 $\propto n^{-2.5}$).
(ii) The interfaces $u \approx \tanh(\xi/\sqrt{2d/r})$, width $\approx 6.3\times10^{-3}$,
whose coefficients decay geometrically. Measured against $n = 8192$ on 201 times in
$[0, 1]$: $n = 2048$ has relative L2 7e-7 (max 1e-4 at $t = 0.005$, 1e-5 for
$t \ge 0.1$, 4e-10 at $t = 1$); $n = 4096$ (the default) 1.4e-7 (max 2e-5, 2e-6, 8e-11).
A 512-mode reference (the usual size of this benchmark's published data) is ~1e-5 in
relative L2, all of it from the kink. No dealiasing: aliasing of the cubic term stays
below the truncation error. Use float64 (enable x64 in the caller).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

_LENGTH = 2.0  # period of the domain [-1, 1)


def allen_cahn_grid(n: int, dtype=None) -> Float[Array, " n"]:
    """The periodic collocation grid $x_j = -1 + 2j/n$, $j = 0..n-1$ ($x = 1$ is $x = -1$).

    **Arguments:**

    - `n`: number of points.
    - `dtype`: floating dtype; defaults to JAX's default float.

    **Returns:**

    `x`, shape `(n,)`.
    """
    return -1.0 + jnp.arange(n, dtype=dtype if dtype is not None else float) * (_LENGTH / n)


def allen_cahn_initial_condition(x: Float[ArrayLike, "..."]) -> Float[Array, "..."]:
    r"""$u_0(x) = x^2\cos(\pi x)$: continuous when extended periodically ($u_0(\pm1) = -1$)
    but with a kink there ($u_0'(\pm1) = \mp 2$)."""
    x = jnp.asarray(x)
    return x**2 * jnp.cos(jnp.pi * x)


def _etdrk4_coefficients(lh, n_contour: int = 32):
    """`(E, E2, Q, f1, f2, f3)` for step `h` with `lh = h * L` (Kassam & Trefethen 2005).

    The phi-functions suffer cancellation near `lh = 0`, so they are averaged over a circle
    of radius 1 around each `lh` (trapezoidal rule for the Cauchy integral).
    """
    r = jnp.exp(1j * jnp.pi * (jnp.arange(1, n_contour + 1) - 0.5) / n_contour)
    z = lh[:, None] + r[None, :]
    ez = jnp.exp(z)

    def mean(a):
        return jnp.real(jnp.mean(a, axis=-1))

    q = mean((jnp.exp(z / 2) - 1) / z)
    f1 = mean((-4 - z + ez * (4 - 3 * z + z**2)) / z**3)
    f2 = mean((2 + z + ez * (z - 2)) / z**3)
    f3 = mean((-4 - 3 * z - z**2 + ez * (4 - z)) / z**3)
    return jnp.exp(lh), jnp.exp(lh / 2), q, f1, f2, f3


@eqx.filter_jit
def _solve(u0, t_eval, diffusion, reaction, n_sub, uniform):
    n = u0.shape[-1]
    k = jnp.asarray(2 * np.pi / _LENGTH * np.fft.rfftfreq(n, 1.0 / n), dtype=u0.dtype)
    lin = -diffusion * k**2 + reaction

    def nonlinear(u_hat):
        u = jnp.fft.irfft(u_hat, n)
        return jnp.fft.rfft(-reaction * u**3)

    def coefficients(h):
        E, E2, q, f1, f2, f3 = _etdrk4_coefficients(h * lin)
        # The contour averages are phi-functions of h*L; the scheme needs h * phi.
        return E, E2, h * q, h * f1, h * f2, h * f3

    def advance(u_hat, coeffs):
        E, E2, q, f1, f2, f3 = coeffs

        def step(_, v):
            nv = nonlinear(v)
            a = E2 * v + q * nv
            na = nonlinear(a)
            b = E2 * v + q * na
            nb = nonlinear(b)
            c = E2 * a + q * (2 * nb - nv)
            nc = nonlinear(c)
            return E * v + nv * f1 + 2 * (na + nb) * f2 + nc * f3

        u_hat = jax.lax.fori_loop(0, n_sub, step, u_hat)
        return u_hat, jnp.fft.irfft(u_hat, n)

    hs = jnp.diff(t_eval) / n_sub
    if uniform:  # the usual case: one set of coefficients (they cost more than the steps)
        coeffs = coefficients(hs[0])
        _, out = jax.lax.scan(lambda u_hat, _: advance(u_hat, coeffs), jnp.fft.rfft(u0), hs)
    else:
        _, out = jax.lax.scan(lambda u_hat, h: advance(u_hat, coefficients(h)), jnp.fft.rfft(u0), hs)
    return jnp.concatenate([u0[None], out])


def solve_allen_cahn(
    u0: Float[Array, " n"],
    t_eval: ArrayLike,
    diffusion: float = 1e-4,
    reaction: float = 5.0,
    max_dt: float = 1e-3,
) -> Float[Array, "nt n"]:
    r"""Integrates $u_t = d\,u_{xx} + r(u - u^3)$ on the periodic $[-1, 1)$ by ETDRK4.

    Each output interval $[t_i, t_{i+1}]$ is split into the same number $m$ of equal steps,
    $m = \lceil \max_i (t_{i+1} - t_i) / \text{max\_dt} \rceil$, so every step is at most
    `max_dt`. Global error is $O(h^4)$ in time and spectral in space (see the module
    docstring); float64 is needed for errors below ~1e-6.

    **Arguments:**

    - `u0`: initial values on `allen_cahn_grid(n)`, shape `(n,)`.
    - `t_eval`: increasing output times, shape `(nt,)`, concrete; `t_eval[0]` is the
        initial time.
    - `diffusion`: $d$. Defaults to 1e-4.
    - `reaction`: $r$. Defaults to 5.
    - `max_dt`: largest time step. Defaults to 1e-3 (time error ~2e-11).

    **Returns:**

    `u[i, j]` $= u(x_j, t_i)$, shape `(nt, n)`; row 0 is `u0`.
    """
    t_np = np.asarray(t_eval, dtype=np.float64)
    if t_np.ndim != 1 or t_np.size < 1 or np.any(np.diff(t_np) <= 0):
        raise ValueError("t_eval must be a non-empty, strictly increasing 1-D array")
    dt_max = float(np.max(np.diff(t_np))) if t_np.size > 1 else 0.0
    n_sub = max(1, math.ceil(dt_max / max_dt - 1e-9))
    uniform = bool(t_np.size > 1 and np.allclose(np.diff(t_np), dt_max, rtol=1e-12, atol=0))
    return _solve(u0, jnp.asarray(t_np, dtype=u0.dtype), diffusion, reaction, n_sub, uniform)


def allen_cahn_reference(
    n_x: int = 4096, n_t: int = 201, t_final: float = 1.0, max_dt: float = 1e-3
) -> tuple[Float[Array, " n_x"], Float[Array, " n_t"], Float[Array, "n_t n_x"]]:
    r"""The P6 reference: `solve_allen_cahn` from $x^2\cos\pi x$ on a uniform $(t, x)$ grid.

    Call under float64 (``with jax.enable_x64(True):``) for the stated accuracy.

    **Arguments:**

    - `n_x`: grid points in $x$. Defaults to 4096 (relative L2 ~1.4e-7, see the module
        docstring).
    - `n_t`: output times `linspace(0, t_final, n_t)`. Defaults to 201.
    - `t_final`: last time. Defaults to 1.
    - `max_dt`: largest time step. Defaults to 1e-3.

    **Returns:**

    `(x, t, u)` with `u[i, j]` $= u(x_j, t_i)$, shape `(n_t, n_x)`.
    """
    x = allen_cahn_grid(n_x)
    t = jnp.linspace(0.0, t_final, n_t, dtype=x.dtype)
    return x, t, solve_allen_cahn(allen_cahn_initial_condition(x), t, max_dt=max_dt)


@eqx.filter_jit
def periodic_interpolate(u: Float[Array, "*batch n"], x: Float[ArrayLike, " m"]) -> Float[Array, "*batch m"]:
    r"""Evaluates the trigonometric interpolant of grid values at arbitrary points.

    $u(x) = \sum_k \hat u_k e^{i\pi k (x + 1)}$ (the even-$n$ Nyquist mode taken as a
    cosine), which is the function the spectral solver represents; grid values are
    reproduced to round-off.

    **Arguments:**

    - `u`: values on `allen_cahn_grid(n)` (e.g. one row per time), shape `(..., n)`.
    - `x`: query points, shape `(m,)`, any real values (the series has period 2).

    **Returns:**

    Interpolated values, shape `(..., m)`.
    """
    n = u.shape[-1]
    x = jnp.asarray(x, dtype=u.dtype)
    m = np.fft.fftfreq(n, 1.0 / n)
    k = jnp.asarray(2 * np.pi / _LENGTH * m, dtype=u.dtype)
    basis = jnp.exp(1j * (x[:, None] + 1.0) * k[None, :])
    if n % 2 == 0:
        basis = basis.at[:, n // 2].set(jnp.cos((x + 1.0) * k[n // 2]))
    coeffs = jnp.fft.fft(u, axis=-1, norm="forward")
    return jnp.real(coeffs @ basis.T)
