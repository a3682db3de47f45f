r"""Steady incompressible flow on any 2-D shape written in the config (issue 36).

$$(\mathbf u\cdot\nabla)\mathbf u + \nabla p - \nu\Delta\mathbf u = 0, \qquad \nabla\cdot\mathbf u = 0$$

on a shape of `pinnkit.geometry` (density 1, kinematic pressure $p$). The velocity is
given on the named boundaries listed in ``velocity`` (no-slip walls, inflow profiles, a
moving lid); every other boundary is a do-nothing outflow
$\nu\,\partial_n\mathbf u - p\,\mathbf n = 0$ — the same split as the finite-element
solver `pinnkit.solvers.fem_ns`, which gives the problem its field reference
(``fem_reference: true``). With the velocity given on the whole boundary the pressure is
fixed only up to a constant: errors then compare it less its mean (``gauge``).

```yaml
problem:
  name: incompressible_flow
  params:
    domain: {difference: [{rectangle: {lower: [0, 0], upper: [3, 1],
                                       names: {left: inlet, right: outlet, bottom: walls, top: walls}}},
                          {disk: {center: [0.7, 0.5], radius: 0.15, name: obstacle}}]}
    nu: 0.02
    velocity: {inlet: ["4*y*(1 - y)", 0], walls: 0, obstacle: 0}   # the rest: outflow
    fem_reference: true
```
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

from .._host import HostFunction
from ..errors import ConfigError, name_list
from ..errors import did_you_mean as _suggest
from ..expr import ExprError, Resolver, Symbols, host_function, point_function
from ..geometry.distance import DistanceDirichlet, normalised
from ..geometry.domains import SpaceTime
from ..geometry.stokes_corner import StokesCornerEnrichment, local_radii, reentrant_corners
from ..geometry.stream import curl_lifting, stream_velocity
from ..physics.flow import inscribed_circles
from ..physics.problem import Problem
from ..physics.terms import CircleFlux, Dirichlet, Equation
from .expression import broadcast as _broadcast
from .expression import read_constant as _constant
from .expression import read_domain as _domain
from .expression import read_mapping as _mapping
from .navier_stokes import continuity_residual, momentum_residual

KEY = "problem.params"


def do_nothing(piece: str, normal):
    r"""The outflow residual $\nu\,\partial_n\mathbf u - p\,\mathbf n$ on ``piece`` (2 rows),
    ``normal(x, piece) -> (2,)`` the domain's outward normal."""

    def residual(f, c):
        n = normal(f.point, piece)
        dn = [f.partial(q, "x") * n[0] + f.partial(q, "y") * n[1] for q in ("u", "v")]
        return jnp.stack([c["nu"] * dn[0] - f["p"] * n[0], c["nu"] * dn[1] - f["p"] * n[1]])

    return residual


def _fem_velocity(components, params):
    g = host_function(components, ("x", "y"), params)

    def velocity(x, y, m):  # `fem_ns` passes NumPy arrays or NGSolve coefficient functions
        try:
            return g(x, y, m)
        except KeyError as e:
            raise ConfigError(
                f"{KEY}.velocity: the function {e.args[0]!r} has no finite-element counterpart "
                "(the FEM reference takes exp, sin, cos, tan, sqrt, log, sinh, cosh, tanh and "
                "arithmetic). Write the profile with those, or set fem_reference: false."
            ) from None

    return velocity


def fem_mesh_size(domain) -> float:
    """The default ``fem_maxh``: 1/40 of the shape's shorter bounding-box side."""
    lo, hi = domain.bounds()
    return float(min(b - a for a, b in zip(lo, hi, strict=True))) / 40


_CURLS = {"stream": stream_velocity, "curl_lifting": curl_lifting}
"""The ``hard_velocity`` options built on a stream function's lifting (`pinnkit.geometry.stream`)."""


