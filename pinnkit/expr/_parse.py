"""Text → syntax tree, under a strict whitelist.

The text is parsed with Python's own parser (`ast.parse(..., mode="eval")`, which builds
a tree and executes nothing) and the tree is then copied, node by node, into the small
`Node` tree below. Only the node types listed in `_convert` are copied; anything else
(attribute access, indexing, lambdas, comprehensions, strings, keyword arguments, ...)
is rejected with an `ExprError` that names the construct and its column. Names
beginning with an underscore never get through, so neither does ``__import__``.

Size limits keep hostile input cheap to reject: at most `MAX_LENGTH` characters, at
most `MAX_DEPTH` levels of nesting (checked on the brackets before parsing and on the
tree after), and numeric literals of at most `MAX_LITERAL` in magnitude.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from ..errors import ConfigError

MAX_LENGTH = 4000  # characters in one expression
MAX_DEPTH = 64  # nesting levels of brackets / operators in one expression
MAX_LITERAL = 1e100  # magnitude of a number written in an expression


class ExprError(ConfigError):
    """A user expression is invalid. The message is one paragraph naming the config key,
    the expression, the column of the problem and, where possible, the fix."""


def expr_error(key: str, text: str, pos: int | None, msg: str, hint: str = "") -> ExprError:
    """The standard message: ``key: msg at column N of "text". hint``."""
    shown = text if len(text) <= 120 else text[:117] + "..."
    at = f" at column {pos + 1}" if pos is not None else ""
    tail = f" {hint}" if hint else ""
    return ExprError(f"{key}: {msg}{at} of {shown!r}.{tail}")


@dataclass(frozen=True, eq=False)
class Node:
    """One syntax node. ``kind`` is one of:

    - ``"num"`` (``value``: int or float), ``"name"`` (``value``: the identifier);
    - ``"bin"`` (``value``: ``+ - * / **``, two ``args``), ``"neg"`` (one arg);
    - ``"cmp"`` (``value``: ``< <= > >= == !=``, two args), ``"and"``/``"or"`` (2+ args),
      ``"not"`` (one arg);
    - ``"call"`` (``value``: the function's name, ``args``), ``"list"`` (``args``).

    ``pos`` is the 0-based column of the node in the (whitespace-normalised) text.
    """

    kind: str
    pos: int
    value: object = None
    args: tuple[Node, ...] = ()


_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}

# Rejected constructs, with the explanation a user needs.
_FORBIDDEN = {
    ast.Attribute: "attribute access ('.name') is not allowed",
    ast.Subscript: "indexing with [...] is not allowed (derivatives are written u_x, d(u, x))",
    ast.Lambda: "lambda is not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.JoinedStr: "strings are not allowed",
    ast.IfExp: "'a if c else b' is not allowed; write where(c, a, b)",
    ast.NamedExpr: "assignment (':=') is not allowed; use the 'define' section",
    ast.Starred: "starred arguments ('*a') are not allowed",
    ast.Dict: "dictionaries are not allowed",
    ast.Set: "sets are not allowed",
    ast.Await: "'await' is not allowed",
    ast.Yield: "'yield' is not allowed",
    ast.YieldFrom: "'yield' is not allowed",
    ast.Slice: "slices are not allowed",
}


def _bracket_depth(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


def normalise(text: str) -> str:
    """One line, no surrounding blanks (YAML block scalars may contain newlines)."""
    return " ".join(text.split())


def parse(text: str, key: str) -> Node:
    """Parses one expression. Raises `ExprError` (naming ``key``) for anything outside the
    grammar of ``docs/expressions.md``."""
    text = normalise(text)
    if not text:
        raise expr_error(key, text, None, "empty expression")
    if _bracket_depth(text) > MAX_DEPTH:
        raise ExprError(
            f"{key}: expression nested too deeply (more than {MAX_DEPTH} levels of "
            "brackets); split it into helpers under 'define'."
        )
    if len(text) > MAX_LENGTH:
        raise ExprError(
            f"{key}: expression too long ({len(text)} characters, at most {MAX_LENGTH}); "
            "split it into helpers under 'define'."
        )
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        pos = (e.offset - 1) if e.offset else None
        raise expr_error(key, text, pos, f"invalid syntax ({e.msg})") from None
    except (RecursionError, MemoryError, ValueError):
        raise ExprError(
            f"{key}: expression nested too deeply or too large to parse; split it into "
            "helpers under 'define'."
        ) from None
    return _Converter(text, key).convert(tree.body, 0)


class _Converter:
    def __init__(self, text: str, key: str):
        self.text, self.key = text, key

    def col(self, node: ast.AST) -> int:
        # ast columns count UTF-8 bytes; report characters.
        return len(self.text.encode()[: node.col_offset].decode("utf-8", "ignore"))

    def fail(self, node: ast.AST, msg: str, hint: str = "") -> ExprError:
        pos = self.col(node) if hasattr(node, "col_offset") else None
        return expr_error(self.key, self.text, pos, msg, hint)

    def convert(self, node: ast.AST, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise ExprError(
                f"{self.key}: expression nested too deeply (more than {MAX_DEPTH} levels); "
                "split it into helpers under 'define'."
            )
        sub = lambda n: self.convert(n, depth + 1)  # noqa: E731
        pos = self.col(node)
        if isinstance(node, ast.Constant):
            return self.number(node)
        if isinstance(node, ast.Name):
            if node.id.startswith("_"):
                raise self.fail(node, f"names starting with '_' are not allowed ({node.id!r})")
            return Node("name", pos, node.id)
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self.fail(node, f"operator {_op_text(node.op)!r} is not allowed",
                                "Allowed: + - * / ** and comparisons inside where(...).")
            return Node("bin", pos, op, (sub(node.left), sub(node.right)))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return Node("neg", pos, None, (sub(node.operand),))
            if isinstance(node.op, ast.UAdd):
                return sub(node.operand)
            if isinstance(node.op, ast.Not):
                return Node("not", pos, None, (sub(node.operand),))
            raise self.fail(node, "operator '~' is not allowed")
        if isinstance(node, ast.Compare):
            return self.compare(node, sub)
        if isinstance(node, ast.BoolOp):
            kind = "and" if isinstance(node.op, ast.And) else "or"
            return Node(kind, pos, None, tuple(sub(v) for v in node.values))
        if isinstance(node, ast.Call):
            return self.call(node, sub)
        if isinstance(node, ast.List | ast.Tuple):
            return Node("list", pos, None, tuple(sub(v) for v in node.elts))
        for cls, msg in _FORBIDDEN.items():
            if isinstance(node, cls):
                raise self.fail(node, msg)
        raise self.fail(node, f"{type(node).__name__} syntax is not allowed in expressions")

    def number(self, node: ast.Constant) -> Node:
        v = node.value
        if isinstance(v, bool) or not isinstance(v, int | float):
            what = "strings" if isinstance(v, str | bytes) else f"the constant {v!r}"
            raise self.fail(node, f"{what} not allowed; only numbers are")
        if isinstance(v, int) and v.bit_length() > 340 or not (
            math.isfinite(float(v)) and abs(v) <= MAX_LITERAL
        ):
            raise self.fail(node, f"number too large (at most {MAX_LITERAL:g} in magnitude)")
        return Node("num", self.col(node), v)

    def compare(self, node: ast.Compare, sub) -> Node:
        parts = []
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            sym = _CMPOPS.get(type(op))
            if sym is None:
                raise self.fail(node, f"comparison {_op_text(op)!r} is not allowed")
            parts.append(Node("cmp", self.col(node), sym, (sub(left), sub(right))))
            left = right
        # a < b < c means (a < b) and (b < c), as in Python.
        return parts[0] if len(parts) == 1 else Node("and", self.col(node), None, tuple(parts))

    def call(self, node: ast.Call, sub) -> Node:
        if not isinstance(node.func, ast.Name):
            if isinstance(node.func, ast.Attribute):
                raise self.fail(node.func, "attribute access ('.name') is not allowed")
            raise self.fail(node, "only named functions can be called, e.g. sin(x)")
        name = node.func.id
        if name.startswith("_"):
            raise self.fail(node, f"names starting with '_' are not allowed ({name!r})")
        if node.keywords:
            raise self.fail(node, f"keyword arguments are not allowed in {name}(...)")
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.fail(a, "starred arguments ('*a') are not allowed")
        return Node("call", self.col(node), name, tuple(sub(a) for a in node.args))


def _op_text(op: ast.AST) -> str:
    return {
        "Mod": "%", "FloorDiv": "//", "MatMult": "@", "BitAnd": "&", "BitOr": "|",
        "BitXor": "^", "LShift": "<<", "RShift": ">>", "Is": "is", "IsNot": "is not",
        "In": "in", "NotIn": "not in",
    }.get(type(op).__name__, type(op).__name__)
