"""Outlines of 2-D shapes from their boundary parts, for figures: a cylinder is drawn
as the circle its geometry says, not as the edge of a pixel mask (`outline`)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .base import all_parts, memo


def _on_part(part, eps: float, dtype):
    """``s (m,) -> (points (m, 2), kept (m,))`` along ``part`` at arc-length fractions
    ``s``, compiled once (eager evaluation of a CSG trim costs a compilation per
    operation)."""

    @jax.jit
    def f(s):
        u = jnp.stack([s, jnp.zeros_like(s)], axis=1).astype(dtype)
        x = part.from_unit(u)
        return x, jax.vmap(lambda y: part.keep(y, eps))(x)

    return lambda s: tuple(np.asarray(a) for a in f(jnp.asarray(s, dtype)))


def _cut(along, m: int, a: float, b: float, kept_at_a: bool) -> np.ndarray:
    """The point where `keep` first changes in ``[a, b]``, to ``(b - a)/m`` (the kept
    side of it): one more evaluation of ``m`` samples, the shape ``along`` is compiled for."""
    ss = np.linspace(a, b, m)
    k = np.flatnonzero(along(ss)[1] != kept_at_a)
    k = max(int(k[0]) if k.size else m - 1, 1)
    return along(np.full(m, ss[k - 1] if kept_at_a else ss[k]))[0][0]


def _chain(runs: list[np.ndarray], tol: float) -> list[np.ndarray]:
    """Polylines joined end to start (or end to end, one reversed) where they meet
    within ``tol``: the sides of a polygon become one closed loop."""
    runs = [r for r in runs if len(r) > 1]
    out = []
    while runs:
        chain = np.array(runs.pop(0))
        grown = True
        while grown:
            grown = False
            for i, r in enumerate(runs):
                if np.linalg.norm(r[0] - chain[-1]) <= tol:
                    chain = np.concatenate([chain, r[1:]])
                elif np.linalg.norm(r[-1] - chain[-1]) <= tol:
                    chain = np.concatenate([chain, r[::-1][1:]])
                else:
                    continue
                runs.pop(i)
                grown = True
                break
        if len(chain) > 2 and np.linalg.norm(chain[0] - chain[-1]) <= tol:
            chain[-1] = chain[0]  # closed exactly
        out.append(chain)
    return out


def outline(shape, n: int = 2048) -> list[np.ndarray]:
    """The boundary of a 2-D shape as polylines, from its boundary parts (not from a
    pixel mask): each part's atom sampled at equal arc-length steps (``n`` points over
    the whole boundary, at least 129 per part), the pieces CSG trims away removed, the
    cut ends located to 1/129 of a step, and the pieces joined where they meet.

    **Returns:** a list of ``(m, 2)`` float64 arrays in the shape's coordinates; a closed
    loop (a circle, a polygon, the outer rectangle) repeats its first point at the end.
    """
    if shape.dim != 2:
        raise ValueError(f"outline: a 2-D shape is needed, {type(shape).__name__} has dim {shape.dim}")
    dtype = jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
    key = ("outline", n, np.dtype(dtype).name)
    return [c.copy() for c in memo(shape, key, lambda: _outline(shape, n, dtype))]


def _outline(shape, n: int, dtype) -> list[np.ndarray]:
    eps = shape._eps(dtype)
    parts = all_parts(shape)
    total = sum(p.measure() for p in parts)
    runs = []
    for part in parts:
        m = max(129, int(np.ceil(n * part.measure() / total)) + 1)
        s = np.linspace(0.0, 1.0, m)
        along = _on_part(part, eps, dtype)
        x, keep = along(s)
        edges = np.flatnonzero(np.diff(keep.astype(np.int8)))  # keep changes between k and k+1
        bounds = np.concatenate([[0], edges + 1, [m]])
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            if not keep[lo]:
                continue
            run = [x[lo:hi].astype(np.float64)]
            if lo > 0:  # trimmed before: start at the cut
                run.insert(0, _cut(along, m, s[lo - 1], s[lo], False)[None].astype(np.float64))
            if hi < m:
                run.append(_cut(along, m, s[hi - 1], s[hi], True)[None].astype(np.float64))
            runs.append(np.concatenate(run))
    lo, hi = shape.bbox()
    return _chain(runs, 1e-4 * math.dist(lo, hi))
