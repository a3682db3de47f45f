"""`Ex` components → pure JAX functions.

An expression becomes a closure that walks its nodes at trace time and emits the JAX
operations; after `jit` nothing of the walk remains, so a residual written as text
compiles to the same program as the hand-written one. Field derivatives are read from
the `Fields` view (``f.partial``, ``f.laplacian``, ``f.biharmonic``), which is how the configured
derivative method learns, at trace time, exactly which derivatives to compute.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence

import jax.numpy as jnp
from jaxtyping import Array

from .._types import Point
from ..diffops import Fields
from ._ir import Ex

_BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "pow": operator.pow,
}
_CMP = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}
_FN = {
    "sin": jnp.sin, "cos": jnp.cos, "tan": jnp.tan, "exp": jnp.exp, "log": jnp.log,
    "sqrt": jnp.sqrt, "tanh": jnp.tanh, "sinh": jnp.sinh, "cosh": jnp.cosh,
    "arcsin": jnp.arcsin, "arccos": jnp.arccos, "arctan": jnp.arctan, "abs": jnp.abs,
    "sign": jnp.sign, "heaviside": lambda a: jnp.heaviside(a, 0.5),
    "atan2": jnp.arctan2, "min": jnp.minimum, "max": jnp.maximum, "where": jnp.where,
    "and": jnp.logical_and, "or": jnp.logical_or, "not": jnp.logical_not,
}


class _FieldsLeaves:
    """Leaves inside a residual: coordinates and fields from `Fields`, parameters from
    the (possibly trainable) coefficients, the outward normal from ``normal(x, piece)``."""

    def __init__(self, f: Fields, coeffs: Mapping[str, Array], normal: Callable | None):
        self.f, self.coeffs, self.normal_fn = f, coeffs, normal

    def coord(self, name):
        return self.f.coord(name)

    def param(self, name):
        return self.coeffs[name]

    def partial(self, field, cs):
        return self.f.partial(field, *cs) if cs else self.f[field]

    def lap(self, field, cs):
        return self.f.laplacian(field, cs)

    def bilap(self, field, cs):
        return self.f.biharmonic(field, cs)

    def normal(self, piece, coord):
        return self.normal_fn(self.f.point, piece)[self.f.layout.axis(coord)]


class _PointLeaves:
    """Leaves of a function of the point only (exact solutions): parameters are fixed."""

    def __init__(self, x: Point, coords: Sequence[str], params: Mapping[str, float]):
        self.x, self.coords, self.params = x, tuple(coords), params

    def coord(self, name):
        return self.x[self.coords.index(name)]

    def param(self, name):
        return self.params[name]

    def partial(self, field, cs):  # pragma: no cover (rejected when resolving)
        raise ValueError(f"field {field!r} used in a function of the point only")

    lap = bilap = normal = partial


def _small_int(e: Ex) -> int | None:
    """The exponent of ``a**n`` for a constant integer $1 \\le |n| \\le 16$, else None."""
    if e.op != "const" or isinstance(e.value, bool):
        return None
    v = float(e.value)
    return int(v) if v.is_integer() and 1 <= abs(v) <= 16 else None


def _int_pow(a, n: int):
    """$a^n$ by binary exponentiation with ``*`` (the order of XLA's own ``integer_pow``):
    ``lax.integer_pow``'s derivative rule fails JAX's varying-axes check when a
    coordinate with an unvarying tangent meets it under vmap inside ``shard_map`` (the
    Taylor engine's generic rule on a hard constraint's data, jax 0.10); ``*`` does not."""
    if isinstance(a, int | float):
        return a**n
    k, acc = abs(n), None
    while k > 0:
        if k & 1:
            acc = a if acc is None else acc * a
        k >>= 1
        if k > 0:
            a = a * a
    return 1.0 / acc if n < 0 else acc


def evaluate(components: Sequence[Ex], leaves, functions: Mapping[str, Callable] | None = None) -> list:
    """The value of each component (JAX arrays, or Python numbers for constants).

    ``functions``: the elementwise functions by name (default: JAX's, `_FN`); a name it
    lacks raises ``KeyError`` (`host_function` turns that into a message)."""
    memo: dict[int, object] = {}
    fns = _FN if functions is None else functions

    def ev(e: Ex):
        hit = memo.get(id(e))
        if hit is not None:
            return hit
        op = e.op
        if op in ("const", "const_bool"):
            v = e.value
        elif op == "coord":
            v = leaves.coord(e.value)
        elif op == "param":
            v = leaves.param(e.value)
        elif op == "partial":
            v = leaves.partial(*e.value)
        elif op == "lap":
            v = leaves.lap(*e.value)
        elif op == "bilap":
            v = leaves.bilap(*e.value)
        elif op == "normal":
            v = leaves.normal(*e.value)
        elif op == "neg":
            v = -ev(e.args[0])
        elif op == "pow" and _small_int(e.args[1]) is not None:
            v = _int_pow(ev(e.args[0]), _small_int(e.args[1]))
        elif op in _BINARY:
            v = _BINARY[op](ev(e.args[0]), ev(e.args[1]))
        elif op == "cmp":
            v = _CMP[e.value](ev(e.args[0]), ev(e.args[1]))
        else:
            v = fns[op](*(ev(a) for a in e.args))
        memo[id(e)] = v
        return v

    return [ev(e) for e in components]


def _pack(values: list, dtype) -> Array:
    """The components as one ``(k,)`` vector, each written into place with ``where``.

    Not ``jnp.stack``: inside ``shard_map`` the components can differ in their varying
    manual axes (a constant, or a coordinate whose tangent does not vary over ``data``,
    next to one that does: ``dirichlet: [-y, x]`` under a hard constraint), which
    ``stack`` refuses while ``where``, like arithmetic, promotes its operands; a select
    copies values exactly, so the vector is the same."""
    k = len(values)
    slot = jnp.arange(k)
    out = jnp.zeros((k,), dtype)
    for i, v in enumerate(values):
        out = jnp.where(slot == i, jnp.asarray(v, dtype), out)
    return out


def residual_function(
    components: Sequence[Ex], normal: Callable | None = None
) -> Callable[[Fields, Mapping], Array]:
    """``fn(f, coeffs)``: the residual (a scalar for one component, else shape ``(r,)``).

    ``normal(x, piece) -> (d,)`` (the domain's outward normal) is needed only if the
    components contain ``normal`` nodes (Neumann and Robin conditions).
    """
    components = tuple(components)

    def residual(f: Fields, coeffs: Mapping[str, Array]) -> Array:
        values = evaluate(components, _FieldsLeaves(f, coeffs, normal))
        if len(values) == 1:
            return jnp.asarray(values[0], f.point.dtype)
        return _pack(values, f.point.dtype)

    return residual


def point_function(
    components: Sequence[Ex], coords: Sequence[str], params: Mapping[str, float]
) -> Callable[[Point], Array]:
    """``fn(x) -> (k,)`` for expressions of the point (exact solutions, boundary data)."""
    components, coords, params = tuple(components), tuple(coords), dict(params)

    def fn(x: Point) -> Array:
        return _pack(evaluate(components, _PointLeaves(x, coords, params)), x.dtype)

    return fn


# NumPy's names where they differ from the expression language's (``min`` is a reduction there)
_HOST_NAMES = {"min": "minimum", "max": "maximum", "atan2": "arctan2", "and": "logical_and",
               "or": "logical_or", "not": "logical_not"}


class _HostLeaves:
    """Leaves of `host_function`: coordinates are whatever the caller passes (NumPy
    arrays, NGSolve coefficient functions); parameters are fixed numbers."""

    def __init__(self, values: Sequence, coords: Sequence[str], params: Mapping[str, float]):
        self.values, self.coords, self.params = tuple(values), tuple(coords), params

    def coord(self, name):
        return self.values[self.coords.index(name)]

    def param(self, name):
        return self.params[name]

    partial = lap = bilap = normal = _PointLeaves.partial


def host_function(
    components: Sequence[Ex], coords: Sequence[str], params: Mapping[str, float]
) -> Callable:
    """``g(*coordinates, m) -> [component, ...]`` for expressions of the point, evaluated
    with the functions of the module-like ``m`` (``numpy``, or a namespace of NGSolve's
    coefficient functions: ``m.exp``, ``m.sin``, ...): boundary data for solvers outside
    JAX (`pinnkit.solvers.fem_ns`). ``tanh`` falls back to ``sinh/cosh`` where ``m`` has
    none. A function ``m`` lacks raises ``KeyError`` naming it."""
    components, coords, params = tuple(components), tuple(coords), dict(params)

    def g(*args):
        *values, m = args
        fns = {k: getattr(m, _HOST_NAMES.get(k, k)) for k in _FN if hasattr(m, _HOST_NAMES.get(k, k))}
        if "heaviside" in fns:
            fns["heaviside"] = lambda a: m.heaviside(a, 0.5)
        if "tanh" not in fns and "sinh" in fns and "cosh" in fns:
            fns["tanh"] = lambda a: m.sinh(a) / m.cosh(a)
        return evaluate(components, _HostLeaves(values, coords, params), fns)

    return g
