"""Nested reverse-mode autodiff: the reference oracle for every other method."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from .._types import Point
from ._base import AbstractDiffMethod, Request


def _derivative_tensor(net: Callable, order: int) -> Callable:
    """``x -> D^order net(x)``, shape ``(m, d, ..., d)``, by nesting `jax.jacrev`."""
    f = net
    for _ in range(order):
        f = jax.jacrev(f)
    return f


def _lookup(tensors: dict, requests: Sequence[Request], dtype) -> dict:
    """Reads each request off the full derivative tensors ``{order: (m, d, ..., d)}``."""
    out = {}
    for r in requests:
        if r.kind == "laplacian":
            h = tensors[2][r.out]
            out[r] = sum(h[a, a] for a in r.axes) if r.axes else jnp.zeros((), dtype)
        elif r.kind == "biharmonic":
            t = tensors[4][r.out]
            terms = [t[a, a, b, b] for a in r.axes for b in r.axes]
            out[r] = sum(terms) if terms else jnp.zeros((), dtype)
        else:
            out[r] = tensors[r.order][(r.out, *r.axes)]
    return out


class Autodiff(AbstractDiffMethod):
    """Reverse-over-reverse autodiff (`jax.jacrev` nested ``k`` times for order ``k``).

    Builds the full derivative tensor of each needed order, so its cost grows like
    $d^k$: slow for high dimension, but it works on every JAX operation and is the
    oracle the faster methods are tested against.
    """

    def derivatives(self, net, x: Point, requests: Sequence[Request]):
        orders = {r.order for r in requests}
        tensors = {k: _derivative_tensor(net, k)(x) for k in orders}
        return _lookup(tensors, requests, x.dtype)


class ForwardOverReverse(AbstractDiffMethod):
    """`jax.hessian`-style forward-over-reverse: first order by `jacrev`, each further
    order by `jacfwd`. Usually faster than `Autodiff` for second-order residuals in
    low dimension; same numbers to rounding.
    """

    def derivatives(self, net, x: Point, requests: Sequence[Request]):
        orders = {r.order for r in requests}
        tensors = {}
        for k in orders:
            f = net if k == 0 else jax.jacrev(net)
            for _ in range(k - 1):
                f = jax.jacfwd(f)
            tensors[k] = f(x)
        return _lookup(tensors, requests, x.dtype)
