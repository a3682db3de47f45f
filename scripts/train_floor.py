"""The hand-written floor of the peer protocols P1–P3 (`scripts/bench_train.py`).

The same tanh MLP, points and loss as pinnkit's run, with the derivative rows pushed
through the network by hand, layer by layer, as plain arrays: the value ``(n, w)``, the
first-order rows ``(p, n, w)`` and one second-order row ``(n, w)``
($\\Delta_S z$ over the axes ``S`` a residual needs). Per hidden layer, with
$t = \\tanh z$, $s_1 = 1 - t^2$, $s_2 = -2 t s_1$:

$$v \\mapsto t,\\quad \\partial_a z \\mapsto s_1 \\partial_a z,\\quad
\\Delta_S z \\mapsto s_1 \\Delta_S z + s_2 \\textstyle\\sum_{a \\in S} (\\partial_a z)^2,$$

and the first-order rows through the affine maps by one matmul ``W @ (w, p·n)``. One
`jax.value_and_grad` of the loss; no jets, plans, registries or per-point `vmap`. The
loss is checked against pinnkit's (`check_loss`) on the same weights.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from pinnkit.problems.navier_stokes import kovasznay_solution


def weights(net) -> list[tuple[jax.Array, jax.Array]]:
    """``[(W, b), ...]`` of a plain `pinnkit.nn.MLP` core (``W``: ``(out, in)``)."""
    return [(lin.weight, lin.bias) for lin in net.core.layers]


def rows(layers, x, dirs: tuple[int, ...], lap: tuple[int, ...]):
    """``(value (n, m), first (p, n, m) or None, lap (n, m) or None)`` of the MLP at the
    points ``x`` ``(n, d)``: first-order rows along ``dirs``, the Laplacian over ``lap`` (a
    subset of ``dirs``; ``()``: none).

    Feature-major inside (value ``(w, n)``, first-order rows ``(w, p, n)``): every matmul
    is ``W @ (w, rows·n)`` and every weight gradient ``dZ @ H^T``, which XLA:CPU runs
    without transposed copies (the fastest of the layouts tried for this floor)."""
    (w, b), *rest = layers
    n = x.shape[0]
    z = w @ x.T + b[:, None]
    g = w[:, list(dirs)][:, :, None] if dirs else None  # (w, p, 1): the same at every point
    li = [dirs.index(a) for a in lap]
    lz = None
    for w, b in rest:
        t = jnp.tanh(z)
        s1 = 1.0 - t * t
        lt = None
        if g is not None:
            if li:
                sq = sum(g[:, i] * g[:, i] for i in li)
                lt = (-2.0 * t * s1) * sq + (0.0 if lz is None else s1 * lz)
            g = s1[:, None, :] * g
        z = w @ t + b[:, None]
        if g is not None:
            p = g.shape[1]
            g = (w @ g.reshape(w.shape[1], p * n)).reshape(w.shape[0], p, n)
            lz = None if lt is None else w @ lt
    first = None if g is None else jnp.transpose(g, (1, 2, 0))
    return z.T, first, None if lz is None else lz.T


def _ms(r):
    return jnp.mean(jnp.sum(r * r, axis=-1)) if r.ndim > 1 else jnp.mean(r * r)


def loss_fn(problem: str, arrays: dict, coeffs: dict):
    """The floor's loss ``layers -> scalar`` of ``problem`` on the run's points."""
    if problem == "P1":
        xi, xb = arrays["pde"], arrays["boundary"]
        f = 2 * math.pi**2 * jnp.sin(jnp.pi * xi[:, 0]) * jnp.sin(jnp.pi * xi[:, 1])

        def loss(layers):
            _, _, lap = rows(layers, xi, (0, 1), (0, 1))
            u_b = rows(layers, xb, (), ())[0]
            return _ms(-lap[:, 0] - f) + _ms(u_b)

        return loss
    if problem == "P2":
        xm, xc, xb = arrays["momentum"], arrays["continuity"], arrays["boundary"]
        nu = coeffs["nu"]
        sol = jax.vmap(lambda x: jnp.stack(kovasznay_solution(x, 20.0)[:2]))(xb)

        def loss(layers):
            y, g, lap = rows(layers, xm, (0, 1), (0, 1))  # y (n, 3): u, v, p
            u, v = y[:, 0], y[:, 1]
            mom = [u * g[0, :, i] + v * g[1, :, i] + g[i, :, 2] - nu * lap[:, i] for i in (0, 1)]
            _, gc, _ = rows(layers, xc, (0, 1), ())
            cont = gc[0, :, 0] + gc[1, :, 1]
            yb = rows(layers, xb, (), ())[0]
            return _ms(jnp.stack(mom, -1)) + _ms(cont) + _ms(yb[:, :2] - sol)

        return loss
    if problem == "P3":
        xi, x0, xb = arrays["pde"], arrays["initial"], arrays["boundary"]
        nu = coeffs["nu"]
        u0 = -jnp.sin(jnp.pi * x0[:, 1])

        def loss(layers):
            y, g, uxx = rows(layers, xi, (0, 1), (1,))  # coordinates (t, x)
            u = y[:, 0]
            res = g[0, :, 0] + u * g[1, :, 0] - nu * uxx[:, 0]
            return _ms(res) + _ms(rows(layers, x0, (), ())[0][:, 0] - u0) + _ms(rows(layers, xb, (), ())[0])

        return loss
    raise ValueError(f"no floor for {problem!r}")
