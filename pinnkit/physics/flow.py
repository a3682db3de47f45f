r"""Incompressible flow (density 1, so $p$ is kinematic pressure): the pointwise residuals
and boundary pieces the built-in flow problems are made of, public so that a problem of
your own is built the same way (docs/own-problem.md).

**Velocity–pressure form** (2-D and 3-D, steady or unsteady), fields ``u, v[, w], p``:

$$\partial_t\mathbf u + (\mathbf u\cdot\nabla)\mathbf u + \nabla p - \nu\,\Delta\mathbf u
= \mathbf F, \qquad \nabla\cdot\mathbf u = 0$$

(`momentum_residual`, `continuity_residual`; Stokes flow drops the convective term:
``convection=False``).

**Vorticity–stream-function form** (2-D), fields ``psi, omega`` with $u = \psi_y$,
$v = -\psi_x$: $\omega + \Delta\psi = 0$, $\partial_t\omega + u\,\omega_x + v\,\omega_y
- \nu\,\Delta\omega = \nabla\times\mathbf F$ (`stream_residual`, `transport_residual`).

`equations` gives either form's interior terms, `out_names` its fields. Boundary pieces:
`parabolic_inflow` (a channel's Poiseuille profile), `outflow_residual` (the
traction-free "do-nothing" outlet), `velocity_terms` (Dirichlet velocity, no-slip where
no data) and `hard_velocity` (the same data imposed exactly on any shape,
`pinnkit.geometry.DistanceDirichlet`), `pressure_pin` (a gauge term fixing $p$ at one
point). Residuals read the viscosity from the coefficient ``nu``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._types import Point, Scalar
from ..diffops import Fields
from ..geometry.distance import DistanceDirichlet
from .terms import Dirichlet, Equation, Observation

FORMS = ("velocity_pressure", "vorticity_streamfunction")
"""The two formulations `equations` writes."""

# A pinned point is an Observation term, whose rows are sharded over the devices: the
# point is repeated so that its count divides any device count up to 8.
PIN_COPIES = 8


def momentum_residual(
    f: Fields,
    c: Mapping[str, Array],
    velocity: Sequence[str] = ("u", "v"),
    pressure: str = "p",
    unsteady: bool = False,
    force: Callable | None = None,
    convection: bool = True,
) -> Float[Array, " d"]:
    r"""$\partial_t u_i + u_j \partial_j u_i + \partial_i p - \nu\,\Delta u_i - F_i$ for every $i$.

    **Arguments:**
    - `f`, `c`: the `Fields` view and the coefficients (``c["nu"]``: kinematic viscosity).
    - `velocity`: the velocity fields, one per spatial coordinate, in coordinate order.
    - `pressure`: the pressure field.
    - `unsteady`: include $\partial_t \mathbf u$ (the domain has a ``t`` coordinate).
    - `force`: optional body force ``force(point, velocity) -> (d,)``.
    - `convection`: include $u_j \partial_j u_i$ (default); False: Stokes flow.

    **Returns:** the residual vector, shape ``(d,)``.
    """
    coords = f.layout.spatial
    vel = [f[name] for name in velocity]
    rows = []
    for i, ui in enumerate(velocity):
        # (u.grad) u_i + d_i p - nu lap u_i, added in this order (golden histories are bitwise)
        if convection:
            r = sum(vel[j] * f.partial(ui, cj) for j, cj in enumerate(coords))
            r = r + f.partial(pressure, coords[i]) - c["nu"] * f.laplacian(ui)
        else:
            r = f.partial(pressure, coords[i]) - c["nu"] * f.laplacian(ui)
        if unsteady:
            r = r + f.partial(ui, "t")
        rows.append(r)
    res = jnp.stack(rows)
    if force is not None:
        res = res - force(f.point, jnp.stack(vel))
    return res


def continuity_residual(f: Fields, c: Mapping[str, Array], velocity: Sequence[str] = ("u", "v")) -> Scalar:
    r"""$\nabla\cdot\mathbf u$ (``velocity``: the velocity fields in coordinate order)."""
    return f.divergence(tuple(velocity))


def stream_residual(f: Fields, c: Mapping[str, Array]) -> Scalar:
    r"""$\omega + \Delta\psi$ (fields ``psi``, ``omega``)."""
    return f["omega"] + f.laplacian("psi")


def transport_residual(f: Fields, c: Mapping[str, Array], unsteady: bool = False,
                       curl_force: Callable | None = None) -> Scalar:
    r"""$\partial_t\omega + u\,\omega_x + v\,\omega_y - \nu\,\Delta\omega - q$ with $u = \psi_y$,
    $v = -\psi_x$ and $q$ = ``curl_force(point, omega)`` (the curl of the body force)."""
    x, y = f.layout.spatial
    u, v = f.partial("psi", y), -f.partial("psi", x)
    r = u * f.partial("omega", x) + v * f.partial("omega", y) - c["nu"] * f.laplacian("omega")
    if unsteady:
        r = r + f.partial("omega", "t")
    if curl_force is not None:
        r = r - curl_force(f.point, f["omega"])
    return r


def check_form(form: str) -> None:
    """Raises `ValueError` unless ``form`` is one of `FORMS`."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}: actual={form!r}")


