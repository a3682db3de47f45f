r"""A finite-element reference for steady incompressible flow on a 2-D pinnkit shape.

Steady Navier–Stokes (density 1, kinematic pressure $p$, viscosity $\nu$),

$$(\mathbf u\cdot\nabla)\mathbf u + \nabla p - \nu\Delta\mathbf u = \mathbf 0, \qquad
\nabla\cdot\mathbf u = 0,$$

in the weak form: find $(\mathbf u, p)$ with the given velocity on the Dirichlet boundaries
such that for all $(\mathbf v, q)$ vanishing there

$$R(\mathbf u, p; \mathbf v, q) = \int_\Omega \nu\nabla\mathbf u : \nabla\mathbf v
+ (\nabla\mathbf u\,\mathbf u)\cdot\mathbf v - p\,\nabla\cdot\mathbf v
- q\,\nabla\cdot\mathbf u \; dx = 0 .$$

Every boundary without a velocity is a *do-nothing* outflow,
$\nu\,\partial_n\mathbf u - p\,\mathbf n = \mathbf 0$ (the natural condition of this form,
DFG's). A domain with a velocity on every boundary fixes the pressure by
$\int_\Omega p\,dx = 0$ (a Lagrange multiplier).

**Discretisation.** Taylor–Hood elements ($P_k$ velocity, $P_{k-1}$ pressure, ``order`` =
$k \ge 2$; inf-sup stable, no stabilisation) on a Netgen mesh of the same CSG shape
(`pinnkit.solvers.fem_geometry`), curved boundary elements. A few Picard (Oseen) steps
from $\mathbf u = 0$ (with the boundary data) start Newton's method, whose Jacobian is
NGSolve's exact linearisation; each linear system by UMFPACK.
Velocity error $O(h^{k+1})$ in $L^2$ for smooth flows (tests/test_fem_ns.py measures the
slope on Kovasznay flow).

**Forces** on a boundary $S$ by the volume formula (John 2004): with $\mathbf w$ the
finite-element function equal to $\mathbf e$ at the velocity nodes on $S$ and $0$ at all
others, $\mathbf F\cdot\mathbf e = -R(\mathbf u_h, p_h; \mathbf w, 0)$ — the traction
$\oint_S(\nu\nabla\mathbf u - p I)\,\mathbf n_b\,ds$ on the body ($\mathbf n_b$ into the
fluid), super-convergent compared with a surface integral of derivatives. On a no-slip
wall of a divergence-free flow $\nu\nabla\mathbf u\,\mathbf n = \nu(\nabla\mathbf u +
\nabla\mathbf u^\top)\mathbf n$, so this is the full Cauchy traction.

Needs the optional ``fem`` extra (NGSolve); `solve_steady` caches solutions
(`pinnkit.solvers.fem_cache`).
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import threadpoolctl
from jaxtyping import Float

from ..errors import PinnkitError
from . import fem_cache
from .fem_geometry import FemGeometryError, describe, make_mesh, ngsolve_modules

Velocity = tuple[float, float] | Callable
"""A boundary velocity: ``(u, v)`` numbers, or a function ``g(x, y) -> (u, v)`` or
``g(x, y, m) -> (u, v)``. It runs both on NumPy arrays (the cache key samples it on the
boundary's vertices) and on NGSolve coefficient functions (the boundary values), so it
uses arithmetic (``+ - * / **``) and, in the three-argument form, the functions of ``m``:
``m.exp, m.sin, m.cos, m.tan, m.sqrt, m.log, m.sinh, m.cosh, m.pi`` (NumPy's, or NGSolve's)."""


class FemSolveError(PinnkitError, RuntimeError):
    """Newton's method did not converge (too high a Reynolds number for a steady flow,
    too coarse a mesh), or inconsistent boundary data."""


@dataclass(frozen=True, eq=False)
class FlowSolution:
    """A Taylor–Hood solution: ``evaluate(points)``, ``force(boundary)``, ``info``.

    ``gf`` is the NGSolve `GridFunction` of the product space ``(u, p[, mean])``;
    ``info`` has ``ndof``, ``elements``, ``newton_steps``, ``cpu_s`` (the solve's process
    time; 0 when read from the cache), ``cached`` and the cache ``path`` (or None)."""

    mesh: object
    gf: object
    nu: float
    order: int
    info: dict = field(default_factory=dict)

    @property
    def velocity(self):
        return self.gf.components[0]

    @property
    def pressure(self):
        return self.gf.components[1]

    def evaluate(self, points: Float[np.ndarray, "n 2"], snap: float = 1e-6) -> Float[np.ndarray, "n 3"]:
        """``(u, v, p)`` at ``points`` ``(n, 2)``; NaN rows for points outside the mesh.

        A point not in any element but within ``snap`` times the mesh's diameter of one
        (a boundary point rounded to float32 lands just outside) takes the value at the
        nearest of eight points at that distance around it that is in the mesh."""
        pts = np.asarray(points, np.float64)
        if pts.ndim != 2 or pts.shape[1] != 2:
            raise ValueError(f"points must have shape (n, 2): actual={pts.shape}")
        out = np.full((pts.shape[0], 3), np.nan)
        missing = np.arange(pts.shape[0])
        for k in range(9):  # the points themselves, then eight shifted copies of the missing
            if not len(missing):
                break
            q = pts[missing]
            if k:
                if k == 1:  # the mesh's diameter, only when needed (a Python loop)
                    verts = np.array([v.point for v in self.mesh.vertices])
                    step = snap * float(np.hypot(*np.ptp(verts, axis=0)))
                a = (k - 1) * np.pi / 4
                q = q + step * np.array([np.cos(a), np.sin(a)])
            mips = self.mesh(q[:, 0], q[:, 1])
            found = mips["nr"] >= 0
            if found.any():
                mi, rows = mips[found], missing[found]
                out[rows, :2] = np.asarray(self.velocity(mi)).reshape(-1, 2)
                out[rows, 2] = np.asarray(self.pressure(mi)).reshape(-1)
            missing = missing[~found]
        return out

    __call__ = evaluate

    def force(self, boundary: str) -> tuple[float, float]:
        r"""$(F_x, F_y)$ on the boundary named ``boundary`` by the volume formula (module
        docstring): the weak residual tested with $\mathbf w = \mathbf e$ on it."""
        ng, _ = ngsolve_modules()
        if boundary not in set(self.mesh.GetBoundaries()):
            raise FemGeometryError(f"no boundary named {boundary!r}: the mesh has "
                                   f"{sorted(set(self.mesh.GetBoundaries()))}")
        form = _residual_form(ng, self.gf.space, self.nu)
        res = self.gf.vec.CreateVector()
        form.Apply(self.gf.vec, res)
        w = ng.GridFunction(self.gf.space)
        out = []
        for e in ((1.0, 0.0), (0.0, 1.0)):
            w.vec[:] = 0.0
            w.components[0].Set(ng.CF(e), definedon=self.mesh.Boundaries(boundary))
            out.append(-float(ng.InnerProduct(res, w.vec)))
        return out[0], out[1]


def _spaces(ng, mesh, dirichlet: str, order: int, gauge: bool):
    v = ng.VectorH1(mesh, order=order, dirichlet=dirichlet)
    q = ng.H1(mesh, order=order - 1)
    return v * q * ng.NumberSpace(mesh) if gauge else v * q


def _residual_form(ng, space, nu: float, convection: bool = True, wind=None):
    """$R$ of the module docstring as an NGSolve form; ``wind`` (a velocity field) makes
    it Oseen's linear form with $(\\nabla\\mathbf u\\,\\mathbf w)\\cdot\\mathbf v$."""
    trial, test = space.TnT()
    (u, p), (v, q) = trial[:2], test[:2]
    a = ng.BilinearForm(space)
    integrand = nu * ng.InnerProduct(ng.grad(u), ng.grad(v)) - ng.div(u) * q - ng.div(v) * p
    if convection:
        w = u if wind is None else wind
        integrand = integrand + ng.InnerProduct(ng.grad(u) * w, v)
    if len(trial) == 3:  # the pressure's mean fixed by a multiplier
        integrand = integrand + trial[2] * q + test[2] * p
    a += integrand * ng.dx
    return a