def _corner_maxh(value, maxh: float) -> float | None:
    """``fem_corner_maxh``'s element size: ``"auto"`` is ``maxh / 25``, null none."""
    if value == "auto":
        return maxh / 25
    if value is None:
        return None
    if isinstance(value, str):  # YAML reads 3e-5 (no dot) as a string
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ConfigError(f"{KEY}.fem_corner_maxh: the reference mesh's element size at re-entrant "
                          f"corners, 'auto' (the default: fem_maxh / 25), a length > 0 or null (no "
                          f"local size); got {value!r}.")
    return float(value)


def _enforced(exact: tuple[str, ...], hard_velocity: str, terms: dict) -> tuple[str, ...]:
    """The terms the hard constraint makes redundant: the given velocities', and with
    ``stream`` continuity and the circles' flux too (a curl has no divergence: their
    residuals are zero to rounding, yet each costs the network's jet at its points)."""
    if hard_velocity != "stream":
        return exact
    return (*exact, *(t for t in ("continuity", "flux") if t in terms))


def _corner_weighted(fn, corners, radii, beta: float):
    """``fn``'s residual times the product over ``corners`` of min(1, r/R)^beta, R the
    corner's entry of ``radii`` (``corner_weight``, ``corner_radius``)."""
    # one vector of corners (not a Python loop unrolled into the residual: a term each)
    centers = np.asarray([k.center for k in corners], float)  # (corners, 2)
    inv_r2 = 1.0 / np.asarray(radii, float) ** 2

    def residual(f, c):
        x, y = f.coord("x"), f.coord("y")
        cx, cy, s = (jnp.asarray(a, x.dtype) for a in (centers[:, 0], centers[:, 1], inv_r2))
        t2 = ((x - cx) ** 2 + (y - cy) ** 2) * s
        return fn(f, c) * jnp.prod(jnp.minimum(t2, 1.0) ** (0.5 * beta))

    return residual


