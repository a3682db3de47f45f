"""Names → meaning: the symbols of one problem, and syntax trees → `Ex` components.

A name in an expression is, in this order of lookup (declared names never overlap, see
`Symbols.check`): a constant (``pi``, ``e``), a coordinate, a parameter, a field, a
helper from ``define``, or a derivative in subscript notation ``<field>_<coords>``.
Vectors (``[a, b]``, ``grad(u)``) are tuples of scalar nodes; arithmetic acts on them
elementwise, with scalars broadcast.
"""

from __future__ import annotations

import difflib
import keyword
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._ir import FUNCTIONS, Algebra, Ex, FoldError
from ._parse import ExprError, Node, expr_error, normalise, parse

CONSTANTS = {"pi": math.pi, "e": math.e}
DERIVATIVE_HELPERS = ("d", "lap", "grad", "div")
OTHER_FUNCTIONS = ("where", "dot")
RESERVED = frozenset(CONSTANTS) | set(FUNCTIONS) | set(DERIVATIVE_HELPERS) | set(OTHER_FUNCTIONS)
ALL_FUNCTIONS = tuple(sorted(set(FUNCTIONS) | set(DERIVATIVE_HELPERS) | set(OTHER_FUNCTIONS)))

_BOOL_ONLY_IN_WHERE = "a comparison (true/false) can only be the condition of where(cond, a, b)"

Value = Ex | tuple[Ex, ...]  # a scalar (or true/false) node, or a vector of scalar nodes


def _splits(suffix: str, coords: Sequence[str]) -> list[tuple[str, ...]]:
    """All ways to write ``suffix`` as a concatenation of coordinate names."""
    if not suffix:
        return [()]
    out = []
    for c in coords:
        if suffix.startswith(c):
            out += [(c, *rest) for rest in _splits(suffix[len(c):], coords)]
    return out


@dataclass
class Symbols:
    """The names of one problem. Raise `ExprError` from `check` on a bad declaration.

    **Arguments:**
    - `coords`: coordinate names in point order (e.g. ``("t", "x")``).
    - `spatial`: the coordinates that ``lap``/``grad``/``div`` act on by default.
    - `fields`: the network's outputs.
    - `params`: parameter name → value.
    - `helpers`: helper name → raw expression (``define``).
    - `key`: the config key that holds these (for messages), e.g. ``"problem.params"``.
    """

    coords: tuple[str, ...]
    spatial: tuple[str, ...]
    fields: tuple[str, ...]
    params: Mapping[str, float] = field(default_factory=dict)
    helpers: Mapping[str, object] = field(default_factory=dict)
    key: str = "problem.params"

    def derivative(self, name: str) -> list[tuple[str, tuple[str, ...]]]:
        """Readings of ``name`` as ``<field>_<coords>``: ``[(field, coords), ...]``."""
        out = []
        for i, ch in enumerate(name):
            if ch == "_" and name[:i] in self.fields:
                out += [(name[:i], cs) for cs in _splits(name[i + 1 :], self.coords) if cs]
        return out

    def check(self) -> None:
        groups = {
            "domain": self.coords, "fields": self.fields,
            "parameters": tuple(self.params), "define": tuple(self.helpers),
        }
        seen: dict[str, str] = {}
        for group, names in groups.items():
            for n in names:
                where = f"{self.key}.{group}"
                if not isinstance(n, str) or not n.isidentifier() or keyword.iskeyword(n):
                    raise ExprError(f"{where}: {n!r} is not a valid name (letters, digits, '_').")
                if n.startswith("_"):
                    raise ExprError(f"{where}: names may not start with '_' ({n!r}).")
                if n in RESERVED:
                    raise ExprError(
                        f"{where}: {n!r} is reserved (a constant or function of the expression "
                        "language); choose another name."
                    )
                if n in seen:
                    raise ExprError(f"{where}: {n!r} is declared twice (also in {seen[n]}).")
                seen[n] = where
                if group == "domain" and "_" in n:
                    raise ExprError(
                        f"{where}: coordinate names may not contain '_' ({n!r}): '_' starts "
                        "the derivative subscript, as in u_x."
                    )
        for group in ("fields", "parameters", "define"):
            for n in groups[group]:
                reading = self.derivative(n)
                if reading:
                    f, cs = reading[0]
                    raise ExprError(
                        f"{self.key}.{group}: the name {n!r} also reads as a derivative of field "
                        f"{f!r} by {', '.join(cs)} (subscript notation); rename it."
                    )

    def value_names(self) -> list[str]:
        return [*CONSTANTS, *self.coords, *self.params, *self.fields, *self.helpers]


