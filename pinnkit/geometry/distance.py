"""Approximate distance functions (ADFs) and exact Dirichlet conditions on any shape.

After Sukumar & Srivastava (2022), "Exact imposition of boundary conditions with
distance functions in physics-informed deep neural networks" (CMAME 389):

- each boundary part (`pinnkit.geometry.base.Part`) gives a smooth level function $f$
  (zero on its surface, $|\\nabla f| = 1$ there) and a trimming function $t$ ($t \\ge 0$
  on the part). The part's ADF is
  $\\phi = \\sqrt{f^2 + \\big((\\sqrt{t^2 + f^4} - t)/2\\big)^2}$: $\\phi \\approx |f|$ near the
  part and $\\phi > 0$ off it. A part of a CSG result is trimmed also by the operands it
  was combined with: $t \\leftarrow t \\wedge t_{op}$ (R-conjunction
  $a \\wedge b = a + b - \\sqrt{a^2 + b^2}$) with $t_{op} = \\mp\\phi^\\pm_{op}$, the operand's
  *signed* ADF (positive inside it), so every function involved is smooth;
- parts join by R-equivalence, $\\phi = (\\sum_i \\phi_i^{-1})^{-1}$: zero exactly on
  their union, positive elsewhere, normalised to first order ($\\partial\\phi/\\partial n
  = -1$, i.e. $\\phi$ = distance to first order) away from corners;
- a shape's signed ADF is $\\operatorname{sign}(-\\text{sdf})\\,\\phi$: smooth across its
  boundary because $\\phi \\approx |f|$ there.

`DistanceDirichlet` uses them for $y_k = g_k(x) + \\phi_k(x) N_k(x)$, with $g_k$ the
transfinite (inverse-distance) blend of the conditions' data on the pieces where output
$k$ is prescribed, so that ``network.hard_constraint: true`` works on every shape. The
data of a piece that is one straight side is read at a smoothed closest point of that
side (`side_point`), never beyond its ends.

**Corners.** Where two parts meet, both $\\phi_i \\to 0$ and the R-functions lose
smoothness: $\\phi$ stays continuous and zero on the boundary, but its $k$-th
derivatives grow like $r^{1-k}$ with the distance $r$ to the corner (and the blend of
two different data values is discontinuous there). Derivatives remain exact (the Taylor
engine and autodiff agree to rounding) at any $r > 0$; exactly *on* the boundary the
square roots and divisions are guarded: values are exact (0 and $g$), derivatives are
set to zero instead of NaN. Collocation points are never exactly on a Dirichlet piece
(interior samples are strict, enforced boundary terms are dropped), so this only
matters for evaluations there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._constraint import AbstractHardConstraint
from .._types import Point, Scalar
from ..diffops import jets
from . import batched
from ._memo import memo
from .base import AbstractShape, Part
from .domains import AbstractDomain, SpaceTime
from .rfunctions import r_and, trimmed

# The distance function of a CSG part is trimmed by the signed distance of each operand it
# was combined with: each operand's once per evaluation (`_cutter`), but one conjunction
# per (part, operand) pair, so a union of n shapes still costs n(n-1).
MAX_TRIM_PAIRS = 2000


def r_equiv(phis: Sequence[Scalar]) -> Scalar:
    """$(\\sum_i \\phi_i^{-1})^{-1}$, zero if any $\\phi_i$ is (value exact, derivative 0);
    an entry may be a vector of several $\\phi_i$."""
    if len(phis) == 1 and jnp.ndim(phis[0]) == 0:
        return phis[0]
    p = jnp.concatenate([jnp.atleast_1d(q) for q in phis])
    ok = jnp.min(p) > 0
    return jnp.where(ok, 1.0 / jnp.sum(1.0 / jnp.where(ok, p, 1.0)), 0.0)


def part_adf(part: Part, x: Point, cutters: dict | None = None) -> Scalar:
    """ADF of one trimmed part (module docstring; a mesh: `pinnkit.geometry.mesh_adf`).
    ``cutters``: the trimming operands' signed ADFs at ``x`` computed so far (`_cutter`)."""
    from .mesh import MeshSurface

    if isinstance(part.atom, MeshSurface):
        if part.trims:
            raise ValueError("network.hard_constraint: a mesh combined with other shapes (union, "
                             "intersection, difference) has no distance function here; impose its "
                             "Dirichlet data as a loss term (network.hard_constraint: false)")
        return part.frame.scale * part.atom.adf(part.frame.to_local(x))
    f, t = part.level(x)
    return trimmed(f, _trim(t, [(s, sign) for s, sign, _ in part.trims], x, cutters))