_FUNCTIONS = ("exp", "sin", "cos", "tan", "sqrt", "log", "sinh", "cosh")


def _call(g: Callable, x, y, m):
    """``g(x, y)`` or ``g(x, y, m)``, by the number of positional parameters ``g`` takes."""
    try:
        n = len([p for p in inspect.signature(g).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])
    except (TypeError, ValueError):  # a builtin without a signature: two arguments
        n = 2
    return g(x, y, m) if n >= 3 else g(x, y)


def _boundary_cf(ng, value):
    if callable(value):
        m = SimpleNamespace(pi=math.pi, **{f: getattr(ng, f) for f in _FUNCTIONS})
        value = _call(value, ng.x, ng.y, m)
    u, v = value
    return ng.CF((u, v))


def _sample(value, pts: np.ndarray) -> list:
    """Boundary data at the boundary's mesh vertices (the content of a callable)."""
    if not callable(value):
        return [float(value[0]), float(value[1])]
    u, v = _call(value, pts[:, 0], pts[:, 1], np)
    return [np.broadcast_to(np.asarray(c, np.float64), (len(pts),)).tolist() for c in (u, v)]


def _boundary_points(mesh, name: str) -> np.ndarray:
    verts = sorted({v.nr for el in mesh.Boundaries(name).Elements() for v in el.vertices})
    return np.array([mesh.vertices[i].point for i in verts], np.float64).reshape(-1, 2)


