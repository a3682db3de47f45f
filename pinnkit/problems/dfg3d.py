r"""Flow around a cylinder in a square channel: the DFG benchmark 3D-1Z (Schäfer & Turek 1996,
"Benchmark computations of laminar flow around a cylinder", test 3D-1Z).

Channel $[0, 2.5] \times [0, H] \times [0, H]$, $H = 0.41$, minus the cylinder of diameter
$D = 0.1$ along $z$ through $(0.5, 0.2)$ (it spans the channel), steady incompressible
Navier–Stokes (density 1, kinematic pressure $p$),

$$(\mathbf u\cdot\nabla)\mathbf u + \nabla p - \nu\Delta\mathbf u = 0, \qquad \nabla\cdot\mathbf u = 0,$$

inflow $u = 16U_m\,yz(H - y)(H - z)/H^4$, $v = w = 0$ on ``inlet`` ($x = 0$), no-slip on
``walls`` (the four sides $y, z \in \{0, H\}$) and ``cylinder``, do-nothing outflow
$\nu\,\partial_n\mathbf u - p\,\mathbf n = 0$ on ``outlet`` ($x = 2.5$). With $U_m = 0.45$
and $\nu = 10^{-3}$ the mean inflow velocity is $\bar U = 4U_m/9 = 0.2$ and
$\text{Re} = \bar U D/\nu = 20$.

Quantities of interest (`dfg3d_quantities`): the force $\mathbf F = \oint_S \sigma\,\mathbf n_b\,ds$
on the cylinder ($\sigma$, $\mathbf n_b$ as in `pinnkit.problems.dfg`),
$c_D = 2F_x/(\bar U^2 D H)$, $c_L = 2F_y/(\bar U^2 D H)$ and
$\Delta p = p(0.45, 0.2, 0.205) - p(0.55, 0.2, 0.205)$. Reference values
(`DFG3D_REFERENCE`): $c_D = 6.18533$, $c_L = 0.009401$, $\Delta p = 0.171007$, the refined
values quoted by Bayraktar, Mierka & Turek (2012), "Benchmark computations of 3D laminar
flow around a cylinder with CFX, OpenFOAM and FeatFlow", Int. J. Comput. Sci. Eng. 7(3),
and on the FEATFLOW benchmark pages (featflow.de, "DFG flow around cylinder benchmark 3D").

Two force integrals:

- `surface_force`: the stress over the cylinder's side, trapezoidal rule in the angle,
  Gauss–Legendre in $z$, the traction read just outside the surface (`dfg.circle_force`:
  a network with hard no-slip has no usable derivative on it);
- `volume_force`: the volume formulation of `pinnkit.problems.dfg` with
  $\mathbf w = \xi(r)\,\mathbf e$, $r$ the distance from the cylinder's axis. In 3-D the
  cylinder meets the floor and ceiling $z = 0, H$, so no $\mathbf w \in H^1$ is
  $\mathbf e$ on the cylinder and $0$ on every other no-slip wall: $\xi(r)$ does not
  vanish on the floor and ceiling about the cylinder, and there the identity picks up their
  traction. For a solution, integrating by parts gives exactly
  $$F_e = \int_\Omega \big[(\mathbf u\cdot\mathbf e)(\mathbf u\cdot\nabla\xi)
  + \nu(\mathbf u\cdot\mathbf e)\Delta\xi + p\,\mathbf e\cdot\nabla\xi\big]\,dx
  + \nu\int_{A} \xi\,\big[\partial_z u_e(z{=}H) - \partial_z u_e(z{=}0)\big]\,dA$$
  for $\mathbf e = \mathbf e_x, \mathbf e_y$ ($A$: the annulus $R < r < R_2$; on a no-slip
  plane $z = $ const, $(\sigma\mathbf n)\cdot\mathbf e = \pm\nu\,\partial_z u_e$): the volume
  integral less the floor's and ceiling's friction under the cut-off. The volume part
  is values only (Gauss–Legendre in $r$ and $z$, trapezoid in $\theta$), the friction
  part needs first derivatives on the two annuli, read just off the walls as above.

For an exact solution the two agree; for a trained network they differ by the residuals
weighted with $\mathbf w$ (and a body force adds $\int_\Omega \xi f_e\,dx$ to the surface
force: `tests/test_dfg3d.py` checks the identity on a manufactured field).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from ..geometry import Cuboid, Cylinder, difference
from ..geometry.rejection import sobol_unit
from ..physics import flow
from ..physics.flow import continuity_residual, momentum_residual
from ..physics.problem import Problem
from ..physics.sections import SectionFlux, unit_square_rule
from ..physics.terms import Equation, PointEquation
from .dfg import annulus_rule, cutoff, gauss_legendre, traction, weak_integrand

LENGTH, HEIGHT = 2.5, 0.41
CENTER, RADIUS = (0.5, 0.2), 0.05
FRONT, BACK = (0.45, 0.2, 0.205), (0.55, 0.2, 0.205)
VELOCITY = ("u", "v", "w")

DFG3D_REFERENCE = {"c_D": 6.18533, "c_L": 0.009401, "delta_p": 0.171007}
"""DFG 3D-1Z reference values (Bayraktar, Mierka & Turek 2012; FEATFLOW benchmark pages)."""


def channel_domain():
    """The square channel minus the cylinder, boundary names ``inlet, outlet, walls, cylinder``.

    The cylinder primitive (`pinnkit.geometry.Cylinder`, axis $z$) is twice the channel's
    height, so that it crosses the floor and ceiling instead of touching them (its caps lie
    outside and are trimmed away; surfaces that merely touch would count as boundary in the
    distance function, docs/geometry.md)."""
    walls = {"left": "inlet", "right": "outlet", "front": "walls", "back": "walls",
             "bottom": "walls", "top": "walls"}
    return difference(
        Cuboid((0.0, 0.0, 0.0), (LENGTH, HEIGHT, HEIGHT), names=walls),
        Cylinder((*CENTER, 0.5 * HEIGHT), RADIUS, 2 * HEIGHT, name="cylinder"),
    )


def inflow(U_max: float):
    r"""``g(x) -> (3,)``: $u = 16U_m\,yz(H - y)(H - z)/H^4$, $v = w = 0$ (zero on the walls,
    peak ``U_max`` on the centre line; mean $4U_m/9$)."""
    def g(x):
        u = 16 * U_max * x[1] * x[2] * (HEIGHT - x[1]) * (HEIGHT - x[2]) / HEIGHT**4
        return jnp.stack([u, jnp.zeros_like(u), jnp.zeros_like(u)])

    return g


# ------------------------------------------------------------------------ forces


BLOCK = 16384
"""Rows per evaluation call of the force integrals: every call is padded to a multiple, so
the values and the Jacobian are each compiled once (the evaluation grid's batches have
this size too, `pinnkit.nn.evaluate.predict`), not once per rule."""


def _at(predict, pts: np.ndarray, jacobian: bool = False) -> np.ndarray:
    n = len(pts)
    padded = np.concatenate([pts, np.repeat(pts[-1:], (-n) % BLOCK, axis=0)])
    f = predict.jacobian if jacobian else predict
    return np.asarray(f(padded), np.float64)[:n]


def surface_force(predict, nu: float, n_theta: int = 128, n_z: int = 24,
                  offset: float = 1e-3) -> np.ndarray:
    r"""$(F_x, F_y, F_z)$ on the cylinder: $\oint\sigma\,\mathbf n_b\,ds$ by the trapezoidal
    rule in the angle (``n_theta``) times Gauss–Legendre in $z \in [0, H]$ (``n_z``);
    ``predict(points (n, 3)) -> (n, 4)`` and ``predict.jacobian -> (n, 4, 3)``
    (`pinnkit.run.metrics.Predictor`). The traction is extrapolated from
    $R + \delta$ and $R + 2\delta$, $\delta$ = ``offset`` $\cdot R$, as in
    `pinnkit.problems.dfg.circle_force` (``offset=0``: on the surface, smooth fields only)."""
    th = 2 * np.pi * np.arange(n_theta) / n_theta
    z, wz = gauss_legendre(n_z, 0.0, HEIGHT)
    tt, zz = np.meshgrid(th, z, indexing="ij")
    nb = np.stack([np.cos(tt.ravel()), np.sin(tt.ravel()), np.zeros(tt.size)], axis=1)
    w = np.broadcast_to(wz[None, :], tt.shape).ravel() * (2 * np.pi * RADIUS / n_theta)

    d = offset * RADIUS
    radii = (RADIUS,) if d == 0 else (RADIUS + d, RADIUS + 2 * d)
    pts = np.concatenate([np.stack([CENTER[0] + r * nb[:, 0], CENTER[1] + r * nb[:, 1], zz.ravel()],
                                   axis=1) for r in radii])
    t = traction(_at(predict, pts), _at(predict, pts, jacobian=True), np.tile(nb, (len(radii), 1)), nu)
    t = t[: len(nb)] if d == 0 else 2 * t[: len(nb)] - t[len(nb):]
    return (w[:, None] * t).sum(axis=0)


def wall_friction(predict, nu: float, outer: float = 0.15, n_r: int = 16, n_theta: int = 128,
                  offset: float = 1e-3) -> np.ndarray:
    r"""$\nu\int_A \xi\,[\partial_z \mathbf u(z{=}H) - \partial_z \mathbf u(z{=}0)]\,dA$ for
    $(u, v)$: the floor's and ceiling's traction under the cut-off $\xi$ (`cutoff`, annulus
    $R < r <$ ``outer``), the term `volume_force` adds to the volume integral. The
    derivatives are extrapolated from $\delta$ and $2\delta$ off each wall,
    $\delta$ = ``offset`` $\cdot R$ (0: on the walls)."""
    pts2, w2, r = annulus_rule(CENTER, RADIUS, outer, n_r, n_theta)
    xi = cutoff(r, RADIUS, outer)[0]

    d = offset * RADIUS
    heights = (0.0, HEIGHT) if d == 0 else (d, 2 * d, HEIGHT - d, HEIGHT - 2 * d)
    pts = np.concatenate([np.concatenate([pts2, np.full((len(pts2), 1), z)], axis=1) for z in heights])
    dz = _at(predict, pts, jacobian=True)[:, :2, 2].reshape(len(heights), len(pts2), 2)
    lo, hi = (dz[0], dz[1]) if d == 0 else (2 * dz[0] - dz[1], 2 * dz[2] - dz[3])
    return nu * ((w2 * xi)[:, None] * (hi - lo)).sum(axis=0)


def volume_rule(outer: float = 0.15, n_r: int = 16, n_theta: int = 128, n_z: int = 24):
    """Points ``(n, 3)``, weights ``(n,)`` and axis distances of the tensor rule on the
    annular slab $R < r <$ ``outer``, $0 < z < H$: Gauss–Legendre in $r$ and $z$,
    trapezoid in $\\theta$ (`pinnkit.problems.dfg.annulus_rule` times $z$)."""
    pts2, w2, r = annulus_rule(CENTER, RADIUS, outer, n_r, n_theta)
    z, wz = gauss_legendre(n_z, 0.0, HEIGHT)
    pts = np.concatenate([np.repeat(pts2, n_z, axis=0), np.tile(z, len(pts2))[:, None]], axis=1)
    return pts, np.outer(w2, wz).ravel(), np.repeat(r, n_z)


def volume_force(predict, nu: float, outer: float = 0.15, n_r: int = 16, n_theta: int = 128,
                 n_z: int = 24, offset: float = 1e-3, friction: bool = True) -> np.ndarray:
    r"""$(F_x, F_y)$ by the volume formulation (module docstring): the volume integral with
    the cut-off $\xi(r)$ between $R$ and ``outer`` (< 0.2: the annulus must stay clear of
    the walls $y = 0, H$), values only, plus `wall_friction` (``friction=False``: the
    volume integral alone, which for a solution is the cylinder's force plus the
    floor's and ceiling's under $\xi$)."""
    pts, w, r = volume_rule(outer, n_r, n_theta, n_z)
    y = _at(predict, pts)
    _, d1, d2 = cutoff(r, RADIUS, outer)
    # xi depends on x, y only: the plane's integrand with the in-plane velocity
    integrand = weak_integrand(pts[:, :2] - np.asarray(CENTER)[None], r, y[:, :2], y[:, 3], d1, d2, nu)
    force = (w[:, None] * integrand).sum(axis=0)
    if friction:
        force = force + wall_friction(predict, nu, outer, n_r, n_theta, offset)
    return force


def flux(predict, x: float, n: int = 24) -> float:
    r"""The volume flux $\int u\,dy\,dz$ through the cross-section at ``x`` (away from the
    cylinder), by Gauss–Legendre with $n \times n$ points (exact for polynomials of degree
    $2n - 1$ in $y$ and $z$)."""
    nodes, w = unit_square_rule(n)
    h = HEIGHT / 2
    pts = np.concatenate([np.full((len(w), 1), float(x)), h + h * nodes], axis=1)
    return float(h**2 * (w * _at(predict, pts)[:, 0]).sum())


def dfg3d_quantities(predict, nu: float, u_mean: float) -> dict:
    """``c_D, c_L, delta_p`` (surface integral), ``c_D_volume, c_L_volume`` (volume
    formulation), and their relative errors against `DFG3D_REFERENCE` (``err_*``);
    ``outflow_ratio``: the flux through the outlet over the inflow's, $\bar U H^2$ (1 for
    a solution; a network that loses mass about the cylinder shows it here)."""
    scale = 2.0 / (u_mean**2 * 2 * RADIUS * HEIGHT)
    fs = surface_force(predict, nu) * scale
    fv = volume_force(predict, nu) * scale
    p = _at(predict, np.asarray([FRONT, BACK]))[:, 3]
    out = {"c_D": float(fs[0]), "c_L": float(fs[1]), "delta_p": float(p[0] - p[1]),
           "c_D_volume": float(fv[0]), "c_L_volume": float(fv[1])}
    ref = DFG3D_REFERENCE
    for k in ("c_D", "c_L", "delta_p"):
        out[f"err_{k}"] = (out[k] - ref[k]) / ref[k]
    out["err_c_D_volume"] = (out["c_D_volume"] - ref["c_D"]) / ref["c_D"]
    out["outflow_ratio"] = flux(predict, LENGTH) / (u_mean * HEIGHT**2)
    out["reference"] = dict(ref)
    return out


# ------------------------------------------------------------------------ problem


def near_points(n: int, outer: float = 0.15, seed: int = 0) -> np.ndarray:
    r"""``(n, 3)`` fixed points about the cylinder, $R < r <$ ``outer`` from its axis and
    $0 < z < H$, graded towards it as `pinnkit.problems.dfg.near_points` is in 2-D:
    $r = R + (R_2 - R)\,s^2$, $\theta = 2\pi t$, $z = Hv$ for scrambled Sobol $(s, t, v)$
    (``seed``)."""
    s, t, v = sobol_unit(n, 3, seed).T
    r = RADIUS + (outer - RADIUS) * np.maximum(s, 1e-3) ** 2  # not on the cylinder itself
    th = 2 * np.pi * t
    z = HEIGHT * np.clip(v, 1e-3, 1 - 1e-3)  # nor on the floor or ceiling
    return np.stack([CENTER[0] + r * np.cos(th), CENTER[1] + r * np.sin(th), z], axis=1)


def _flow_residual(f, c):  # momentum (3) and continuity (1) at one point
    return jnp.concatenate([momentum_residual(f, c, velocity=VELOCITY),
                            jnp.atleast_1d(continuity_residual(f, c, velocity=VELOCITY))])


FLUX_NODES = 16
"""Gauss–Legendre nodes per side of the ``flux`` term's sections (16 x 16 per section)."""


