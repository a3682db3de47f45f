"""Stokes corner modes: the singular flow at a re-entrant no-slip corner of a 2-D shape,
added to a flow's velocity and pressure with trainable coefficients.

Near a corner of interior angle $\\omega = 2\\alpha$ with no-slip on both edges, Stokes
flow is a sum of Dean & Montagnon's (1949) separable modes (Moffatt 1964): in polar
coordinates $(r, \\varphi)$ about the corner, $\\varphi = 0$ on the bisector, the stream
function $\\psi = r^{\\lambda + 1} f(\\varphi)$ with

- even modes $f = \\cos(\\lambda+1)\\varphi - \\frac{\\cos(\\lambda+1)\\alpha}{\\cos(\\lambda-1)\\alpha}
  \\cos(\\lambda-1)\\varphi$, where $\\sin 2\\lambda\\alpha = -\\lambda \\sin 2\\alpha$;
- odd modes $f = \\sin(\\lambda+1)\\varphi - \\frac{\\sin(\\lambda+1)\\alpha}{\\sin(\\lambda-1)\\alpha}
  \\sin(\\lambda-1)\\varphi$, where $\\sin 2\\lambda\\alpha = \\lambda \\sin 2\\alpha$

($f = f' = 0$ at $\\varphi = \\pm\\alpha$: no slip). The velocity $(\\partial_y\\psi,
-\\partial_x\\psi)$ is of order $r^{\\lambda}$; at a re-entrant corner ($\\omega > \\pi$) the
smallest $\\lambda$ is below 1 (0.5445 and 0.9085 at $\\omega = 3\\pi/2$), so the velocity's
gradient and the pressure $p \\sim r^{\\lambda - 1}$ are unbounded, which no smooth
network represents: on the backward-facing step and the L-bend the error of a plain
network spreads from that corner over the whole flow. The pressure that balances a mode
($\\nabla p = \\nu\\Delta\\mathbf u$: $p + i\\nu\\Delta\\psi$ is analytic) is
$p = 4\\lambda\\nu\\, r^{\\lambda-1}(D\\cos(\\lambda-1)\\varphi - C\\sin(\\lambda-1)\\varphi)$ for
$f = \\dots + C\\cos(\\lambda-1)\\varphi + D\\sin(\\lambda-1)\\varphi$.

`StokesCornerEnrichment` adds $\\sum_j a_j\\,(\\nabla^\\perp(\\chi\\psi_j), \\chi p_j)$ to
``(u, v, p)`` after a base constraint, with one trainable $a_j$ per mode (zero to start),
the cut-off $\\chi = (1 - r^2/R^2)^4$ of `pinnkit.geometry.singular` and $R$ the largest
radius whose disk meets only the corner's two edges. A curl, it is divergence-free; it
vanishes with its normal derivative on both edges and on the disk's rim, so every no-slip
condition of the base stays exact; inside the disk $\\nu\\Delta\\mathbf u - \\nabla p$ of the
added field is bounded (the cut-off's derivatives are $O(r)$ at the corner). Nothing here
knows the solution: the exponents come from the angle, the coefficients from training.
"""

from __future__ import annotations

import functools
import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._constraint import AbstractHardConstraint
from .._types import Point
from ..diffops import jets, safe_atan2
from .base import AbstractShape, all_parts
from .primitives2d import Segment
from .singular import _segment_world, add_at, batched_sdf, wedges


@functools.lru_cache(maxsize=4096)  # a shape's corners often share their angle
def stokes_exponents(omega: float, below: float = 2.0) -> tuple[tuple[float, str], ...]:
    """The real, non-integer Dean–Montagnon exponents $\\lambda \\in (0, $ ``below``$)$ of a
    no-slip wedge of interior angle ``omega`` (radians), each with its parity
    (``"even"``/``"odd"`` stream function about the bisector), smallest first. Found by
    bisection on a fine grid of $g(\\lambda) = \\sin\\lambda\\omega \\pm \\lambda\\sin\\omega$."""
    out = []
    for parity, sign in (("even", 1.0), ("odd", -1.0)):
        g = lambda lam, s=sign: math.sin(lam * omega) + s * lam * math.sin(omega)  # noqa: E731
        grid = np.linspace(1e-6, below, 4001)
        vals = np.sin(grid * omega) + sign * grid * math.sin(omega)
        for i in np.flatnonzero((vals[:-1] != 0) & (vals[:-1] * vals[1:] <= 0)):
            a, b, ga = float(grid[i]), float(grid[i + 1]), g(grid[i])
            for _ in range(200):
                m = 0.5 * (a + b)
                if m in (a, b):
                    break  # adjacent floats: no later step moves a or b
                gm = g(m)
                if ga * gm <= 0:
                    b = m
                else:
                    a, ga = m, gm
            lam = 0.5 * (a + b)
            if abs(lam - round(lam)) > 1e-6:
                out.append((float(lam), parity))
    return tuple(sorted(out))


