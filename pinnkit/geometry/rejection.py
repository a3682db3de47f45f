"""Sampling by rejection (the geometry side of sampling; the training side, batch sizes
and fresh or fixed sets, is `pinnkit.train.collocation`): how many candidates, which to
keep, at a fixed shape.

A domain that is not the image of the unit cube (`AbstractRejectionDomain`: shapes,
meshes, space-time cylinders over them) is sampled from *candidates*: unit-cube rows
mapped into its bounding box (interior) or onto its primitives' whole boundary parts
(boundary pieces), of which those that lie on the piece are kept
(`AbstractRejectionDomain.candidates`). Inside `jax.jit` the number of points
must be static, so a draw takes `oversample` candidates, enough that fewer than ``n``
are kept with probability below about $10^{-9}$, and `select` keeps the first ``n``
accepted ones. Uniform candidates give uniform points; a (shifted) Sobol set restricted
to the shape is the usual quasi-random rejection set.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

# z-score of the shortfall probability: P(Binomial(m, p) < n) <~ Phi(-6) ~ 1e-9.
_Z = 6.0
# The acceptance estimate is a Monte Carlo mean over 2^16 Sobol points (standard error
# <= 0.002); 2 % less than the estimate keeps the margin above honest.
_SAFETY = 0.98
ESTIMATE_POINTS = 2**16


def sobol_unit(n: int, dim: int, seed: int) -> np.ndarray:
    """``n`` scrambled Sobol points in $[0,1)^{dim}$ (float64, numpy)."""
    from scipy.stats import qmc

    # scipy warns when n is not a power of 2 (balance properties are lost); taking the
    # first n of the next power of two is the documented, harmless use here.
    m = max(0, int(np.ceil(np.log2(max(n, 1)))))
    pts = qmc.Sobol(d=dim, scramble=True, seed=seed).random_base2(m)
    return pts[:n]


def oversample(n: int, p: float) -> int:
    """Candidates $m$ such that $m$ draws with acceptance $p$ give $\\ge n$ accepted with
    probability about $1 - 10^{-9}$: the smallest $m$ with
    $m p - z\\sqrt{m p (1-p)} \\ge n$, $z = 6$, for $p$ lowered by 2 %."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"acceptance rate must be in (0, 1]: actual={p}")
    if n <= 0:
        return 0
    p = min(1.0, p * _SAFETY)
    q = _Z * math.sqrt(1.0 - p)
    s = (q + math.sqrt(q * q + 4.0 * n)) / 2.0  # s = sqrt(m p)
    return int(math.ceil(s * s / p))


def select(x: Float[Array, "m d"], keep: Bool[Array, " m"], n: int) -> Float[Array, "n d"]:
    """The first ``n`` rows of ``x`` with ``keep``; static shapes (jit-compatible).

    If fewer than ``n`` are kept (probability ~1e-9 with `oversample` candidates) the
    kept rows repeat cyclically, so the set stays on the piece.
    """
    m = x.shape[0]
    idx = jnp.flatnonzero(keep, size=m, fill_value=0)
    count = jnp.maximum(jnp.sum(keep.astype(jnp.int32)), 1)
    return x[idx[jnp.arange(n) % count]]


def host_points(domain, piece: str, n: int, draw, dtype) -> tuple[np.ndarray, float]:
    """A fixed set of exactly ``n`` points of ``piece`` by host-side rejection.

    ``draw(round, m) -> (m, dim)`` gives unit-cube rows (round 0, 1, ... until enough
    are kept). **Returns:** ``(points (n, dim), acceptance)``, the measured fraction of
    candidates kept.
    """
    got, drawn, kept = [], 0, 0
    r = 0
    while kept < n:
        m = domain.unit_rows(n - kept, piece)
        x, keep = domain.candidates(jnp.asarray(draw(r, m), dtype), piece)
        x, keep = np.asarray(x), np.asarray(keep)
        got.append(x[keep])
        drawn, kept, r = drawn + m, kept + int(keep.sum()), r + 1
        if r > 50:
            raise RuntimeError(f"rejection sampling of {piece!r} keeps almost nothing ({kept}/{drawn})")
    return np.concatenate(got)[:n].astype(dtype), kept / drawn


def fixed_points(domain, piece: str, n: int, unit, draw, dtype) -> np.ndarray:
    """The fixed training set of ``piece`` of a rejection-sampled ``domain``: ``n`` points.

    A piece with nothing to reject (acceptance 1: an untrimmed boundary, a box in time) is
    the image of ``unit()`` (``n`` unit-cube rows, the draw an image of the unit cube
    takes); else `host_points` with ``draw``.
    """
    if domain.acceptance(piece) >= 1.0:
        return np.asarray(domain.points(unit(), piece, n), dtype)
    return host_points(domain, piece, n, draw, dtype)[0]


def rejected(domain, pieces: dict[str, str]) -> dict[str, float]:
    """``{name: acceptance}`` (4 digits) for each ``name: piece`` of ``pieces`` sampled with
    rejection, i.e. whose acceptance is below 1 (reported in ``summary.json``)."""
    return {k: round(p, 4) for k, piece in sorted(pieces.items()) if (p := domain.acceptance(piece)) < 1.0}


def estimate_acceptance(domain, piece: str, points: int = ESTIMATE_POINTS) -> float:
    """Fraction of `candidates` on ``piece`` over a fixed scrambled Sobol set (seed 0),
    computed in float32 whatever the default dtype, so that the number of candidates
    (`oversample`) does not depend on ``jax_enable_x64``. Usable while tracing."""
    return estimate_acceptances(domain, [piece], points)[piece]


def estimate_acceptances(domain, pieces, points: int = ESTIMATE_POINTS) -> dict[str, float]:
    """`estimate_acceptance` of each of ``pieces``, all in one compiled program (the
    counts are exact integers in float32, so each figure is the one-piece one)."""
    u = np.asarray(sobol_unit(points, domain.dim, 0), np.float32)
    # lowered and compiled explicitly, so that it runs even while an outer function is
    # being traced, with the shape's constant arithmetic inside the one program (under
    # `ensure_compile_time_eval` each constant op was compiled on its own: ~35 programs)
    run = jax.jit(lambda u: [domain.candidates(u, pc)[1] for pc in pieces]).lower(u).compile()
    return {pc: float(np.mean(np.asarray(k, np.float32))) for pc, k in zip(pieces, run(u), strict=True)}
