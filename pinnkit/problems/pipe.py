r"""Checks of a flow through a pipe (issue 33's mesh pipe, `scripts/make_meshes.py`
``bent_pipe``): the volume flux through cross-sections and the distance of a section's
profile from Poiseuille's.

A cross-section is the disk of radius $R$ about ``center`` perpendicular to the unit
``normal`` (the centre line's direction there). Its rule (`disk_rule`) is Gauss–Legendre in
the radius (the area element $r\,dr$ included) times the trapezoidal rule in the angle,
`pinnkit.physics.sections.unit_disk_rule` scaled by $R$ (the training term's): exact for the flux of a
profile polynomial in $r$ of degree $2n_r - 2$ and for any angular mode below
$n_\theta$. For incompressible flow with no-slip walls every section carries the inflow's
flux $Q$; far from a bend a steady Stokes or low-Re flow is Poiseuille's,
$u_P(r) = \frac{2Q}{\pi R^2}\,(1 - r^2/R^2)$ along the normal.

`pipe_flow` is the problem: steady incompressible flow (Navier–Stokes, or Stokes with
``convection: false``) through a closed 3-D shape whose boundary has an inflow cap, an
outflow cap and a wall, e.g. a triangle mesh whose STL names them
(`pinnkit.geometry.TriangleMesh`), as in ``configs/pipe_mesh.yaml``:

```yaml
problem:
  name: pipe_flow
  params:
    domain: {mesh: {file: meshes/bent_pipe.stl}}   # solids wall, inlet, outlet
    Q: 0.3927
    nu: 0.05
    sections: [[[-1.5, 0, 0], [1, 0, 0]], [[1.5, 3.5, 0], [0, 1, 0]]]   # [center, normal]
    far: [0, 1]          # the sections whose profile is compared with Poiseuille's
    flux_sections: [[[-0.75, 0, 0], [1, 0, 0]]]   # a term "flux": Q through these (SectionFlux)
```
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import jax.numpy as jnp
import numpy as np

from ..errors import ConfigError, name_list
from ..errors import did_you_mean as _suggest
from ..geometry.mesh import described
from ..physics.flow import continuity_residual, momentum_residual, velocity_terms
from ..physics.problem import Problem
from ..physics.sections import SectionFlux, section_frame, unit_disk_rule
from ..physics.terms import Equation
from .expression import read_constant, read_domain

KEY = "problem.params"
VELOCITY = ("u", "v", "w")


def disk_rule(center, normal, radius: float, n_r: int = 16, n_theta: int = 64):
    """Points ``(n_r * n_theta, 3)``, weights (summing to $\\pi R^2$) and radii of the
    cross-section's rule (module docstring)."""
    c = np.asarray(center, np.float64)
    n = np.asarray(normal, np.float64)
    if c.shape != (3,) or n.shape != (3,) or not np.isfinite(c).all() or not np.linalg.norm(n) > 0:
        raise ValueError(f"a pipe section needs a 3-D center and a non-zero 3-D normal: actual "
                         f"center={center!r}, normal={normal!r}")
    if not (np.isfinite(radius) and radius > 0):
        raise ValueError(f"a pipe section's radius must be > 0: actual={radius!r}")
    _, e1, e2 = section_frame(n)
    nodes, w = unit_disk_rule(n_r, n_theta)  # the training term's rule, scaled by the radius
    pts = c[None] + radius * (nodes[:, :1] * e1[None] + nodes[:, 1:] * e2[None])
    return pts, radius**2 * w, radius * np.hypot(nodes[:, 0], nodes[:, 1])


def section_flux(predict, center, normal, radius: float, n_r: int = 16, n_theta: int = 64) -> float:
    """$\\int u\\cdot n\\,dA$ over the cross-section; ``predict(points (n, 3)) -> (n, m)``
    with the velocity in the first three columns."""
    pts, w, _ = disk_rule(center, normal, radius, n_r, n_theta)
    n = np.asarray(normal, np.float64) / np.linalg.norm(normal)
    u = np.asarray(predict(pts), np.float64)[:, :3]
    return float(np.sum(w * (u @ n)))


