"""Values computed once per shape object (shapes are immutable Equinox modules).

A shape's boundary parts, names and pieces are asked for once per piece and would
otherwise be rebuilt each time: $O(n^2)$ for a polygon of $n$ sides or a CSG tree of $n$
operands. The table is keyed by the object's id and cleared when it is collected.
"""

import weakref

_MEMO: dict[int, tuple] = {}  # id(shape) -> (weakref to it, {what: value})


def memo(shape, what, make):
    """``make()`` computed once per shape object (shapes are immutable): its boundary
    parts, names and pieces, asked for once per piece, would otherwise be rebuilt each
    time, $O(n^2)$ for a polygon of $n$ sides or a CSG tree of $n$ operands."""
    hit = _MEMO.get(id(shape))
    if hit is None or hit[0]() is not shape:
        key = id(shape)
        hit = (weakref.ref(shape, lambda _, key=key: _MEMO.pop(key, None)), {})
        _MEMO[key] = hit
    table = hit[1]
    if what not in table:
        table[what] = make()
    return table[what]


def all_parts(shape) -> tuple:
    """``shape.parts()``, built once per shape object (`memo`)."""
    # (a lambda: a bound method of an Equinox module is itself a module, whose creation
    # flattens the whole shape, O(operands) per access)
    return memo(shape, "parts", lambda: shape.parts())


def part_measures(shape, parts) -> tuple[float, ...]:
    """The whole atoms' measures of ``parts`` (of ``shape``), computed once."""
    def make():
        out = []
        for p in parts:
            f = p.frame
            out.append(f.scale ** (len(f.shift) - 1) * p.atom.measure())
        return tuple(out)
    return memo(shape, ("measures", tuple(map(id, parts))), make)
