"""The jet of a function of the point alone (a distance function, a lifting of boundary
data, singular features): one nested forward-mode trace instead of the generic rule's
several.

Output transforms $T(x, y)$ of exact boundary conditions are affine in the network's
output, $T = A(x) + D(x)\\,y$, with $A$ and $D$ functions of $x$ only, often long ones
(R-function distance functions of every boundary part). Their rules take the jets of $A$
and $D$ from `of_point` and combine them with $y$'s jet by Leibniz's rule, so the long
functions are differentiated only along the input's own rows.

Why not `pinnkit.diffops._generic.generic`: for a second-order plan it traces the
function three times (the first-order rows, the Laplacian rows' linear term, and the
second directional derivatives), each with its own copy of the primal and first-order
computations; on the DFG channel's distance functions that is ten times the function's
own size in the compiled program, and XLA's compile time grows with it. Here the value,
the first-order rows and every second directional derivative come from one
`jax.jvp` of a `jax.vmap` of `jax.jvp`, about five times the function's size, and the
input's higher rows (zero for the coordinates) cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._algebra import _COLLAPSED, Jet, Plan, select
from ._generic import generic
from ._rows import RowKind


def of_point(fn: Callable[[Array], Array], x_jet: Jet, plan: Plan) -> Jet:
    """The jet of ``fn(x)`` (any shape) from the jet of the input point ``x``, for a
    function of $x$ alone.

    With $v_i$ the input's first-order rows (``x_jet.first``, $(p, d)$: unit vectors, or
    free directions): first-order rows $Df[v_i]$; a Laplacian row over $S$,
    $\\sum_{a \\in S} D^2 f[v_a, v_a]$; a mixed partial $\\partial_{ab}$, $D^2 f[v_a, v_b]$;
    all from one trace. A plan of order $k > 2$ with mixed partials and Laplacians only
    (the third derivatives of a stream function) gets every $D^j f[v_{i_1}, \\dots,
    v_{i_j}]$, $j \\le k$, from $k$ nested `jax.jvp`s, each vmapped over the directions
    (`_derivative_tensors`). The input must have no higher rows (the coordinates' jet,
    `pinnkit.diffops._algebra.input_jet`, has none); otherwise, and for the collapsed rows of
    a bi-Laplacian, this is the generic rule.
    """
    x, dirs = x_jet.value, x_jet.first
    if dirs is None:
        return Jet(fn(x), None, {})
    if x_jet.rest or any(k.kind in _COLLAPSED for k in plan.rest):
        return generic(fn, (x_jet,), plan)
    if plan.order > 2:
        return _of_tensors(fn, x, dirs, plan)

    def with_first(z):  # (f(z), Df(z)[v_i] for every i); the value is not batched
        return jax.vmap(lambda v: jax.jvp(fn, (z,), (v,)), out_axes=(None, 0))(dirs)

    if not plan.rest:
        value, first = with_first(x)
        return Jet(value, first, {})
    # second directions: only the rows' own axes (D^2 f[v_i, w_j] for every i, those j)
    outer = sorted({plan.dirs.index(a) for key in plan.rest for a in key.axes})
    (value, first), (_, second) = jax.vmap(
        lambda w: jax.jvp(with_first, (x,), (w,)), out_axes=((None, None), 0)
    )(select(dirs, outer))

    def d2(a: int, b: int) -> Array:
        return second[outer.index(plan.dirs.index(b)), plan.dirs.index(a)]

    rest = {}
    for key in plan.rest:
        kind, axes = key
        if kind is RowKind.LAPLACIAN:
            rest[key] = jnp.sum(jnp.stack([d2(a, a) for a in axes]), 0)
        else:  # a mixed partial of order 2 (the plan's order bounds it)
            rest[key] = d2(*axes)
    return Jet(value, first, rest)


def _derivative_tensors(fn: Callable[[Array], Array], x: Array, dirs: Array, k: int) -> tuple[Array, ...]:
    """$(f(x), T_1, \\dots, T_k)$, $T_j[i_1, \\dots, i_j] = D^j f(x)[v_{i_1}, \\dots,
    v_{i_j}]$ ($v_i$ the rows of ``dirs``): one `jax.jvp` per order, vmapped over the
    directions, each around the previous; the lower orders' tangents are discarded
    (dead code the compiler removes), so order $j$ is traced once."""

    def deeper(g):
        def h(z):
            prim, tang = jax.vmap(lambda v: jax.jvp(g, (z,), (v,)), out_axes=(None, 0))(dirs)
            return (*prim, tang[-1])

        return h

    g = lambda z: (fn(z),)  # noqa: E731
    for _ in range(k):
        g = deeper(g)
    return g(x)


def _of_tensors(fn: Callable[[Array], Array], x: Array, dirs: Array, plan: Plan) -> Jet:
    """`of_point` for plans of order > 2 whose rows are partials and Laplacians."""
    tensors = _derivative_tensors(fn, x, dirs, plan.order)

    def entry(axes) -> Array:
        t = tensors[len(axes)]
        for a in axes:
            t = t[plan.dirs.index(a)]
        return t

    rest = {}
    for key in plan.rest:
        kind, axes = key
        if kind is RowKind.LAPLACIAN:
            rest[key] = jnp.sum(jnp.stack([entry((a, a)) for a in axes]), 0)
        else:
            rest[key] = entry(axes)
    return Jet(tensors[0], tensors[1], rest)
