"""Vectorised CSG: many operands or parts of one kind evaluated as one stacked primitive.

Written operand by operand, a CSG tree of $n$ operands costs one traced operation per
operand in its signed distance, and a union of $n$ disks $n(n-1)$ in its boundary's
trims (each of its parts is trimmed by the $n - 1$ others), traced again for every
boundary piece. Here the same numbers come from stacked parameters:

- `stacked_sdf`: the signed distances of many shapes at one point, with disks/balls and
  axis-aligned rectangles/boxes each evaluated as one array operation;
- `Program`: a boundary piece's rejection test in one pass over the candidates. Each
  part's trims are first *normalised* (`keep_trims`): a trim by a union's outside, an
  intersection's inside or a difference's inside is the conjunction of the trims by
  its operands (exactly: $\\min_j d_j > \\epsilon \\iff d_j > \\epsilon\\ \\forall j$;
  ``AbstractShape.split_trim``), and a
  trim keeping the outside of a shape with an exact distance whose bounding box is
  farther than the tolerance from the part's removes nothing and is dropped
  (``AbstractShape.exact_outside``). The part of
  each candidate then indexes a padded table of its trims (shape, sign, tie), and every
  shape's distance and normal is computed for all candidates at once.

The per-part path in `pinnkit.geometry.base` stays the reference for small trees;
`tests/test_geometry_batched.py` checks that both keep the same candidates.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ._memo import all_parts, memo, part_measures

BATCH_MIN = 4  # fewer shapes of a kind than this are evaluated one by one (as before)
_CHUNK = 1 << 21  # candidate-trim pairs evaluated per block


def _kind(shape) -> str | None:
    """``"round"`` (``center``, ``radius``), ``"box"`` (``lower``, ``upper``, axis-aligned)
    or None: the shape's declared ``stack_kind``."""
    return type(shape).stack_kind


def _norm_rows(v):
    """Row norms with a zero (not NaN) derivative at 0, as `base.safe_norm`."""
    ss = jnp.sum(v * v, axis=-1)
    pos = ss > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, ss, 1.0)), 0.0)


def _params(kind, shapes, dtype):
    if kind == "round":
        return (jnp.asarray([s.center for s in shapes], dtype),
                jnp.asarray([s.radius for s in shapes], dtype))
    return (jnp.asarray([s.lower for s in shapes], dtype),
            jnp.asarray([s.upper for s in shapes], dtype))


def _kind_sdf(kind, params, x):
    """Signed distances ``(..., k)`` of stacked shapes at points ``x`` ``(..., d)``; the
    parameters broadcast against ``x[..., None, :]``."""
    a, b = params
    if kind == "round":
        return _norm_rows(x[..., None, :] - a) - b
    q = jnp.abs(x[..., None, :] - 0.5 * (a + b)) - 0.5 * (b - a)
    return _norm_rows(jnp.maximum(q, 0.0)) + jnp.minimum(jnp.max(q, axis=-1), 0.0)


# faces of an axis-aligned box in the order of its parts: (axis, upper side?)
_FACES = {2: ((1, 0), (0, 1), (1, 1), (0, 0)), 3: ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1))}


def _kind_normal(kind, params, x):
    """Outward normals ``(..., k, d)`` of stacked shapes' boundaries at ``x`` (the nearest
    part's, the first on a tie, as `AbstractShape.normal`)."""
    a, b = params
    if kind == "round":
        r = x[..., None, :] - a
        return r / _norm_rows(r)[..., None]
    d = x.shape[-1]
    inside = jnp.clip(x[..., None, :], a, b)
    dist, normals = [], []
    for axis, up in _FACES[d]:
        face = (b if up else a)[..., axis]
        on_face = inside.at[..., axis].set(jnp.broadcast_to(face, inside.shape[:-1]))
        dist.append(_norm_rows(x[..., None, :] - on_face))
        normals.append(jnp.zeros((d,), x.dtype).at[axis].set(1.0 if up else -1.0))
    k = jnp.argmin(jnp.stack(dist, -1), axis=-1)
    return jnp.stack(normals)[k]