def _check_inputs(shape, nu, velocity, order, mesh):
    if not (isinstance(nu, int | float) and math.isfinite(nu) and nu > 0):
        raise FemGeometryError(f"viscosity nu must be a positive number: actual={nu!r}")
    if not (isinstance(order, int) and order >= 2):
        raise FemGeometryError(f"Taylor–Hood needs velocity order >= 2: actual={order!r}")
    names = set(mesh.GetBoundaries())
    unknown = sorted(set(velocity) - names)
    if unknown:
        raise FemGeometryError(
            f"velocity names boundaries {unknown} that the shape does not have; its boundaries are "
            f"{sorted(names)} (pinnkit's boundary names: docs/geometry.md)")
    if not velocity:
        raise FemGeometryError("velocity must give the velocity on at least one boundary "
                               "(inflow, walls); the others are do-nothing outflows")


def _newton(ng, space, gf, nu, picard: int, tol: float, max_steps: int) -> int:
    """Picard then Newton on the free dofs; ``gf`` holds the boundary data and is
    overwritten by the solution. Returns the number of Newton steps."""
    free = space.FreeDofs()
    res, du = gf.vec.CreateVector(), gf.vec.CreateVector()
    for _ in range(picard):  # Oseen steps: robust far from the solution
        wind = ng.GridFunction(space.components[0])
        wind.vec.data = gf.components[0].vec
        a = _residual_form(ng, space, nu, wind=wind)
        a.Assemble()
        res.data = a.mat * gf.vec
        gf.vec.data -= a.mat.Inverse(free, inverse="umfpack") * res
    form = _residual_form(ng, space, nu)
    for step in range(1, max_steps + 1):
        form.Apply(gf.vec, res)
        form.AssembleLinearization(gf.vec)
        du.data = form.mat.Inverse(free, inverse="umfpack") * res
        gf.vec.data -= du
        size = float(np.max(np.abs(gf.vec.FV().NumPy())))
        if not math.isfinite(size):
            break
        if float(np.max(np.abs(du.FV().NumPy()))) <= tol * max(size, 1.0):
            return step
    raise FemSolveError(
        f"Newton's method for the steady flow did not converge in {max_steps} steps "
        f"(nu={nu}): the Reynolds number may be too high for a steady solution on this mesh "
        "(try more Picard steps, a finer mesh, or a larger nu), or the boundary data may be "
        "inconsistent (net inflow through a closed domain)."
    )


@dataclass(frozen=True, eq=False)
class Discretisation:
    """The mesh and Taylor–Hood space of a flow problem, its boundary data, and ``key``
    (the JSON-able inputs of a cache key: geometry, nu, mesh, order, the data sampled on
    the boundary vertices, NGSolve's version, the number of dofs)."""

    mesh: object
    space: object
    nu: float
    velocity: dict
    key: list
    info: dict

    def set_boundary(self, gf, factor: float = 1.0) -> None:
        """Write ``factor`` times the boundary velocity into ``gf``'s Dirichlet dofs."""
        ng, _ = ngsolve_modules()
        # one Set over all Dirichlet boundaries: a Set restricted to one clears the others
        data = self.mesh.BoundaryCF({k: factor * _boundary_cf(ng, v) for k, v in self.velocity.items()},
                                    default=ng.CF((0, 0)))
        gf.components[0].Set(data, definedon=self.mesh.Boundaries("|".join(self.velocity)))