def _trim(t, trims, x: Point, cutters: dict | None):
    """``t`` (a part's own trimming function, None, or a vector of them) conjoined with
    each trim ``(shape, sign)``: the part keeps ``sign * sdf > 0``, i.e. ``-sign *
    signed_adf > 0`` (positive inside)."""
    cutters = {} if cutters is None else cutters
    for shape, sign in trims:
        tc = -sign * _cutter(shape, x, cutters)
        t = tc if t is None else r_and(t, tc)
    return t


def _cutter(shape: AbstractShape, x: Point, cutters: dict) -> Scalar:
    """``signed_adf(shape, x)``, once per call: the operands of a CSG result trim all of
    its parts (a plate's four sides are each trimmed by its hole), and each would trace
    the operand's whole distance function again."""
    if id(shape) not in cutters:  # the shapes live in the parts' trims during the call
        cutters[id(shape)] = signed_adf(shape, x, cutters)
    return cutters[id(shape)]


def signed_adf(shape: AbstractShape, x: Point, cutters: dict | None = None) -> Scalar:
    """The shape's smooth signed ADF: positive inside, $\\approx$ distance near the
    boundary."""
    phi = _parts_adf(shape, "boundary", x, {} if cutters is None else cutters)
    return jnp.where(shape.sdf(x) < 0, phi, -phi)


def piece_adf(domain: AbstractDomain, piece: str, x: Point, cutters: dict | None = None) -> Scalar:
    """ADF of one boundary piece (or ``"initial"``: $t - t_0$ of a `SpaceTime`);
    ``cutters`` shares the trimming operands' distance functions between pieces."""
    if isinstance(domain, SpaceTime):
        if piece == "initial":
            return x[0] - domain.t0
        return piece_adf(domain.space, piece, x[1:], cutters)
    if not isinstance(domain, AbstractShape):
        raise ValueError(f"distance functions need a pinnkit.geometry shape, not {type(domain).__name__}")
    return _parts_adf(domain, piece, x, {} if cutters is None else cutters)


def _parts_adf(root: AbstractShape, piece: str, x: Point, cutters: dict) -> Scalar:
    """The R-equivalence of ``piece``'s parts' ADFs, the straight sides with the same
    trims as one stacked evaluation each (`segment_groups`), the other parts trimmed as
    one vector per run of equal trims (`trim_runs`)."""
    groups, _ = segment_groups(root, piece)
    phis = [_run_adf(root, piece, run, x, cutters) for run in trim_runs(root, piece)]
    for arrays, trims in groups:
        f, t = _segments_level(*(jnp.asarray(v, x.dtype) for v in arrays), x)
        phis.append(trimmed(f, _trim(t, trims, x, cutters)))
    return r_equiv(phis)


def trim_runs(root: AbstractShape, piece: str) -> tuple[tuple[int, ...], ...]:
    """The parts of ``piece`` that `segment_groups` leaves, in their order, as runs of
    consecutive parts with the same trims (the same operands with the same signs, in the
    same order; a mesh alone). A run's levels are stacked into one vector and conjoined
    with its trims once: each trimming operand's ADF then feeds one operation, where
    part by part XLA copied the operand's whole elementwise program into the fusion of
    each part it trims (a box's faces trimmed by a cylinder: the cylinder's program
    four times)."""
    def make():
        from .mesh import MeshSurface

        parts = root.piece_parts(piece)
        runs: list[list[int]] = []
        last = None
        for i in segment_groups(root, piece)[1]:
            p = parts[i]
            key = None if isinstance(p.atom, MeshSurface) else tuple((id(s), sign) for s, sign, _ in p.trims)
            if key is not None and key == last and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
            last = key
        return tuple(tuple(r) for r in runs)
    return memo(root, ("trim runs", piece), make)


