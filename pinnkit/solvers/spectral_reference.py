r"""The pseudo-spectral reference as a pointwise function: snapshots of a periodic 2-D
solution (`solve_vorticity`, `primitive_from_vorticity`) stored as truncated Fourier
coefficients, evaluated exactly in space and interpolated in time.

`spectral_reference` turns ``(n_times, n_fields, M, M)`` centred coefficients at equally
spaced times into a JAX-traceable ``(t, x, y) -> fields`` (used as a problem's reference:
`pinnkit.problems.periodic_flow`); `truncate_modes` and `fourier_eval` are its parts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np


def truncate_modes(coef: np.ndarray, rel_tol: float) -> np.ndarray:
    """Centred coefficients ``(..., n, n)`` (``fftshift``-ed, modes -n/2..n/2-1) cut to the
    smallest square band $|m_x|, |m_y| \\le K$ outside which every coefficient is below
    ``rel_tol`` times the largest; returns ``(..., 2K + 1, 2K + 1)``."""
    n = coef.shape[-1]
    mag = np.abs(coef).reshape(-1, n, n).max(axis=0)
    m = np.arange(n) - n // 2
    reach = np.maximum(np.abs(m)[:, None], np.abs(m)[None, :])
    significant = reach[mag > rel_tol * mag.max()]
    # The Nyquist row/column has no symmetric partner: never keep it.
    K = int(min(significant.max() if significant.size else 0, (n - 1) // 2))
    keep = slice(n // 2 - K, n // 2 + K + 1)
    return coef[..., keep, keep]


def fourier_eval(coef, L: float, x, y):
    r"""$\mathrm{Re}\sum_{m_x, m_y} c_{m_x m_y} e^{2\pi i (m_x x + m_y y)/L}$ for centred
    coefficients ``(..., M, M)``, $M = 2K + 1$, at one point."""
    K = (coef.shape[-1] - 1) // 2
    k = jnp.arange(-K, K + 1, dtype=x.dtype) * (2 * math.pi / L)
    ex, ey = jnp.exp(1j * k * x), jnp.exp(1j * k * y)
    return jnp.real(jnp.einsum("...ij,i,j->...", coef, ex, ey)).astype(x.dtype)


def complex_of(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` as complex64, or complex128 for a float64 ``dtype``."""
    return a.astype(np.complex128 if dtype == jnp.float64 else np.complex64)


def _cubic_weights(tau):
    """Lagrange weights of the nodes 0, 1, 2, 3 at ``tau``."""
    nodes = range(4)
    return jnp.stack([
        math.prod(1.0 / (k - j) for j in nodes if j != k) * functools.reduce(
            lambda acc, j: acc * (tau - j), [j for j in nodes if j != k], jnp.ones_like(tau))
        for k in nodes
    ])


def spectral_reference(coef: np.ndarray, t0: float, t1: float, L: float) -> Callable:
    r"""A pointwise, JAX-traceable reference ``(t, x, y) -> fields`` from snapshots
    ``coef`` ``(n_times, n_fields, M, M)`` at equally spaced times in $[t_0, t_1]$:
    the exact Fourier series in space, cubic Lagrange interpolation between the four
    nearest snapshots in time (error $O(\Delta t^4)$).

    Memory: a `vmap` over $B$ points gathers $B \times 4\,n_\text{fields} M^2$ complex
    numbers; keep ``eval.batch`` near 2048.
    """
    n_times = coef.shape[0]
    if n_times < 4:
        raise ValueError(f"spectral_reference needs at least 4 snapshots: actual={n_times}")
    dt = (t1 - t0) / (n_times - 1)

    def reference(z):
        c = jnp.asarray(complex_of(coef, z.dtype))
        s = (z[0] - t0) / dt
        first = jnp.clip(jnp.floor(s).astype(jnp.int32) - 1, 0, n_times - 4)
        w = _cubic_weights(s - first)
        near = jax.lax.dynamic_slice_in_dim(c, first, 4, axis=0)
        ct = jnp.tensordot(w.astype(c.dtype), near, axes=1)
        return fourier_eval(ct, L, z[1], z[2])

    return reference
