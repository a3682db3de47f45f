r"""Flow past a cylinder: the DFG benchmark 2D-1 (Schäfer & Turek 1996).

Channel $[0, 2.2] \times [0, 0.41]$ minus the disk of radius $R = 0.05$ about $(0.2, 0.2)$,
steady incompressible Navier–Stokes (density 1, kinematic pressure $p$),

$$(\mathbf u\cdot\nabla)\mathbf u + \nabla p - \nu\Delta\mathbf u = 0, \qquad \nabla\cdot\mathbf u = 0,$$

parabolic inflow $u = 4U_m y(H - y)/H^2$, $v = 0$ on ``inlet`` ($x = 0$), no-slip on
``walls`` and ``cylinder``, do-nothing outflow $\nu\,\partial_n\mathbf u - p\,\mathbf n = 0$
on ``outlet``. With $U_m = 0.3$ and $\nu = 10^{-3}$: $\bar U = 2U_m/3 = 0.2$,
$\text{Re} = \bar U D/\nu = 20$.

Quantities of interest (`dfg_quantities`): the force on the cylinder
$\mathbf F = \oint_S \sigma\,\mathbf n_b\,ds$, $\sigma = -p I + \nu(\nabla\mathbf u + \nabla\mathbf u^\top)$,
$\mathbf n_b$ the body's outward normal (into the fluid; the domain's normal on
``cylinder`` is $-\mathbf n_b$), $c_D = 2F_x/(\bar U^2 D)$, $c_L = 2F_y/(\bar U^2 D)$ and
$\Delta p = p(0.15, 0.2) - p(0.25, 0.2)$. Reference values (`DFG1_REFERENCE`): John &
Matthies (2001) / the FEATFLOW benchmark page, to 12 digits.

Two force integrals:

- `circle_force`: the surface integral by the trapezoidal rule in the angle (spectrally
  accurate for the smooth periodic integrand), with the network's exact derivatives;
  `boundary_force` is the same integral by the geometry's arc-length sampling of any
  named piece (weights ``boundary_measure / n``: Monte Carlo, error $O(n^{-1/2})$);
- `volume_force`: the volume formulation (John 2004) with a test function
  $\mathbf w = \xi(r)\,\mathbf e$, $\xi = 1$ on the cylinder, $0$ for $r \ge R_2$: for a
  solution of the equations, integrating the weak form by parts twice gives
  $$F_e = \int_\Omega \big[(\mathbf u\cdot\mathbf e)(\mathbf u\cdot\nabla\xi)
  + \nu(\mathbf u\cdot\mathbf e)\Delta\xi + p\,\mathbf e\cdot\nabla\xi\big]\,dx,$$
  values only (the boundary terms vanish: $\mathbf u = 0$ on the cylinder, $\xi = 0$
  elsewhere; a term $\int(\nabla\cdot\mathbf u)(\mathbf u\cdot\mathbf w)$ is dropped,
  zero for a solution). Gauss–Legendre in $r$, trapezoid in $\theta$. Unsteady flow
  adds $-\int_\Omega \xi\,\partial_t(\mathbf u\cdot\mathbf e)\,dx$ (``dudt``; DFG 2D-2,
  `pinnkit.problems.dfg2`).

For an exact solution the two agree; for a trained network they differ by the
residuals weighted with $\mathbf w$, so their gap is a check on the figure.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..geometry import Disk, Rectangle, difference
from ..geometry.distance import DistanceDirichlet
from ..geometry.rejection import sobol_unit
from ..physics import flow
from ..physics.flow import continuity_residual, momentum_residual
from ..physics.host import HostFunction
from ..physics.problem import Problem
from ..physics.terms import Equation, PointEquation

LENGTH, HEIGHT = 2.2, 0.41
CENTER, RADIUS = (0.2, 0.2), 0.05
FRONT, BACK = (0.15, 0.2), (0.25, 0.2)

DFG1_REFERENCE = {"c_D": 5.57953523384, "c_L": 0.010618948146, "delta_p": 0.11752016697}
"""DFG 2D-1 reference values (Schäfer & Turek 1996; digits from the FEATFLOW benchmark)."""


def channel_domain():
    """The DFG channel minus the cylinder, boundary names ``inlet, outlet, walls, cylinder``."""
    return difference(
        Rectangle((0.0, 0.0), (LENGTH, HEIGHT),
                  names={"left": "inlet", "right": "outlet", "bottom": "walls", "top": "walls"}),
        Disk(CENTER, RADIUS, name="cylinder"),
    )


# ------------------------------------------------------------------------ forces


def _jacobian(predict, points: np.ndarray) -> np.ndarray:
    return np.asarray(predict.jacobian(points), np.float64)


def traction(values: np.ndarray, jac: np.ndarray, normal: np.ndarray, nu: float) -> np.ndarray:
    r"""$\sigma\mathbf n = -p\,\mathbf n + \nu(\nabla\mathbf u + \nabla\mathbf u^\top)\mathbf n$ per
    point, from values ``(n, d + 1)`` = (velocity, p), Jacobians ``(n, d + 1, d)``
    ($\partial_j y_i$) and normals ``(n, d)`` (d = 2 or 3); returns ``(n, d)``."""
    d = normal.shape[1]
    grad = jac[:, :d, :d]
    strain = grad + np.swapaxes(grad, 1, 2)
    return -values[:, d:d + 1] * normal + nu * np.einsum("nij,nj->ni", strain, normal)


def circle_force(predict, nu: float, center=CENTER, radius: float = RADIUS, n: int = 256,
                 offset: float = 1e-3) -> np.ndarray:
    r"""$\oint \sigma\,\mathbf n_b\,ds$ over the circle by the $n$-point trapezoidal rule in
    the angle, $\mathbf n_b = (\cos\theta, \sin\theta)$; ``predict(points) -> (n, 3)`` and
    ``predict.jacobian(points) -> (n, 3, 2)`` (`pinnkit.run.metrics.Predictor`).

    The traction is taken from just outside the circle, $\sigma(R) \approx 2\sigma(R + \delta)
    - \sigma(R + 2\delta)$ with $\delta$ = ``offset`` $\cdot R$ (error $O(\delta^2)$,
    about $10^{-6}$ relative), because a network with hard no-slip has no usable derivative
    *on* the circle: its distance function $|f|$ has a kink there, so $\partial_n\mathbf u$
    flips sign with the rounding of the point (and is 0 where $\phi$ rounds to 0).
    ``offset=0`` evaluates on the circle (smooth fields only).
    **Returns:** $(F_x, F_y)$."""
    th = 2 * np.pi * np.arange(n) / n
    nb = np.stack([np.cos(th), np.sin(th)], axis=1)

    def at(r):
        pts = np.asarray(center, np.float64)[None] + r * nb
        return traction(np.asarray(predict(pts), np.float64), _jacobian(predict, pts), nb, nu)

    d = offset * radius
    t = at(radius) if d == 0 else 2 * at(radius + d) - at(radius + 2 * d)
    return t.sum(axis=0) * (2 * np.pi * radius / n)


def boundary_force(predict, nu: float, domain, piece: str, n: int, key) -> np.ndarray:
    r"""The force on the body whose surface is the boundary ``piece`` of ``domain`` (a hole:
    its normals point into the body, so $\mathbf n_b = -\mathbf n$), by Monte Carlo over
    ``n`` points uniform in arc length (`AbstractDomain.sample`), weights
    ``boundary_measure(piece) / n``. Error $O(n^{-1/2})$ (`circle_force` converges
    spectrally on a circle)."""
    measure = domain.boundary_measure(piece)
    if measure is None:
        measure = domain.estimate(piece)
    pts = domain.sample(key, n, piece, jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32)
    nb = -np.asarray(jax.vmap(lambda x: domain.normal(x, piece))(pts), np.float64)
    pts = np.asarray(pts, np.float64)
    t = traction(np.asarray(predict(pts), np.float64), _jacobian(predict, pts), nb, nu)
    return t.sum(axis=0) * (measure / n)


def cutoff(r, radius: float = RADIUS, outer: float = 0.15):
    r"""The test function $\xi(r)$ of `volume_force` and its derivatives $(\xi, \xi', \xi'')$:
    $\xi = 1 - S(s)$, $s = (r - R)/(R_2 - R)$, $S = 10s^3 - 15s^4 + 6s^5$ (the quintic
    smoothstep: $\xi' = \xi'' = 0$ at both ends, so $\Delta\xi$ is continuous)."""
    h = outer - radius
    s = np.clip((r - radius) / h, 0.0, 1.0)
    xi = 1 - (10 * s**3 - 15 * s**4 + 6 * s**5)
    d1 = -(30 * s**2 - 60 * s**3 + 30 * s**4) / h
    d2 = -(60 * s - 180 * s**2 + 120 * s**3) / h**2
    return xi, d1, d2


def gauss_legendre(n: int, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the ``n``-point Gauss–Legendre rule on $[a, b]$ (exact for
    polynomials of degree $2n - 1$)."""
    g, w = np.polynomial.legendre.leggauss(n)
    return a + (b - a) * (g + 1) / 2, w * (b - a) / 2


def weak_integrand(offset: np.ndarray, r: np.ndarray, vel: np.ndarray, p: np.ndarray,
                   d1: np.ndarray, d2: np.ndarray, nu: float) -> np.ndarray:
    r"""The steady volume-force integrand $(\mathbf u\cdot\nabla\xi)\,\mathbf u
    + \nu\,\Delta\xi\,\mathbf u + p\,\nabla\xi$ ``(n, 2)`` for a radial cut-off
    $\xi(r)$ in the plane: ``offset`` ``(n, 2)`` from the centre, ``r`` its length,
    ``vel`` ``(n, 2)`` the in-plane velocity, ``p`` ``(n,)``, ``d1, d2`` = $\xi', \xi''$
    (`cutoff`)."""
    grad_xi = d1[:, None] * (offset / r[:, None])
    lap_xi = d2 + d1 / r
    u_dot = np.sum(vel * grad_xi, axis=1)
    return vel * (u_dot + nu * lap_xi)[:, None] + p[:, None] * grad_xi


def annulus_rule(center=CENTER, radius: float = RADIUS, outer: float = 0.15, n_r: int = 24,
                 n_theta: int = 256):
    """Points ``(n, 2)``, weights ``(n,)`` (area element $r\\,dr\\,d\\theta$ included) and radii
    of the tensor rule on $R < r < R_2$: Gauss–Legendre in $r$, trapezoid in $\\theta$."""
    r, wr = gauss_legendre(n_r, radius, outer)
    th = 2 * np.pi * np.arange(n_theta) / n_theta
    rr, tt = np.meshgrid(r, th, indexing="ij")
    r_, t_ = rr.ravel(), tt.ravel()
    pts = np.asarray(center)[None] + np.stack([r_ * np.cos(t_), r_ * np.sin(t_)], axis=1)
    w = (wr[:, None] * rr * (2 * np.pi / n_theta)).ravel()
    return pts, w, r_


def volume_force(predict, nu: float, center=CENTER, radius: float = RADIUS, outer: float = 0.15,
                 n_r: int = 24, n_theta: int = 256, dudt=None, inner: float | None = None) -> np.ndarray:
    r"""$(F_x, F_y)$ by the volume formulation (module docstring) with `cutoff` between
    ``inner`` (default: ``radius``) and ``outer`` (the annulus must lie in the fluid); values only.

    ``inner`` $> R$: $\xi = 1$ on $R < r <$ ``inner``, so the steady figure reads the fields
    only in ``inner`` $< r <$ ``outer``: the momentum balance of the fluid outside a
    control surface, averaged over the circles of that ring with the weights $-\xi'(r)$.
    For a solution the figure does not depend on the ring; for a trained network it
    leaves out whatever the network does next to the wall (a hard no-slip network's
    residual sits there, docs/navier_stokes.md), and its change with the ring says
    whether the field away from the wall balances its own momentum.

    ``dudt``: for unsteady flow, ``dudt(points (n, 2)) -> (n, 2)``, $\partial_t\mathbf u$ at
    the instant ``predict`` shows; the weak form then gains $-\int_\Omega \xi\,\partial_t
    \mathbf u\,dx$ (the test function's $(\partial_t\mathbf u, \mathbf w)$), over the
    plateau too. None: steady."""
    start = radius if inner is None else float(inner)
    if not radius <= start < outer:
        raise ValueError(f"volume_force: need radius <= inner < outer: actual radius={radius}, "
                         f"inner={inner}, outer={outer}")
    pts, w, r = annulus_rule(center, start, outer, n_r, n_theta)
    y = np.asarray(predict(pts), np.float64)
    xi, d1, d2 = cutoff(r, start, outer)
    integrand = weak_integrand(pts - np.asarray(center)[None], r, y[:, :2], y[:, 2], d1, d2, nu)
    if dudt is not None:
        integrand = integrand - xi[:, None] * np.asarray(dudt(pts), np.float64)
    force = (w[:, None] * integrand).sum(axis=0)
    if dudt is not None and start > radius:  # the plateau, xi = 1
        pts, w, _ = annulus_rule(center, radius, start, n_r, n_theta)
        force = force - (w[:, None] * np.asarray(dudt(pts), np.float64)).sum(axis=0)
    return force


def section_flux(predict, x: float, y0: float = 0.0, y1: float = HEIGHT, n: int = 64) -> float:
    r"""$\int_{y_0}^{y_1} u(x, y)\,dy$, the volume flux through the vertical segment at
    ``x``, by ``n``-point Gauss–Legendre (exact for polynomials of degree $2n - 1$)."""
    y, w = gauss_legendre(n, y0, y1)
    pts = np.stack([np.full_like(y, x), y], axis=1)
    return float((w * np.asarray(predict(pts), np.float64)[:, 0]).sum())


def dfg_quantities(predict, nu: float, u_mean: float, n: int = 256) -> dict:
    """``c_D, c_L, delta_p`` (surface integral), ``c_D_volume, c_L_volume``, their
    relative errors against `DFG1_REFERENCE` (``err_*``), and ``mass_defect``, the
    outlet's volume flux over the inflow's less 1 (0 for a solution; a hard no-slip
    network that loses mass next to the cylinder reads negative, docs/navier_stokes.md)."""
    scale = 2.0 / (u_mean**2 * 2 * RADIUS)
    fs = circle_force(predict, nu, n=n) * scale
    fv = volume_force(predict, nu, n_theta=n) * scale
    p = np.asarray(predict(np.asarray([FRONT, BACK])), np.float64)[:, 2]
    inflow = u_mean * HEIGHT  # the parabolic profile's flux
    out = {"c_D": float(fs[0]), "c_L": float(fs[1]), "delta_p": float(p[0] - p[1]),
           "c_D_volume": float(fv[0]), "c_L_volume": float(fv[1]),
           "mass_defect": section_flux(predict, LENGTH) / inflow - 1}
    for k in ("c_D", "c_L", "delta_p"):
        out[f"err_{k}"] = (out[k] - DFG1_REFERENCE[k]) / DFG1_REFERENCE[k]
    out["err_c_D_volume"] = (out["c_D_volume"] - DFG1_REFERENCE["c_D"]) / DFG1_REFERENCE["c_D"]
    out["reference"] = dict(DFG1_REFERENCE)
    return out


# ------------------------------------------------------------------------ problem


def near_points(n: int, outer: float = 0.1, seed: int = 0, center=CENTER,
                radius: float = RADIUS) -> np.ndarray:
    r"""``(n, 2)`` fixed points in the annulus $R < r < R_2$ (``outer``) about the cylinder,
    graded towards it: $r = R + (R_2 - R)\,s^2$, $\theta = 2\pi t$ for scrambled Sobol
    $(s, t)$ (``seed``), so the density per unit area grows like $1/\sqrt{r - R}$ at the
    wall. The boundary layer and the hard no-slip lifting's steep gradients live there,
    and a uniform set of a few thousand points leaves the first millimetre with a handful
    of them (docs/navier_stokes.md)."""
    s, t = sobol_unit(n, 2, seed).T
    r = radius + (outer - radius) * np.maximum(s, 1e-3) ** 2  # not on the circle itself
    th = 2 * np.pi * t
    return np.asarray(center, np.float64)[None] + np.stack([r * np.cos(th), r * np.sin(th)], axis=1)


def parabolic_inflow(U_max: float, y_axis: int = 1):
    r"""``g(x) -> (2,)``: the inflow $u = 4U_m y(H - y)/H^2$, $v = 0$ (m/s), reading $y$ from
    coordinate ``y_axis`` of a point (1 in space, 2 in space-time ``(t, x, y)``):
    `pinnkit.physics.flow.parabolic_inflow` with the channel's height."""
    return flow.parabolic_inflow(U_max, HEIGHT, y_axis)


def outlet_residual(f, c):
    r"""The do-nothing outflow $\nu\,\partial_n\mathbf u - p\,\mathbf n$ with $\mathbf n = (1, 0)$
    (`pinnkit.physics.flow.outflow_residual`)."""
    return flow.outflow_residual(f, c)


def boundary_terms(inflow) -> dict:
    """The terms ``outlet`` (do-nothing), ``inlet`` (``inflow``), ``walls`` and ``cylinder``
    (no-slip) of the DFG channel, steady or unsteady."""
    return {
        "outlet": Equation(outlet_residual, where="outlet"),
        **flow.velocity_terms({"inlet": inflow, "walls": None, "cylinder": None}),
    }


def no_slip(domain, inflow) -> DistanceDirichlet:
    r"""The hard constraint of ``inlet``, ``walls``, ``cylinder`` on ``domain`` (the channel or
    a `SpaceTime` over it): $\mathbf u = g + \phi\,N$ by distance functions, the outlet free."""
    # The walls get the inflow's data too (zero there): the lifting then blends one smooth
    # function, (1 - w_cylinder) (U(y), 0), close to Poiseuille flow away from the cylinder;
    # with zero wall data it would decay from the inlet within ~H and its divergence
    # (rms 0.39 against 0.02 beyond x = 0.5) stalled Adam at a continuity loss of 0.12.
    return flow.hard_velocity(domain, {"inlet": inflow, "walls": inflow, "cylinder": None})


def _flow_residual(f, c):  # momentum (2) and continuity (1) at one point
    return jnp.concatenate([momentum_residual(f, c), jnp.atleast_1d(continuity_residual(f, c))])


def fem_boundary_velocity(U_max: float) -> dict:
    """The Dirichlet data of the channel for `pinnkit.solvers.fem_ns`: the parabolic
    inflow on ``inlet``, no-slip on ``walls`` and ``cylinder``."""
    return {"inlet": lambda x, y: (4 * U_max * y * (HEIGHT - y) / HEIGHT**2, 0 * y),
            "walls": (0.0, 0.0), "cylinder": (0.0, 0.0)}


def fem_solution(U_max: float = 0.3, nu: float = 1e-3, maxh: float = 0.01,
                 cylinder_maxh: float | None = None, order: int = 2, cache=True):
    """The steady finite-element solution on the channel (`pinnkit.solvers.fem_ns`,
    Taylor–Hood, the ``fem`` extra), cylinder mesh size ``maxh / 10`` by default. At the
    defaults c_D, c_L and Δp are within 0.05 % of `DFG1_REFERENCE` (~103k dofs, ~20 CPU s
    once, then read from the cache; docs/benchmarks.md)."""
    from ..solvers.fem_ns import solve_steady

    return solve_steady(channel_domain(), nu, fem_boundary_velocity(U_max), maxh=maxh,
                        boundary_maxh={"cylinder": maxh / 10 if cylinder_maxh is None else cylinder_maxh},
                        order=order, cache=cache)


def dfg_cylinder(U_max: float = 0.3, nu: float = 1e-3, near: int = 0, near_outer: float = 0.1,
                 near_seed: int = 0, fem_reference: bool = False, fem_maxh: float = 0.01,
                 lifting: str = "distance", lifting_outer: float = 0.2,
                 lifting_profile: str = "wall") -> Problem:
    r"""DFG benchmark 2D-1 (module docstring): fields ``u, v, p``, terms ``momentum``,
    ``continuity``, ``outlet`` (do-nothing) and the Dirichlet terms ``inlet``, ``walls``,
    ``cylinder``.

    **Arguments:**
    - `U_max`: the inflow's centre-line velocity (0.3: Re = 20).
    - `nu`: kinematic viscosity (coefficient ``nu``).
    - `near`: if > 0, a term ``near`` (momentum and continuity together) on this many
      fixed points graded towards the cylinder (`near_points`, out to radius
      ``near_outer``, Sobol seed ``near_seed``), on top of the sampled ``momentum`` and
      ``continuity`` points; 0: none. Measured on the DFG config with SSBroyden
      (docs/benchmarks.md): with 2048 uniform points and ``near_outer`` 0.1 the
      residual left the refined ring and reappeared, as large, just outside it; with
      4096 + 4096 and ``near_outer`` 0.15 no ring keeps it (seed 0); c_D and Δp
      are within 0.2 % on seeds 0, 1, 2, c_L off by +17 / +31 / −76 % (from +200 %).
    - `fem_reference`: if true, the field reference is the finite-element solution
      (`fem_solution` with mesh size `fem_maxh`; the ``fem`` extra), so ``summary.json``
      gets ``rel_l2`` and ``linf`` of ``u, v, p`` and the plots their error maps.

    - `lifting`: the hard constraint's lifting, ``"distance"`` (the distance-function
      blend of the data, `no_slip`) or ``"stream"`` (`pinnkit.problems.dfg_lifting.StreamLifting`:
      the curl of a stream function, divergence-free, switched on within
      ``lifting_outer`` of the cylinder's centre by the step ``lifting_profile``; the
      same distance function $\phi$).

    ``network.hard_constraint: true`` imposes the inflow profile and no-slip exactly
    (`pinnkit.geometry.DistanceDirichlet` on ``inlet``, ``walls``, ``cylinder``; the
    outlet stays free). ``summary.json`` gets ``metrics``: $c_D$, $c_L$, $\Delta p$ and
    their errors (`dfg_quantities`); the c_D/c_L reference values hold for the defaults.
    """
    U_max, nu = float(U_max), float(nu)
    domain = channel_domain()
    inflow = parabolic_inflow(U_max)
    terms = {
        "momentum": Equation(momentum_residual),
        "continuity": Equation(continuity_residual),
        **boundary_terms(inflow),
    }
    if near:
        if near < 0 or not RADIUS < near_outer < min(CENTER[1], HEIGHT - CENTER[1]):
            raise ValueError(f"dfg_cylinder: near={near} must be >= 0 and near_outer={near_outer} "
                             f"between the radius {RADIUS} and the wall gap {CENTER[1]}")
        terms["near"] = PointEquation(_flow_residual, near_points(int(near), near_outer, int(near_seed)))
    if lifting not in ("distance", "stream"):
        raise ValueError(f"dfg_cylinder: lifting must be 'distance' or 'stream': actual={lifting!r}")
    hard = no_slip(domain, inflow)
    if lifting == "stream":
        from .dfg_lifting import StreamLifting

        hard = StreamLifting(hard, U_max, HEIGHT, CENTER, RADIUS, float(lifting_outer), str(lifting_profile))
    u_mean = 2 * U_max / 3
    reference = None
    if fem_reference:
        sol = fem_solution(U_max, nu, maxh=float(fem_maxh))
        reference = HostFunction(sol.evaluate, 3)
    return Problem(
        domain, ("u", "v", "p"), terms, coeffs={"nu": nu}, reference=reference,
        hard_constraint=hard, enforced=("inlet", "walls", "cylinder"),
        metrics=lambda predict: dfg_quantities(predict, nu, u_mean),
        vectors={"velocity": ("u", "v")}, name="dfg_cylinder",
        description=f"DFG 2D-1 flow past a cylinder, Re = {u_mean * 2 * RADIUS / nu:g}",
    )