def _run_adf(root: AbstractShape, piece: str, run: tuple[int, ...], x: Point, cutters: dict) -> Scalar:
    """The ADFs of one run of `trim_runs` (a vector for two or more parts): atoms that
    declare ``stack_level`` (planar rectangles) as one stacked evaluation,
    other atoms level by level; parts with and without their own trimming function
    (a sphere's None beside a face's) one by one."""
    parts = root.piece_parts(piece)
    if len(run) == 1:
        return part_adf(parts[run[0]], x, cutters)
    ps = [parts[i] for i in run]
    # dispatch on the declared evaluation, not the class: atoms sharing it stack
    kind = type(ps[0].atom)
    if kind.stack_level is not None and all(type(p.atom).stack_level is kind.stack_level for p in ps):
        rows = memo(root, ("stack rows", piece, run), lambda: kind.stack_rows(ps))
        f, t = kind.stack_level(*(jnp.asarray(v, x.dtype) for v in rows), x)
    else:
        levels = [p.level(x) for p in ps]
        if len({lv[1] is None for lv in levels}) > 1:
            return jnp.stack([part_adf(p, x, cutters) for p in ps])
        f = jnp.stack([lv[0] for lv in levels])
        t = None if levels[0][1] is None else jnp.stack([lv[1] for lv in levels])
    return trimmed(f, _trim(t, [(s, sign) for s, sign, _ in ps[0].trims], x, cutters))


def segment_groups(root: AbstractShape, piece: str) -> tuple[tuple, tuple[int, ...]]:
    """``piece``'s straight sides grouped by their trims (the same operands with the same
    signs, in the same order), each group with two or more sides as world-frame arrays
    ``(a, b, sign, length, (length/2)^2)`` (``sign`` -1 where flipped) and its trims
    ``((shape, sign), ...)``, and the indices of the other parts: one distance
    function per group instead of one per side (a polygon's sides form one group)."""
    def make():
        parts = root.piece_parts(piece)
        by_trims: dict[tuple, list[int]] = {}
        for i, p in enumerate(parts):
            if type(p.atom).stack_kind == "segment":
                key = tuple((id(s), sign) for s, sign, _ in p.trims)
                by_trims.setdefault(key, []).append(i)
        groups, stacked = [], set()
        for idx in by_trims.values():
            if len(idx) < 2:
                continue
            ps = [parts[i] for i in idx]
            a = np.stack([batched._to_world(p, p.atom.a) for p in ps])
            b = np.stack([batched._to_world(p, p.atom.b) for p in ps])
            length = np.linalg.norm(b - a, axis=1)  # in float64, as Segment.measure
            arrays = (a, b, np.asarray([-1.0 if p.flip else 1.0 for p in ps]), length, (0.5 * length) ** 2)
            groups.append((arrays, tuple((s, sign) for s, sign, _ in ps[0].trims)))
            stacked.update(idx)
        return tuple(groups), tuple(i for i in range(len(parts)) if i not in stacked)
    return memo(root, ("segment groups", piece), make)


def _segments_level(a, b, sign, length, half2, x):
    """`Part.level` of segments ``a -> b`` (rows) in the world frame, as `Segment.level`:
    $f$ the signed distance to the line, $t = ((L/2)^2 - |x - c|^2)/L$."""
    e = (b - a) / length[:, None]
    r = x[None, :] - a
    f = sign * (e[:, 0] * r[:, 1] - e[:, 1] * r[:, 0])
    c = x[None, :] - 0.5 * (a + b)
    return f, (half2 - jnp.sum(c * c, axis=1)) / length


