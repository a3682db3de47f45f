"""Corner singular enrichment: the known singular behaviour of $-\\Delta u = f$ at a
corner of a 2-D shape, added to the network with trainable coefficients.

Near a corner of interior angle $\\omega$ with Dirichlet data on both edges, the solution
of the Poisson problem is $u = \\sum_j K_j\\, \\rho^{\\lambda_j} \\sin(\\lambda_j \\theta) + w$
with $\\lambda_j = j\\pi/\\omega$, $(\\rho, \\theta)$ polar coordinates about the corner
($\\theta = 0$ on one edge, $\\omega$ on the other) and $w$ smoother (Grisvard 1985). At a
re-entrant corner ($\\omega > \\pi$) $\\lambda_1 < 1$: the gradient is unbounded, and
$u/\\phi \\sim \\rho^{\\lambda_1 - 1}$ for a distance function $\\phi$, which no smooth network
represents. After Hu, Jin & Zhou (2024), "Solving Poisson problems in polygonal domains
with singularity enriched physics informed neural networks" (SIAM J. Sci. Comput.,
arXiv:2308.16429), `CornerEnrichment` writes the field as

$$y_k = T(x, N(x))_k + \\sum_{c, j} a_{k c j}\\, S_{c j}(x), \\qquad
S_{cj} = \\chi(\\rho_c / R_c)\\,(\\rho_c / R_c)^{\\lambda_{cj}} \\sin(\\lambda_{cj}\\theta_c),$$

with $T$ the hard constraint (if any), trainable $a$ (the stress intensity factors,
starting at 0) and the cut-off $\\chi(t) = (1 - t^2)^4$ for $t < 1$, 0 beyond ($C^3$, a
polynomial in $\\rho^2$, so smooth at the corner). `corner` finds the corner's wedge from
the shape and the largest radius $R$ whose disk meets no boundary but the corner's two
straight edges, so every $S_{cj}$ vanishes on the whole boundary and a hard constraint
stays exact. With $s = \\rho^{\\lambda}\\sin\\lambda\\theta$ harmonic,
$\\Delta(\\chi s) = 2\\nabla\\chi\\cdot\\nabla s + s\\Delta\\chi$ stays bounded
($\\nabla\\chi = O(\\rho)$), so the residual does. Nothing here knows the solution: the
exponents come from the angle, the coefficients from training.

**At the corner.** Each $S$ is continuous with value 0 at $\\rho = 0$, where its true
derivatives of order $k > \\lambda$ are infinite; there the rules give 0 for every
derivative (`safe_atan2`, a guarded power), and at every $\\rho > 0$ they are exact
(tests: Taylor engine vs autodiff, float64, rtol 1e-10, at $\\rho = 10^{-1} \\dots 10^{-6}$).
Derivatives of order $k$ grow like $\\rho^{\\lambda - k}$, so a collocation point at
$\\rho = 10^{-6}$ sees $|\\nabla^2 S| \\sim 10^{8}$ (their harmonic combination cancels
to rounding in the Laplacian).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._constraint import AbstractFieldConstraint, AbstractHardConstraint
from .._types import Point
from ..diffops import jets, safe_atan2
from .base import AbstractShape, Part, all_parts, check_point
from .primitives2d import Segment


class Corner(eqx.Module):
    """The singular functions $S_j(x)$, $j = 1 \\dots J$, of one corner (module docstring).

    **Arguments:**
    - `center`: the corner $c$ (world coordinates).
    - `start`: the direction angle (radians) of the edge where $\\theta = 0$; the domain
      lies counter-clockwise from it.
    - `angle`: the interior angle $\\omega \\in (0, 2\\pi]$.
    - `radius`: the cut-off radius $R$.
    - `exponents`: $(\\lambda_1, \\dots, \\lambda_J)$, $\\lambda_j = j\\pi/\\omega$.
    """

    center: tuple[float, float] = eqx.field(static=True)
    start: float = eqx.field(static=True)
    angle: float = eqx.field(static=True)
    radius: float = eqx.field(static=True)
    exponents: tuple[float, ...] = eqx.field(static=True)

    def __call__(self, x: Point) -> Float[Array, " J"]:
        v = (x[:2] - jnp.asarray(self.center, x.dtype)) / self.radius
        # rotate so the interior bisector is the +x axis: the branch cut of atan2 then
        # lies on the exterior bisector, outside the domain near the corner
        mid = self.start + 0.5 * self.angle
        cm, sm = math.cos(mid), math.sin(mid)
        along, across = cm * v[0] + sm * v[1], cm * v[1] - sm * v[0]
        theta = safe_atan2(across, along) + 0.5 * self.angle
        t2 = v[0] * v[0] + v[1] * v[1]
        pos = t2 > 0
        safe = jnp.where(pos, t2, 1.0)
        q = 1.0 - t2
        q2 = q * q  # (1 - t2)^4 by products (see pinnkit.expr._eval._int_pow)
        cut = jnp.where(t2 < 1.0, q2 * q2, 0.0)
        # rho^lam = (t2)^(lam/2), guarded at the corner (value 0, derivatives 0 there)
        s = [jnp.where(pos, safe ** (0.5 * lam), 0.0) * jnp.sin(lam * theta) for lam in self.exponents]
        return cut * jnp.stack(s)


class CornerEnrichment(eqx.Module):
    """$y_k = T(x, y)_k + \\sum_{c,j} a_{k c j} S_{c j}(x)$ for the outputs ``outputs``
    (module docstring); a network ``transform``, not itself an
    `pinnkit.physics.AbstractHardConstraint` (it prescribes nothing; it keeps ``base``'s
    conditions exact because every $S_{cj}$ vanishes on the boundary).

    **Arguments:**
    - `corners`: the `Corner` s (from `corner`).
    - `outputs`: the output indices enriched.
    - `coef`: the trainable coefficients, ``(len(outputs), total terms)``; zeros to start.
    - `base`: the transform applied first (a hard constraint, e.g. `DistanceDirichlet`),
      or None.
    """

    corners: tuple[Corner, ...]
    outputs: tuple[int, ...] = eqx.field(static=True)
    coef: Float[Array, "k terms"]
    base: AbstractHardConstraint | None = None

    def __check_init__(self):
        terms = sum(len(c.exponents) for c in self.corners)
        if not self.corners or self.coef.shape != (len(self.outputs), terms):
            raise ValueError(f"CornerEnrichment: coef must have shape ({len(self.outputs)}, {terms}) "
                             f"for {len(self.corners)} corners: actual={self.coef.shape}")

    def features(self, x: Point) -> Float[Array, " terms"]:
        """Every corner's $S_{cj}(x)$, concatenated."""
        return jnp.concatenate([c(x) for c in self.corners])

    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        out = y if self.base is None else self.base(x, y)
        add = self.coef.astype(x.dtype) @ self.features(x)
        return out.at[jnp.asarray(self.outputs)].add(add)


