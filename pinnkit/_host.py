"""Reference solutions computed by numpy on the host (`HostFunction`).

Some exact or reference solutions are numpy code (a Cole–Hopf quadrature, an
interpolated spectral table). Evaluation calls them *on the host*, on numpy points,
outside any compiled computation: `pinnkit.nn.evaluate.predict` and
`pinnkit.parallel.mesh.predict_sharded` test for a `HostFunction` and call `host`.

Why not `jax.pure_callback` inside the jitted evaluation: on the CPU backend the callback
first places its arguments on the CPU device, a transfer queued on the same thread pool
that is running the computation which called it. With one core (``taskset -c 1``,
``--cpus-per-task=1``) that pool has one thread, and the callback waits forever for its
own argument. Calling the object on a JAX value still goes through `jax.pure_callback`
(tests, plots of derived fields, ``network.pi_init: reference``), where the same caveat
applies.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Float


class HostFunction(eqx.Module):
    """A pointwise field $u(x)$ evaluated by numpy: ``fn(points (n, d) float64) -> (n, m)``.

    **Arguments:**
    - `fn`: vectorised over rows; receives float64 points, returns ``n_out`` values per row.
    - `n_out`: number of fields ``m``.

    ``host(points, dtype)`` evaluates on the host (points rounded to ``dtype`` first, the
    values rounded to ``dtype`` after, as a compiled evaluation in ``dtype`` would);
    ``self(x)`` with ``x`` of shape ``(d,)`` is the same function for JAX code.
    """

    fn: Callable[[np.ndarray], np.ndarray] = eqx.field(static=True)
    n_out: int = eqx.field(static=True)

    def host(self, points: np.ndarray, dtype=np.float64) -> np.ndarray:
        """Values at ``points`` ``(n, d)`` → numpy ``(n, m)`` of ``dtype``."""
        pts = np.asarray(points).astype(dtype).astype(np.float64)
        out = np.asarray(self.fn(pts), np.float64).reshape(pts.shape[0], self.n_out)
        return out.astype(dtype)

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, " m"]:
        shape = jax.ShapeDtypeStruct((self.n_out,), x.dtype)

        def cb(a):
            a = np.asarray(a)
            flat = a.reshape(-1, a.shape[-1]).astype(np.float64)
            vals = np.asarray(self.fn(flat), np.float64)
            return vals.reshape(a.shape[:-1] + (self.n_out,)).astype(a.dtype)

        return jax.pure_callback(cb, shape, x, vmap_method="broadcast_all")