def poiseuille_error(predict, center, normal, radius: float, n_r: int = 16, n_theta: int = 64) -> float:
    """$\\max |u\\cdot n - u_P(r)| / \\max u_P$ on the section's rule points, $u_P$ the
    Poiseuille profile with the section's own flux (module docstring): 0 for a developed
    flow, whatever its flux."""
    pts, w, r = disk_rule(center, normal, radius, n_r, n_theta)
    n = np.asarray(normal, np.float64) / np.linalg.norm(normal)
    un = np.asarray(predict(pts), np.float64)[:, :3] @ n
    peak = 2 * float(np.sum(w * un)) / (np.pi * radius**2)
    if peak == 0:
        return float("inf") if np.any(un) else 0.0
    return float(np.max(np.abs(un - peak * (1 - (r / radius) ** 2))) / abs(peak))


# ------------------------------------------------------------------------ the problem


def cap_geometry(domain, piece: str):
    """``(center, outward unit normal, radius)`` of a flat circular cap ``piece`` of a
    triangle mesh: the area-weighted centroid and normal of its triangles, and the largest
    distance of a vertex from the centre (the circumradius of a polygonal cap)."""
    from ..geometry.mesh import MeshSurface

    parts = domain.piece_parts(piece)
    if not all(isinstance(p.atom, MeshSurface) for p in parts):
        raise ConfigError(f"{KEY}.inlet: the inflow profile's centre, direction and radius are read "
                          f"from a triangle mesh's cap; the boundary {piece!r} of this shape is no "
                          "mesh part. Give inlet_center, inlet_normal and radius in problem.params.")
    tri = np.concatenate([p.atom.triangles for p in parts])
    cross = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    area = 0.5 * np.linalg.norm(cross, axis=1)
    center = (area[:, None] * tri.mean(1)).sum(0) / area.sum()
    normal = cross.sum(0) / np.linalg.norm(cross.sum(0))
    radius = float(np.linalg.norm(tri.reshape(-1, 3) - center, axis=1).max())
    return center, normal, radius


def poiseuille_inflow(Q: float, center, direction, radius: float):
    r"""``g(x) -> (3,)``: $\frac{2Q}{\pi R^2}(1 - r^2/R^2)$ along the unit ``direction``,
    $r$ the distance of $x$ from the axis through ``center`` (the profile of flux $Q$)."""
    c, d = (jnp.asarray(np.asarray(v, np.float64)) for v in (center, direction))
    peak = 2 * Q / (math.pi * radius**2)

    def g(x):
        q = x - c.astype(x.dtype)
        dd = d.astype(x.dtype)
        r2 = jnp.sum(q * q) - jnp.dot(q, dd) ** 2
        return peak * (1 - r2 / radius**2) * dd

    return g


def do_nothing(piece: str, normal):
    r"""The traction-free outlet $\nu\,\partial_n\mathbf u - p\,\mathbf n$ on ``piece``
    (3 rows), ``normal(x, piece)`` the shape's outward normal."""

    def residual(f, c):
        n = normal(f.point, piece)
        rows = []
        for i, q in enumerate(VELOCITY):
            dn = sum(f.partial(q, x) * n[j] for j, x in enumerate(f.layout.spatial))
            rows.append(c["nu"] * dn - f["p"] * n[i])
        return jnp.stack(rows)

    return residual


def _point(v, key: str) -> np.ndarray:
    try:
        out = np.asarray(v, np.float64)
    except (TypeError, ValueError):
        out = np.zeros(0)
    if out.shape != (3,) or not np.isfinite(out).all():
        raise ConfigError(f"{key}: expected 3 finite numbers [x, y, z], got {v!r}.")
    return out


def _positive(v, key: str) -> float:
    """A number or constant expression (``pi/16``) > 0."""
    out = float("nan") if isinstance(v, bool) else read_constant(v, key)
    if not (math.isfinite(out) and out > 0):
        raise ConfigError(f"{key}: expected a finite number > 0, got {v!r}.")
    return out


