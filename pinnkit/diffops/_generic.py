"""The generic Taylor rule: the jet of any JAX function of jets, by nested forward mode.

Layers without a rule of their own (a user's transform, unknown embeddings or cores, a
user's own module as the whole network) go through `generic`, which is correct for any
JAX function built from `custom_jvp`-or-plain primitives.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array

from . import _bilaplacian
from ._algebra import _COLLAPSED, Jet, Plan, select
from ._rows import Row, RowKind


def _second_directional(fn: Callable, primals: tuple, tangents: tuple) -> Array:
    """$D^2 f[v, v]$ by jvp-of-jvp."""
    inner = lambda *p: jax.jvp(fn, p, tangents)[1]
    return jax.jvp(inner, primals, tangents)[1]


def _mixed_partial(fn: Callable, values: tuple, subsets, rows, *, k: int) -> Array:
    """$\\partial_{\\epsilon_1} \\cdots \\partial_{\\epsilon_k} f(z(\\epsilon))|_{\\epsilon=0}$ with
    $z_i(\\epsilon) = v_i + \\sum_I \\epsilon^I r_{i,I}$ (``rows[i][I]``, ``None`` = zero)."""
    dtype = jnp.result_type(*values)

    def f(eps):
        args = []
        for v, rs in zip(values, rows, strict=True):
            for sub, r in zip(subsets, rs, strict=True):
                if r is not None:
                    v = v + functools.reduce(operator.mul, [eps[i] for i in sub]) * r
            args.append(v)
        return fn(*args)

    eye = jnp.eye(k, dtype=dtype)
    for i in range(k):
        f = functools.partial(_directional, f, eye[i])
    return f(jnp.zeros((k,), dtype))


def _directional(g: Callable, e: Array, eps: Array) -> Array:
    return jax.jvp(g, (eps,), (e,))[1]


def generic(fn: Callable, jets: tuple[Jet, ...], plan: Plan) -> Jet:
    """The jet of ``fn(*z)`` from the jets of its inputs, for any JAX function ``fn``.

    - first-order rows: one `jax.jvp` per direction (vmapped);
    - a Laplacian row, by collapsing the second-order Taylor coefficients:
      $\\Delta_S f(z) = Df[\\Delta_S z] + \\sum_{a \\in S} D^2 f[\\partial_a z, \\partial_a z]$;
    - a mixed partial $\\partial_\\alpha$, $|\\alpha| = k$: $k$ nested jvps in auxiliary
      variables $\\epsilon_1..\\epsilon_k$ of $f(z + \\sum_{I} \\epsilon^I \\partial_{\\alpha_I} z)$,
      $I$ over the non-empty subsets of positions (only square-free monomials can reach
      $\\partial_{\\epsilon_1 \\cdots \\epsilon_k}$), vmapped over the rows of equal order.

    Cost about $2^k$ evaluations of ``fn`` per row of order $k$: slower than the fast
    rules, never wrong.
    """
    values = tuple(j.value for j in jets)
    out = fn(*values)
    p = len(plan.dirs)
    if p == 0:
        return Jet(out, None, {})
    firsts = tuple(
        j.first if j.first is not None else jnp.zeros((p, *j.value.shape), j.value.dtype) for j in jets
    )
    first = jax.vmap(lambda *t: jax.jvp(fn, values, t)[1])(*firsts)
    rest = {}
    for key in plan.rest:
        kind, axes = key
        if kind is RowKind.LAPLACIAN:
            lin = jax.jvp(fn, values, tuple(j.row_or_zero(key, plan.dirs) for j in jets))[1]
            pos = [plan.dirs.index(a) for a in axes]
            t_s = tuple(select(f, pos) for f in firsts)
            quad = jax.vmap(lambda *t: _second_directional(fn, values, t))(*t_s)
            rest[key] = lin + jnp.sum(quad, 0)
        elif kind in _COLLAPSED:
            rows = lambda k: tuple(j.row(k, plan.dirs) for j in jets)  # noqa: E731
            if (row := _bilaplacian.of_function(key, fn, values, rows)) is not None:
                rest[key] = row
    orders = sorted({len(a) for kind, a in plan.rest if kind is RowKind.PARTIAL})
    for k in orders:
        alphas = [a for kind, a in plan.rest if kind is RowKind.PARTIAL and len(a) == k]
        subsets = [c for m in range(1, k + 1) for c in itertools.combinations(range(k), m)]
        stacks = []  # stacks[i][n]: (len(alphas), *s) rows of input i, or None if all zero
        for j, f in zip(jets, firsts, strict=True):
            per = []
            for sub in subsets:
                subs = [tuple(sorted(a[i] for i in sub)) for a in alphas]
                if len(sub) == 1:
                    rs = [f[plan.dirs.index(s[0])] for s in subs]
                else:
                    rs = [j.rest.get(Row(RowKind.PARTIAL, s)) for s in subs]
                if all(r is None for r in rs):
                    per.append(None)
                else:
                    per.append(jnp.stack([jnp.zeros_like(j.value) if r is None else r for r in rs]))
            stacks.append(per)
        mixed = jax.vmap(functools.partial(_mixed_partial, fn, values, subsets, k=k))(stacks)
        rest.update({Row(RowKind.PARTIAL, a): m for a, m in zip(alphas, mixed, strict=True)})
    return Jet(out, first, rest)
