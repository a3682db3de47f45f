r"""The DFG benchmarks by finite elements: the classical reference for the PINN problems
`dfg_cylinder` (2D-1) and `dfg_shedding` (2D-2).

The same domain (`pinnkit.problems.dfg.channel_domain`), inflow and viscosity as the
PINN problems, solved by `pinnkit.solvers.fem_ns` (steady, Taylor–Hood P2/P1, Newton)
and `pinnkit.solvers.fem_unsteady` (BDF2), forces by the volume formula. Mesh levels
``maxh`` / ``cylinder_maxh``; the defaults of `dfg1_fem` are the validated level of
docs/benchmarks.md (c_D, c_L, Δp within 0.05 % of `DFG1_REFERENCE`). Needs the ``fem``
extra.
"""

from __future__ import annotations

from ..solvers.fem_ns import FlowSolution
from ..solvers.fem_unsteady import FlowHistory, periodic_figures, solve_unsteady
from .dfg import BACK, FRONT, RADIUS, channel_domain, fem_boundary_velocity, fem_solution

D = 2 * RADIUS


def dfg1_fem(U_max: float = 0.3, nu: float = 1e-3, *, maxh: float = 0.01,
             cylinder_maxh: float = 0.001, order: int = 2, cache=True) -> FlowSolution:
    """DFG 2D-1 (Re 20 for the defaults), steady; ~103k dofs, ~20 CPU s at the defaults."""
    return fem_solution(U_max, nu, maxh=maxh, cylinder_maxh=cylinder_maxh, order=order, cache=cache)


def fem_quantities(sol: FlowSolution, U_max: float = 0.3) -> dict:
    r"""``c_D``, ``c_L`` ($2F/(\bar U^2 D)$, $\bar U = 2U_m/3$, volume formula) and
    ``delta_p`` = p(0.15, 0.2) − p(0.25, 0.2) of a DFG 2D-1 solution."""
    fx, fy = sol.force("cylinder")
    scale = 2.0 / ((2.0 * U_max / 3.0) ** 2 * D)
    p = sol.evaluate([FRONT, BACK])[:, 2]
    return {"c_D": scale * fx, "c_L": scale * fy, "delta_p": float(p[0] - p[1])}


def dfg2_fem(U_max: float = 1.5, nu: float = 1e-3, *, t_end: float = 10.0, dt: float = 0.005,
             maxh: float = 0.03, cylinder_maxh: float = 0.003, order: int = 2, cache=True, probes=(),
             keep_from: float | None = None) -> FlowHistory:
    """DFG 2D-2 (Re 100) from rest by BDF2 to ``t_end``: forces on the cylinder and
    ``(u, v, p)`` at the front and back points, then at ``probes`` ``(m, 2)``, every step;
    the whole solution of every step from ``keep_from`` on (`FlowHistory.snapshot`).
    ``order`` 2: P2/P1 Taylor–Hood, 3: P3/P2."""
    pts = [FRONT, BACK, *(tuple(map(float, q)) for q in probes)]
    return solve_unsteady(channel_domain(), nu, fem_boundary_velocity(U_max), t_end=t_end, dt=dt, maxh=maxh,
                          boundary_maxh={"cylinder": cylinder_maxh}, forces=["cylinder"],
                          order=order, probes=pts, cache=cache, keep_from=keep_from)


def dfg2_figures(history: FlowHistory, U_max: float = 1.5, periods: int = 3) -> dict:
    """``c_D_max``, ``c_L_max``, ``St`` ($Df/\\bar U$, f of the lift) over the last periods."""
    u_mean = 2.0 * U_max / 3.0
    f = history.forces["cylinder"] * 2.0 / (u_mean**2 * D)
    out = periodic_figures(history.times, f[:, 0], f[:, 1], periods=periods)
    out["St"] = out["frequency"] * D / u_mean
    return out
