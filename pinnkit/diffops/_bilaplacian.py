"""Collapsed bi-Laplacian rows for the Taylor engine (`f.biharmonic`).

For a bi-Laplacian request over the axes $S$ the engine carries, besides the value,
the first-order rows $\\partial_a z$ and the Hessian rows $\\partial_{ab} z$
($a \\le b \\in S$):

- one *gradient-of-Laplacian row* $\\partial_c \\Delta_S z$ per $c \\in S$, row
  ``Row(RowKind.GRAD_LAPLACIAN, (c, *S))``;
- one *bi-Laplacian row* $\\Delta_S^2 z = \\sum_{a, b \\in S} \\partial_a^2 \\partial_b^2 z$,
  row ``Row(RowKind.BILAPLACIAN, S)``.

That is $1 + d + d(d+1)/2 + d + 1$ rows ($9$ at $d = 2$) instead of every fourth, third
and second partial the separate $\\partial_a^2 \\partial_b^2$ need ($13$ at $d = 2$,
$O(d^4)$ in general): the rows of order 3 and 4 enter the result only through these
sums, and every chain rule below is linear in them, so they can be propagated summed
("collapsed", as the forward Laplacian does at second order). No interpolation weights:
all coefficients are positive integers, so there is no cancellation.

The chain rule for any $f(z)$, from Faà di Bruno's formula for $\\partial_{caa}$ and
$\\partial_{aabb}$ summed over $a, b \\in S$ ($z_a = \\partial_a z$, $z_{ab}$ the Hessian
rows, $L = \\Delta_S z = \\sum_a z_{aa}$, $G_a = \\partial_a \\Delta_S z$, $B = \\Delta_S^2 z$):

$$\\partial_c \\Delta f = Df[G_c] + D^2f[z_c, L] + 2 \\sum_a D^2f[z_{ca}, z_a]
  + \\sum_a D^3f[z_c, z_a, z_a],$$

$$\\Delta^2 f = Df[B] + 4 \\sum_a D^2f[z_a, G_a] + D^2f[L, L] + 2 \\sum_{a,b} D^2f[z_{ab}, z_{ab}]
  + 2 \\sum_a D^3f[L, z_a, z_a] + 4 \\sum_{a,b} D^3f[z_a, z_b, z_{ab}]
  + \\sum_{a,b} D^4f[z_a, z_a, z_b, z_b].$$

`terms` lists these as data; the generic rule (`of_function`, each $D^k f[\\dots]$ by $k$
nested `jax.jvp`s) and the product rule (`of_product`: for $m(a, b) = ab$, $D^2 m$ is the
cross term and $D^{3,4} m = 0$) evaluate them with their own multilinear maps. For an
element-wise $\\sigma$ ($D^k \\sigma[v_1..v_k] = s_k \\prod v_i$) the sums factor, with
$Q = \\sum_a z_a^2$, into `elementwise`:

$$\\partial_c \\Delta \\sigma = s_1 G_c + s_2 \\big(z_c L + 2 \\textstyle\\sum_a z_a z_{ca}\\big)
  + s_3 z_c Q,$$

$$\\Delta^2 \\sigma = s_1 B + s_2 \\big(4 \\textstyle\\sum_a z_a G_a + L^2
  + 2 \\sum_{a,b} z_{ab}^2\\big) + s_3 \\big(2 Q L + 4 \\sum_{a,b} z_a z_b z_{ab}\\big) + s_4 Q^2.$$
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from ._rows import Row, RowKind, partial_row

# A row getter maps a row label to that row, or None where the row is known to be zero.
Rows = Callable[[Row], object]


def keys(axes: tuple[int, ...]) -> tuple[Row, ...]:
    """The collapsed rows of a bi-Laplacian over ``axes``: $\\partial_c \\Delta$, then $\\Delta^2$."""
    return tuple(_grad_lap(c, axes) for c in axes) + (Row(RowKind.BILAPLACIAN, axes),)


def _grad_lap(c: int, axes: tuple[int, ...]) -> Row:
    return Row(RowKind.GRAD_LAPLACIAN, (c, *axes))


def hessian_axes(axes: tuple[int, ...]) -> list[tuple[int, int]]:
    """The Hessian rows a bi-Laplacian over ``axes`` needs, $a \\le b$."""
    return [(a, b) for i, a in enumerate(axes) for b in axes[i:]]


def _split(key: Row) -> tuple[int | None, tuple[int, ...]]:
    kind, axes = key
    return (axes[0], axes[1:]) if kind is RowKind.GRAD_LAPLACIAN else (None, axes)


def total(items: Sequence, add: Callable = operator.add):
    """Sum of the non-``None`` items; ``None`` if there are none (a structural zero)."""
    items = [i for i in items if i is not None]
    return functools.reduce(add, items) if items else None


def product(*factors):
    return None if any(f is None for f in factors) else functools.reduce(operator.mul, factors)


def _scaled(c, x):
    return None if x is None else (x if c == 1 else c * x)


def terms(key: Row, row: Rows, add: Callable) -> dict[int, list[tuple[int, tuple]]]:
    """The chain rule of the row ``key`` as ``{k: [(coefficient, (v_1, ..., v_k)), ...]}``,
    meaning $\\sum_k \\sum c\\, D^k f[v_1, \\dots, v_k]$, with rows from ``row`` (``None``:
    zero) and ``add`` to sum two rows (for $L$)."""
    c, axes = _split(key)
    first = lambda a: row(partial_row(a))  # noqa: E731
    hess = lambda a, b: row(partial_row(a, b))  # noqa: E731
    lap = total([hess(a, a) for a in axes], add)
    if c is not None:
        return {
            1: [(1, (row(key),))],
            2: [(1, (first(c), lap))] + [(2, (hess(c, a), first(a))) for a in axes],
            3: [(1, (first(c), first(a), first(a))) for a in axes],
        }
    pairs = hessian_axes(axes)
    twice = lambda a, b: 1 if a == b else 2  # noqa: E731 - (a, b) and (b, a)
    return {
        1: [(1, (row(key),))],
        2: [(4, (first(a), row(_grad_lap(a, axes)))) for a in axes]
        + [(1, (lap, lap))]
        + [(2 * twice(a, b), (hess(a, b), hess(a, b))) for a, b in pairs],
        3: [(2, (lap, first(a), first(a))) for a in axes]
        + [(4 * twice(a, b), (first(a), first(b), hess(a, b))) for a, b in pairs],
        4: [(twice(a, b), (first(a), first(a), first(b), first(b))) for a, b in pairs],
    }


def evaluate(groups: dict[int, list[tuple[int, tuple]]], multilinear: Callable):
    """$\\sum_k \\sum c\\, D^k f[v_1..v_k]$ with ``multilinear(k, vs)`` $= D^k f[v_1..v_k]$
    (``None`` where it is zero); terms with a zero factor are skipped."""
    out = []
    for k, group in groups.items():
        for c, vs in group:
            if all(v is not None for v in vs):
                out.append(_scaled(c, multilinear(k, vs)))
    return total(out)


def elementwise(key: Row, s: Sequence, row: Rows):
    """The row ``key`` of $\\sigma(z)$ for an element-wise $\\sigma$ with $s_j = \\sigma^{(j)}(z)$,
    by the factored formulas above (the first-order rows must all be present)."""
    c, axes = _split(key)
    z = {a: row(partial_row(a)) for a in axes}
    hess = lambda a, b: row(partial_row(a, b))  # noqa: E731
    lap = total([hess(a, a) for a in axes])
    q = total([z[a] * z[a] for a in axes])
    if c is not None:
        second = [product(z[c], lap), _scaled(2, total([product(z[a], hess(c, a)) for a in axes]))]
        return total([product(s[1], row(key)), product(s[2], total(second)), s[3] * z[c] * q])
    pairs = hessian_axes(axes)
    twice = lambda a, b: 1 if a == b else 2  # noqa: E731
    h2 = total([_scaled(twice(a, b), product(hess(a, b), hess(a, b))) for a, b in pairs])
    zhz = total([_scaled(twice(a, b), product(z[a], z[b], hess(a, b))) for a, b in pairs])
    zg = total([product(z[a], row(_grad_lap(a, axes))) for a in axes])
    second = total([_scaled(4, zg), product(lap, lap), _scaled(2, h2)])
    third = total([_scaled(2, product(q, lap)), _scaled(4, zhz)])
    return total([product(s[1], row(key)), product(s[2], second), product(s[3], third), s[4] * q * q])


# ---- rows of functions of several jets: rows are tuples over the inputs -----------------


def _inputs(rows: tuple) -> tuple | None:
    return None if all(r is None for r in rows) else rows


def _add_inputs(p: tuple, q: tuple) -> tuple:
    return tuple(x if y is None else y if x is None else x + y for x, y in zip(p, q, strict=True))


def of_function(key: Row, fn: Callable, values: tuple, rows: Callable[[Row], tuple]):
    """The row ``key`` of ``fn(*z)`` for any JAX function, given the inputs' ``values`` and
    ``rows(k)`` = the tuple of the inputs' rows ``k`` (``None`` entries: zero)."""

    def form(k, vs):
        g = fn
        for v in vs:
            t = tuple(jnp.zeros_like(x) if r is None else r for x, r in zip(values, v, strict=True))
            g = functools.partial(_jvp_along, g, t)
        return g(*values)

    return evaluate(terms(key, lambda k: _inputs(rows(k)), _add_inputs), form)


def _jvp_along(g: Callable, tangents: tuple, *primals):
    return jax.jvp(g, primals, tangents)[1]


def of_product(key: Row, a, b, rows: Callable[[Row], tuple]):
    """The row ``key`` of the element-wise product $ab$ (values ``a``, ``b``; ``rows(k)`` =
    ``(row of a, row of b)``): $D m[v] = v_a b + a v_b$, $D^2 m[v, w] = v_a w_b + w_a v_b$."""

    def form(k, vs):
        if k == 1:
            ((va, vb),) = vs
            return total([None if va is None else va * b, None if vb is None else a * vb])
        if k == 2:
            (va, vb), (wa, wb) = vs
            return total([product(va, wb), product(wa, vb)])
        return None

    return evaluate(terms(key, lambda k: _inputs(rows(k)), _add_inputs), form)
