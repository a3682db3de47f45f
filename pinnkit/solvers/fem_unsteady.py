r"""Unsteady incompressible flow on a 2-D pinnkit shape: Taylor–Hood in space, BDF2 in time.

The equations and boundary conditions of `pinnkit.solvers.fem_ns` with
$\partial_t\mathbf u$ added, marched from rest by the linearly implicit (extrapolated)
BDF2 scheme: with $\mathbf u^\ast = 2\mathbf u^n - \mathbf u^{n-1}$,

$$\frac{3\mathbf u^{n+1} - 4\mathbf u^n + \mathbf u^{n-1}}{2\,\Delta t}
+ (\nabla\mathbf u^{n+1})\,\mathbf u^\ast + \nabla p^{n+1} - \nu\Delta\mathbf u^{n+1} = 0,
\qquad \nabla\cdot\mathbf u^{n+1} = 0,$$

second order in $\Delta t$, one linear (Oseen) solve per step, no CFL limit from the
convection (the first step is backward Euler). The boundary velocity is ramped
smoothly, $s(t) = \sin^2(\pi t / 2 t_r)$ for $t < t_r$ (``ramp``; an impulsive start
for ``ramp = 0``).

**Forces** by the volume formula of the discrete equations: the residual of the step's
own system (time difference included), tested with $\mathbf w = \mathbf e$ at the nodes
of the boundary, $\mathbf F\cdot\mathbf e = -r(\mathbf w)$. ``periodic_figures`` reads
$\max c_D$, $\max c_L$ and the Strouhal number off the last periods of a history.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import threadpoolctl

from . import fem_cache
from .fem_geometry import FemGeometryError, ngsolve_modules
from .fem_ns import FlowSolution, Velocity, discretise


@dataclass(frozen=True, eq=False)
class FlowHistory:
    """``times`` ``(n,)``; ``forces`` ``{boundary: (n, 2)}``; ``probes`` ``(n, m, 3)`` =
    (u, v, p) at the probe points; ``final``: the `FlowSolution` at ``times[-1]``;
    ``kept_times`` ``(k,)`` and ``kept`` ``(k, ndof)``: the coefficient vectors of the
    steps kept whole (``keep_from`` of `solve_unsteady`; none by default), read back as
    solutions by `snapshot`."""

    times: np.ndarray
    forces: dict
    probes: np.ndarray
    final: FlowSolution
    info: dict = field(default_factory=dict)
    kept_times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    kept: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def snapshot(self, i: int) -> FlowSolution:
        """The `FlowSolution` at ``kept_times[i]`` (a new grid function on the final's space)."""
        ng, _ = ngsolve_modules()
        gf = ng.GridFunction(self.final.gf.space)
        gf.vec.FV().NumPy()[:] = self.kept[i]
        return FlowSolution(self.final.mesh, gf, self.final.nu, self.final.order,
                            dict(self.final.info, t=float(self.kept_times[i])))


def _ramp(t: float, t_ramp: float) -> float:
    return 1.0 if t >= t_ramp else math.sin(0.5 * math.pi * t / t_ramp) ** 2


def _step_form(ng, space, nu: float, c0: float, wind):
    """The step's bilinear form: ``c0 * u.v`` plus Oseen's form with ``wind``."""
    (u, p, *_), (v, q, *_) = space.TnT()
    a = ng.BilinearForm(space)
    a += (c0 * ng.InnerProduct(u, v) + nu * ng.InnerProduct(ng.grad(u), ng.grad(v))
          + ng.InnerProduct(ng.grad(u) * wind, v) - ng.div(u) * q - ng.div(v) * p) * ng.dx
    if len(space.components) == 3:
        (_, _, lam), (_, _, mu) = space.TnT()
        a += (lam * q + mu * p) * ng.dx
    return a


def _force_tests(ng, space, mesh, names) -> dict:
    """Per boundary, the two coefficient vectors of $\\mathbf w = \\mathbf e_x, \\mathbf e_y$."""
    out = {}
    w = ng.GridFunction(space)
    for name in names:
        vecs = []
        for e in ((1.0, 0.0), (0.0, 1.0)):
            w.vec[:] = 0.0
            w.components[0].Set(ng.CF(e), definedon=mesh.Boundaries(name))
            vecs.append(w.vec.FV().NumPy().copy())
        out[name] = np.stack(vecs)
    return out


def solve_unsteady(
    domain,
    nu: float,
    velocity: Mapping[str, Velocity],
    *,
    t_end: float,
    dt: float,
    maxh: float = 0.05,
    boundary_maxh: Mapping[str, float] | None = None,
    order: int = 2,
    curve: int = 3,
    ramp: float = 0.0,
    forces: Sequence[str] = (),
    probes=None,
    cache: bool | str | Path = True,
    blas_threads: int = 1,
    keep_from: float | None = None,
) -> FlowHistory:
    r"""March the flow from rest to ``t_end`` with steps ``dt`` (module docstring).

    Arguments as `pinnkit.solvers.fem_ns.solve_steady`, and: ``ramp`` (the boundary
    data's ramp time $t_r$), ``forces`` (boundary names whose force is recorded each
    step), ``probes`` (points ``(m, 2)`` where ``(u, v, p)`` is recorded each step).
    Every step is recorded. Cached like the steady solver (the history and the final
    coefficients).
    """
    ng, _ = ngsolve_modules()
    for what, val in (("t_end", t_end), ("dt", dt)):
        if not (isinstance(val, int | float) and math.isfinite(val) and val > 0):
            raise FemGeometryError(f"{what} must be a positive number: actual={val!r}")
    if not (isinstance(ramp, int | float) and math.isfinite(ramp) and ramp >= 0):
        raise FemGeometryError(f"ramp must be a number >= 0: actual={ramp!r}")
    if keep_from is not None and not (isinstance(keep_from, int | float) and math.isfinite(keep_from)
                                      and 0 <= keep_from <= t_end):
        raise FemGeometryError(f"keep_from must be a time in [0, t_end={t_end}]: actual={keep_from!r}")
    disc = discretise(domain, nu, velocity, maxh=maxh, boundary_maxh=boundary_maxh,
                      order=order, curve=curve)
    mesh, space = disc.mesh, disc.space
    unknown = sorted(set(forces) - set(mesh.GetBoundaries()))
    if unknown:
        raise FemGeometryError(f"forces names boundaries {unknown} that the mesh does not have: "
                               f"{sorted(set(mesh.GetBoundaries()))}")
    pts = np.zeros((0, 2)) if probes is None else np.asarray(probes, np.float64).reshape(-1, 2)
    n_steps = int(round(t_end / dt))
    first_kept = n_steps + 1 if keep_from is None else max(1, math.ceil(keep_from / dt - 1e-9))
    n_kept = n_steps + 1 - first_kept
    parts = [disc.key, float(dt), n_steps, float(ramp), sorted(forces), pts.tolist()]
    key = fem_cache.digest("ns_bdf2", *parts, *([first_kept] if n_kept else []))
    path = fem_cache.path_for(cache, "ns_bdf2", key)
    gf = ng.GridFunction(space)
    info = dict(disc.info, dt=dt, steps=n_steps, cached=False)
    ndof = space.ndof
    stored = fem_cache.load(path, ndof * max(n_kept, 1))  # the kept steps end with the final
    if stored is not None:
        vecs = stored[0].reshape(-1, ndof)
        gf.vec.FV().NumPy()[:] = vecs[-1]
        meta = stored[1]
        info.update(meta["info"], cached=True, path=str(path))
        final = FlowSolution(mesh, gf, disc.nu, order, info)
        times = np.asarray(meta["times"])
        return FlowHistory(times, {k: np.asarray(v) for k, v in meta["forces"].items()},
                           np.asarray(meta["probes"]).reshape(len(times), len(pts), 3), final, info,
                           times[first_kept - 1:], vecs if n_kept else np.zeros((0, ndof)))
    t0 = time.process_time()
    tests = _force_tests(ng, space, mesh, forces)
    free = space.FreeDofs()
    old, older = ng.GridFunction(space), ng.GridFunction(space)  # u^n, u^{n-1}
    wind = ng.GridFunction(space.components[0])
    mass = ng.BilinearForm(space)
    (u, *_), (v, *_) = space.TnT()
    mass += ng.InnerProduct(u, v) * ng.dx
    mass.Assemble()
    euler, bdf2 = (_step_form(ng, space, disc.nu, c0, wind) for c0 in (1.0 / dt, 1.5 / dt))
    rhs, res = gf.vec.CreateVector(), gf.vec.CreateVector()
    times, hist_f, hist_p, kept = [], {k: [] for k in forces}, [], []
    with threadpoolctl.threadpool_limits(limits=blas_threads, user_api="blas"):
        for n in range(1, n_steps + 1):
            t = n * dt
            first = n == 1
            # u* = 2 u^n - u^{n-1} (u^n on the first step)
            wind.vec.data = old.components[0].vec if first else (
                2.0 * old.components[0].vec - older.components[0].vec)
            a = euler if first else bdf2
            a.Assemble()  # the forms read ``wind``: reassembled, not rebuilt
            if first:
                rhs.data = (1.0 / dt) * (mass.mat * old.vec)
            else:  # (4 u^n - u^{n-1}) / (2 dt)
                rhs.data = (1.0 / dt) * (mass.mat * (2.0 * old.vec - 0.5 * older.vec))
            gf.vec.data = old.vec
            disc.set_boundary(gf, _ramp(t, ramp) if ramp > 0 else 1.0)
            res.data = rhs - a.mat * gf.vec
            gf.vec.data += a.mat.Inverse(free, inverse="umfpack") * res
            if not np.all(np.isfinite(gf.vec.FV().NumPy())):
                raise FemGeometryError(f"the time stepper diverged at t={t:g}: reduce dt (actual {dt})")
            res.data = a.mat * gf.vec - rhs  # the full residual: the forces' test
            r = res.FV().NumPy()
            times.append(t)
            for k, w in tests.items():
                hist_f[k].append((-(w @ r)).tolist())
            if len(pts):
                hist_p.append(FlowSolution(mesh, gf, disc.nu, order).evaluate(pts))
            if n >= first_kept:
                kept.append(gf.vec.FV().NumPy().copy())
            older.vec.data = old.vec
            old.vec.data = gf.vec
    info.update(cpu_s=time.process_time() - t0, path=None if path is None else str(path))
    probes_arr = np.asarray(hist_p).reshape(len(times), len(pts), 3)
    out_f = {k: np.asarray(v).reshape(-1, 2) for k, v in hist_f.items()}
    kept_arr = np.asarray(kept).reshape(n_kept, ndof)
    if path is not None:
        fem_cache.store(path, kept_arr.ravel() if n_kept else gf.vec.FV().NumPy(), {
            "info": {k: info[k] for k in ("cpu_s",)}, "times": times,
            "forces": {k: v.tolist() for k, v in out_f.items()}, "probes": probes_arr.tolist()})
    return FlowHistory(np.asarray(times), out_f, probes_arr,
                       FlowSolution(mesh, gf, disc.nu, order, info), info,
                       np.asarray(times[first_kept - 1:]), kept_arr)


def periodic_figures(times, drag, lift, periods: int = 3) -> dict:
    r"""``c_D_max``, ``c_L_max``, ``c_L_min``, ``period`` and ``frequency`` of a periodic
    signal's last ``periods`` periods (lift's upward zero crossings, linearly
    interpolated; maxima by a parabola through the largest sample and its neighbours).
    Raises `ValueError` if the lift has fewer than ``periods + 1`` crossings (no shedding)."""
    t, d, lf = (np.asarray(a, np.float64) for a in (times, drag, lift))
    up = np.flatnonzero((lf[:-1] < 0) & (lf[1:] >= 0))
    if len(up) < periods + 1:
        raise ValueError(f"the lift crosses zero upwards {len(up)} times: no periodic shedding "
                         f"to read {periods} periods from (run longer, or it is steady)")
    cross = t[up] - lf[up] * (t[up + 1] - t[up]) / (lf[up + 1] - lf[up])
    window = slice(up[-periods - 1], up[-1] + 2)

    def peak(y):
        yy, i = y[window], int(np.argmax(y[window]))
        if 0 < i < len(yy) - 1:
            a, b, c = yy[i - 1], yy[i], yy[i + 1]
            den = a - 2 * b + c
            return float(b - 0.125 * (a - c) ** 2 / den) if den != 0 else float(b)
        return float(yy[i])

    period = float((cross[-1] - cross[-periods - 1]) / periods)
    return {"c_D_max": peak(d), "c_L_max": peak(lf), "c_L_min": -peak(-lf), "period": period,
            "frequency": 1.0 / period}
