"""A pointwise model evaluated on many points, batched: `predict`. A pure function of a
callable and an array, so plots, problems and the run directory share it without
importing each other (`pinnkit.run.metrics.predict` re-exports it)."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._host import HostFunction


@eqx.filter_jit
def _values(fn, x):
    return jax.vmap(fn)(x)


@eqx.filter_jit
def _jacobians(fn, x):
    return jax.vmap(jax.jacfwd(fn))(x)


def predict(fn: Callable, points: np.ndarray, batch: int = 16384, dtype=jnp.float32,
            jacobian: bool = False) -> np.ndarray:
    """``vmap(fn)`` over ``points`` in batches of ``batch`` rows; returns numpy ``(n, m)``
    (``jacobian``: ``vmap(jacfwd(fn))``, ``(n, m, dim)``). ``fn`` is an argument of one
    jitted function, so a network of the same structure is compiled once per process
    (evaluations during training reuse it). A `HostFunction` (a numpy reference) is
    evaluated on the host, outside JAX (values only)."""
    if isinstance(fn, HostFunction):
        if jacobian:
            raise TypeError("predict: a HostFunction has no Jacobian (it is evaluated in numpy)")
        return fn.host(points, np.dtype(dtype))
    kind = _jacobians if jacobian else _values
    f = lambda x: kind(fn, x)  # noqa: E731
    n = points.shape[0]
    pad = (-n) % batch if n > batch else 0
    pts = np.concatenate([points, np.repeat(points[-1:], pad, axis=0)]) if pad else points
    outs = [
        np.asarray(f(jnp.asarray(pts[i : i + batch], dtype)))
        for i in range(0, pts.shape[0], min(batch, pts.shape[0]))
    ]
    return np.concatenate(outs)[:n]