@jets.taylor_rule(CornerEnrichment)
def _corner_enrichment_jet(ce: CornerEnrichment, x_jet: jets.Jet, y_jet: jets.Jet, *, plan: jets.Plan,
                           keep) -> jets.Jet:
    # the base's own rule, plus a linear map of features of x alone (`jets.of_point`): the
    # generic rule would differentiate the base's distance functions along y's rows too
    out = y_jet if ce.base is None else jets.propagate(ce.base, x_jet, y_jet, plan=plan)
    add = jets.linear(jets.of_point(ce.features, x_jet, plan), ce.coef.astype(x_jet.value.dtype), None)
    return add_at(out, add, ce.outputs, plan)


def add_at(out: jets.Jet, add: jets.Jet, outputs: tuple[int, ...], plan: jets.Plan) -> jets.Jet:
    """``out`` with ``add`` added to its rows ``outputs``, row by row of the jet (an
    enrichment's Taylor rule: the base's jet plus features of the point alone)."""
    idx = jnp.asarray(outputs)
    zero = jnp.zeros_like(out.value)
    first = out.first
    if add.first is not None:
        first = jnp.zeros((len(plan.dirs), *zero.shape), zero.dtype) if first is None else first
        first = first.at[:, idx].add(add.first)
    rest = dict(out.rest)
    for k, r in add.rest.items():
        rest[k] = rest.get(k, zero).at[idx].add(r)
    return jets.Jet(out.value.at[idx].add(add.value), first, rest)