class Resolver:
    """Turns raw config expressions into `Ex` components for one problem."""

    def __init__(self, symbols: Symbols):
        symbols.check()
        self.sym = symbols
        self.alg = Algebra()
        self.helpers: dict[str, Value] = {}
        self._resolve_helpers()

    # public ----------------------------------------------------------------------
    def components(self, raw, key: str, *, fields_allowed: bool = True) -> tuple[Ex, ...]:
        """A scalar or vector expression (string, number, or list of them; vector items of
        a list are concatenated) → its scalar components. ``fields_allowed=False`` for
        exact solutions and boundary data."""
        items = raw if isinstance(raw, list | tuple) else [raw]
        if isinstance(raw, list | tuple) and not raw:
            raise ExprError(f"{key}: an empty list; give one expression per component.")
        out: list[Ex] = []
        for i, item in enumerate(items):
            k = f"{key}.{i}" if isinstance(raw, list | tuple) else key
            v = self.value(item, k)
            for e in v if isinstance(v, tuple) else (v,):
                if e.is_bool:
                    raise ExprError(
                        f"{k}: the expression is a comparison (true/false); comparisons may only "
                        "be the condition of where(cond, a, b)."
                    )
                if not fields_allowed and e.fields:
                    raise ExprError(
                        f"{k}: depends on the field(s) {sorted(e.fields)}; this expression may "
                        "only use coordinates, parameters, constants and helpers without fields."
                    )
                out.append(e)
        return tuple(out)

    def value(self, raw, key: str) -> Value:
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise ExprError(
                f"{key}: expected an expression (a string or a number), got {raw!r} "
                f"({type(raw).__name__})."
            )
        text = raw if isinstance(raw, str) else repr(raw)
        tree = parse(text, key)
        return _Walk(self, key, normalise(text)).value(tree)

    # helpers ---------------------------------------------------------------------
    def _resolve_helpers(self) -> None:
        key = f"{self.sym.key}.define"
        deps: dict[str, set[str]] = {}
        for name, raw in self.sym.helpers.items():
            items = raw if isinstance(raw, list) else [raw]
            names: set[str] = set()
            for item in items:
                if isinstance(item, str):
                    stack = [parse(item, f"{key}.{name}")]
                    while stack:  # iterative: nesting is bounded but recursion is not needed
                        n = stack.pop()
                        if n.kind == "name" and n.value in self.sym.helpers:
                            names.add(n.value)
                        stack.extend(n.args)
            deps[name] = names
        # Depth-first over the helper graph, iteratively (no recursion on user input).
        order: list[str] = []
        state: dict[str, int] = {}  # 1 = on the current path, 2 = done
        for root in deps:
            if state.get(root) == 2:
                continue
            state[root] = 1
            stack = [(root, iter(sorted(deps[root])))]
            while stack:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    state[node] = 2
                    order.append(node)
                elif state.get(nxt) == 1:
                    path = [n for n, _ in stack]
                    cycle = " -> ".join([*path[path.index(nxt) :], nxt])
                    raise ExprError(f"{key}: helpers refer to each other in a cycle: {cycle}.")
                elif state.get(nxt) is None:
                    state[nxt] = 1
                    stack.append((nxt, iter(sorted(deps[nxt]))))
        for name in order:
            raw = self.sym.helpers[name]
            comps = self.components(raw, f"{key}.{name}")
            self.helpers[name] = comps if isinstance(raw, list) or len(comps) > 1 else comps[0]