def flux_term(xs, flow: float) -> SectionFlux:
    r"""The ``flux`` term of `dfg_cylinder_3d`: `SectionFlux` on the channel's square
    cross-sections at the positions ``xs`` (centre $(x, H/2, H/2)$, normal $\mathbf e_x$,
    half-side $H/2$), each asked for the volume flux ``flow``."""
    h = HEIGHT / 2
    rows = np.asarray([[x, h, h, 1.0, 0.0, 0.0, h, flow] for x in xs], np.float64)
    return SectionFlux(rows, VELOCITY, n_r=FLUX_NODES, shape="square")


def _sections(value) -> tuple[float, ...]:
    seq = value if isinstance(value, list | tuple) else None
    ok = seq is not None and all(isinstance(x, int | float) and not isinstance(x, bool) for x in seq)
    xs = tuple(float(x) for x in seq) if ok else ()
    lo, hi = CENTER[0] - RADIUS, CENTER[0] + RADIUS
    if not ok or not all(0 < x <= LENGTH and not lo <= x <= hi for x in xs):
        raise ValueError(
            f"flux_sections must be a list of x positions of cross-sections in (0, {LENGTH}] that miss "
            f"the cylinder (x outside [{lo:g}, {hi:g}]), e.g. [0.25, 1.0, 2.0]; got {value!r}. "
            "Each section's volume flux is asked to equal the inflow's ([] for none).")
    return xs