class StokesCorner(eqx.Module):
    """The Stokes modes of one corner (module docstring).

    **Arguments:**
    - `center`: the corner (world coordinates).
    - `bisector`: the direction angle (radians) of the interior bisector.
    - `angle`: the interior angle $\\omega$.
    - `radius`: the cut-off radius $R$.
    - `modes`: ``((lambda, parity), ...)`` (`stokes_exponents`).
    - `nu`: the kinematic viscosity that scales the pressure.
    """

    center: tuple[float, float] = eqx.field(static=True)
    bisector: float = eqx.field(static=True)
    angle: float = eqx.field(static=True)
    radius: float = eqx.field(static=True)
    modes: tuple[tuple[float, str], ...] = eqx.field(static=True)
    nu: float = eqx.field(static=True)

    def __call__(self, x: Point) -> Float[Array, "3 J"]:
        """Rows ``u, v, p`` of every mode at ``x``: $\\nabla^\\perp(\\chi\\psi_j)$ and
        $\\chi p_j$, with $\\psi_j = R\\,(r/R)^{\\lambda+1} f(\\varphi)$ (velocity of order 1 at
        $r \\sim R$)."""
        d = (x[:2] - jnp.asarray(self.center, x.dtype)) / self.radius
        c, s = math.cos(self.bisector), math.sin(self.bisector)
        xi, eta = c * d[0] + s * d[1], c * d[1] - s * d[0]  # bisector frame
        t2 = d[0] * d[0] + d[1] * d[1]
        pos = t2 > 0
        safe = jnp.where(pos, t2, 1.0)
        phi = safe_atan2(eta, xi)
        q = 1.0 - t2
        inside = t2 < 1.0
        chi = jnp.where(inside, q * q * q * q, 0.0)
        dchi = jnp.where(inside, -8.0 * q * q * q, 0.0)  # d chi / d(t2) times 2, per unit d
        half = 0.5 * self.angle
        rows = []
        for lam, parity in self.modes:
            a1, a2 = lam + 1.0, lam - 1.0
            if parity == "even":
                k = -math.cos(a1 * half) / math.cos(a2 * half)
                f = jnp.cos(a1 * phi) + k * jnp.cos(a2 * phi)
                df = -a1 * jnp.sin(a1 * phi) - k * a2 * jnp.sin(a2 * phi)
                pres = -4.0 * lam * k * jnp.sin(a2 * phi)  # C = k, D = 0
            else:
                k = -math.sin(a1 * half) / math.sin(a2 * half)
                f = jnp.sin(a1 * phi) + k * jnp.sin(a2 * phi)
                df = a1 * jnp.cos(a1 * phi) + k * a2 * jnp.cos(a2 * phi)
                pres = 4.0 * lam * k * jnp.cos(a2 * phi)  # C = 0, D = k
            r_lam = jnp.where(pos, safe ** (0.5 * lam), 0.0)  # t^lam, 0 (and flat) at the corner
            psi = r_lam * jnp.sqrt(safe) * f  # t^(lam+1) f, in units of R (0 at the corner)
            cphi, sphi = jnp.where(pos, xi / jnp.sqrt(safe), 1.0), jnp.where(pos, eta / jnp.sqrt(safe), 0.0)
            # curl of t^(lam+1) f in the bisector frame: (d/d eta, -d/d xi)
            u_xi = r_lam * (a1 * f * sphi + df * cphi)
            u_eta = -r_lam * (a1 * f * cphi - df * sphi)
            u = c * u_xi - s * u_eta
            v = s * u_xi + c * u_eta
            # curl(chi psi) = chi curl(psi) + psi curl(chi); grad chi = dchi * d (per unit d)
            u_all = chi * u + psi * dchi * d[1]
            v_all = chi * v - psi * dchi * d[0]
            p_lam = jnp.where(pos, safe ** (0.5 * lam - 0.5), 0.0)  # t^(lam-1)
            p_all = chi * (self.nu / self.radius) * p_lam * pres
            rows.append(jnp.stack([u_all, v_all, p_all]))
        return jnp.stack(rows, axis=-1)


class StokesCornerEnrichment(AbstractHardConstraint):
    """``(u, v, p) = T(x, y) + \\sum_j a_j m_j(x)`` with $m_j$ the corners' modes
    (`StokesCorner`) and $T$ the base constraint, whose conditions stay exact (module
    docstring). ``velocity``, ``pressure``: the output indices of ``(u, v)`` and ``p``;
    ``coef``: the trainable $a_j$, ``(modes,)``."""

    corners: tuple[StokesCorner, ...]
    base: AbstractHardConstraint
    coef: Float[Array, " modes"]
    velocity: tuple[int, int] = eqx.field(static=True, default=(0, 1))
    pressure: int = eqx.field(static=True, default=2)

    def __check_init__(self):
        modes = sum(len(c.modes) for c in self.corners)
        if not self.corners or self.coef.shape != (modes,):
            raise ValueError(f"StokesCornerEnrichment: coef must have shape ({modes},) for "
                             f"{len(self.corners)} corners: actual={self.coef.shape}")

    def features(self, x: Point) -> Float[Array, " rows"]:
        """Every mode's ``(u, v, p)``, rows ``u`` of all modes, then ``v``, then ``p``."""
        return jnp.concatenate([c(x) for c in self.corners], axis=-1).reshape(-1)

    def weight(self, dtype) -> Float[Array, "3 rows"]:
        """The map from `features` to the added ``(u, v, p)``: one $a_j$ per mode, shared by
        its three rows."""
        return jnp.kron(jnp.eye(3, dtype=dtype), self.coef.astype(dtype)[None, :])

    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        idx = jnp.asarray((*self.velocity, self.pressure))
        return self.base(x, y).at[idx].add(self.weight(x.dtype) @ self.features(x))


