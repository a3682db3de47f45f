"""The resolved expression: scalar nodes over coordinates, parameters and field derivatives.

After name resolution (`_resolve`) every expression is a tuple of scalar `Ex` nodes (one
for a scalar, several for a vector). Nodes are built only through `Algebra`, whose
constructors fold constants (in Python floats, so ``2*pi**2`` costs nothing at run
time), drop neutral elements (``u - 0`` is ``u``) and enforce the size limits. The same
class differentiates symbolically (`Algebra.diff`), which is how ``d(k*u_x, x)``,
``lap(exact)`` or ``grad(k*u)`` reduce to derivatives of the network's fields: the
derivative engine only ever sees requests for $\\partial^\\alpha u$, $\\Delta u$ and, for a
Laplacian of a Laplacian (`Algebra.bilaplacian`), $\\Delta^2 u$.
"""

from __future__ import annotations

import math
from collections.abc import Callable

MAX_IR_DEPTH = 200  # nesting of the resolved expression, helpers inlined
MAX_NODES = 50_000  # nodes built for one problem (symbolic derivatives can grow)
MAX_EXPONENT = 100  # magnitude of a constant exponent
MAX_CONSTANT = 1e300


FIELD_OPS = ("partial", "lap", "bilap")  # leaves that read a field's derivative


class FoldError(Exception):
    """A constant or size problem found while building nodes; the caller adds the key."""


class Ex:
    """One scalar node. ``op`` names the operation; ``value`` holds a number (``const``),
    a name (``coord``, ``param``), ``(field, coords)`` (``partial``, ``lap``, ``bilap``) or a
    comparison symbol (``cmp``). Identity-hashed: shared sub-expressions (helpers) are
    evaluated once."""

    __slots__ = ("op", "args", "value", "depth", "fields")

    def __init__(self, op: str, args: tuple[Ex, ...] = (), value=None):
        self.op, self.args, self.value = op, args, value
        self.depth = 1 + max((a.depth for a in args), default=0)
        own = {value[0]} if op in FIELD_OPS else set()
        self.fields = frozenset(own.union(*(a.fields for a in args)))

    @property
    def is_const(self) -> bool:
        return self.op == "const"

    @property
    def is_bool(self) -> bool:
        return self.op in ("cmp", "and", "or", "not", "const_bool")

    def __repr__(self) -> str:
        if not self.args:
            return f"{self.op}({self.value!r})"
        return f"{self.op}({', '.join(map(repr, self.args))})"


def _heaviside(v: float) -> float:
    return 1.0 if v > 0 else (0.5 if v == 0 else 0.0)


# name -> (number of arguments, constant folding on Python floats)
FUNCTIONS: dict[str, tuple[int, Callable]] = {
    "sin": (1, math.sin), "cos": (1, math.cos), "tan": (1, math.tan),
    "exp": (1, math.exp), "log": (1, math.log), "sqrt": (1, math.sqrt),
    "tanh": (1, math.tanh), "sinh": (1, math.sinh), "cosh": (1, math.cosh),
    "arcsin": (1, math.asin), "arccos": (1, math.acos), "arctan": (1, math.atan),
    "abs": (1, abs), "sign": (1, lambda v: float((v > 0) - (v < 0))),
    "heaviside": (1, _heaviside),
    "atan2": (2, math.atan2), "min": (2, min), "max": (2, max),
}

_CMP = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