def _positive(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if not (math.isfinite(v) and v > 0):
        raise ValueError(
            f"{name} must be a finite number > 0, got {value!r}. The benchmark 3D-1Z is "
            f"{name}={dict(U_max=0.45, nu=1e-3)[name]:g} (Re = 20); the reference values "
            "c_D, c_L, delta_p hold only there."
        )
    return v


def dfg_cylinder_3d(U_max: float = 0.45, nu: float = 1e-3, near: int = 0, near_outer: float = 0.15,
                    near_seed: int = 0, flux_sections: Sequence[float] = ()) -> Problem:
    r"""DFG benchmark 3D-1Z (module docstring): fields ``u, v, w, p``, terms ``momentum``
    (3 rows), ``continuity``, ``outlet`` (do-nothing) and the Dirichlet terms ``inlet``,
    ``walls``, ``cylinder``.

    **Arguments:**
    - `U_max`: the inflow's peak velocity at the channel's centre line (0.45: Re = 20).
    - `nu`: kinematic viscosity (coefficient ``nu``).
    - `near`: if > 0, a term ``near`` (momentum and continuity together) on this many fixed
      points graded towards the cylinder (`near_points`, out to ``near_outer`` from its
      axis, Sobol seed ``near_seed``), on top of the sampled terms; 0 (default): none.
      The knob for the one measured failure of the shipped config (its fixed points leave
      this ring unsampled, docs/benchmarks.md).
    - `flux_sections`: x positions of cross-sections (each in $(0, 2.5]$ and clear of the
      cylinder) on which a term ``flux`` (`flux_term`, `pinnkit.physics.SectionFlux` on the
      square $[0, H]^2$, 16 x 16 Gauss–Legendre nodes) asks for the inflow's volume flux
      $\bar U H^2$: the mean of $u$ over each section less $\bar U$. Default ``()``: none.
      Mass conservation as an integral, which the pointwise residuals let the network
      break in the cylinder's wake (docs/navier_stokes.md "DFG 3D-1Z").

    ``network.hard_constraint: true`` imposes the inflow and no-slip exactly
    (`pinnkit.geometry.DistanceDirichlet` on ``inlet``, ``walls``, ``cylinder`` of the 3-D
    CSG shape; the outlet stays free). ``summary.json`` gets ``metrics``: $c_D$, $c_L$,
    $\Delta p$ and their errors (`dfg3d_quantities`; the reference holds for the defaults).
    """
    U_max, nu = _positive(U_max, "U_max"), _positive(nu, "nu")
    gap = min(CENTER[1], HEIGHT - CENTER[1])
    if not (isinstance(near, int) and not isinstance(near, bool) and near >= 0
            and isinstance(near_outer, (int, float)) and RADIUS < near_outer < gap):
        raise ValueError(f"near={near} must be an integer >= 0 and near_outer={near_outer} between "
                         f"the radius {RADIUS} and the gap to the side walls {CENTER[1]}.")
    xs = _sections(flux_sections)
    domain = channel_domain()
    g = inflow(U_max)
    terms = {
        "momentum": Equation(functools.partial(momentum_residual, velocity=VELOCITY)),
        "continuity": Equation(functools.partial(continuity_residual, velocity=VELOCITY)),
        "outlet": Equation(functools.partial(flow.outflow_residual, velocity=VELOCITY), where="outlet"),
        **flow.velocity_terms({"inlet": g, "walls": None, "cylinder": None}, VELOCITY),
    }
    if near:
        pts = near_points(near, float(near_outer), int(near_seed))
        terms["near"] = PointEquation(_flow_residual, pts)
    u_mean = 4 * U_max / 9
    if xs:
        terms["flux"] = flux_term(xs, u_mean * HEIGHT**2)
    # the walls take the inflow's data (zero there) as in `dfg.no_slip`: the lift is then one
    # smooth function, (1 - w_cylinder) (U(y, z), 0, 0), close to the channel's flow
    hard = flow.hard_velocity(domain, {"inlet": g, "walls": g, "cylinder": None}, (0, 1, 2))
    return Problem(
        domain, (*VELOCITY, "p"), terms, coeffs={"nu": nu},
        hard_constraint=hard, enforced=("inlet", "walls", "cylinder"),
        metrics=lambda predict: dfg3d_quantities(predict, nu, u_mean),
        vectors={"velocity": VELOCITY}, name="dfg_cylinder_3d",
        description=f"DFG 3D-1Z flow around a cylinder in a square channel, "
                    f"Re = {u_mean * 2 * RADIUS / nu:g}",
    )