def side_ends(domain: AbstractDomain, piece: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The world-frame ends ``(a, b)`` of ``piece`` if it is one straight side (a
    polygon's or a rectangle's side, trimmed or not), else None."""
    space = domain.space if isinstance(domain, SpaceTime) else domain
    if not isinstance(space, AbstractShape) or piece in ("boundary", "initial"):
        return None
    def make():
        parts = space.piece_parts(piece)
        if len(parts) != 1 or type(parts[0].atom).stack_kind != "segment":
            return None
        p = parts[0]
        return batched._to_world(p, p.atom.a), batched._to_world(p, p.atom.b)
    return memo(space, ("side ends", piece), make)


def _gauss_ramp(m, width):
    """$E[\\max(m + wZ, 0)] = m\\,\\Phi(m/w) + w\\,\\varphi(m/w)$, $Z$ standard normal, $w > 0$."""
    z = m / width
    return (m * 0.5 * jax.scipy.special.erfc(-z / np.sqrt(2.0))
            + width * jnp.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi))


def side_point(a, b, x: Point) -> Point:
    r"""A smoothed closest point of the side $a \to b$ to ``x`` (2-D): $a + \tilde s\,(b - a)$
    with $\tilde s = E[\operatorname{clamp}(s + wZ, 0, 1)]$, $s$ the projection's
    parameter, $Z$ standard normal and the width $w = |f|/L$ the distance to the side's
    line in side lengths.

    Why: a piece's data $g_i$ is written for the piece (the step's inflow
    $16(y - 1/2)(1 - y)$ on $y \in [1/2, 1]$), but the blend evaluates it at every point
    of the shape, where beside the piece's ends it is another function (negative behind
    the step), and the blend carries that into the flow. The closest point (the clamp of
    $s$) stays on the piece but has a kink along the lines $s = 0, 1$, which cross the
    shape (behind the step) and would put a kink line into the Laplacian of the lifting.
    Averaging the clamp over a Gaussian of width $w$ keeps it in $[0, 1]$ (an average of
    values in $[0, 1]$: the point stays on the side, so a nonnegative profile stays
    nonnegative) and makes it $C^\infty$ wherever $w > 0$, i.e. off the side's line; on
    the side itself ($w = 0$) it is the clamp, so $\tilde s = s$ and the data are
    exact. Inside the side's slab the change is exponentially small near the side
    ($\le w\,\varphi(\min(s, 1 - s)/w)$) and grows with the distance, where the blend
    weight of the piece is small."""
    a, b = jnp.asarray(a, x.dtype), jnp.asarray(b, x.dtype)
    e = b - a
    length2 = jnp.sum(e * e)
    r = x - a
    s = jnp.dot(r, e) / length2
    width = jnp.abs(e[0] * r[1] - e[1] * r[0]) / length2  # |f| / L
    ok = width > 0
    safe = jnp.where(ok, width, 1.0)
    smooth = _gauss_ramp(s, safe) - _gauss_ramp(s - 1.0, safe)
    return a + jnp.where(ok, smooth, jnp.clip(s, 0.0, 1.0)) * e


def _side_points(domain: AbstractDomain, pieces: Sequence[str], x: Point) -> dict[str, Point]:
    """``{piece: point}``: where each piece's data are read, `side_point` of ``x`` for
    the straight sides (all in one vectorised evaluation: a polygon's ten sides are one
    program, not ten), ``x`` itself for the other pieces."""
    out = {p: x for p in pieces}
    sides = [p for p in pieces if side_ends(domain, p) is not None]
    if not sides:
        return out
    a, b = (np.stack([side_ends(domain, p)[i] for p in sides]) for i in (0, 1))
    space_x = x[1:] if isinstance(domain, SpaceTime) else x
    q = jax.vmap(side_point, in_axes=(0, 0, None))(a, b, space_x)  # (sides, 2)
    for i, p in enumerate(sides):
        out[p] = jnp.concatenate([x[:1], q[i]]) if isinstance(domain, SpaceTime) else q[i]
    return out


def adf(domain: AbstractDomain, pieces: Sequence[str] = ("boundary",)) -> Callable[[Point], Scalar]:
    """``phi(x)``: the ADF of the union of ``pieces``, zero exactly there, positive in the
    rest of the domain, normalised to first order."""
    pieces = tuple(pieces)
    for p in pieces:
        if p != "initial":
            domain.check_piece(p)

    def phi(x):
        cutters = {}
        return r_equiv([piece_adf(domain, p, x, cutters) for p in pieces])
    return phi


class DistanceDirichlet(AbstractHardConstraint):
    """Exact Dirichlet data on any shape: for each constrained output $k$,
    $y_k = g_k(x) + \\phi_k(x)\\,y_k^{net}$, where $\\phi_k$ is the ADF of the pieces on
    which $k$ is prescribed and $g_k = \\sum_i w_i g_{i,k}$ blends their data with
    $w_i = \\phi_i^{-1} / \\sum_j \\phi_j^{-1}$ ($= 1$ on piece $i$); the data of a piece
    that is one straight side are read at `side_point` (on the side, never beyond its
    ends), those of other pieces at $x$ itself.

    **Arguments:**
    - `domain`: a shape or a `SpaceTime` over one (``"initial"`` is then a piece too).
    - `pieces`: one piece per condition (``("inlet", "walls", "cylinder")``).
    - `outputs`: per condition, the output indices it prescribes.
    - `values`: per condition, ``g(x) -> (len(outputs),)`` or None for zero.
    - `scale`: ``((k, s_k), ...)``: $\\phi_k$ is divided by $s_k$ (`normalised` sets it to
      the maximum of $\\phi_k$ in the domain); None (the default) for $\\phi_k$ itself.

    The pieces of one output must be disjoint (``"boundary"`` overlaps every name).
    """

    domain: AbstractDomain
    pieces: tuple[str, ...] = eqx.field(static=True)
    outputs: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    values: tuple[Callable | None, ...] = eqx.field(static=True)
    scale: tuple[tuple[int, float], ...] | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if not (len(self.pieces) == len(self.outputs) == len(self.values)) or not self.pieces:
            raise ValueError("DistanceDirichlet needs one piece, output tuple and value per condition")
        space = self.domain.space if isinstance(self.domain, SpaceTime) else self.domain
        pairs = batched.trim_count(space) if isinstance(space, AbstractShape) else 0
        if pairs > MAX_TRIM_PAIRS:
            from ..errors import ConfigError

            raise ConfigError(
                f"network.hard_constraint: the shape's boundary has {pairs} (part, trimming "
                f"operand) pairs, each a distance function traced into every step; at most "
                f"{MAX_TRIM_PAIRS} are accepted (about a union of 45 shapes). Set "
                "network.hard_constraint: false (the conditions become loss terms) or use fewer "
                "CSG operands (a polygon's sides cost nothing here)."
            )
        valid = self.domain.pieces()
        for p in self.pieces:
            if p not in valid or p == "interior":
                raise ValueError(f"DistanceDirichlet piece {p!r} is not a boundary of the domain: {valid}")
        for k in {k for o in self.outputs for k in o}:
            mine = [p for p, o in zip(self.pieces, self.outputs, strict=True) if k in o]
            if len(set(mine)) < len(mine) or ("boundary" in mine and len(mine) > 1):
                raise ValueError(
                    f"output {k} is prescribed on overlapping pieces {mine}: give each part of "
                    "the boundary one Dirichlet condition per field"
                )
        x = jax.ShapeDtypeStruct((self.domain.dim,), jnp.float32)
        for p in dict.fromkeys(self.pieces):  # a CSG with a mesh raises here, or an oversized mesh table
            jax.eval_shape(lambda z, p=p: piece_adf(self.domain, p, z), x)

    def lifting(self, x: Point, m: int) -> tuple[Float[Array, " m"], Float[Array, " m"]]:
        """$(A(x), D(x))$ with ``self(x, y)`` $= A + D\\,y$ for ``m`` outputs: $A_k = g_k$ and
        $D_k = \\phi_k$ on the constrained outputs, $0$ and $1$ on the others. Each piece's
        ADF, each condition's data and each set of pieces' blend is computed once (the
        outputs ``u, v`` of a no-slip condition share all three)."""
        cutters = {}  # each trimming operand's distance function once for all pieces
        phis = {p: piece_adf(self.domain, p, x, cutters) for p in dict.fromkeys(self.pieces)}
        # a data function shared by several pieces (the DFG inflow: inlet and walls) once
        # per point it is read at (a straight side's data at its `side_point`)
        keys = [(id(g), p if side_ends(self.domain, p) is not None else None) for p, g in
                zip(self.pieces, self.values, strict=True)]
        at = _side_points(self.domain, [p for p, g in zip(self.pieces, self.values, strict=True)
                                        if g is not None], x)
        by_fn = {}
        for key, p, g in zip(keys, self.pieces, self.values, strict=True):
            if g is not None and key not in by_fn:
                by_fn[key] = jnp.atleast_1d(g(at[p]))
        data = [None if g is None else by_fn[key] for key, g in zip(keys, self.values, strict=True)]
        a, d = [jnp.zeros((), x.dtype)] * m, [jnp.ones((), x.dtype)] * m
        shared, scale = {}, dict(self.scale or ())
        for k in sorted({k for o in self.outputs for k in o}):
            conds = tuple(i for i, o in enumerate(self.outputs) if k in o)
            ph = [phis[self.pieces[i]] for i in conds]
            if conds not in shared:
                shared[conds] = (_blend_weights(ph), r_equiv(ph))
            w, phi = shared[conds]
            gs = [jnp.zeros((), x.dtype) if data[i] is None else data[i][self.outputs[i].index(k)]
                  for i in conds]
            a[k] = gs[0] if w is None else sum(wi * gi for wi, gi in zip(w, gs, strict=True))
            d[k] = phi if k not in scale else phi / scale[k]
        return jnp.stack(a), jnp.stack(d)

    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        a, d = self.lifting(x, y.shape[0])
        return a + d * y


def normalised(dd: DistanceDirichlet, n: int = 4096, digits: int = 2) -> DistanceDirichlet:
    """``dd`` with each constrained output's factor $D_k = \\phi_k$ divided by its maximum
    over ``n`` points of the domain's interior (drawn once, key 0; rounded to ``digits``
    significant digits, so float32 and float64 builds agree), a constant of the model.

    Why: $\\phi_k$ is the R-equivalence of the pieces' distances, of order the distance to
    the *nearest* piece, so its maximum is a fraction of the shape's inradius (0.13-0.25 on
    the unit-scale flows of ``configs/flows``) and the network must output $1/\\max\\phi_k$
    times the field's size. Divided by it, $\\max D_k \\approx 1$ on any shape: the
    network's output is of the field's size, whatever the geometry. The boundary values
    are untouched ($D_k = 0$ there, $y_k = g_k$)."""
    ks = sorted({k for o in dd.outputs for k in o})
    x = dd.domain.sample(jax.random.key(0), n, "interior", jnp.result_type(float))
    plain = DistanceDirichlet(dd.domain, dd.pieces, dd.outputs, dd.values)
    _, d = jax.jit(jax.vmap(lambda z: plain.lifting(z, ks[-1] + 1)))(x)
    d = np.asarray(jnp.max(d, axis=0))
    scale = tuple((k, float(f"{d[k]:.{digits}g}")) for k in ks)
    return DistanceDirichlet(dd.domain, dd.pieces, dd.outputs, dd.values, scale)


def affine_lifting_jet(lifting, x_jet: jets.Jet, y_jet: jets.Jet, plan: jets.Plan) -> jets.Jet:
    r"""The jet of $A(x) + D(x)\,y$ for a constraint affine in the network's output, from
    ``lifting(x, m) -> (A, D)``: $A$ and $D$ are differentiated along the input's rows
    only (`jets.of_point`, one trace), $y$ enters by Leibniz's rule."""
    ad = jets.of_point(lambda x: jnp.stack(lifting(x, y_jet.value.shape[0])), x_jet, plan)
    a, d = (jets.Jet(ad.value[i], None if ad.first is None else ad.first[:, i],
                     {k: r[i] for k, r in ad.rest.items()}) for i in (0, 1))
    return jets.add(a, jets.product(d, y_jet, plan))