@jets.taylor_rule(StokesCornerEnrichment)
def _stokes_corner_jet(se: StokesCornerEnrichment, x_jet: jets.Jet, y_jet: jets.Jet, *,
                       plan: jets.Plan, keep) -> jets.Jet:
    # the base's own rule plus a linear map of features of x alone (as for CornerEnrichment)
    out = jets.propagate(se.base, x_jet, y_jet, plan=plan)
    add = jets.linear(jets.of_point(se.features, x_jet, plan), se.weight(x_jet.value.dtype), None)
    return add_at(out, add, (*se.velocity, se.pressure), plan)


def reentrant_corners(shape: AbstractShape, walls: set[str], nu: float) -> tuple[StokesCorner, ...]:
    """Every re-entrant corner ($\\omega > \\pi$) of ``shape`` whose two edges both belong to
    boundaries in ``walls`` (no-slip), as a `StokesCorner` with the largest admissible
    cut-off radius and its modes below $\\lambda = 2$; empty if there is none."""
    # One pass over the parts: each vertex's incident segments (names, far ends). Only a
    # vertex whose edges are all walls and whose interior side is the reflex one (probed by
    # one batched sdf call) goes on to `wedges`, `corner`'s search for all of them at once
    # (one corner at a time, each scanning every part, took 32 s at 500 reflex vertices).
    lo, hi = shape.bbox()
    eps = 1e-6 * math.dist(lo, hi)
    ends: dict[tuple[float, float], list[tuple[str, np.ndarray]]] = {}
    for p in all_parts(shape):
        if isinstance(p.atom, Segment):
            a, b = _segment_world(p)
            for v, w in ((a, b), (b, a)):
                ends.setdefault((round(float(v[0]), 9), round(float(v[1]), 9)), []).append((p.name, w - v))
    verts, probes = [], []
    for key, inc in ends.items():
        if not all(name in walls for name, _ in inc):
            continue
        v = np.asarray(key)
        if len(inc) == 2:  # probe along the bisector of the smaller angle: outside means reflex
            u = sum(e / np.linalg.norm(e) for _, e in inc)
            if np.linalg.norm(u) < 1e-12:
                continue  # a straight boundary there
            verts.append(v)
            probes.append(v + eps * u / np.linalg.norm(u))
        else:  # shared walls or more edges: leave it to `corner`
            verts.append(v)
            probes.append(v + np.inf)
    if not verts:
        return ()
    finite = np.isfinite(np.asarray(probes)).all(axis=1)
    sdf = batched_sdf(shape, np.where(finite[:, None], probes, 0.0))
    cand = [v for v, ok, d in zip(verts, finite, sdf, strict=True) if not (ok and d < 0)]  # not convex
    found = []
    for v, w in zip(cand, wedges(shape, np.asarray(cand).reshape(-1, 2)), strict=True):
        if isinstance(w, ValueError):
            continue  # not a corner of one region
        start, angle, radius = w
        if angle <= math.pi + 1e-9:
            continue
        modes = stokes_exponents(angle)
        if modes:
            found.append(StokesCorner((float(v[0]), float(v[1])), start + 0.5 * angle, angle, radius, modes,
                                      float(nu)))
    return tuple(found)


def local_radii(shape: AbstractShape, corners: tuple[StokesCorner, ...],
                cover: float = 0.15) -> tuple[float, ...]:
    r"""A radius per corner for a weight that stays local: $R_c = \min(R_{c,max}, \ell)$ with
    $\ell$ the radius at which the corners' sectors, $\sum_c \tfrac12\omega_c\ell^2$, cover the
    fraction ``cover`` of the shape's area (its interior's share of the bounding box,
    `AbstractShape.acceptance`: closed-form or the sampler's memoised Sobol estimate),
    $R_{c,max}$ the corner's largest admissible radius (`StokesCorner.radius`)."""
    lo, hi = shape.bbox()
    area = shape.acceptance("interior") * math.prod(b - a for a, b in zip(lo, hi, strict=True))
    ell = math.sqrt(cover * area / sum(0.5 * c.angle for c in corners))
    return tuple(min(c.radius, ell) for c in corners)