class _Walk:
    """Resolves one parsed expression (``key`` and ``text`` for messages)."""

    def __init__(self, r: Resolver, key: str, text: str):
        self.r, self.alg, self.sym, self.key, self.text = r, r.alg, r.sym, key, text

    def fail(self, node: Node, msg: str, hint: str = "") -> ExprError:
        return expr_error(self.key, self.text, node.pos, msg, hint)

    def value(self, node: Node) -> Value:
        try:
            return self._value(node)
        except FoldError as e:
            raise self.fail(node, str(e)) from None

    def scalar(self, node: Node, what: str = "a number") -> Ex:
        v = self.value(node)
        if isinstance(v, tuple):
            raise self.fail(node, f"expected {what}, got a vector of {len(v)} components")
        if v.is_bool:
            raise self.fail(node, _BOOL_ONLY_IN_WHERE)
        return v

    def _value(self, node: Node) -> Value:
        k = node.kind
        if k == "num":
            return self.alg.const(node.value)
        if k == "name":
            return self.name(node)
        if k == "list":
            if not node.args:
                raise self.fail(node, "an empty vector")
            what = "a scalar component (vectors do not nest)"
            return tuple(self.scalar(a, what) for a in node.args)
        if k == "neg":
            return self.map(self.alg.neg, self.value(node.args[0]), node)
        if k == "bin":
            return self.binary(node)
        if k == "cmp":
            a, b = (self.scalar(x) for x in node.args)
            return self.alg.cmp(node.value, a, b)
        if k in ("and", "or", "not"):
            return self.alg.logic(k, *(self.boolean(a) for a in node.args))
        return self.call(node)

    def boolean(self, node: Node) -> Ex:
        v = self.value(node)
        if isinstance(v, tuple) or not v.is_bool:
            raise self.fail(node, "expected a comparison such as x < 0.5 here")
        return v

    def map(self, fn, v: Value, node: Node) -> Value:
        if isinstance(v, tuple):
            return tuple(fn(e) for e in v)
        if v.is_bool:
            raise self.fail(node, _BOOL_ONLY_IN_WHERE)
        return fn(v)

    # names -----------------------------------------------------------------------
    def name(self, node: Node) -> Value:
        n, s = node.value, self.sym
        if n in CONSTANTS:
            return self.alg.const(CONSTANTS[n])
        if n in s.coords:
            return self.alg.node("coord", (), n)
        if n in s.params:
            return self.alg.node("param", (), n)
        if n in s.fields:
            return self.alg.node("partial", (), (n, ()))
        if n in self.r.helpers:
            return self.r.helpers[n]
        if n in s.helpers:  # pragma: no cover (helpers are resolved in dependency order)
            raise self.fail(node, f"helper {n!r} used before it is defined")
        readings = s.derivative(n)
        if len(readings) == 1:
            f, cs = readings[0]
            return self.alg.node("partial", (), (f, cs))
        if len(readings) > 1:
            alts = "; ".join(f"d({f}, {', '.join(cs)})" for f, cs in readings)
            raise self.fail(node, f"{n!r} is ambiguous", f"Write one of: {alts}.")
        if n in ALL_FUNCTIONS:
            raise self.fail(node, f"{n!r} is a function", f"Call it, e.g. {n}(...).")
        raise self.unknown(node, n)

    def unknown(self, node: Node, n: str) -> ExprError:
        s = self.sym
        for i, ch in enumerate(n):
            if ch == "_" and n[:i] in s.fields:
                return self.fail(
                    node, f"cannot read {n!r} as a derivative of field {n[:i]!r}",
                    f"After '_' write coordinate names only ({', '.join(s.coords)}), e.g. "
                    f"{n[:i]}_{s.coords[-1]}{s.coords[-1]}.",
                )
        pool = s.value_names() + [f"{f}_{c}" for f in s.fields for c in s.coords]
        close = difflib.get_close_matches(n, pool, n=1, cutoff=0.6)
        hint = f"Did you mean {close[0]!r}?" if close else ""
        known = (
            f"Known names: coordinates {list(s.coords)}, fields {list(s.fields)}, parameters "
            f"{list(s.params)}, helpers {list(s.helpers)}, constants pi, e."
        )
        return self.fail(node, f"unknown symbol {n!r}", f"{hint} {known}".strip())

    # arithmetic ------------------------------------------------------------------
    def binary(self, node: Node) -> Value:
        op = {"+": self.alg.add, "-": self.alg.sub, "*": self.alg.mul, "/": self.alg.div,
              "**": self.alg.pow}[node.value]
        left, right = node.args
        a, b = self.value(left), self.value(right)
        for v, n in ((a, left), (b, right)):
            if not isinstance(v, tuple) and v.is_bool:
                raise self.fail(n, _BOOL_ONLY_IN_WHERE)
        if node.value == "**" and isinstance(b, tuple):
            raise self.fail(right, "the exponent must be a scalar")
        if isinstance(a, tuple) and isinstance(b, tuple):
            if len(a) != len(b):
                raise self.fail(
                    node, f"dimension mismatch: vectors of {len(a)} and {len(b)} components"
                )
            return tuple(op(x, y) for x, y in zip(a, b, strict=True))
        if isinstance(a, tuple):
            return tuple(op(x, b) for x in a)
        if isinstance(b, tuple):
            return tuple(op(a, y) for y in b)
        return op(a, b)

    # calls -----------------------------------------------------------------------
    def call(self, node: Node) -> Value:
        name, args = node.value, node.args
        if name in DERIVATIVE_HELPERS:
            return getattr(self, f"call_{name}")(node, args)
        if name == "where":
            self.arity(node, 3)
            c = self.boolean(args[0])
            a, b = self.value(args[1]), self.value(args[2])
            if isinstance(a, tuple) or isinstance(b, tuple):
                n = len(a) if isinstance(a, tuple) else len(b)
                a = a if isinstance(a, tuple) else (a,) * n
                b = b if isinstance(b, tuple) else (b,) * n
                if len(a) != len(b):
                    raise self.fail(node, f"dimension mismatch in where: {len(a)} vs {len(b)}")
                return tuple(self.alg.fn("where", c, x, y) for x, y in zip(a, b, strict=True))
            return self.alg.fn("where", c, self.scalar(args[1]), self.scalar(args[2]))
        if name == "dot":
            self.arity(node, 2)
            a, b = (self.vector(x) for x in args)
            if len(a) != len(b):
                raise self.fail(node, f"dimension mismatch in dot: {len(a)} vs {len(b)} components")
            return self.alg.total(self.alg.mul(x, y) for x, y in zip(a, b, strict=True))
        if name in ("min", "max"):
            if len(args) < 2:
                raise self.fail(node, f"{name} needs at least 2 arguments, got {len(args)}")
            out = self.scalar(args[0])
            for a in args[1:]:
                out = self.alg.fn(name, out, self.scalar(a))
            return out
        if name in FUNCTIONS:
            n = FUNCTIONS[name][0]
            self.arity(node, n)
            if n == 1:
                return self.map(lambda e: self.alg.fn(name, e), self.value(args[0]), args[0])
            return self.alg.fn(name, *(self.scalar(a) for a in args))
        close = difflib.get_close_matches(name, ALL_FUNCTIONS, n=1, cutoff=0.6)
        hint = f"Did you mean {close[0]!r}? " if close else ""
        raise self.fail(
            node, f"unknown function {name!r}", f"{hint}Functions: {', '.join(ALL_FUNCTIONS)}."
        )

    def arity(self, node: Node, n: int) -> None:
        if len(node.args) != n:
            s = "s" if n != 1 else ""
            raise self.fail(node, f"{node.value} takes {n} argument{s}, got {len(node.args)}")

    def vector(self, node: Node) -> tuple[Ex, ...]:
        v = self.value(node)
        if not isinstance(v, tuple):
            raise self.fail(node, "expected a vector such as [a, b] or grad(u)")
        return v

    def coord_args(self, node: Node, args: Sequence[Node]) -> tuple[str, ...]:
        out = []
        for a in args:
            if a.kind != "name" or a.value not in self.sym.coords:
                what = repr(a.value) if a.kind == "name" else "this argument"
                raise self.fail(
                    a, f"{node.value}(...) expects coordinate names here; {what} is not one",
                    f"Coordinates: {', '.join(self.sym.coords)}.",
                )
            out.append(a.value)
        return tuple(out)

    def call_d(self, node: Node, args) -> Value:
        if len(args) < 2:
            raise self.fail(node, "d needs an expression and at least one coordinate: d(u, x)")
        cs = self.coord_args(node, args[1:])

        def nth(e: Ex) -> Ex:
            for c in cs:
                e = self.alg.diff(e, c)
            return e

        return self.map(nth, self.value(args[0]), args[0])

    def call_lap(self, node: Node, args) -> Ex:
        if not args:
            raise self.fail(node, "lap needs an expression: lap(u)")
        cs = self.coord_args(node, args[1:]) or self.sym.spatial
        e = self.scalar(args[0])
        if e.op == "partial" and not e.value[1]:  # a bare field: one Laplacian request
            return self.alg.node("lap", (), (e.value[0], cs))
        if (b := self.alg.bilaplacian(e, cs)) is not None:  # lap(c*lap(u)): c*Δ²u, one request
            return b
        return self.alg.total(self.alg.diff(self.alg.diff(e, c), c) for c in cs)

    def call_grad(self, node: Node, args) -> tuple[Ex, ...]:
        if not args:
            raise self.fail(node, "grad needs an expression: grad(u)")
        cs = self.coord_args(node, args[1:]) or self.sym.spatial
        e = self.scalar(args[0])
        return tuple(self.alg.diff(e, c) for c in cs)

    def call_div(self, node: Node, args) -> Ex:
        if not args:
            raise self.fail(node, "div needs a vector: div(u, v) or div([u, v])")
        comps: list[Ex] = []
        for a in args:
            v = self.value(a)
            comps += list(v) if isinstance(v, tuple) else [self.scalar(a)]
        cs = self.sym.spatial
        if len(comps) != len(cs):
            raise self.fail(
                node, f"dimension mismatch: div needs one component per spatial coordinate "
                f"({', '.join(cs)}), got {len(comps)}",
            )
        return self.alg.total(self.alg.diff(e, c) for e, c in zip(comps, cs, strict=True))