@jets.taylor_rule(DistanceDirichlet)
def _distance_dirichlet_jet(dd: DistanceDirichlet, x_jet: jets.Jet, y_jet: jets.Jet, *,
                            plan: jets.Plan, keep) -> jets.Jet:
    # affine in y: the distance functions and the data along the input's rows only
    return affine_lifting_jet(dd.lifting, x_jet, y_jet, plan)


def _blend_weights(phis: Sequence[Scalar]) -> list[Scalar] | None:
    """The weights $w_i = \\prod_{j \\ne i}\\phi_j / \\sum_k \\prod_{j \\ne k}\\phi_j$ of the
    blend $\\sum_i w_i g_i$ (None for one piece: $g_1$ itself)."""
    if len(phis) == 1:
        return None
    p = jnp.stack(phis)
    # the leave-one-out products as exclusive prefix times suffix products: O(n), one
    # vector program, where the n products of n - 1 factors were n^2 scalar operations
    one = jnp.ones((1,), p.dtype)
    pre = jnp.cumprod(jnp.concatenate([one, p[:-1]]))
    suf = jnp.cumprod(jnp.concatenate([one, p[:0:-1]]))[::-1]
    loo = pre * suf
    den = jnp.sum(loo)
    ok = den > 0
    # den = 0 where two or more pieces meet (a corner point): the limit there is the mean
    # of those pieces' data (equal for compatible data), never the others'
    on = p == 0
    n_on = jnp.sum(on.astype(p.dtype))
    w = jnp.where(ok, loo / jnp.where(ok, den, 1.0), jnp.where(on, 1.0 / jnp.maximum(n_on, 1.0), 0.0))
    return list(w)