def equations(form: str, dim: int, unsteady: bool, force: Callable | None = None,
              curl_force: Callable | None = None, convection: bool = True) -> dict[str, Equation]:
    """The interior terms of either form: ``momentum`` and ``continuity`` (velocity–pressure,
    velocity fields ``u, v[, w]``), or ``stream`` and ``transport`` (2-D only).

    **Arguments:**
    - `form`: one of `FORMS`; `dim`: the spatial dimension (2 or 3).
    - `unsteady`: the domain has a time coordinate ``t``.
    - `force`: body force for the momentum residual; `curl_force`: its curl for the
      transport residual (`transport_residual`).
    - `convection`: False for Stokes flow (velocity–pressure form only).
    """
    check_form(form)
    if form == "vorticity_streamfunction":
        if dim != 2:
            raise ValueError(f"the vorticity–stream-function form is 2-D only: actual dim={dim}")
        if not convection:
            raise ValueError("Stokes flow (convection=False) is written in the velocity–pressure form")
        return {
            "stream": Equation(stream_residual),
            "transport": Equation(
                functools.partial(transport_residual, unsteady=unsteady, curl_force=curl_force)
            ),
        }
    vel = ("u", "v", "w")[:dim]
    momentum = functools.partial(momentum_residual, velocity=vel, unsteady=unsteady, force=force)
    if not convection:
        momentum = functools.partial(momentum, convection=False)
    return {
        "momentum": Equation(momentum),
        "continuity": Equation(functools.partial(continuity_residual, velocity=vel)),
    }


def out_names(form: str, dim: int) -> tuple[str, ...]:
    """The fields of either form: ``("u", "v"[, "w"], "p")`` or ``("psi", "omega")``."""
    return ("psi", "omega") if form == "vorticity_streamfunction" else (*("u", "v", "w")[:dim], "p")


def pressure_pin(domain, point: Sequence[float], value: float) -> Observation:
    """A term fixing $p$ = ``value`` at ``point`` (all coordinates of ``domain``): the gauge
    of a pressure the equations define up to a constant, as a loss term (`PIN_COPIES`
    copies of the point, so that any device count up to 8 divides them)."""
    point = np.asarray(point, np.float64)
    if point.shape != (domain.dim,):
        raise ValueError(
            f"pressure_pin must be a point with {domain.dim} coordinates {domain.coords}: "
            f"actual={point.tolist()}"
        )
    return Observation(
        np.repeat(point[None], PIN_COPIES, axis=0),
        np.full((PIN_COPIES, 1), value, np.float64),
        fields=("p",),
    )


def parabolic_inflow(U_max: float, height: float, y_axis: int = 1) -> Callable[[Point], Float[Array, "2"]]:
    r"""``g(x) -> (2,)``: the Poiseuille inflow $u = 4U_m y(H - y)/H^2$, $v = 0$ of a channel
    $0 \le y \le H$ (``height``), peak ``U_max`` on the centre line, reading $y$ from
    coordinate ``y_axis`` of a point (1 in space, 2 in space-time ``(t, x, y)``)."""

    def inflow(x):
        u = 4 * U_max * x[y_axis] * (height - x[y_axis]) / height**2
        return jnp.stack([u, jnp.zeros_like(u)])

    return inflow


