"""Taylor mode: every derivative a residual asks for, in one forward pass.

A *jet* of a quantity $z(x) \\in \\mathbb{R}^n$ at a point $x$ is its value plus a few
*rows* of Taylor coefficients, each of the same shape as $z$:

- a first-order row $\\partial_a z$ for every direction $a$ that any request needs;
- a *Laplacian row* $\\Delta_S z = \\sum_{a \\in S} \\partial_a^2 z$ for a Laplacian request
  over the axes $S$ (carried as one row, never as $|S|$ second derivatives);
- a mixed-partial row $\\partial_\\alpha z$ for every requested multi-index $\\alpha$ of
  order $\\ge 2$ and for all of its sub-multisets (the set is closed downwards, which is
  what Faà di Bruno's formula below needs);
- for a bi-Laplacian request over $S$: the Hessian rows over $S$, one row
  $\\partial_c \\Delta_S z$ per $c \\in S$ and one row $\\Delta_S^2 z$ (third and fourth
  orders collapsed into the sums the operator reads; rules in `_bilaplacian`).

The jet of the input $x$ is $(x, e_{a_1}, \\dots, e_{a_p})$ with no higher rows, and it is
pushed through the network layer by layer:

- an affine map $z \\mapsto Wz + b$ maps the value to $Wz + b$ and every row $r \\mapsto Wr$:
  three matmuls per layer (value, first-order block, stacked higher rows), each batched
  over points by the caller's `vmap` into one large matrix product;
- an element-wise $\\sigma$ with $s_j = \\sigma^{(j)}(z)$ maps
  $\\partial_a z \\mapsto s_1 \\partial_a z$,
  $\\Delta_S z \\mapsto s_1 \\Delta_S z + s_2 \\sum_{a \\in S} (\\partial_a z)^2$ (the forward
  Laplacian), and a mixed partial by the multivariate Faà di Bruno formula over the set
  partitions $\\pi$ of the positions of $\\alpha$,
  $\\partial_\\alpha \\sigma(z) =
  \\sum_\\pi s_{|\\pi|} \\prod_{B \\in \\pi} \\partial_{\\alpha_B} z$
  (equal terms are merged at trace time: $u_{xxxx}$ has 15 partitions but 5 distinct
  terms).

Rows that are known to be zero (the higher rows of the input, of an affine embedding)
are not stored, so they cost nothing; and the input's first-order rows do not depend on
$x$, so under `vmap` they stay unbatched until the first non-linearity.

Why this representation rather than univariate jets along polarisation directions
(Griewank–Utke–Walther interpolation): for the sparse sets of mixed partials PDEs use, the
closed set of multi-indices is no larger than the directional coefficients needed (all of
$u_{xxxx}, u_{xxyy}, u_{yyyy}$ and their lower orders at $d = 2$: 13 rows, against
$1 + 4\\binom{d+3}{4} = 21$ for interpolation), and without interpolation weights there is
no cancellation, so the result agrees with nested reverse mode to rounding.

Fast rules exist for `pinnkit.nn.Network` with `Normalize` / `PeriodicEmbedding` /
`FourierFeatures` embeddings, an `MLP` core (every activation in `pinnkit.nn.layers.ACTIVATIONS`,
with closed-form derivatives of any order; plain or RWF layers), the gated cores of
`pinnkit.nn.nets` (`ModifiedMLP`, `PirateNet`: gates $a + z \\odot (b - a)$ by Leibniz's rule,
residual mixing $\\alpha h + (1-\\alpha) x$ row by row) and a `HardDirichlet` transform
(Leibniz's rule); a `Parity` average propagates one jet per reflected copy. Everything
else (a user's own transform, unknown embeddings or cores, or a user's own module as the
whole network) goes through a *generic* rule built from nested
`jax.jvp`, which is correct for any JAX function; see `_generic`.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections import Counter
from collections.abc import Callable, Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._types import Point, Scalar
from ..nn.layers import (
    ACTIVATIONS,
    MLP,
    FourierFeatures,
    HardDirichlet,
    Network,
    Normalize,
    Parity,
    PeriodicEmbedding,
)
from ..nn.nets import Dense, ModifiedMLP, PirateNet
from . import _bilaplacian
from ._base import AbstractDiffMethod, Request

# A row label: ("p", axes) is the partial derivative along the sorted `axes`
# (first-order rows have one axis); ("l", axes) is the Laplacian over `axes`;
# ("gl", (c, *axes)) and ("b", axes) are the collapsed rows of a bi-Laplacian
# (d/dx_c of the Laplacian, the bi-Laplacian; see _bilaplacian).
Key = tuple[str, tuple[int, ...]]


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
def _block_sizes(n: int) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
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


class _Plan(NamedTuple):
    dirs: tuple[int, ...]  # axes with a first-order row, sorted; row i <-> dirs[i]
    rest: tuple[Key, ...]  # Laplacian rows, then mixed partials by increasing order
    order: int  # highest derivative order carried
    needed: frozenset  # rows the requests read directly (the rest only feed them)


def _make_plan(requests: Sequence[Request]) -> _Plan:
    dirs: set[int] = set()
    partials: set[tuple[int, ...]] = set()
    laps: set[tuple[int, ...]] = set()
    bilaps: set[tuple[int, ...]] = set()
    needed: set[Key] = set()
    for r in requests:
        dirs.update(r.axes)
        if r.kind == "biharmonic":
            if r.axes:
                bilaps.add(r.axes)
                needed.add(("b", r.axes))
        elif r.kind == "laplacian":
            if r.axes:
                laps.add(r.axes)
        elif len(r.axes) >= 2:
            partials.add(r.axes)
        elif len(r.axes) == 1:
            needed.add(("p", r.axes))
    needed.update(("p", a) for a in partials)
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
            needed.update(("p", (a, a)) for a in axes)  # sum the diagonal at the end
        else:
            lap_rows.append(("l", axes))
            needed.add(("l", axes))
    rest = tuple(lap_rows) + tuple(("p", a) for a in sorted(partials, key=lambda a: (len(a), a)))
    rest += tuple(k for axes in sorted(bilaps) for k in _bilaplacian.keys(axes))
    order = max(
        [len(a) for a in partials] + [4] * bool(bilaps) + [2] * bool(lap_rows) + [1] * bool(dirs) + [0]
    )
    return _Plan(tuple(sorted(dirs)), rest, order, frozenset(needed))


# ---------------------------------------------------------------------------------------
# Jets


class _Jet(NamedTuple):
    """Value ``(*s)``, first-order block ``(p, *s)`` and higher rows ``(*s)`` by key.

    ``first=None`` or a key missing from ``rest`` means that row is zero. The three groups
    go through an affine map as three matmuls (value, first-order block, stacked higher
    rows) rather than one: no concatenation of the value with the rows, which measured
    fastest for the forward Laplacian's reverse pass.
    """

    value: Array
    first: Array | None
    rest: dict[Key, Array]

    def row(self, key: Key, dirs: tuple[int, ...]) -> Array | None:
        kind, axes = key
        if kind == "p" and len(axes) == 1:
            return None if self.first is None else self.first[dirs.index(axes[0])]
        return self.rest.get(key)

    def row_or_zero(self, key: Key, dirs: tuple[int, ...]) -> Array:
        r = self.row(key, dirs)
        return jnp.zeros_like(self.value) if r is None else r


def _input_jet(x: Point, plan: _Plan) -> _Jet:
    if not plan.dirs:
        return _Jet(x, None, {})
    eye = jnp.asarray(np.eye(x.shape[0])[list(plan.dirs)], x.dtype)  # constant: unbatched
    return _Jet(x, eye, {})


def _select(rows: Array, idx: Sequence[int]) -> Array:
    """``rows[idx]`` with static indices, as a slice when they are contiguous."""
    idx = list(idx)
    if idx == list(range(idx[0], idx[-1] + 1)):
        return rows[idx[0] : idx[-1] + 1]
    return jnp.stack([rows[i] for i in idx])


def _linear(jet: _Jet, weight: Array, bias: Array | None, keep=None) -> _Jet:
    """$z \\mapsto Wz + b$, rows $r \\mapsto Wr$. ``keep``: the higher rows still needed
    (``None``: all); the first-order block is dropped when no first-order row is kept."""
    value = weight @ jet.value
    if bias is not None:
        value = value + bias
    first = jet.first
    if first is not None and keep is not None and not any(k[0] == "p" and len(k[1]) == 1 for k in keep):
        first = None
    first = None if first is None else first @ weight.T
    keys = [k for k in jet.rest if keep is None or k in keep]
    if len(keys) == 1:
        return _Jet(value, first, {keys[0]: weight @ jet.rest[keys[0]]})
    # one matmul for all higher rows: measured 2x faster than one per row at order 4
    rows = jnp.stack([jet.rest[k] for k in keys]) @ weight.T if keys else []
    return _Jet(value, first, dict(zip(keys, rows, strict=True)))


def _elementwise(jet: _Jet, s: Sequence[Array], plan: _Plan) -> _Jet:
    """Applies an element-wise $\\sigma$, given ``s[j]`` $= \\sigma^{(j)}(z)$ for $j \\le$ order."""
    if jet.first is None:  # then every row is zero (the first-order block feeds all others)
        return _Jet(s[0], None, {})
    first = jet.first
    rest = {}
    for key in plan.rest:
        kind, axes = key
        acc = []
        if kind == "l":
            if (r := jet.rest.get(key)) is not None:
                acc.append(s[1] * r)
            sq = jnp.sum(jnp.square(_select(first, [plan.dirs.index(a) for a in axes])), 0)
            acc.append(s[2] * sq)
        elif kind in ("gl", "b"):
            acc.append(_bilaplacian.elementwise(key, s, lambda k: jet.row(k, plan.dirs)))
        else:
            for j, terms in _faa_di_bruno(axes):
                prods = []
                for c, factors in terms:
                    rs = [jet.row(("p", f), plan.dirs) for f in factors]
                    if all(r is not None for r in rs):
                        prod = functools.reduce(operator.mul, rs)
                        prods.append(prod if c == 1 else c * prod)
                if prods:
                    acc.append(s[j] * functools.reduce(operator.add, prods))
        if acc:
            rest[key] = functools.reduce(operator.add, acc)
    return _Jet(s[0], s[1][None] * first, rest)


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


def _product(a: _Jet, b: _Jet, plan: _Plan) -> _Jet:
    """The jet of the element-wise product of two jets (Leibniz's rule)."""

    def row(j: _Jet, axes: tuple[int, ...]) -> Array | None:
        return j.value if not axes else j.row(("p", axes), plan.dirs)

    if a.first is None and b.first is None:
        return _Jet(a.value * b.value, None, {})
    first = [f * v[None] for f, v in ((a.first, b.value), (b.first, a.value)) if f is not None]
    rest = {}
    for key in plan.rest:
        kind, axes = key
        terms = []
        if kind == "l":
            pairs = ((a.rest.get(key), b.value), (b.rest.get(key), a.value))
            terms += [r * v for r, v in pairs if r is not None]
            if a.first is not None and b.first is not None:
                pos = [plan.dirs.index(i) for i in axes]
                terms.append(2.0 * jnp.sum(_select(a.first, pos) * _select(b.first, pos), 0))
        elif kind in ("gl", "b"):
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
    return _Jet(a.value * b.value, functools.reduce(operator.add, first), rest)


def _scale(a: _Jet, c) -> _Jet:
    """The jet of $c\\,a$ for a scalar $c$ that does not depend on $x$."""
    first = None if a.first is None else c * a.first
    return _Jet(c * a.value, first, {k: c * r for k, r in a.rest.items()})


def _add(a: _Jet, b: _Jet) -> _Jet:
    first = [f for f in (a.first, b.first) if f is not None]
    rest = dict(a.rest)
    for k, r in b.rest.items():
        rest[k] = rest[k] + r if k in rest else r
    return _Jet(a.value + b.value, functools.reduce(operator.add, first) if first else None, rest)


# ---------------------------------------------------------------------------------------
# Closed-form derivatives of the activations: [sigma(a), sigma'(a), ..., sigma^(K)(a)]


@functools.cache
def _poly_chain(dy: tuple[float, ...], order: int) -> tuple[np.ndarray, ...]:
    """For $y' = q(y)$ (polynomial ``dy``), the polynomials $P_k$ with $y^{(k)} = P_k(y)$."""
    P = np.polynomial.polynomial
    polys = [np.array([0.0, 1.0])]
    for _ in range(order):
        polys.append(P.polymul(P.polyder(polys[-1]), dy))
    return tuple(polys)


def _horner(coeffs: np.ndarray, y: Array) -> Array:
    coeffs = np.trim_zeros(coeffs, "b")
    if len(coeffs) == 0:
        return jnp.zeros_like(y)
    acc = jnp.full_like(y, float(coeffs[-1]))
    for c in coeffs[-2::-1]:
        acc = acc * y + float(c) if c else acc * y
    return acc


def _tanh_derivs(a: Array, k: int) -> list[Array]:
    t = jnp.tanh(a)  # tanh' = 1 - tanh^2
    return [t] + [_horner(P, t) for P in _poly_chain((1.0, 0.0, -1.0), k)[1:]]


def _sigmoid_derivs(a: Array, k: int) -> list[Array]:
    s = jax.nn.sigmoid(a)  # sigmoid' = sigmoid - sigmoid^2
    return [s] + [_horner(P, s) for P in _poly_chain((0.0, 1.0, -1.0), k)[1:]]


def _times_x(a: Array, g: list[Array], value: Array) -> list[Array]:
    """Derivatives of $a\\,g(a)$ from those of $g$: $(ag)^{(k)} = a g^{(k)} + k g^{(k-1)}$."""
    return [value] + [a * g[k] + k * g[k - 1] for k in range(1, len(g))]


def _gelu_derivs(a: Array, k: int) -> list[Array]:
    # jax.nn.gelu (approximate=True): a * C(a), C = (1 + tanh(u)) / 2, u = c (a + 0.044715 a^3)
    c, q = math.sqrt(2.0 / math.pi), 0.044715
    u = [c * (a + q * a**3), c * (1.0 + 3.0 * q * a * a), 6.0 * c * q * a]
    u += [jnp.full_like(a, 6.0 * c * q), jnp.zeros_like(a)] + [jnp.zeros_like(a)] * k
    t = _tanh_derivs(u[0], k)
    tanh_u = [t[0]]
    for n in range(1, k + 1):
        terms = [
            cnt * t[j] * functools.reduce(operator.mul, [u[m] for m in ks]) for j, cnt, ks in _block_sizes(n)
        ]
        tanh_u.append(functools.reduce(operator.add, terms))
    cdf = [0.5 * (1.0 + tanh_u[0])] + [0.5 * d for d in tanh_u[1:]]
    return _times_x(a, cdf, jax.nn.gelu(a))


def _silu_derivs(a: Array, k: int) -> list[Array]:
    return _times_x(a, _sigmoid_derivs(a, k), jax.nn.silu(a))


def _softplus_derivs(a: Array, k: int) -> list[Array]:
    return [jax.nn.softplus(a)] + _sigmoid_derivs(a, k - 1) if k else [jax.nn.softplus(a)]


def _sin_derivs(a: Array, k: int) -> list[Array]:
    s, c = jnp.sin(a), jnp.cos(a)
    return [(s, c, -s, -c)[j % 4] for j in range(k + 1)]


def _relu_derivs(a: Array, k: int) -> list[Array]:
    # jax.nn.relu's rule: derivative 0 at 0; all higher derivatives vanish
    out = [jax.nn.relu(a), (a > 0).astype(a.dtype)]
    return (out + [jnp.zeros_like(a)] * k)[: k + 1]


def _nested_jvp_derivs(fn: Callable, a: Array, k: int) -> list[Array]:
    """Any element-wise ``fn``: $\\sigma^{(j)}$ by $j$ nested jvps with tangent 1."""
    out, g = [fn(a)], fn
    for _ in range(k):
        g = functools.partial(_derivative, g)
        out.append(g(a))
    return out


def _derivative(g: Callable, z: Array) -> Array:
    return jax.jvp(g, (z,), (jnp.ones_like(z),))[1]


_ACTIVATION_DERIVS: dict[str, Callable[[Array, int], list[Array]]] = {
    "tanh": _tanh_derivs,
    "sin": _sin_derivs,
    "gelu": _gelu_derivs,
    "silu": _silu_derivs,
    "swish": _silu_derivs,
    "softplus": _softplus_derivs,
    "sigmoid": _sigmoid_derivs,
    "relu": _relu_derivs,
}


def activation_derivatives(name: str, a: Array, order: int) -> list[Array]:
    """$[\\sigma(a), \\sigma'(a), \\dots, \\sigma^{(\\text{order})}(a)]$ for the activation
    ``name`` of `pinnkit.nn.layers.ACTIVATIONS`, element-wise, in closed form (nested jvp for an
    activation without a closed form here)."""
    rule = _ACTIVATION_DERIVS.get(name)
    if rule is None:
        return _nested_jvp_derivs(ACTIVATIONS[name], a, order)
    return rule(a, order)


# ---------------------------------------------------------------------------------------
# Fast rules for pinnkit's layers


def _affine(layer) -> tuple[Array, Array | None]:
    """``(W, b)`` of an `eqx.nn.Linear` or a `pinnkit.nn.nets.Dense` (RWF: $W = e^s V$ is
    formed once, then the rows go through one matmul as for a plain layer)."""
    if type(layer) is Dense:
        return layer.matrix(), layer.bias
    return layer.weight, layer.bias


def _dense(layer, jet: _Jet, keep=None) -> _Jet:
    weight, bias = _affine(layer)
    return _linear(jet, weight, bias, keep)


def _activate(name: str, jet: _Jet, plan: _Plan) -> _Jet:
    return _elementwise(jet, activation_derivatives(name, jet.value, plan.order), plan)


def _gate(z: _Jet, a: _Jet, b: _Jet, plan: _Plan) -> _Jet:
    """$(1 - z) \\odot a + z \\odot b = a + z \\odot (b - a)$ (`pinnkit.nn.nets.gate`), by
    Leibniz's rule for the one product."""
    return _add(a, _product(z, _add(b, _scale(a, -1.0)), plan))


def _mlp(mlp: MLP, jet: _Jet, plan: _Plan, keep) -> _Jet:
    *hidden, last = mlp.layers
    for layer in hidden:
        jet = _activate(mlp.activation, _dense(layer, jet), plan)
    return _dense(last, jet, keep)


def _modified_mlp(m: ModifiedMLP, jet: _Jet, plan: _Plan, keep) -> _Jet:
    u = _activate(m.activation, _dense(m.encoder_u, jet), plan)
    v = _activate(m.activation, _dense(m.encoder_v, jet), plan)
    h = jet
    for layer in m.hidden:
        h = _gate(_activate(m.activation, _dense(layer, h), plan), u, v, plan)
    return _dense(m.out, h, keep)


def _pirate(m: PirateNet, jet: _Jet, plan: _Plan, keep) -> _Jet:
    act = lambda layer, z: _activate(m.activation, _dense(layer, z), plan)  # noqa: E731
    u, v = act(m.encoder_u, jet), act(m.encoder_v, jet)
    x = jet
    for b in m.blocks:
        z1 = _gate(act(b.dense1, x), v, u, plan)
        z2 = _gate(act(b.dense2, z1), v, u, plan)
        h = act(b.dense3, z2)
        x = _add(_scale(h, b.alpha), _scale(x, 1.0 - b.alpha))
    return _dense(m.out, x, keep)


def _normalize(norm: Normalize, jet: _Jet) -> _Jet:
    dtype = jet.value.dtype
    scale = 2.0 / (jnp.asarray(norm.upper, dtype) - jnp.asarray(norm.lower, dtype))
    first = None if jet.first is None else jet.first * scale[None]
    return _Jet(norm(jet.value), first, {k: r * scale for k, r in jet.rest.items()})


def _fourier(ff: FourierFeatures, jet: _Jet, plan: _Plan) -> _Jet:
    B = 2.0 * jnp.pi * jax.lax.stop_gradient(ff.B)
    proj = 2.0 * jnp.pi * (jax.lax.stop_gradient(ff.B) @ jet.value)  # as FourierFeatures does
    # [cos p, sin p] is one element-wise map of [p, p] with per-element derivatives
    twice = lambda r: jnp.concatenate([r, r], axis=-1)
    both = _Jet(
        twice(proj),
        None if jet.first is None else twice(jet.first @ B.T),
        {k: twice(B @ r) for k, r in jet.rest.items()},
    )
    sin, cos = jnp.sin(proj), jnp.cos(proj)
    cyc_cos, cyc_sin = (cos, -sin, -cos, sin), (sin, cos, -sin, -cos)
    derivs = [jnp.concatenate([cyc_cos[j % 4], cyc_sin[j % 4]]) for j in range(plan.order + 1)]
    return _elementwise(both, derivs, plan)


def _periodic(pe: PeriodicEmbedding, jet: _Jet, plan: _Plan) -> _Jet:
    # every feature is phi(c x_i): phi = identity (normalised coordinate, the offset does not
    # matter to derivatives), cos or sin (periodic coordinate, c = 2 pi / period)
    idx, scale, kinds = [], [], []  # kinds: 0 identity, 1 cos, 2 sin
    for i, period in enumerate(pe.periods):
        if period is None:
            idx += [i]
            scale += [2.0 / (pe.upper[i] - pe.lower[i])]
            kinds += [0]
        else:
            idx += [i, i]
            scale += [2.0 * math.pi / period] * 2
            kinds += [1, 2]
    scale = jnp.asarray(scale, jet.value.dtype)
    sel = lambda r: r[..., np.asarray(idx)] * scale.reshape((1,) * (r.ndim - 1) + (-1,))
    angle = sel(jet.value)
    feats = _Jet(
        angle, None if jet.first is None else sel(jet.first), {k: sel(r) for k, r in jet.rest.items()}
    )
    sin, cos = jnp.sin(angle), jnp.cos(angle)
    one, zero = jnp.ones_like(angle), jnp.zeros_like(angle)
    is_lin, is_cos = np.asarray(kinds) == 0, np.asarray(kinds) == 1

    def nth(j):  # phi^(j) of every feature, j >= 1
        periodic = jnp.where(is_cos, (cos, -sin, -cos, sin)[j % 4], (sin, cos, -sin, -cos)[j % 4])
        return jnp.where(is_lin, one if j == 1 else zero, periodic)

    derivs = [pe(jet.value)] + [nth(j) for j in range(1, plan.order + 1)]
    return _elementwise(feats, derivs, plan)


def _hard_dirichlet(hd: HardDirichlet, x_jet: _Jet, y_jet: _Jet, plan: _Plan) -> _Jet:
    # affine in y: hd(x, y) = A(x) + D(x) y with A = hd(x, 0) and D = d/dy hd(x, y) [1]
    # (= phi on the constrained outputs, 1 elsewhere). The x-only part goes through the
    # generic rule, which is cheap without y's rows; y enters by Leibniz's rule.
    def parts(x):
        zero = jnp.zeros_like(y_jet.value)
        a, d = jax.jvp(lambda y: hd(x, y), (zero,), (jnp.ones_like(zero),))
        return jnp.stack([a, d])

    ad = _generic(parts, (x_jet,), plan)
    a, d = (
        _Jet(ad.value[i], None if ad.first is None else ad.first[:, i], {k: r[i] for k, r in ad.rest.items()})
        for i in (0, 1)
    )
    return _add(a, _product(d, y_jet, plan))


def _is_fast_layer(lin) -> bool:
    if type(lin) is Dense:
        return True
    return (
        type(lin) is eqx.nn.Linear and isinstance(lin.in_features, int) and isinstance(lin.out_features, int)
    )


def _is_fast_mlp(m) -> bool:
    return type(m) is MLP and all(_is_fast_layer(lin) for lin in m.layers)


def _module(m: Callable, jet: _Jet, plan: _Plan, keep=None) -> _Jet:
    # exact type checks: a subclass may override __call__, and then only the generic rule is safe
    if _is_fast_mlp(m):
        return _mlp(m, jet, plan, keep)
    if type(m) is ModifiedMLP:
        return _modified_mlp(m, jet, plan, keep)
    if type(m) is PirateNet:
        return _pirate(m, jet, plan, keep)
    if type(m) is Normalize:
        return _normalize(m, jet)
    if type(m) is FourierFeatures:
        return _fourier(m, jet, plan)
    if type(m) is PeriodicEmbedding:
        return _periodic(m, jet, plan)
    return _generic(m, (jet,), plan)


# ---------------------------------------------------------------------------------------
# Generic rule: any JAX function of jets, by nested forward mode


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


def _generic(fn: Callable, jets: tuple[_Jet, ...], plan: _Plan) -> _Jet:
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
        return _Jet(out, None, {})
    firsts = tuple(
        j.first if j.first is not None else jnp.zeros((p, *j.value.shape), j.value.dtype) for j in jets
    )
    first = jax.vmap(lambda *t: jax.jvp(fn, values, t)[1])(*firsts)
    rest = {}
    for key in plan.rest:
        kind, axes = key
        if kind == "l":
            lin = jax.jvp(fn, values, tuple(j.row_or_zero(key, plan.dirs) for j in jets))[1]
            pos = [plan.dirs.index(a) for a in axes]
            t_s = tuple(_select(f, pos) for f in firsts)
            quad = jax.vmap(lambda *t: _second_directional(fn, values, t))(*t_s)
            rest[key] = lin + jnp.sum(quad, 0)
        elif kind in ("gl", "b"):
            rows = lambda k: tuple(j.row(k, plan.dirs) for j in jets)  # noqa: E731
            if (row := _bilaplacian.of_function(key, fn, values, rows)) is not None:
                rest[key] = row
    orders = sorted({len(a) for kind, a in plan.rest if kind == "p"})
    for k in orders:
        alphas = [a for kind, a in plan.rest if kind == "p" and len(a) == k]
        subsets = [c for m in range(1, k + 1) for c in itertools.combinations(range(k), m)]
        stacks = []  # stacks[i][n]: (len(alphas), *s) rows of input i, or None if all zero
        for j, f in zip(jets, firsts, strict=True):
            per = []
            for sub in subsets:
                subs = [tuple(sorted(a[i] for i in sub)) for a in alphas]
                if len(sub) == 1:
                    rs = [f[plan.dirs.index(s[0])] for s in subs]
                else:
                    rs = [j.rest.get(("p", s)) for s in subs]
                if all(r is None for r in rs):
                    per.append(None)
                else:
                    per.append(jnp.stack([jnp.zeros_like(j.value) if r is None else r for r in rs]))
            stacks.append(per)
        mixed = jax.vmap(functools.partial(_mixed_partial, fn, values, subsets, k=k))(stacks)
        rest.update({("p", a): m for a, m in zip(alphas, mixed, strict=True)})
    return _Jet(out, first, rest)


# ---------------------------------------------------------------------------------------
# The method


def _network_jet(net: Callable, x: Point, plan: _Plan, force_generic: bool) -> _Jet:
    x_jet = _input_jet(x, plan)
    if not force_generic and _is_fast_mlp(net):  # a bare MLP as the whole network
        return _mlp(net, x_jet, plan, plan.needed)
    if force_generic or type(net) is not Network or type(net.parity) not in (Parity, type(None)):
        return _generic(lambda z: jnp.atleast_1d(net(z)), (x_jet,), plan)
    if net.parity is None:
        return _chain(net, x_jet, plan)
    # x -> R x is affine: its jet has the value R x and first-order rows R e_d (the
    # reflected directions negated), so the fast rules run unchanged on each copy.
    jets = []
    for sub, sign in net.parity.elements():
        flip = np.array([-1.0 if d in sub else 1.0 for d in plan.dirs])[:, None]
        first = None if x_jet.first is None else x_jet.first * jnp.asarray(flip, x.dtype)
        jet = _chain(net, _Jet(net.parity.reflect(x, sub), first, {}), plan)
        jets.append(_scale(jet, sign / len(net.parity.elements())))
    return functools.reduce(_add, jets)


def _chain(net: Network, x_jet: _Jet, plan: _Plan) -> _Jet:
    """Embedding → core → transform of a `Network`, by the fast rules where they exist."""
    jet = x_jet
    for emb in net.embedding:
        jet = _module(emb, jet, plan)
    # without a transform, the last layer only computes the rows the requests read
    keep = plan.needed if net.transform is None else None
    jet = _module(net.core, jet, plan, keep)
    if type(net.transform) is HardDirichlet:
        jet = _hard_dirichlet(net.transform, x_jet, jet, plan)
    elif net.transform is not None:
        jet = _generic(net.transform, (x_jet, jet), plan)
    return jet


class Taylor(AbstractDiffMethod):
    """Every requested derivative, for all outputs at once, in one forward propagation of
    a truncated Taylor expansion through the network (Taylor mode / forward Laplacian).

    A residual that asks for $u$, $\\nabla u$, $\\Delta u$ and $u_t$ pays for one
    propagation of $1 + d + 1$ rows, not for three derivative passes; the Laplacian is
    propagated as one row and never through a $d \\times d$ Hessian. Mixed partials of
    order 2–4 (and higher) are carried as one row per multi-index that the request needs;
    a bi-Laplacian (`Fields.biharmonic`) as $d$ rows $\\partial_c \\Delta u$ and one row
    $\\Delta^2 u$ on top of the Hessian rows.

    Fast closed-form rules cover `pinnkit.nn.Network` with an `MLP` core (all activations
    of `pinnkit.nn.layers.ACTIVATIONS`), `Normalize` / `PeriodicEmbedding` / `FourierFeatures`
    embeddings and a `HardDirichlet` transform; any other layer or transform and any other
    callable (for example a user's own Equinox module passed as the network) go through a
    generic nested-`jax.jvp` rule with the same result. Training differentiates this
    forward propagation in reverse mode (`jax.value_and_grad` over the parameters), which
    needs no special support; forward mode over it works too (no `custom_vjp` inside).

    **Arguments:**

    - `force_generic`: use the generic rule for the whole network (for tests and
      benchmarks). Default `False`.
    """

    force_generic: bool = eqx.field(static=True, default=False)

    def derivatives(
        self, net: Callable[[Point], Array], x: Point, requests: Sequence[Request]
    ) -> dict[Request, Scalar]:
        plan = _make_plan(requests)
        jet = _network_jet(net, x, plan, self.force_generic)
        out: dict[Request, Scalar] = {}
        for r in requests:
            if r.kind == "laplacian":
                if ("l", r.axes) in plan.rest:
                    out[r] = jet.row_or_zero(("l", r.axes), plan.dirs)[r.out]
                elif r.axes:
                    diag = [jet.row_or_zero(("p", (a, a)), plan.dirs)[r.out] for a in r.axes]
                    out[r] = functools.reduce(operator.add, diag)
                else:
                    out[r] = jnp.zeros((), jet.value.dtype)
            elif r.kind == "biharmonic":
                out[r] = jet.row_or_zero(("b", r.axes), plan.dirs)[r.out]
            elif r.axes:
                out[r] = jet.row_or_zero(("p", r.axes), plan.dirs)[r.out]
            else:
                out[r] = jet.value[r.out]
        return out
