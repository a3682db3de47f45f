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

import contextlib
import functools
import itertools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import jet
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
    v_{i_j}]$, $j \\le k$, by univariate Taylor mode along a few combinations of the
    directions and polarisation (`_univariate`), or, where `jax.experimental.jet` lacks a
    rule for one of ``fn``'s primitives, from $k$ nested `jax.jvp`s, each vmapped over the
    directions (`_derivative_tensors`). The input must have no higher rows (the coordinates' jet,
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


@contextlib.contextmanager
def _jet_inside_shard_map():
    """`jax.experimental.jet` (jax 0.10) inside `jax.shard_map`: its rules bind primitives
    on their operands directly, so a constant's (device-invariant) zero series meets the
    points' (device-varying) series and the varying-axes check refuses the operation;
    and it has no rule for ``pvary``, the identity on values that `jnp` inserts where a
    constant meets the points. For the time of a trace: ``pvary`` gets a rule (the cast of
    the value and of its series), and every rule first casts all its operands to their
    common varying axes (what `jnp` does for its own operations; outside `shard_map` there
    are none and nothing changes).
    """
    from jax._src import core  # neither the primitive nor the cast has a public handle

    saved = dict(jet.jet_rules)

    def cast(rule):
        def rule_on_common_axes(primals_in, series_in, **params):
            leaves, tree = jax.tree_util.tree_flatten((primals_in, series_in))
            return rule(*jax.tree_util.tree_unflatten(tree, core.auto_insert_reshard(*leaves)), **params)

        return rule_on_common_axes

    def pvary_rule(primals_in, series_in, *, axes):  # the cast of the value, its series alike
        (x,), (terms,) = primals_in, series_in
        # (the rules' casts can have made the value varying already: then it is the identity)
        out = x if set(axes) <= core.typeof(x).mat.varying else core.pvary_p.bind(x, axes=axes)
        return out, [core.auto_insert_reshard(t, out)[0] for t in terms]

    jet.jet_rules.update({prim: cast(rule) for prim, rule in saved.items()})
    if hasattr(core, "pvary_p") and core.pvary_p not in saved:
        jet.jet_rules[core.pvary_p] = pvary_rule
    try:
        yield
    finally:
        jet.jet_rules.clear()
        jet.jet_rules.update(saved)


@functools.cache
def _lattice(p: int, k: int) -> tuple[np.ndarray, tuple, tuple]:
    """Directions and recovery matrices of `_univariate` for ``p`` directions, order ``k``:
    the lattice, and per order $j$ the pseudo-inverse and the multi-indices of its rows.

    The directions are the lattice $\\{c \\in \\mathbb N^p : |c| = k\\}$; along
    $w = \\sum_i c_i v_i$, $D^j f[w, \\dots, w] = \\sum_{|\\alpha| = j}
    \\binom{j}{\\alpha} c^\\alpha\\, T_\\alpha$ ($T_\\alpha$ the derivative with
    multiplicity $\\alpha$ of each $v_i$). The lattice is unisolvent for homogeneous
    polynomials of every degree $j \\le k$ (one of degree $j$ vanishing on it, times
    $(\\sum_i c_i)^{k - j}$, is one of degree $k$ vanishing on it: zero), so each order's
    system has full column rank, and its pseudo-inverse (numpy, float64, at trace time)
    gives every $T_\\alpha$ exactly up to rounding."""
    lattice = np.asarray([c for c in itertools.product(range(k + 1), repeat=p) if sum(c) == k], float)
    alphas, recover = [], []
    for j in range(1, k + 1):
        al = tuple(a for a in itertools.product(range(j + 1), repeat=p) if sum(a) == j)
        multinomial = [math.factorial(j) / math.prod(math.factorial(i) for i in a) for a in al]
        m = np.stack([[n * np.prod(c ** np.asarray(a)) for n, a in zip(multinomial, al, strict=True)]
                      for c in lattice])
        alphas.append(al)
        recover.append(np.linalg.pinv(m))
    return lattice, tuple(recover), tuple(alphas)


def _univariate(fn: Callable[[Array], Array], x: Array, dirs: Array,
                k: int) -> Callable[[tuple[int, ...]], Array] | None:
    """Univariate Taylor mode (`jax.experimental.jet`) along the lattice directions of
    `_lattice`, vmapped, then each order's derivatives recovered by polarisation (a
    constant matrix): $k$-th order Taylor arithmetic along a few directions instead of
    $k$ nested `jax.jvp`s, which trace $2^k$ copies of the function (on the stream
    function's lifting, order 3: 0.55x the compiled program's instructions, 0.4x its
    compile time, 0.3x the evaluation). Returns ``entry(counts)``, the derivative with
    ``counts[i]`` derivatives along row ``i`` of ``dirs`` (``()``: the value), or None
    where `jax.experimental.jet` has no rule for one of ``fn``'s primitives."""
    p = dirs.shape[0]
    lattice, recover, alphas = _lattice(p, k)
    w = jnp.asarray(lattice, dirs.dtype) @ dirs
    pure = [int(np.argmax(c)) if c.max() == k else -1 for c in lattice]
    zero = jnp.zeros_like(x)

    def along(v):
        value, series = jet.jet(fn, (x,), ((v, *([zero] * (k - 1))),))
        return value, jnp.stack(series)

    try:
        with _jet_inside_shard_map():
            value, series = jax.vmap(along, out_axes=(None, 1))(w)  # series: (k, directions, ...)
    except (KeyError, NotImplementedError):  # a primitive without a rule in jax.experimental.jet
        return None  # (any other error of fn's own is raised again by the nested jvps)

    def entry(counts: tuple[int, ...]) -> Array:
        if not counts:
            return value
        j = sum(counts)
        if max(counts) == j:  # along one row v_i: read at the direction k v_i itself (a zero stays 0)
            return series[j - 1, pure.index(counts.index(j))] / k**j
        row = jnp.asarray(recover[j - 1][alphas[j - 1].index(counts)], series.dtype)
        return jnp.tensordot(row, series[j - 1], axes=1)

    return entry


def _of_tensors(fn: Callable[[Array], Array], x: Array, dirs: Array, plan: Plan) -> Jet:
    """`of_point` for plans of order > 2 whose rows are partials and Laplacians."""
    p = dirs.shape[0]
    univariate = _univariate(fn, x, dirs, plan.order)
    if univariate is None:
        tensors = _derivative_tensors(fn, x, dirs, plan.order)

    def entry(axes) -> Array:
        if univariate is not None:
            idx = [plan.dirs.index(a) for a in axes]
            return univariate(tuple(idx.count(i) for i in range(p)) if axes else ())
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
    first = jnp.stack([entry((a,)) for a in plan.dirs])
    return Jet(entry(()), first, rest)