def discretise(domain, nu: float, velocity: Mapping[str, Velocity], *, maxh: float,
               boundary_maxh: Mapping[str, float] | None, order: int, curve: int,
               corner_maxh: float | None = None) -> Discretisation:
    """Mesh ``domain`` (a shape or its YAML mapping) and build the space (`solve_steady`'s
    arguments); checks the inputs (`FemGeometryError`)."""
    ng, _ = ngsolve_modules()
    if isinstance(domain, Mapping):
        from ..geometry import build_domain

        domain = build_domain(domain, key="domain")
    velocity = dict(velocity)
    mesh = make_mesh(domain, maxh, boundary_maxh, curve, corner_maxh)
    _check_inputs(domain, nu, velocity, order, mesh)
    gauge = set(velocity) == set(mesh.GetBoundaries())
    space = _spaces(ng, mesh, "|".join(velocity), order, gauge)
    bmaxh = {k: float(h) for k, h in dict(boundary_maxh or {}).items()}
    # corner_maxh only when set: the keys (and cached solutions) of meshes without it unchanged
    key = [describe(domain), float(nu), order, curve, float(maxh), sorted(bmaxh.items()),
           *([] if corner_maxh is None else [["corner_maxh", float(corner_maxh)]]),
           [(k, _sample(v, _boundary_points(mesh, k))) for k, v in velocity.items()],
           ng.__version__, space.ndof]
    info = {"ndof": space.ndof, "elements": mesh.ne, "maxh": maxh, "boundary_maxh": bmaxh,
            "corner_maxh": corner_maxh, "order": order}
    return Discretisation(mesh, space, float(nu), velocity, key, info)


def solve_steady(
    domain,
    nu: float,
    velocity: Mapping[str, Velocity],
    *,
    maxh: float = 0.05,
    boundary_maxh: Mapping[str, float] | None = None,
    corner_maxh: float | None = None,
    order: int = 2,
    curve: int = 3,
    picard: int = 2,
    tol: float = 1e-10,
    max_newton: int = 30,
    cache: bool | str | Path = True,
    blas_threads: int = 1,
) -> FlowSolution:
    r"""Steady Navier–Stokes on a pinnkit 2-D shape by Taylor–Hood finite elements.

    **Arguments:**

    - ``domain``: a pinnkit shape (`pinnkit.geometry`), or its YAML geometry mapping
      (``{"difference": [...]}``, docs/geometry.md);
    - ``nu``: kinematic viscosity (> 0);
    - ``velocity``: ``{boundary name: Velocity}``: the velocity on the Dirichlet
      boundaries (``(0, 0)`` for no-slip walls, a profile for an inflow); every other
      boundary is a do-nothing outflow. The data should agree where two boundaries
      meet; where they do not (a driven lid's corners), the corner node takes one value;
    - ``maxh``, ``boundary_maxh``, ``corner_maxh``, ``curve``: the mesh
      (`fem_geometry.make_mesh`; ``corner_maxh``: the element size at re-entrant corners);
    - ``order``: the velocity degree $k$ (pressure $k - 1$), default 2 (P2/P1);
    - ``picard``, ``tol``, ``max_newton``: Picard steps before Newton; Newton stops when
      the largest update is at most ``tol`` times the largest coefficient;
    - ``cache``: ``True`` for ``~/.cache/pinnkit/fem`` (``$XDG_CACHE_HOME`` if set), a
      folder, or ``False``: solutions are stored under a hash of every input
      (geometry, data sampled on the boundary vertices, mesh, order, tolerances, NGSolve's
      version) and read back instead of solved;
    - ``blas_threads``: OpenBLAS threads during the solve (1: see the comment there).

    **Returns:** a `FlowSolution`. **Raises:** `FemGeometryError` (a shape the mesher
    cannot rebuild, an unknown boundary name, an impossible number), `FemSolveError`.
    """
    ng, _ = ngsolve_modules()
    disc = discretise(domain, nu, velocity, maxh=maxh, boundary_maxh=boundary_maxh,
                      order=order, curve=curve, corner_maxh=corner_maxh)
    key = fem_cache.digest("ns_steady", disc.key, picard, tol)
    gf = ng.GridFunction(disc.space)
    info = dict(disc.info, cached=False)
    path = fem_cache.path_for(cache, "ns_steady", key)
    stored = fem_cache.load(path, disc.space.ndof)
    if stored is not None:
        gf.vec.FV().NumPy()[:] = stored[0]
        info.update(stored[1], cached=True, path=str(path), cpu_s=0.0)
        return FlowSolution(disc.mesh, gf, disc.nu, order, info)
    t0 = time.process_time()
    disc.set_boundary(gf)
    # UMFPACK's BLAS calls are on small dense fronts: OpenBLAS threads mostly spin (10x
    # the CPU time measured on 2 busy cores), so the solve runs with one by default
    with threadpoolctl.threadpool_limits(limits=blas_threads, user_api="blas"):
        steps = _newton(ng, disc.space, gf, disc.nu, picard, tol, max_newton)
    info.update(newton_steps=steps, cpu_s=time.process_time() - t0,
                path=None if path is None else str(path))
    if path is not None:
        fem_cache.store(path, gf.vec.FV().NumPy(), {k: info[k] for k in ("newton_steps", "cpu_s")})
    return FlowSolution(disc.mesh, gf, disc.nu, order, info)
