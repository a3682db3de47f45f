r"""Exact viscous Burgers solution (benchmark P3) by the Cole–Hopf transform.

$$u_t + u u_x = \nu u_{xx},\quad x\in[-1, 1],\quad u(x, 0) = -\sin(\pi x),\quad
u(\pm1, t) = 0,\qquad \nu = 0.01/\pi \text{ by default.}$$

The initial condition is odd and 2-periodic, so the Dirichlet problem is the periodic one
and Cole–Hopf ($u = -2\nu\,\phi_x/\phi$, $\phi_t = \nu\phi_{xx}$) gives
(Basdevant et al. 1986, Comput. Fluids 14:23)

$$u(x, t) = -\frac{\int \sin(\pi(x - \eta))\, f(x - \eta)\, e^{-\eta^2/4\nu t}\, d\eta}
{\int f(x - \eta)\, e^{-\eta^2/4\nu t}\, d\eta},\qquad
f(y) = \exp\!\Big(-\frac{\cos \pi y}{2\pi\nu}\Big).$$

With $\eta = \sqrt{4\nu t}\,z$ both integrals are Gauss–Hermite integrals
$\int g(z) e^{-z^2} dz \approx \sum_i w_i g(z_i)$. $f$ spans $e^{\pm 1/(2\pi\nu)} = e^{\pm 50}$
for the default $\nu$, so the sums are formed as $\sum_i e^{E_i - \max_j E_j}$ with
$E_i = \log w_i - \cos(\pi(x - c z_i))/(2\pi\nu)$: nothing overflows and the ratio is
unchanged. Everything is numpy float64 (independent of JAX's x64 setting).

**Why 200 nodes.** Near the shock at $t = 1$ the integrand $f(x - cz)e^{-z^2}$ is a pair of
bumps of width $\sigma \approx 0.4$ centred near $|z| \approx 6.5$; Gauss–Hermite nodes there
are $h \approx \pi/\sqrt{2N - z^2}$ apart, and, like the trapezoidal rule, the error
falls as $e^{-2\pi^2\sigma^2/h^2}$: 2e-7 for $N = 50$, round-off from $N \approx 100$. On
the benchmark grid the result moves by < 1e-14 between 100 and 1600 nodes (measured), so
the default of 200 has a factor-2 margin.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special
from jaxtyping import ArrayLike, Float

BURGERS_NU = 0.01 / math.pi


def _hermite_log_rule(n_quad: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Hermite nodes and log-weights, with weights that underflowed dropped."""
    # scipy's rule (asymptotic for large n) stays accurate where numpy's hermgauss overflows.
    z, w = scipy.special.roots_hermite(n_quad)
    keep = w > 0
    return z[keep], np.log(w[keep])


def burgers_cole_hopf(
    x: Float[ArrayLike, "..."],
    t: Float[ArrayLike, "..."],
    nu: float = BURGERS_NU,
    n_quad: int = 200,
    chunk: int = 8192,
) -> Float[np.ndarray, "..."]:
    r"""Evaluates the exact Burgers solution $u(x, t)$ (see the module docstring).

    **Arguments:**

    - `x`: positions in $[-1, 1]$ (the formula is 2-periodic and odd beyond it).
    - `t`: times $\ge 0$; broadcast against `x`.
    - `nu`: viscosity. Defaults to $0.01/\pi$.
    - `n_quad`: Gauss–Hermite nodes. Defaults to 200 (converged to round-off for $t \le 1$ at
        the default $\nu$; much larger $t$ or smaller $\nu$ may need more).
    - `chunk`: points processed at once (memory ~ `chunk * n_quad` doubles).

    **Returns:**

    $u$ as a float64 numpy array of the broadcast shape of `x` and `t`.
    """
    x, t = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(t, np.float64))
    if np.any(t < 0):
        raise ValueError("burgers_cole_hopf needs t >= 0")
    z, log_w = _hermite_log_rule(n_quad)
    xf, tf = x.ravel(), t.ravel()
    out = np.empty_like(xf)
    for s in range(0, xf.size, chunk):
        xs, ts = xf[s : s + chunk, None], tf[s : s + chunk, None]
        y = xs - np.sqrt(4.0 * nu * ts) * z[None, :]  # x - eta at the nodes
        expo = log_w[None, :] - np.cos(np.pi * y) / (2.0 * np.pi * nu)
        weights = np.exp(expo - expo.max(axis=1, keepdims=True))
        out[s : s + chunk] = -np.sum(np.sin(np.pi * y) * weights, axis=1) / np.sum(weights, axis=1)
    # At t = 0 the quadrature collapses to u0 already; keep it exact anyway.
    out = np.where(tf == 0, -np.sin(np.pi * xf), out)
    return out.reshape(x.shape)


def burgers_reference(
    n_x: int = 256,
    n_t: int = 100,
    t_final: float = 1.0,
    nu: float = BURGERS_NU,
    n_quad: int = 200,
) -> tuple[Float[np.ndarray, " n_x"], Float[np.ndarray, " n_t"], Float[np.ndarray, "n_t n_x"]]:
    r"""The P3 evaluation grid and the exact solution on it.

    **Arguments:**

    - `n_x`: points of `linspace(-1, 1, n_x)`. Defaults to 256.
    - `n_t`: points of `linspace(0, t_final, n_t)`. Defaults to 100.
    - `t_final`: last time. Defaults to 1.
    - `nu`, `n_quad`: as in `burgers_cole_hopf`.

    **Returns:**

    `(x, t, u)` with `u[i, j]` $= u(x_j, t_i)$, shape `(n_t, n_x)`, float64 numpy.
    """
    x = np.linspace(-1.0, 1.0, n_x)
    t = np.linspace(0.0, t_final, n_t)
    return x, t, burgers_cole_hopf(x[None, :], t[:, None], nu=nu, n_quad=n_quad)