def _sections(sections, key: str) -> list:
    """``[(center, unit normal)]`` from ``[[center], [normal]]`` rows of ``problem.params.<key>``."""
    if not isinstance(sections, list | tuple):
        raise ConfigError(f"{KEY}.{key}: expected a list of [center, normal], got {sections!r}.")
    out = []
    for i, sec in enumerate(sections):
        if not (isinstance(sec, list | tuple) and len(sec) == 2):
            raise ConfigError(f"{KEY}.{key}.{i}: expected [[x, y, z], [nx, ny, nz]] (a centre and "
                              f"the pipe's direction there), got {sec!r}.")
        c, n = _point(sec[0], f"{KEY}.{key}.{i}.0"), _point(sec[1], f"{KEY}.{key}.{i}.1")
        if not np.linalg.norm(n) > 0:
            raise ConfigError(f"{KEY}.{key}.{i}.1: the normal must not be zero.")
        out.append((c, n / np.linalg.norm(n)))
    return out


def pipe_metrics(predict, Q: float, sections, far, radius: float) -> dict:
    """``flux`` through each section and its relative deviation from $Q$ (``flux_error``,
    the largest; ``flux_spread``: (max - min)/Q), ``poiseuille_error`` of each section in
    ``far`` (`poiseuille_error`) and the largest of them."""
    flux = [section_flux(predict, c, n, radius) for c, n in sections]
    prof = [poiseuille_error(predict, *sections[k], radius) for k in far]
    return {"Q": Q, "flux": flux, "flux_error": max(abs(f / Q - 1) for f in flux),
            "flux_spread": (max(flux) - min(flux)) / Q, "far_sections": list(far),
            "poiseuille_errors": prof, "poiseuille_error": max(prof) if prof else None,
            "sections": [[c.tolist(), n.tolist()] for c, n in sections], "radius": radius}


