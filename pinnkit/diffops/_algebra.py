"""The jet algebra of the Taylor engine: which rows to carry, and the rules that every
layer's fast rule is built from.

A *jet* of a quantity $z(x) \\in \\mathbb{R}^n$ at a point $x$ is its value plus a few
*rows* of Taylor coefficients, each of the same shape as $z$ (`pinnkit.diffops._rows`):

- a first-order row $\\partial_a z$ for every direction $a$ that any request needs;
- a *Laplacian row* $\\Delta_S z = \\sum_{a \\in S} \\partial_a^2 z$ for a Laplacian request
  over the axes $S$ (carried as one row, never as $|S|$ second derivatives);
- a mixed-partial row $\\partial_\\alpha z$ for every requested multi-index $\\alpha$ of
  order $\\ge 2$ and for all of its sub-multisets (the set is closed downwards, which is
  what Faà di Bruno's formula below needs);
- for a bi-Laplacian request over $S$: the Hessian rows over $S$, one row
  $\\partial_c \\Delta_S z$ per $c \\in S$ and one row $\\Delta_S^2 z$ (third and fourth
  orders collapsed into the sums the operator reads; rules in `_bilaplacian`).

The rules here (`linear`, `elementwise`, `product`, `scale`, `add`) are exact for any
rows; `pinnkit.diffops.jets` exports them for the layers' own rules:

- an affine map $z \\mapsto Wz + b$ maps the value to $Wz + b$ and every row $r \\mapsto Wr$:
  one matmul for the value, one per first-order row (one for the whole block beyond
  `_SPLIT_ROWS` rows) and one for the stacked higher rows, each batched over points by
  the caller's `vmap` into one large matrix product;
- an element-wise $\\sigma$ with $s_j = \\sigma^{(j)}(z)$ maps
  $\\partial_a z \\mapsto s_1 \\partial_a z$,
  $\\Delta_S z \\mapsto s_1 \\Delta_S z + s_2 \\sum_{a \\in S} (\\partial_a z)^2$ (the forward
  Laplacian), and a mixed partial by the multivariate Faà di Bruno formula over the set
  partitions $\\pi$ of the positions of $\\alpha$,
  $\\partial_\\alpha \\sigma(z) =
  \\sum_\\pi s_{|\\pi|} \\prod_{B \\in \\pi} \\partial_{\\alpha_B} z$
  (equal terms are merged at trace time: $u_{xxxx}$ has 15 partitions but 5 distinct
  terms);
- an element-wise product by Leibniz's rule.

Rows that are known to be zero (the higher rows of the input, of an affine embedding)
are not stored, so they cost nothing; and the input's first-order rows do not depend on
$x$, so under `vmap` they stay unbatched until the first non-linearity.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._types import Point
from . import _bilaplacian
from ._base import Request
from ._rows import Row, RowKind, partial_row

# ---------------------------------------------------------------------------------------
# Combinatorics (trace time, cached)


def _set_partitions(items: tuple[int, ...]):
    """All partitions of ``items`` into non-empty blocks (Bell(len(items)) of them)."""
    if not items:
        yield ()
        return
    head, tail = items[0], items[1:]
    for part in _set_partitions(tail):
        yield ((head,),) + part
        for i, block in enumerate(part):
            yield part[:i] + ((head,) + block,) + part[i + 1 :]


@functools.cache
def _faa_di_bruno(alpha: tuple[int, ...]) -> tuple:
    """Terms of $\\partial_\\alpha \\sigma(z) = \\sum_j \\sigma^{(j)} \\sum c \\prod_\\beta
    \\partial_{\\beta} z$.

    Returns ``((j, ((c, (beta_1, beta_2, ...)), ...)), ...)`` grouped by the number of
    blocks ``j``, identical products merged into the integer ``c``.
    """
    groups: dict[int, Counter] = {}
    for part in _set_partitions(tuple(range(len(alpha)))):
        factors = tuple(sorted(tuple(sorted(alpha[i] for i in block)) for block in part))
        groups.setdefault(len(part), Counter())[factors] += 1
    return tuple((j, tuple((c, f) for f, c in sorted(groups[j].items()))) for j in sorted(groups))


@functools.cache
def block_sizes(n: int) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
    """Univariate Faà di Bruno: $(f \\circ u)^{(n)} = \\sum c\\, f^{(j)} \\prod_i u^{(k_i)}$,
    as ``((j, c, (k_1, ..., k_j)), ...)``."""
    counts = Counter()
    for part in _set_partitions(tuple(range(n))):
        counts[tuple(sorted(len(b) for b in part))] += 1
    return tuple((len(ks), c, ks) for ks, c in sorted(counts.items()))


def _sub_multisets(alpha: tuple[int, ...]) -> set[tuple[int, ...]]:
    """Proper sub-multisets of ``alpha`` of size >= 2 (sorted tuples)."""
    out = set()
    for m in range(2, len(alpha)):
        out.update(tuple(sorted(c)) for c in itertools.combinations(alpha, m))
    return out


# ---------------------------------------------------------------------------------------
# Plan: which rows to carry, decided once from the requests


# the collapsed bi-Laplacian rows, whose rules live in _bilaplacian
_COLLAPSED = (RowKind.GRAD_LAPLACIAN, RowKind.BILAPLACIAN)


class Plan(NamedTuple):
    """Which rows a jet carries, decided once (at trace time) from the requests."""

    dirs: tuple[int, ...]  # axes with a first-order row, sorted; row i <-> dirs[i]
    rest: tuple[Row, ...]  # Laplacian rows, then mixed partials by increasing order
    order: int  # highest derivative order carried
    needed: frozenset  # rows the requests read directly (the rest only feed them)
    # first-order rows along coordinate axes (False: row i is e_{dirs[i]}) or along free
    # directions (True: the stochastic estimators' random jets, `_stochastic`)
    free: bool = False


def make_plan(requests: Sequence[Request]) -> Plan:
    """The rows that the ``requests`` need, closed downwards (see the module docstring)."""
    dirs: set[int] = set()
    partials: set[tuple[int, ...]] = set()
    laps: set[tuple[int, ...]] = set()
    bilaps: set[tuple[int, ...]] = set()
    needed: set[Row] = set()
    for r in requests:
        dirs.update(r.axes)
        if r.kind == "biharmonic":
            if r.axes:
                bilaps.add(r.axes)
                needed.add(Row(RowKind.BILAPLACIAN, r.axes))
        elif r.kind == "laplacian":
            if r.axes:
                laps.add(r.axes)
        elif len(r.axes) >= 2:
            partials.add(r.axes)
        elif len(r.axes) == 1:
            needed.add(Row(RowKind.PARTIAL, r.axes))
    needed.update(Row(RowKind.PARTIAL, a) for a in partials)
    for axes in bilaps:  # rows that only feed the bi-Laplacian
        partials.update(_bilaplacian.hessian_axes(axes))
    todo = list(partials)
    while todo:  # close downwards: Faà di Bruno for alpha needs every sub-multiset
        for sub in _sub_multisets(todo.pop()):
            if sub not in partials:
                partials.add(sub)
                todo.append(sub)
    lap_rows = []
    for axes in sorted(laps):
        if all((a, a) in partials for a in axes):
            needed.update(partial_row(a, a) for a in axes)  # sum the diagonal at the end
        else:
            lap_rows.append(Row(RowKind.LAPLACIAN, axes))
            needed.add(Row(RowKind.LAPLACIAN, axes))
    by_order = sorted(partials, key=lambda a: (len(a), a))
    rest = tuple(lap_rows) + tuple(Row(RowKind.PARTIAL, a) for a in by_order)
    rest += tuple(k for axes in sorted(bilaps) for k in _bilaplacian.keys(axes))
    order = max(
        [len(a) for a in partials] + [4] * bool(bilaps) + [2] * bool(lap_rows) + [1] * bool(dirs) + [0]
    )
    return Plan(tuple(sorted(dirs)), rest, order, frozenset(needed))


# ---------------------------------------------------------------------------------------
# Jets


class Jet(NamedTuple):
    """Value ``(*s)``, first-order block ``(p, *s)`` (row ``i`` along ``plan.dirs[i]``) and
    higher rows ``(*s)`` by `Row`.

    ``first=None`` or a row missing from ``rest`` means that row is zero. The three groups
    go through an affine map by separate matmuls (`linear`) rather than one: no
    concatenation of the value with the rows, which measured fastest for the forward
    Laplacian's reverse pass.
    """

    value: Array
    first: Array | None
    rest: dict[Row, Array]

    def row(self, key: Row, dirs: tuple[int, ...]) -> Array | None:
        if key.is_first_order:
            return None if self.first is None else self.first[dirs.index(key.axes[0])]
        return self.rest.get(key)

    def row_or_zero(self, key: Row, dirs: tuple[int, ...]) -> Array:
        r = self.row(key, dirs)
        return jnp.zeros_like(self.value) if r is None else r


def input_jet(x: Point, plan: Plan) -> Jet:
    """The jet of the coordinates: $(x, e_{a_1}, \\dots, e_{a_p})$, no higher rows."""
    if not plan.dirs:
        return Jet(x, None, {})
    eye = jnp.asarray(np.eye(x.shape[0])[list(plan.dirs)], x.dtype)  # constant: unbatched
    return Jet(x, eye, {})


def select(rows: Array, idx: Sequence[int]) -> Array:
    """``rows[idx]`` with static indices, as a slice when they are contiguous."""
    idx = list(idx)
    if idx == list(range(idx[0], idx[-1] + 1)):
        return rows[idx[0] : idx[-1] + 1]
    return jnp.stack([rows[i] for i in idx])


# first-order blocks of up to this many rows go through the affine map row by row
_SPLIT_ROWS = 4


def linear(jet: Jet, weight: Array, bias: Array | None, keep=None) -> Jet:
    """$z \\mapsto Wz + b$, rows $r \\mapsto Wr$. ``keep``: the higher rows still needed
    (``None``: all); the first-order block is dropped when no first-order row is kept."""
    value = weight @ jet.value
    if bias is not None:
        value = value + bias
    first = jet.first
    if first is not None and keep is not None and not any(k.is_first_order for k in keep):
        first = None
    if first is not None and first.shape[0] <= _SPLIT_ROWS:
        # one matmul per first-order row, not one over the (p, n) block: under the caller's
        # vmap the block's weight cotangent contracts over points *and* rows, which XLA:CPU
        # lowers with a transposed copy of the block; per row it is a plain (n, w) matmul
        # (issue 32: 8-12 % off P1's value_and_grad, same values)
        first = jnp.stack([f @ weight.T for f in first])
    elif first is not None:  # many directions (high d): one matmul, a short program
        first = first @ weight.T
    keys = [k for k in jet.rest if keep is None or k in keep]
    if len(keys) == 1:
        return Jet(value, first, {keys[0]: weight @ jet.rest[keys[0]]})
    # one matmul for all higher rows: measured 2x faster than one per row at order 4
    rows = jnp.stack([jet.rest[k] for k in keys]) @ weight.T if keys else []
    return Jet(value, first, dict(zip(keys, rows, strict=True)))


def elementwise(jet: Jet, s: Sequence[Array], plan: Plan) -> Jet:
    """Applies an element-wise $\\sigma$, given ``s[j]`` $= \\sigma^{(j)}(z)$ for $j \\le$ order."""
    if jet.first is None:  # then every row is zero (the first-order block feeds all others)
        return Jet(s[0], None, {})
    first = jet.first
    rest = {}
    for key in plan.rest:
        kind, axes = key
        acc = []
        if kind is RowKind.LAPLACIAN:
            if (r := jet.rest.get(key)) is not None:
                acc.append(s[1] * r)
            sq = jnp.sum(jnp.square(select(first, [plan.dirs.index(a) for a in axes])), 0)
            acc.append(s[2] * sq)
        elif kind in _COLLAPSED:
            acc.append(_bilaplacian.elementwise(key, s, lambda k: jet.row(k, plan.dirs)))
        else:
            for j, terms in _faa_di_bruno(axes):
                prods = []
                for c, factors in terms:
                    rs = [jet.row(Row(RowKind.PARTIAL, f), plan.dirs) for f in factors]
                    if all(r is not None for r in rs):
                        prod = functools.reduce(operator.mul, rs)
                        prods.append(prod if c == 1 else c * prod)
                if prods:
                    acc.append(s[j] * functools.reduce(operator.add, prods))
        if acc:
            rest[key] = functools.reduce(operator.add, acc)
    return Jet(s[0], s[1][None] * first, rest)


@functools.cache
def _leibniz(alpha: tuple[int, ...]) -> tuple[tuple[int, tuple, tuple], ...]:
    """Leibniz: $\\partial_\\alpha (ab) = \\sum_I \\partial_{\\alpha_I} a\\,
    \\partial_{\\alpha \\setminus \\alpha_I} b$ over the subsets $I$ of positions, as
    ``((count, beta_a, beta_b), ...)``."""
    counts = Counter()
    k = len(alpha)
    for m in range(k + 1):
        for sub in itertools.combinations(range(k), m):
            rest = tuple(alpha[i] for i in range(k) if i not in sub)
            counts[(tuple(alpha[i] for i in sub), rest)] += 1
    return tuple((c, a, b) for (a, b), c in sorted(counts.items()))


def product(a: Jet, b: Jet, plan: Plan) -> Jet:
    """The jet of the element-wise product of two jets (Leibniz's rule)."""

    def row(j: Jet, axes: tuple[int, ...]) -> Array | None:
        return j.value if not axes else j.row(Row(RowKind.PARTIAL, axes), plan.dirs)

    if a.first is None and b.first is None:
        return Jet(a.value * b.value, None, {})
    first = [f * v[None] for f, v in ((a.first, b.value), (b.first, a.value)) if f is not None]
    rest = {}
    for key in plan.rest:
        kind, axes = key
        terms = []
        if kind is RowKind.LAPLACIAN:
            pairs = ((a.rest.get(key), b.value), (b.rest.get(key), a.value))
            terms += [r * v for r, v in pairs if r is not None]
            if a.first is not None and b.first is not None:
                pos = [plan.dirs.index(i) for i in axes]
                terms.append(2.0 * jnp.sum(select(a.first, pos) * select(b.first, pos), 0))
        elif kind in _COLLAPSED:
            rows = lambda k: (a.row(k, plan.dirs), b.row(k, plan.dirs))  # noqa: E731
            terms.append(_bilaplacian.of_product(key, a.value, b.value, rows))
        else:
            for c, axes_a, axes_b in _leibniz(axes):
                ra, rb = row(a, axes_a), row(b, axes_b)
                if ra is not None and rb is not None:
                    terms.append(ra * rb if c == 1 else c * (ra * rb))
        terms = [t for t in terms if t is not None]
        if terms:
            rest[key] = functools.reduce(operator.add, terms)
    return Jet(a.value * b.value, functools.reduce(operator.add, first), rest)


def scale(a: Jet, c) -> Jet:
    """The jet of $c\\,a$ for a scalar $c$ that does not depend on $x$."""
    first = None if a.first is None else c * a.first
    return Jet(c * a.value, first, {k: c * r for k, r in a.rest.items()})


def add(a: Jet, b: Jet) -> Jet:
    """The jet of $a + b$."""
    first = [f for f in (a.first, b.first) if f is not None]
    rest = dict(a.rest)
    for k, r in b.rest.items():
        rest[k] = rest[k] + r if k in rest else r
    return Jet(a.value + b.value, functools.reduce(operator.add, first) if first else None, rest)