def _segment_world(part: Part) -> tuple[np.ndarray, np.ndarray]:
    f = part.frame
    r, b = np.asarray(f.rotation), np.asarray(f.shift)
    return tuple(f.scale * (r @ np.asarray(p)) + b for p in (part.atom.a, part.atom.b))


def _distances(parts: tuple[Part, ...], ends: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """``(points, parts)``: the distance from each point to each part, the straight ones
    (world ends ``ends[i]``, nan for a curved part) in closed form for all at once, each
    curved one by one batched call of its own ``distance``."""
    a, e = ends[:, 0], ends[:, 1] - ends[:, 0]
    ca = pts[:, None, :] - a[None]
    with np.errstate(invalid="ignore", divide="ignore"):  # a point-like segment: nan, as "through"
        h = np.clip((ca[..., 0] * e[:, 0] + ca[..., 1] * e[:, 1]) / (e[:, 0] * e[:, 0] + e[:, 1] * e[:, 1]),
                    0.0, 1.0)
    r = ca - h[..., None] * e
    out = np.sqrt(r[..., 0] * r[..., 0] + r[..., 1] * r[..., 1])
    dtype = jnp.asarray(0.0).dtype
    for i, p in enumerate(parts):
        if not isinstance(p.atom, Segment):
            out[:, i] = np.asarray(jax.vmap(p.distance)(jnp.asarray(pts, dtype)))
    return out


def wedges(shape: AbstractShape, points, what: str = "corner") -> list[tuple[float, float, float]
                                                                      | ValueError]:
    """The wedge of the 2-D ``shape`` at each of ``points`` (``(n, 2)``), as `corner` finds
    it: ``(start, omega, r_max)``, or the `ValueError` `corner` raises there (not on the
    boundary, on a curved part, where separate pieces touch, a straight boundary).

    One pass over the parts for all points: their distances to every part in one batched
    array (chunks of $2^{20}$ entries), then the probes of all points' edges and sectors in
    two batched ``sdf`` calls; the per-point work is over the few parts through it."""
    with jax.ensure_compile_time_eval():
        return _wedges(shape, np.asarray(points, float).reshape(-1, 2), what)


def batched_sdf(shape: AbstractShape, points) -> np.ndarray:
    """``shape.sdf`` at each of ``points`` (``(n, d)``, n >= 0) by one vmapped call, the batch
    padded to a power of two so that the searches' successive probes reuse its compilation."""
    if not len(points):
        return np.zeros(0)
    x = np.asarray(points, float).reshape(len(points), -1)
    pad = np.zeros((1 << (len(x) - 1).bit_length(), x.shape[1]))
    pad[:len(x)] = x
    with jax.ensure_compile_time_eval():
        return np.asarray(jax.vmap(shape.sdf)(jnp.asarray(pad, jnp.asarray(0.0).dtype)))[:len(x)]


def _wedges(shape: AbstractShape, pts: np.ndarray, what: str) -> list:
    lo, hi = shape.bbox()
    tol = 1e-9 * math.dist(lo, hi)
    eps = 1e-6 * math.dist(lo, hi)
    parts = all_parts(shape)
    ends = np.array([_segment_world(p) if isinstance(p.atom, Segment) else np.full((2, 2), np.nan)
                     for p in parts]).reshape(-1, 2, 2)
    out: list = [None] * len(pts)
    found = {}  # point index -> (rays [[angle, extent], ...], r_max)
    rows = max(1, 2 ** 20 // max(len(parts), 1))
    for lo_i in range(0, len(pts), rows):
        d = _distances(parts, ends, pts[lo_i:lo_i + rows])
        beyond = d > tol  # not through the point (nan, a point-like segment, counts as through)
        far_all = np.where(beyond, d, np.inf).min(axis=1)
        for k in range(len(d)):
            i, c, far = lo_i + k, pts[lo_i + k], float(far_all[k])
            dirs = []  # (angle, extent) of each edge from c
            for j in np.flatnonzero(~beyond[k]):
                if not isinstance(parts[j].atom, Segment):
                    out[i] = ValueError(f"{what}.at: {c.tolist()} lies on the curved boundary part "
                                        f"{parts[j].name!r}; a corner enrichment needs two straight edges "
                                        "meeting at the point")
                    break
                for e in ends[j]:
                    length = float(np.linalg.norm(e - c))
                    if length > tol:
                        dirs.append((math.atan2(e[1] - c[1], e[0] - c[0]) % (2 * math.pi), length))
            if out[i] is not None:
                continue
            if not dirs:
                out[i] = ValueError(f"{what}.at: {c.tolist()} is not on the shape's boundary (nearest "
                                    f"boundary part at distance {far:.4g}); give the coordinates of a corner")
                continue
            rays: list[list[float]] = []  # merged directions: [angle, longest extent]
            for ang, length in sorted(dirs):
                if rays and abs(ang - rays[-1][0]) < 1e-9:
                    rays[-1][1] = max(rays[-1][1], length)
                else:
                    rays.append([ang, length])
            if len(rays) > 1 and abs(rays[0][0] + 2 * math.pi - rays[-1][0]) < 1e-9:
                rays[0][1] = max(rays[0][1], rays.pop()[1])
            found[i] = rays, min(far, *(r[1] for r in rays))

    def probe(items):  # sdf at c + 0.5 r_max (cos a, sin a) for each (point index, angle a)
        return batched_sdf(shape, [pts[i] + 0.5 * found[i][1] * np.asarray([math.cos(a), math.sin(a)])
                                   for i, a in items])

    # a ray is an edge only where the shape's boundary is (not a wall CSG removed)
    items = [(i, r[0]) for i, (rays, _) in found.items() for r in rays]
    on = iter(np.abs(probe(items)) <= eps)
    for i, (rays, r_max) in list(found.items()):
        found[i] = [r for r in rays if next(on)], r_max
    # the sectors between consecutive edges; within r_max the shape is a union of them
    sectors = []
    for i, (rays, _) in found.items():
        for k, (ang, _) in enumerate(rays):
            width = (rays[(k + 1) % len(rays)][0] - ang) % (2 * math.pi) or 2 * math.pi
            sectors.append((i, ang, width))
    inner = iter(probe([(i, ang + 0.5 * width) for i, ang, width in sectors]) < 0)
    inside: dict[int, list] = {i: [] for i in found}
    for (i, ang, width), ok in zip(sectors, inner, strict=True):
        if ok:
            inside[i].append((ang, width))
    for i, (rays, r_max) in found.items():
        c = pts[i]
        if not rays:
            out[i] = ValueError(f"{what}.at: {c.tolist()} is not on the shape's boundary (the edges through "
                                "it lie inside the shape); give the coordinates of a corner")
        elif len(inside[i]) != 1:
            out[i] = ValueError(f"{what}.at: {c.tolist()} is where {len(inside[i])} separate sectors of the "
                                "shape meet, not a corner of one region; enrich corners where exactly two "
                                "edges bound the shape")
        elif abs(inside[i][0][1] - math.pi) < 1e-9:
            out[i] = ValueError(f"{what}.at: {c.tolist()} is not a corner: the boundary is straight there "
                                "(interior angle 180 degrees, no singularity)")
        else:
            out[i] = (float(inside[i][0][0]), float(inside[i][0][1]), float(r_max))
    return out


def corner(shape: AbstractShape, at, radius: float | None = None, terms: int | None = None,
           what: str = "corner") -> Corner:
    """The `Corner` of ``shape`` at the point ``at``, found from the shape itself.

    The boundary parts through ``at`` must be straight segments (a polygon's edges, a
    rectangle's sides, after any CSG and similarity); the wedge between them that lies
    inside the shape gives the angle $\\omega$, and the largest admissible radius
    $R_{max}$ is the distance from ``at`` to the nearest boundary part not through it
    (and to the edges' far ends), so that the cut-off disk meets only the two edges.

    **Arguments:**
    - `radius`: the cut-off radius $R \\le R_{max}$ (default $R_{max}$).
    - `terms`: how many $\\lambda_j = j\\pi/\\omega$ (default: those with $\\lambda_j < 2$
      that are not integers, the terms that keep $w \\notin H^2$: two at the L-shape's
      $\\omega = 3\\pi/2$, $\\lambda = 2/3, 4/3$).
    - `what`: the config key named in errors.

    Raises `ValueError` (naming ``what``) if ``at`` is not on the boundary, lies on a
    curved part, is not a corner (a straight boundary there), is where separate
    pieces of the shape touch, or if ``radius`` exceeds $R_{max}$ or ``terms`` < 1, or if
    the shape is not 2-D.
    """
    # the geometry is probed with concrete numbers even when the network is built under
    # a trace (the memory plan builds it inside ``eqx.filter_eval_shape``)
    with jax.ensure_compile_time_eval():
        return _corner(shape, at, radius, terms, what)


def _corner(shape: AbstractShape, at, radius: float | None, terms: int | None, what: str) -> Corner:
    if not isinstance(shape, AbstractShape) or shape.dim != 2:
        raise ValueError(f"{what}: a corner enrichment needs a 2-D geometry shape (polygon, CSG of "
                         f"2-D primitives), not {type(shape).__name__} with coordinates {shape.coords}")
    c = np.asarray(check_point(at, 2, f"{what}.at"))
    w = _wedges(shape, c[None], what)[0]
    if isinstance(w, ValueError):
        raise w
    start, omega, r_max = w
    if radius is None:
        radius = r_max
    elif not (math.isfinite(float(radius)) and 0 < float(radius) <= r_max * (1 + 1e-12)):
        raise ValueError(f"{what}.radius: {radius!r} must be > 0 and at most {r_max:.6g}, the distance from "
                         "the corner to the nearest boundary beyond its two edges (the enrichment must "
                         "vanish on the whole boundary); lower it or omit it")
    lams = [j * math.pi / omega for j in range(1, 64)]
    if terms is None:
        lams = [lam for lam in lams if lam < 2 and abs(lam - round(lam)) > 1e-9]
        if not lams:
            raise ValueError(f"{what}: the corner at {c.tolist()} (interior angle {math.degrees(omega):.6g} "
                             f"degrees, lambda_1 = {math.pi / omega:.4g}) has no singular term below r^2: "
                             "the solution is regular enough there; remove it or set terms explicitly")
    elif not (isinstance(terms, int) and 1 <= terms <= len(lams)):
        raise ValueError(f"{what}.terms: expected an integer from 1 to {len(lams)}: actual={terms!r}")
    else:
        lams = lams[:terms]
    return Corner((float(c[0]), float(c[1])), float(start), float(omega), float(radius), tuple(lams))


def enrich(domain, out_names: tuple[str, ...], specs, base: AbstractHardConstraint | None = None,
           dtype=jnp.float32, key: str = "network.singular") -> CornerEnrichment:
    """A `CornerEnrichment` from ``network.singular`` entries (anything with ``at``,
    ``radius``, ``terms`` and ``fields``: the config's `CornerConfig`), applied after
    ``base``, its coefficients zeros of ``dtype``. Raises `ValueError` naming ``key.N``."""
    if isinstance(base, AbstractFieldConstraint):
        raise ValueError(
            f"{key}: the problem's hard constraint differentiates the network (a velocity that "
            "is the curl of a stream function), and the corner functions would be added to its "
            "value only; remove network.singular or the constraint's option (hard_velocity: stream)")
    corners, fields = [], None
    for i, s in enumerate(specs):
        corners.append(corner(domain, s.at, s.radius, s.terms, what=f"{key}.{i}"))
        mine = tuple(s.fields) or tuple(out_names)
        bad = sorted(set(mine) - set(out_names))
        if bad:
            raise ValueError(f"{key}.{i}.fields: {bad} are not fields of the problem; its fields are "
                             f"{list(out_names)}")
        if fields is not None and set(mine) != set(fields):
            raise ValueError(f"{key}.{i}.fields: every corner must enrich the same fields ({list(fields)}); "
                             f"got {list(mine)}")
        fields = mine
    outputs = tuple(sorted(out_names.index(f) for f in fields))
    terms = sum(len(c.exponents) for c in corners)
    return CornerEnrichment(tuple(corners), outputs, jnp.zeros((len(outputs), terms), dtype), base)