def pipe_flow(
    domain: Mapping,
    Q: float,
    nu: float,
    sections: Sequence = (),
    far: Sequence[int] = (),
    convection: bool = True,
    inlet: str = "inlet",
    outlet: str = "outlet",
    wall: str | Sequence[str] = "wall",
    inlet_center: Sequence[float] | None = None,
    inlet_normal: Sequence[float] | None = None,
    radius: float | None = None,
    flux_sections: Sequence = (),
) -> Problem:
    r"""Steady flow through a pipe (module docstring): fields ``u, v, w, p``, terms
    ``momentum`` (3 rows), ``continuity``, the inflow (Poiseuille's profile of flux ``Q``,
    a Dirichlet term named after the inlet), no-slip on the wall (named after it) and the
    do-nothing outflow $\nu\,\partial_n\mathbf u - p\,\mathbf n = 0$ (named after the outlet).

    **Arguments:**
    - `domain`: a closed 3-D shape (a geometry tree, e.g. ``{mesh: {file: pipe.stl}}``)
      whose boundary names include ``inlet``, ``outlet`` and ``wall`` (the next three
      arguments rename them; ``wall`` may list several pieces). Every boundary must be one
      of them.
    - `Q`: the inflow's volume flux; `nu`: the kinematic viscosity.
    - `convection`: False drops $(\mathbf u\cdot\nabla)\mathbf u$ (steady Stokes).
    - `sections`: cross-sections ``[[center], [normal]]`` of radius ``radius`` through
      which ``summary.json`` reports the flux (`section_flux`); `far`: indices of those
      far from any bend, where the profile is compared with Poiseuille's (`poiseuille_error`).
    - `inlet_center`, `inlet_normal` (the inflow's direction), `radius`: the inflow
      profile's axis and radius; by default read from a mesh's inlet cap
      (`cap_geometry`: area-weighted centroid, inward normal, circumradius).
    - `flux_sections`: cross-sections ``[[center], [normal]]`` (radius ``radius``) on which
      a term ``flux`` (`pinnkit.physics.SectionFlux`) asks for the flux $Q$ along the
      normal: mass conservation as an integral, which the wall's soft no-slip alone lets
      leak (docs/navier_stokes.md "Flux through sections"). Put them between the checked
      `sections`, not on them, so that the check is not what was fitted.

    Boundary data enter as loss terms (a mesh's smooth distance is too rough for hard
    no-slip, docs/benchmarks.md "Mesh queries").
    """
    dom = read_domain(domain, f"{KEY}.domain")
    if getattr(dom, "dim", None) != 3 or "t" in dom.coords:
        raise ConfigError(f"{KEY}.domain: pipe_flow is steady and 3-D; give a closed 3-D shape "
                          "without t (e.g. {mesh: {file: pipe.stl}}).")
    walls = [wall] if isinstance(wall, str) else list(wall)
    boundaries = [p for p in dom.pieces() if p not in ("interior", "boundary")]
    where = described(dom)
    roles = {"inlet": [inlet], "outlet": [outlet], "wall": walls}
    for role, names in roles.items():
        for n in names:
            if n not in boundaries:
                raise ConfigError(
                    f"{KEY}.{role}: {where} has no boundary {n!r}.{_suggest(n, boundaries)} Its "
                    f"boundaries: {name_list(boundaries)}. Name the part in the file (an STL's "
                    f"'solid {n}' block), rename one with the mesh's names: {{old: {n}}}, or set "
                    f"{KEY}.{role} to one of them.")
    given = [n for names in roles.values() for n in names]
    if len(set(given)) != len(given):
        raise ConfigError(f"{KEY}: the inlet, outlet and wall must be different boundaries; got "
                          f"inlet {inlet!r}, outlet {outlet!r}, wall {walls!r}.")
    rest = [b for b in boundaries if b not in given]
    if rest:
        raise ConfigError(f"{KEY}: {where} has boundaries {name_list(rest)} that are neither inlet, "
                          f"outlet nor wall; list them under {KEY}.wall (no-slip).")
    Q, nu = _positive(Q, f"{KEY}.Q"), _positive(nu, f"{KEY}.nu")
    if inlet_center is None or inlet_normal is None or radius is None:
        c0, n0, r0 = cap_geometry(dom, inlet)
    center = _point(inlet_center, f"{KEY}.inlet_center") if inlet_center is not None else c0
    direction = _point(inlet_normal, f"{KEY}.inlet_normal") if inlet_normal is not None else -n0
    if not np.linalg.norm(direction) > 0:
        raise ConfigError(f"{KEY}.inlet_normal: expected a non-zero direction, got {inlet_normal!r}.")
    direction = direction / np.linalg.norm(direction)
    R = _positive(radius, f"{KEY}.radius") if radius is not None else r0
    secs = _sections(sections, "sections")
    far = list(far) if isinstance(far, list | tuple) else far
    if not isinstance(far, list) or not all(isinstance(k, int) and not isinstance(k, bool)
                                           and 0 <= k < len(secs) for k in far):
        raise ConfigError(f"{KEY}.far: expected indices into sections (0 to {len(secs) - 1}), got {far!r}.")

    terms = {
        "momentum": Equation(functools.partial(momentum_residual, velocity=VELOCITY,
                                               convection=bool(convection))),
        "continuity": Equation(functools.partial(continuity_residual, velocity=VELOCITY)),
        **velocity_terms({inlet: poiseuille_inflow(Q, center, direction, R),
                          **{w: None for w in walls}}, VELOCITY),
        outlet: Equation(do_nothing(outlet, dom.normal), where=outlet),
    }
    trained = _sections(flux_sections, "flux_sections")
    if trained:
        terms["flux"] = SectionFlux(np.asarray([[*c, *n, R, Q] for c, n in trained]))
    kind = "Navier-Stokes" if convection else "Stokes"
    return Problem(
        dom, (*VELOCITY, "p"), terms, coeffs={"nu": nu},
        metrics=(lambda predict: pipe_metrics(predict, Q, secs, far, R)) if secs else None,
        name="pipe_flow",
        description=f"steady {kind} flow through a pipe, flux {Q:g}, nu = {nu:g}, "
                    f"Re = {2 * Q / (math.pi * R * nu):.3g} (mean velocity x diameter / nu)",
    )