def outflow_residual(f: Fields, c: Mapping[str, Array], axis: str = "x",
                     velocity: Sequence[str] = ("u", "v"), pressure: str = "p") -> Float[Array, " d"]:
    r"""The traction-free ("do-nothing") outlet $\nu\,\partial_n\mathbf u - p\,\mathbf n$ on a
    boundary whose outward normal is $\mathbf n = +\mathbf e_{axis}$ (``axis``: a spatial
    coordinate name); on one with normal $-\mathbf e_{axis}$ the residual is the negative,
    the same loss. ``velocity`` in coordinate order. **Returns:** ``(d,)``."""
    coords = f.layout.spatial
    rows = []
    for i, ui in enumerate(velocity):
        r = c["nu"] * f.partial(ui, axis)
        rows.append(r - f[pressure] if coords[i] == axis else r)
    return jnp.stack(rows)


def velocity_terms(data: Mapping[str, Callable | None],
                   velocity: Sequence[str] = ("u", "v")) -> dict[str, Dirichlet]:
    """One Dirichlet term per boundary piece, named after it: ``{piece: g}`` with
    ``g(x) -> (len(velocity),)``, or None for no-slip ($\\mathbf u = 0$)."""
    return {piece: Dirichlet(piece, tuple(velocity)) if g is None else Dirichlet(piece, tuple(velocity), g)
            for piece, g in data.items()}


def hard_velocity(domain, data: Mapping[str, Callable | None],
                  velocity: Sequence[int] = (0, 1)) -> DistanceDirichlet:
    r"""The velocity data of `velocity_terms` imposed exactly (a problem's
    ``hard_constraint``): $\mathbf u = g + \phi\,N$ by distance functions on any shape or a
    `pinnkit.SpaceTime` over one; pieces not named (an outlet) stay free.

    **Arguments:**
    - `domain`: the shape (or space-time domain) whose boundary pieces ``data`` names.
    - `data`: ``{piece: g or None}`` as in `velocity_terms`; the pieces must be disjoint.
    - `velocity`: the output indices of the velocity fields.
    """
    vel = tuple(velocity)
    return DistanceDirichlet(domain, tuple(data), (vel,) * len(data), tuple(data.values()))


def inscribed_circles(shape, n: int, seed: int = 0, fill: tuple[float, float] = (0.3, 0.9),
                      nodes: int = 16) -> np.ndarray:
    r"""``n`` circles inside a 2-D shape for `pinnkit.physics.terms.CircleFlux`, ``(n, 4)``
    rows ``[c_x, c_y, r, theta_0]``: centres drawn uniformly in the interior, each radius a
    uniform fraction in ``fill`` of the centre's distance to the boundary ($-$``sdf``, never
    more than the distance: docs/geometry.md), so every circle stays inside the fluid with
    a gap of at least ``1 - fill[1]`` of that distance, and its first node at a uniform
    angle in $[0, 2\pi/$``nodes``$)$ (the nodes of different circles do not line up).
    Random but fixed: key ``seed``, float64."""
    if shape.dim != 2:
        raise ValueError(f"inscribed_circles needs a 2-D shape: actual dim={shape.dim}")
    if not (0 < fill[0] <= fill[1] < 1):
        raise ValueError(f"inscribed_circles fill must satisfy 0 < lo <= hi < 1: actual={fill}")
    k_c, k_r, k_t = jax.random.split(jax.random.key(seed), 3)
    centre = np.asarray(shape.sample(k_c, n, "interior", jnp.float64), np.float64)
    dist = -np.asarray(jax.vmap(shape.sdf)(jnp.asarray(centre)), np.float64)
    frac = np.asarray(jax.random.uniform(k_r, (n,), jnp.float64, *fill), np.float64)
    theta = np.asarray(jax.random.uniform(k_t, (n,), jnp.float64, 0.0, 2 * np.pi / nodes), np.float64)
    return np.column_stack([centre, frac * dist, theta])