def incompressible_flow(
    domain: Mapping,
    velocity: Mapping,
    nu: float | str | None = None,
    Re: float | str | None = None,
    parameters: Mapping | None = None,
    define: Mapping | None = None,
    fem_reference: bool = False,
    fem_maxh: float | None = None,
    fem_boundary_maxh: Mapping | None = None,
    fem_corner_maxh: float | str | None = "auto",
    fem_order: int = 3,
    flux_circles: int = 0,
    hard_velocity: str = "all",
    corner_modes: bool = False,
    corner_weight: float = 1.0,
    corner_radius: float | str = "auto",
    name: str = "incompressible_flow",
    description: str = "",
) -> Problem:
    r"""Steady 2-D incompressible Navier–Stokes on a shape (module docstring): fields
    ``u, v, p``, terms ``momentum`` (2 rows), ``continuity``, one Dirichlet term per
    boundary in ``velocity`` (named after it) and one do-nothing term per other boundary.

    **Arguments:**
    - `domain`: a 2-D shape of the geometry language (docs/geometry.md); its boundary
      names are the keys of ``velocity`` and the outflows.
    - `velocity`: ``{boundary: [u, v]}`` (expressions of ``x, y``, parameters and
      ``define`` helpers; one value for both components, so ``walls: 0`` is no-slip).
      Every boundary not listed is a do-nothing outflow.
    - `nu` or `Re`: the kinematic viscosity, or $\text{Re}$ with $\nu = 1/\text{Re}$
      (velocity and length scales of order 1); exactly one.
    - `parameters`, `define`: constants and helpers for the expressions.
    - `flux_circles`: if > 0, a term ``flux`` (`pinnkit.physics.CircleFlux`): the
      continuity equation averaged over that many fixed circles inside the shape
      (`pinnkit.physics.flow.inscribed_circles`, key 0), from the velocity's flux through
      each; it sees a sink or source on a thin line between the collocation points.
    - `hard_velocity`: which given velocities ``network.hard_constraint: true`` imposes
      exactly: ``"all"`` (default) or ``"zero"`` (only the no-slip boundaries, velocity 0;
      the others, an inflow or a lid, stay loss terms and need a batch in
      ``sampler.batch``). With ``"all"`` the lifting of an inflow is its data blended
      with the walls' zeros by inverse distance, a field whose flux decays away from the
      inlet (a sink the network must cancel); with ``"zero"`` the lifting is 0. With
      ``"stream"`` every given velocity is exact and the velocity is the curl of a
      constrained stream function (`pinnkit.geometry.stream.StreamVelocity`):
      divergence-free by construction, carrying the inflow's flux through every section,
      one trainable constant per obstacle; straight sides with any data and circles with
      zero velocity. It enforces ``continuity`` (and ``flux``) too: the builder drops them
      with the given boundaries' terms, and their ``sampler.batch`` entries are unused.
      ``"curl_lifting"`` (`pinnkit.geometry.stream.CurlLifting`): the same lifting's curl
      plus the distance factor times the network's velocity; divergence-free lifting, the
      network's part kept divergence-free by the ``continuity`` term, the network
      differentiated to the residual's order only. Same limits as ``"stream"``.
    - `corner_modes`: with ``"all"`` or ``"zero"`` and ``network.hard_constraint: true``,
      add the singular Stokes flow of every re-entrant corner between no-slip edges
      (Dean–Montagnon modes, one trainable coefficient each;
      `pinnkit.geometry.stokes_corner`): a plain network cannot represent the unbounded
      velocity gradient and pressure there.
    - `corner_weight`: $\beta \ge 0$ (default 1; 0: off). The momentum and continuity
      residuals are multiplied by $\prod_c \min(1, r_c / R_c)^{\beta}$ about every
      re-entrant no-slip corner $c$ (none: no change). At such a corner the true
      solution's squared momentum residual, $\sim r^{2\lambda_1 - 4}$, is not integrable,
      so the plain collocation loss has no finite value there and its minimiser is biased;
      with $\beta > 1 - \lambda_1$ (0.46 at 270 degrees) the weighted loss is finite. A
      smooth velocity's divergence misses the singular gradient $\sim r^{\lambda_1 - 1}$
      there too: unweighted, the few points of a draw near the corner carry the
      continuity loss and change from one draw to the next.
    - `corner_radius`: $R_c$ of `corner_weight`: ``"auto"`` (default;
      `pinnkit.geometry.stokes_corner.local_radii`: the radius at which the corners'
      sectors cover 15 % of the shape's area, at most each corner's largest admissible
      radius, the distance to the nearest boundary that does not meet at the corner) or a
      length > 0 (capped at that largest radius).
    - `fem_reference`: if true, the field reference is the Taylor–Hood solution of the
      same problem (`pinnkit.solvers.fem_ns.solve_steady`; the ``fem`` extra), mesh size
      `fem_maxh` (default `fem_mesh_size`: 1/40 of the shorter side), `fem_boundary_maxh`
      ``{boundary: size}``, `fem_corner_maxh` at re-entrant corners (``"auto"``: ``fem_maxh``
      / 25; null: none; without it the corners' pressure singularity pollutes the whole
      field: the backward-facing step's default mesh had a pressure error of 1.3e-2 and
      the bend's 1.3e-2, 8e-4 with it, docs/benchmarks.md), velocity degree `fem_order`
      (3, the default: P3/P2, 1.1-4x the P2/P1 solve's seconds; 2: P2/P1, whose pressure
      is 1.4e-2 off in the smoothed-lid cavity, where it is steep at the lid's ends, and
      under 1e-3 off on the other shapes measured); solved once, then read
      from ``~/.cache/pinnkit/fem``. ``summary.json`` then gets ``rel_l2`` and ``linf`` of
      ``u, v, p`` and the plots their error maps.

    ``network.hard_constraint: true`` imposes every listed velocity exactly
    (`pinnkit.geometry.DistanceDirichlet`, its distance factor divided by its maximum in
    the shape, `pinnkit.geometry.distance.normalised`, so that the network's output is of
    the velocity's size on any shape); the outflows stay loss terms.
    """
    dom = _domain(domain, f"{KEY}.domain")
    if isinstance(dom, SpaceTime) or dom.dim != 2 or tuple(dom.coords) != ("x", "y"):
        raise ConfigError(
            f"{KEY}.domain: incompressible_flow is steady and 2-D, on coordinates x, y; got "
            f"coordinates {', '.join(dom.coords)}. Remove t: and coords: from the domain (an "
            "unsteady or 3-D flow is written with the expression problem, docs/expressions.md)."
        )
    if (nu is None) == (Re is None):
        raise ConfigError(f"{KEY}: give exactly one of nu (kinematic viscosity) and Re (nu = 1/Re).")
    visc = _constant(nu, f"{KEY}.nu") if nu is not None else 1.0 / _constant(Re, f"{KEY}.Re")
    if not (math.isfinite(visc) and visc > 0):
        raise ConfigError(f"{KEY}.{'nu' if nu is not None else 'Re'}: the viscosity must be finite "
                          f"and > 0, got nu = {visc:g}.")
    params = {str(k): _constant(v, f"{KEY}.parameters.{k}")
              for k, v in _mapping(parameters, f"{KEY}.parameters").items()}
    r = Resolver(Symbols(("x", "y"), ("x", "y"), ("u", "v", "p"), params,
                         _mapping(define, f"{KEY}.define"), key=KEY))
    boundaries = [p for p in dom.pieces() if p not in ("interior", "boundary")] or ["boundary"]
    given = _mapping(velocity, f"{KEY}.velocity", required=True)
    for b in given:
        if b not in dom.pieces() or b == "interior":
            raise ConfigError(
                f"{KEY}.velocity.{b}: the domain has no boundary {b!r}.{_suggest(b, boundaries)} "
                f"Its boundaries: {name_list(boundaries)}; name them in the shape (name: or names:)."
            )
    if "boundary" in given and len(given) > 1:
        raise ConfigError(f"{KEY}.velocity: 'boundary' is the whole boundary and overlaps "
                          f"{name_list([b for b in given if b != 'boundary'])}; give one or the others.")
    data = {str(b): _broadcast(r.components(v, f"{KEY}.velocity.{b}", fields_allowed=False), 2,
                               f"{KEY}.velocity.{b}") for b, v in given.items()}
    outflows = [] if "boundary" in data else [b for b in boundaries if b not in data]

    terms = {"momentum": Equation(momentum_residual), "continuity": Equation(continuity_residual)}
    if isinstance(corner_weight, bool) or not (isinstance(corner_weight, int | float)
                                               and math.isfinite(corner_weight) and corner_weight >= 0):
        raise ConfigError(f"{KEY}.corner_weight: expected a number >= 0 (0: off; above 1 - lambda_1, "
                          f"0.46 at a 270-degree corner, the loss is finite), got {corner_weight!r}.")
    if corner_radius != "auto" and (isinstance(corner_radius, bool) or not (
            isinstance(corner_radius, int | float) and math.isfinite(corner_radius) and corner_radius > 0)):
        raise ConfigError(f"{KEY}.corner_radius: the corner weight's radius, 'auto' (the default: the "
                          "corners' disks cover 15 % of the shape) or a length > 0 (capped at each "
                          f"corner's largest admissible radius), got {corner_radius!r}.")
    if not isinstance(corner_modes, bool):
        raise ConfigError(f"{KEY}.corner_modes: expected true or false, got {corner_modes!r}.")
    if isinstance(flux_circles, bool) or not isinstance(flux_circles, int) or flux_circles < 0:
        raise ConfigError(f"{KEY}.flux_circles: the number of circles of the flux term, an integer "
                          f">= 0 (0: no flux term); got {flux_circles!r}.")
    if flux_circles:
        terms["flux"] = CircleFlux(inscribed_circles(dom, flux_circles))
    values = {}
    for b in (*data, *outflows):
        if b in terms:
            raise ExprError(f"{KEY}.domain: a boundary is named {b!r}, the name of an equation; rename it.")
    for b, comps in data.items():
        zero = all(e.is_const and e.value == 0 for e in comps)
        values[b] = None if zero else point_function(comps, ("x", "y"), params)
        terms[b] = Dirichlet(b, ("u", "v"), values[b])
    # re-entrant corners between no-slip walls, for corner_weight and corner_modes
    walls = {b for b, g in values.items() if g is None}
    corners = (reentrant_corners(dom, walls, visc)
               if (corner_modes or corner_weight > 0 or fem_reference) else ())
    if corners and corner_weight > 0:  # (fem_reference alone computes them for `singular`)
        radii = (local_radii(dom, corners) if corner_radius == "auto"
                 else tuple(min(c.radius, float(corner_radius)) for c in corners))
        # continuity too: a smooth velocity's divergence misses the corner's singular
        # gradient (~ r^(lambda - 1)) there, and unweighted its few points there dominate
        # the loss on one draw of the points and not on the next
        for name, fn in (("momentum", momentum_residual), ("continuity", continuity_residual)):
            terms[name] = Equation(_corner_weighted(fn, corners, radii, float(corner_weight)))
    for b in outflows:
        terms[b] = Equation(do_nothing(b, dom.normal), where=b)
    if hard_velocity not in ("all", "zero", *_CURLS):
        raise ConfigError(f"{KEY}.hard_velocity: 'all' (every given velocity exact with "
                          "network.hard_constraint), 'zero' (only the no-slip boundaries), "
                          "'stream' (every given velocity exact, the velocity the curl of a stream "
                          "function) or 'curl_lifting' (every given velocity exact, the lifting a "
                          f"curl); got {hard_velocity!r}.")
    exact = {b: g for b, g in values.items() if hard_velocity != "zero" or g is None}
    if corner_modes and hard_velocity in _CURLS:
        raise ConfigError(f"{KEY}.corner_modes: the corner modes are added to the velocity's value, and "
                          f"hard_velocity: {hard_velocity} makes the velocity a curl of the network; use "
                          "hard_velocity: all (the default) or zero, or remove corner_modes.")
    if hard_velocity in _CURLS:
        try:
            hard = _CURLS[hard_velocity](dom, exact, key=f"{KEY}.hard_velocity")
        except ValueError as e:
            raise ConfigError(f"{e}. Use hard_velocity: all (the default).") from None
    else:
        try:
            if not exact:
                raise ValueError("no boundary to impose exactly")
            hard = normalised(DistanceDirichlet(dom, tuple(exact), ((0, 1),) * len(exact),
                                                tuple(exact.values())))
        except ValueError as e:
            if isinstance(e, ConfigError):  # a limit (docs/geometry.md): refused, not ignored
                raise
            hard = None  # a mesh (no smooth distance): loss terms only
        if corner_modes and corners and hard is not None:  # their singular Stokes flow, trained coefficients
            hard = StokesCornerEnrichment(corners, hard, jnp.zeros(sum(len(c.modes) for c in corners)))
    reference = None
    if fem_reference:
        from ..solvers.fem_ns import solve_steady

        maxh = float(fem_maxh) if fem_maxh is not None else fem_mesh_size(dom)
        sol = solve_steady(
            dom, visc, {b: _fem_velocity(c, params) for b, c in data.items()}, maxh=maxh,
            boundary_maxh=dict(fem_boundary_maxh or {}), order=int(fem_order),
            corner_maxh=_corner_maxh(fem_corner_maxh, maxh))
        reference = HostFunction(sol.evaluate, 3)
    closed = not outflows
    text = (f"steady flow, nu = {visc:g}; velocity on {', '.join(data)}"
            + (f"; outflow {', '.join(outflows)}" if outflows else ""))
    return Problem(
        dom, ("u", "v", "p"), terms, coeffs={"nu": visc}, reference=reference,
        hard_constraint=hard, enforced=() if hard is None else _enforced(tuple(exact), hard_velocity, terms),
        gauge={"p": "mean"} if closed else None, vectors={"velocity": ("u", "v")},
        singular=tuple(c.center for c in corners) if reference is not None else (),
        name=name, description=description or text,
    )