def stacked_sdf(shapes, x):
    """The signed distances of ``shapes`` at one point ``x`` as one vector (order: the
    stacked kinds first, then the rest as given); for a min/max over operands."""
    groups: dict[str, list] = {}
    rest = []
    for s in shapes:
        k = _kind(s)
        groups.setdefault(k, []).append(s) if k else rest.append(s)
    out = []
    for k, g in groups.items():
        if len(g) < BATCH_MIN:
            rest = g + rest
        else:
            out.append(_kind_sdf(k, _params(k, g, x.dtype), x))
    if rest:
        out.append(jnp.stack([s.sdf(x) for s in rest]))
    return jnp.concatenate(out)


def sdf_rows(root, x):
    """``root.sdf`` at each row of ``x``: a `jax.vmap`, in blocks (`jax.lax.map`) when
    the shape's stacked operands would make the intermediate arrays large."""
    size = memo(root, "size", lambda: len(all_parts(root)))
    block = max(256, _CHUNK // max(size, 1))
    if size <= 64 or x.shape[0] <= block:
        return jax.vmap(root.sdf)(x)
    return jax.lax.map(root.sdf, x, batch_size=block)


# --- normalised trims -------------------------------------------------------------------
def _atom_kind(part) -> str | None:
    """``"segment"`` (``a``, ``b``), ``"round"`` (``center``, ``radius``: a circle or a
    sphere) or None: the atom's declared ``stack_kind``."""
    return type(part.atom).stack_kind


def _atom_box(part):
    """The world bounding box of a part's whole atom, or None if unknown."""
    atom = part.atom
    kind = _atom_kind(part)
    if kind == "segment":
        pts = np.asarray([atom.a, atom.b])
    elif kind == "round":
        c = np.asarray(atom.center)
        pts = np.asarray([c - atom.radius, c + atom.radius])
    else:
        return None
    d = pts.shape[1]
    corners = np.asarray(np.meshgrid(*pts.T, indexing="ij")).reshape(d, -1).T
    f = part.frame
    world = f.scale * corners @ np.asarray(f.rotation).T + np.asarray(f.shift)
    return world.min(0), world.max(0)


def keep_trims(root, part) -> tuple:
    """``part.trims`` normalised for the rejection test on ``root`` (module docstring):
    split into simple shapes, duplicates and trims that cannot remove anything dropped."""
    return memo(root, ("keep trims", id(part)), lambda: _keep_trims(root, part))


def _keep_trims(root, part) -> tuple:
    if not (trims := part.trims):
        return ()
    if (own := _atom_box(part)) is not None:
        # what cannot remove anything goes before the split (a union's operands lie in
        # its box, so they would go too): a union part's n - 1 trims shrink to its
        # neighbours without splitting the rest
        trims = tuple(t for t, u in zip(trims, _useless(root, own, trims), strict=True) if not u)
    split = memo(root, "split trims", dict)  # (id, sign, tie) -> its split, None: itself
    flat: dict = {}
    for t in trims:
        key = (id(t[0]), t[1], t[2])
        got = split.get(key, False)
        if got is False:
            got = t[0].split_trim(t[1], t[2])
            got = split[key] = None if got == (t,) else got
        if got is None:
            flat.setdefault(key, t)
        else:
            for s in got:
                flat.setdefault((id(s[0]), s[1], s[2]), s)
    out = tuple(flat.values())
    if own is None or not out:
        return out
    return tuple(t for t, u in zip(out, _useless(root, own, out), strict=True) if not u)


def _useless(root, own, trims) -> np.ndarray:
    """For each trim ``(shape, sign, tie)`` of a part whose atom lies in the box ``own``:
    whether it keeps the outside of a shape with an exact outside distance whose bounding
    box is farther than the tolerance from ``own``, so that it removes nothing."""
    index, rows, table = memo(root, "trim boxes", lambda: ({}, [], {}))
    for s, _, _ in trims:
        if id(s) not in index:
            lo, hi = s.bbox()
            index[id(s)] = len(rows)
            rows.append((*lo, *hi, float(s.exact_outside())))
    if table.get("rows") != len(rows):  # the (shapes, 2d + 1) array of the rows so far
        table["rows"], table["array"] = len(rows), np.asarray(rows)
    a = table["array"][np.fromiter((index[id(t[0])] for t in trims), np.int64, len(trims))]
    sign = np.fromiter((t[1] for t in trims), np.float64, len(trims))
    d = root.dim
    # the larger (float32) tolerance: safe for float64 too
    gap = memo(root, "gap", lambda: 2.0 * root._eps(jnp.float32))
    apart = np.any(a[:, :d] - gap > own[1], 1) | np.any(a[:, d:2 * d] + gap < own[0], 1)
    return (a[:, 2 * d] > 0) & (sign > 0) & apart


def trim_count(root) -> int:
    """The number of (part, trim) pairs of ``root``'s boundary before normalisation: what
    the per-part rejection test and the distance functions trace."""
    return memo(root, "trim count", lambda: sum(len(p.trims) for p in all_parts(root)))


# --- the vectorised rejection test ------------------------------------------------------


class Program:
    """A boundary piece's candidates and rejection test, vectorised over its parts
    (module docstring). Built once per (shape, piece) on the host (numpy tables)."""

    def __init__(self, root, parts: tuple):
        self.root, self.parts = root, parts
        # candidate points: segments and spheres as world-frame stacked parameters
        self.atom_groups: dict[str, np.ndarray] = {}
        for i, p in enumerate(parts):
            k = _atom_kind(p)
            if k is not None:
                self.atom_groups.setdefault(k, []).append(i)
        self.atom_groups = {k: np.asarray(v) for k, v in self.atom_groups.items()}
        self.other_parts = [i for i, p in enumerate(parts) if _atom_kind(p) is None]
        self.world = {}
        for k, idx in self.atom_groups.items():
            ps = [parts[i] for i in idx]
            if k == "segment":
                a = np.stack([_to_world(p, p.atom.a) for p in ps])
                b = np.stack([_to_world(p, p.atom.b) for p in ps])
                n = np.stack([np.asarray(p.frame.rotation) @ np.asarray(
                    [p.atom.b[1] - p.atom.a[1], p.atom.a[0] - p.atom.b[0]]) / p.atom.measure() for p in ps])
                self.world[k] = (a, b, n)
            else:
                c = np.stack([_to_world(p, p.atom.center) for p in ps])
                r = np.asarray([p.frame.scale * p.atom.radius for p in ps])
                self.world[k] = (c, r)
        self.flip = np.asarray([-1.0 if p.flip else 1.0 for p in parts])
        # trims: a padded (parts, T) table into the distinct trim shapes
        trims = [keep_trims(root, p) for p in parts]
        shapes, where = [], {}
        for ts in trims:
            for s, _, _ in ts:
                if id(s) not in where:
                    where[id(s)] = len(shapes)
                    shapes.append(s)
        width = max([len(t) for t in trims] + [0])
        self.index = np.zeros((len(parts), width), np.int64)
        self.sign = np.zeros((len(parts), width), np.float64)  # 0: padding
        self.tie = np.zeros((len(parts), width), np.float64)
        for i, ts in enumerate(trims):
            for j, (s, sign, tie) in enumerate(ts):
                self.index[i, j], self.sign[i, j], self.tie[i, j] = where[id(s)], sign, tie
        self.has_tie = bool(np.any(self.tie))
        # distinct shapes by kind: stacked ones are gathered per (candidate, trim)
        kinds = [_kind(s) for s in shapes]
        self.shapes = shapes
        self.shape_groups = {}
        for k in ("round", "box"):
            members = [i for i, kk in enumerate(kinds) if kk == k]
            if members:
                self.shape_groups[k] = np.asarray(members)
        self.dense = [i for i, kk in enumerate(kinds) if kk is None]
        self.slot = np.zeros(len(shapes), np.int64)  # position of a shape within its group
        for members in self.shape_groups.values():
            self.slot[members] = np.arange(len(members))
        self.slot[self.dense] = np.arange(len(self.dense))

    def _within(self, idx, k):
        """For part indices ``k``: whether each is in the group ``idx`` and its position
        there (0 where not)."""
        pos = np.full(len(self.parts), -1)
        pos[idx] = np.arange(len(idx))
        j = jnp.asarray(pos)[k]
        return j >= 0, jnp.maximum(j, 0)

    def points(self, v, k):
        """Candidates: row ``i`` of unit rows ``v`` mapped onto part ``k[i]``'s atom."""
        x = jnp.zeros(v.shape, v.dtype)
        for kind, idx in self.atom_groups.items():
            mine, j = self._within(idx, k)
            if kind == "segment":
                a, b, _ = (jnp.asarray(t, v.dtype)[j] for t in self.world[kind])
                y = a + v[:, :1] * (b - a)
            else:
                c, r = (jnp.asarray(t, v.dtype)[j] for t in self.world[kind])
                y = c + r[:, None] * _unit_sphere(v, v.shape[1])
            x = jnp.where(mine[:, None], y, x)
        for i in self.other_parts:
            x = jnp.where((k == i)[:, None], self.parts[i].from_unit(v), x)
        return x

    def normals(self, x, k):
        """The result's outward normal of part ``k[i]`` at ``x[i]``."""
        n = jnp.zeros(x.shape, x.dtype)
        for kind, idx in self.atom_groups.items():
            mine, j0 = self._within(idx, k)
            if kind == "segment":
                y = jnp.asarray(self.world[kind][2], x.dtype)[j0]
            else:
                r = x - jnp.asarray(self.world[kind][0], x.dtype)[j0]
                y = r / _norm_rows(r)[:, None]
            n = jnp.where(mine[:, None], y, n)
        for i in self.other_parts:
            n = jnp.where((k == i)[:, None], jax.vmap(self.parts[i].normal)(x), n)
        return n * jnp.asarray(self.flip, x.dtype)[k][:, None]

    def keep(self, x, k, eps: float):
        """Whether candidate ``x[i]`` of part ``k[i]`` lies on the result's boundary:
        the conjunction of its normalised trims (`pinnkit.geometry.base.Part.keep`)."""
        width = self.index.shape[1]
        if width == 0:
            return jnp.ones(x.shape[:1], bool)
        block = max(1, _CHUNK // width)
        if x.shape[0] <= block:
            return self._keep(x, k, eps)
        return jax.lax.map(lambda xk: self._keep(xk[0], xk[1], eps), (x, k), batch_size=block)

    def _keep(self, x, k, eps):
        dt = x.dtype
        if x.ndim == 1:  # one row (inside lax.map)
            return self._keep(x[None], k[None], eps)[0]
        idx = jnp.asarray(self.index)[k]  # (m, T)
        sign = jnp.asarray(self.sign, dt)[k]
        tie = jnp.asarray(self.tie, dt)[k]
        slot = jnp.asarray(self.slot)[idx]
        d = jnp.zeros(idx.shape, dt)
        nrm = jnp.zeros((*idx.shape, x.shape[1]), dt) if self.has_tie else None
        for kind, members in self.shape_groups.items():
            mine = jnp.asarray(np.isin(np.arange(len(self.shapes)), members))[idx]
            group = [self.shapes[i] for i in members]
            params = tuple(p[jnp.where(mine, slot, 0)] for p in _params(kind, group, dt))
            # one point against its T trim shapes: x[:, None, :] against (m, T, ...) parameters
            d = jnp.where(mine, _pair_sdf(kind, params, x), d)
            if self.has_tie:
                nrm = jnp.where(mine[..., None], _pair_normal(kind, params, x), nrm)
        if self.dense:
            cols = jnp.stack([jax.vmap(self.shapes[i].sdf)(x) for i in self.dense], 1)
            mine = jnp.asarray(np.isin(np.arange(len(self.shapes)), self.dense))[idx]
            sl = jnp.where(mine, slot, 0)
            d = jnp.where(mine, jnp.take_along_axis(cols, sl, 1), d)
            if self.has_tie:
                ncols = jnp.stack([jax.vmap(lambda y, s=self.shapes[i]: s.normal(y, "boundary"))(x)
                                   for i in self.dense], 1)
                nrm = jnp.where(mine[..., None], jnp.take_along_axis(ncols, sl[..., None], 1), nrm)
        here = sign * d > eps
        if self.has_tie:
            agree = tie * jnp.sum(self.normals(x, k)[:, None, :] * nrm, -1) > 0
            here = here | ((tie != 0) & (jnp.abs(d) <= eps) & agree)
        return jnp.all(here | (sign == 0), axis=1)


def _pair_sdf(kind, params, x):
    a, b = params  # (m, T, d) and (m, T[, d])
    if kind == "round":
        return _norm_rows(x[:, None, :] - a) - b
    q = jnp.abs(x[:, None, :] - 0.5 * (a + b)) - 0.5 * (b - a)
    return _norm_rows(jnp.maximum(q, 0.0)) + jnp.minimum(jnp.max(q, axis=-1), 0.0)


def _pair_normal(kind, params, x):
    m, t = params[0].shape[:2]
    flat = tuple(p.reshape(m * t, *p.shape[2:]) for p in params)
    xs = jnp.repeat(x, t, axis=0)
    # each (point, shape) pair alone: the stacked normal with one shape per row
    n = _kind_normal(kind, tuple(p[:, None] for p in flat), xs)[:, 0]
    return n.reshape(m, t, x.shape[1])


def _unit_sphere(v, d):
    lon = 2 * jnp.pi * v[:, 0]
    if d == 2:
        return jnp.stack([jnp.cos(lon), jnp.sin(lon)], axis=1)
    z = 2 * v[:, 1] - 1
    rho = jnp.sqrt(jnp.clip(1 - z * z, 0.0, 1.0))
    return jnp.stack([rho * jnp.cos(lon), rho * jnp.sin(lon), z], axis=1)


def _to_world(part, y) -> np.ndarray:
    f = part.frame
    return f.scale * (np.asarray(f.rotation) @ np.asarray(y, np.float64)) + np.asarray(f.shift)


def program(root, piece: str) -> Program:
    """The `Program` of one piece of ``root``, built once."""
    return memo(root, ("program", piece), lambda: Program(root, root.piece_parts(piece)))


def candidates(root, u, piece: str):
    """`AbstractShape.candidates` of a boundary piece through its `Program`: the part by
    ``u[:, 0]`` in proportion to its atom's measure, the candidate on it, the test."""
    def run(u):
        prog = program(root, piece)
        k, v = choose_parts(root, u, piece)
        x = prog.points(v, k)
        return x, prog.keep(x, k, root._eps(u.dtype))
    # one compiled function, also when called eagerly (the acceptance estimate)
    return memo(root, ("candidates", piece), lambda: jax.jit(run))(u)


def choose_parts(root, u, piece: str):
    """Part index per row (by ``u[:, 0]``, in proportion to the atoms' measures) and the
    rows with column 0 rescaled to be uniform within the chosen part again."""
    parts = root.piece_parts(piece)
    w = np.asarray(part_measures(root, parts))
    edges = jnp.asarray(np.cumsum(w) / w.sum(), u.dtype)
    k = jnp.minimum(jnp.searchsorted(edges, u[:, 0], side="right"), len(parts) - 1)
    starts = jnp.concatenate([jnp.zeros((1,), u.dtype), edges[:-1]])
    s = jnp.clip((u[:, 0] - starts[k]) / (edges - starts)[k], 0.0, 1.0 - jnp.finfo(u.dtype).eps)
    return k, u.at[:, 0].set(s)


def vectorise(root, piece: str) -> bool:
    """Whether ``piece`` is sampled through its `Program` (more than 16 parts, or trims
    by shapes of more than 32 parts in all) rather than part by part (small trees: the
    reference path). A trim counts its shape's parts: one side of a plate cut by 1000
    holes would compare each candidate's normal with the union's nearest part's."""
    def decide():
        parts = root.piece_parts(piece)
        if len(parts) > 16:
            return True
        sizes = memo(root, "trim sizes", dict)
        weight = 0
        for p in parts:
            for shape, _, _ in p.trims:
                if id(shape) not in sizes:
                    sizes[id(shape)] = len(all_parts(shape))
                weight += sizes[id(shape)]
        return weight > 32
    return memo(root, ("vectorise", piece), decide)


# --- acceptance once per tree ----------------------------------------------------------
PER_NAME_POINTS = 2**10


def per_tree(root) -> bool:
    """Whether the boundary acceptances are estimated once for the whole tree (more than
    16 named pieces with trimmed parts) instead of once per piece."""
    def decide():
        names = {p.name for p in all_parts(root) if p.trims}
        return len(names) > 16
    return memo(root, "per tree", decide)


def _part_acceptance(root):
    from .sampling import ESTIMATE_POINTS, sobol_unit

    parts = all_parts(root)
    w = np.asarray(part_measures(root, parts))
    by_name: dict[str, float] = {}
    for p, wi in zip(parts, w, strict=True):
        by_name[p.name] = by_name.get(p.name, 0.0) + wi
    w_name = np.asarray([by_name[p.name] for p in parts])
    count = np.maximum(np.ceil(ESTIMATE_POINTS * w / w.sum()), np.ceil(PER_NAME_POINTS * w / w_name))
    count = np.maximum(count, 1).astype(np.int64)
    u = np.asarray(sobol_unit(int(count.sum()), root.dim, 0), np.float32)
    k = np.repeat(np.arange(len(parts)), count)
    prog = program(root, "boundary")
    eps = root._eps(jnp.float32)
    k32 = k.astype(np.int32)  # compiled explicitly: runs while an outer function is traced
    f = jax.jit(lambda u, k: prog.keep(prog.points(u, k), k, eps)).lower(u, k32).compile()
    keep = np.asarray(f(u, k32))
    return np.bincount(k, weights=keep, minlength=len(parts)) / count, count, w


def tree_acceptance(root, piece: str) -> float:
    """A boundary piece's acceptance from one stratified estimate over the whole tree:
    each part gets its share of $2^{16}$ Sobol candidates and at least its share of
    $2^{10}$ within its name; the piece's acceptance is the measure-weighted mean of its
    parts', lowered by 3 standard errors where fewer than $2^{16}$ candidates went into
    it (so that `pinnkit.geometry.sampling.oversample` stays honest)."""
    from .sampling import ESTIMATE_POINTS

    a, count, w = memo(root, "part acceptance", lambda: _part_acceptance(root))
    names = memo(root, "part names", lambda: np.asarray([p.name for p in all_parts(root)]))
    mine = slice(None) if piece == "boundary" else names == piece
    p = float(np.sum(w[mine] * a[mine]) / np.sum(w[mine]))
    n = int(count[mine].sum())
    if n < ESTIMATE_POINTS:
        p = max(p - 3.0 * math.sqrt(p * (1.0 - p) / n), 0.5 * p)
    return p