class Algebra:
    """Builds `Ex` nodes with folding and limits, and differentiates them."""

    def __init__(self):
        self.count = 0
        self._diff_memo: dict[tuple[int, str], Ex] = {}
        self._keep: list[Ex] = []  # keeps memo keys (ids) alive

    # leaves ----------------------------------------------------------------------
    def node(self, op: str, args: tuple[Ex, ...] = (), value=None) -> Ex:
        self.count += 1
        if self.count > MAX_NODES:
            raise FoldError(
                f"expression too large (more than {MAX_NODES} nodes after inlining helpers "
                "and expanding derivatives)"
            )
        e = Ex(op, args, value)
        if e.depth > MAX_IR_DEPTH:
            raise FoldError(
                f"expression nested too deeply (more than {MAX_IR_DEPTH} levels after "
                "inlining helpers)"
            )
        return e

    def const(self, v) -> Ex:
        if isinstance(v, float) and not (math.isfinite(v) and abs(v) <= MAX_CONSTANT):
            raise FoldError(f"a constant evaluates to {v!r}")
        if isinstance(v, int) and abs(v) > 2**63:
            v = float(v)
            if abs(v) > MAX_CONSTANT:
                raise FoldError("a constant is too large")
        return self.node("const", (), v)

    def zero(self) -> Ex:
        return self.const(0)

    def one(self) -> Ex:
        return self.const(1)

    # arithmetic ------------------------------------------------------------------
    def _fold(self, fn, *vals):
        try:
            v = fn(*vals)
        except ZeroDivisionError:
            raise FoldError("division by zero in a constant") from None
        except (OverflowError, ValueError) as e:
            raise FoldError(f"a constant cannot be evaluated ({e})") from None
        return self.const(v)

    def add(self, a: Ex, b: Ex) -> Ex:
        if a.is_const and b.is_const:
            return self._fold(lambda x, y: x + y, a.value, b.value)
        if a.is_const and a.value == 0:
            return b
        if b.is_const and b.value == 0:
            return a
        return self.node("add", (a, b))

    def sub(self, a: Ex, b: Ex) -> Ex:
        if a.is_const and b.is_const:
            return self._fold(lambda x, y: x - y, a.value, b.value)
        if b.is_const and b.value == 0:
            return a
        if a.is_const and a.value == 0:
            return self.neg(b)
        return self.node("sub", (a, b))

    def mul(self, a: Ex, b: Ex) -> Ex:
        if a.is_const and b.is_const:
            return self._fold(lambda x, y: x * y, a.value, b.value)
        for p, q in ((a, b), (b, a)):
            if p.is_const and p.value == 0:
                return self.zero()
            if p.is_const and p.value == 1:
                return q
        return self.node("mul", (a, b))

    def div(self, a: Ex, b: Ex) -> Ex:
        if b.is_const and b.value == 0:
            raise FoldError("division by the constant zero")
        if a.is_const and b.is_const:
            return self._fold(lambda x, y: x / y, a.value, b.value)
        if b.is_const and b.value == 1:
            return a
        if a.is_const and a.value == 0:
            return self.zero()
        return self.node("div", (a, b))

    def pow(self, a: Ex, b: Ex) -> Ex:
        if b.is_const:
            p = b.value
            if abs(p) > MAX_EXPONENT:
                shown = p if isinstance(p, int) else f"{p:g}"
                raise FoldError(f"exponent {shown} too large (at most {MAX_EXPONENT} in magnitude)")
            if isinstance(p, float) and p.is_integer():
                b = self.const(int(p))  # u**2.0 -> integer power (exact, cheaper)
            if a.is_const:
                if a.value == 0 and p < 0:
                    raise FoldError("division by zero in a constant (0 to a negative power)")
                if a.value < 0 and not isinstance(b.value, int):
                    raise FoldError("a negative constant to a fractional power")
                return self._fold(lambda x, y: x**y, a.value, b.value)
            if b.value == 1:
                return a
            if b.value == 0:
                return self.one()
        return self.node("pow", (a, b))

    def neg(self, a: Ex) -> Ex:
        if a.is_const:
            return self.const(-a.value)
        if a.op == "neg":
            return a.args[0]
        return self.node("neg", (a,))

    def fn(self, name: str, *args: Ex) -> Ex:
        """Elementary function ``name`` (a key of `FUNCTIONS`) or ``where``."""
        if name == "where":
            c, a, b = args
            if c.op == "const_bool":
                return a if c.value else b
            return self.node("where", args)
        if all(a.is_const for a in args):
            return self._fold(FUNCTIONS[name][1], *(float(a.value) for a in args))
        return self.node(name, args)

    def cmp(self, op: str, a: Ex, b: Ex) -> Ex:
        if a.is_const and b.is_const:
            return self.node("const_bool", (), bool(_CMP[op](a.value, b.value)))
        return self.node("cmp", (a, b), op)

    def logic(self, op: str, *args: Ex) -> Ex:
        return self.node(op, args)

    def total(self, items) -> Ex:
        out = self.zero()
        for e in items:
            out = self.add(out, e)
        return out

    # derivatives -----------------------------------------------------------------
    def constant_in(self, e: Ex, cs) -> bool:
        """Whether ``e`` is (symbolically) independent of every coordinate in ``cs``."""
        return all((d := self.diff(e, c)).is_const and d.value == 0 for c in cs)

    def bilaplacian(self, e: Ex, cs: tuple[str, ...]) -> Ex | None:
        """$\\Delta_{cs} e$ as one bi-Laplacian request per field where ``e`` is a Laplacian
        ``lap(u)`` over the same coordinates (as a set, each once), or a sum of such terms
        times factors constant in ``cs`` (``-D*lap(u)``, ``lap(u)/k + lap(v)``): then
        $\\Delta(c\\,\\Delta u) = c\\,\\Delta^2 u$, which the derivative engine computes without
        the fourth partials (`pinnkit.diffops.Fields.biharmonic`). ``None`` for anything
        else (``x*lap(u)``, ``lap(u, x)`` under ``lap(., x, y)``, ``lap(u) + u``): the caller
        then expands $\\sum_c \\partial_c^2 e$ symbolically."""
        op, args = e.op, e.args
        if op == "lap":
            field, inner = e.value
            same = set(inner) == set(cs) and len(set(cs)) == len(cs) == len(inner)
            return self.node("bilap", (), (field, tuple(cs))) if same else None
        if op == "neg":
            b = self.bilaplacian(args[0], cs)
            return None if b is None else self.neg(b)
        if op in ("add", "sub"):
            a, b = (self.bilaplacian(x, cs) for x in args)
            if a is None or b is None:
                return None
            return self.add(a, b) if op == "add" else self.sub(a, b)
        if op in ("mul", "div"):
            x, y = args
            pairs = ((x, y), (y, x)) if op == "mul" else ((x, y),)
            for inner, factor in pairs:
                if self.constant_in(factor, cs) and (b := self.bilaplacian(inner, cs)) is not None:
                    return self.mul(factor, b) if op == "mul" else self.div(b, factor)
        return None

    def diff(self, e: Ex, c: str) -> Ex:
        """$\\partial e / \\partial c$ for coordinate ``c``, symbolically."""
        key = (id(e), c)
        hit = self._diff_memo.get(key)
        if hit is None:
            hit = self._diff(e, c)
            self._diff_memo[key] = hit
            self._keep.append(e)
        return hit

    def _diff(self, e: Ex, c: str) -> Ex:
        op, args = e.op, e.args
        d = lambda a: self.diff(a, c)  # noqa: E731
        if op in ("const", "param", "normal"):  # a box face's normal is constant
            return self.zero()
        if op == "coord":
            return self.one() if e.value == c else self.zero()
        if op == "partial":
            field, cs = e.value
            return self.node("partial", (), (field, (*cs, c)))
        if op == "lap":
            field, cs = e.value
            return self.total(self.node("partial", (), (field, (a, a, c))) for a in cs)
        if op == "bilap":
            field, cs = e.value
            return self.total(
                self.node("partial", (), (field, (a, a, b, b, c))) for a in cs for b in cs
            )
        if op == "add":
            return self.add(d(args[0]), d(args[1]))
        if op == "sub":
            return self.sub(d(args[0]), d(args[1]))
        if op == "neg":
            return self.neg(d(args[0]))
        if op == "mul":
            a, b = args
            return self.add(self.mul(d(a), b), self.mul(a, d(b)))
        if op == "div":
            a, b = args
            b2 = self.pow(b, self.const(2))
            return self.sub(self.div(d(a), b), self.div(self.mul(a, d(b)), b2))
        if op == "pow":
            a, b = args
            if b.is_const:
                p = b.value
                return self.mul(self.mul(b, self.pow(a, self.const(p - 1))), d(a))
            # a**b (b' log a + b a'/a)
            inner = self.add(self.mul(d(b), self.fn("log", a)), self.div(self.mul(b, d(a)), a))
            return self.mul(e, inner)
        if op == "where":
            cond, a, b = args
            return self.fn("where", cond, d(a), d(b))
        if op in ("min", "max"):
            a, b = args
            cond = self.cmp("<=" if op == "min" else ">=", a, b)
            return self.fn("where", cond, d(a), d(b))
        if op == "atan2":  # atan2(a, b) = arctan(a / b): (b a' - a b') / (a² + b²)
            a, b = args
            num = self.sub(self.mul(b, d(a)), self.mul(a, d(b)))
            return self.div(num, self.add(self.pow(a, self.const(2)), self.pow(b, self.const(2))))
        if op in ("heaviside", "sign"):
            return self.zero()
        (a,) = args
        return self.mul(self._outer(op, a), d(a))

    def _outer(self, op: str, a: Ex) -> Ex:
        """The derivative of the unary function ``op`` at ``a``."""
        two = self.const(2)
        if op == "sin":
            return self.fn("cos", a)
        if op == "cos":
            return self.neg(self.fn("sin", a))
        if op == "tan":
            return self.add(self.one(), self.pow(self.fn("tan", a), two))
        if op == "exp":
            return self.fn("exp", a)
        if op == "log":
            return self.div(self.one(), a)
        if op == "sqrt":
            return self.div(self.const(0.5), self.fn("sqrt", a))
        if op == "tanh":
            return self.sub(self.one(), self.pow(self.fn("tanh", a), two))
        if op == "sinh":
            return self.fn("cosh", a)
        if op == "cosh":
            return self.fn("sinh", a)
        if op == "abs":
            return self.fn("sign", a)
        if op in ("arcsin", "arccos"):
            g = self.div(self.one(), self.fn("sqrt", self.sub(self.one(), self.pow(a, two))))
            return g if op == "arcsin" else self.neg(g)
        if op == "arctan":
            return self.div(self.one(), self.add(self.one(), self.pow(a, two)))
        raise FoldError(f"cannot differentiate {op!r}")  # pragma: no cover (table is closed)
