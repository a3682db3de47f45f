r"""Incompressible Navier–Stokes problems (density 1, so $p$ is kinematic pressure).

**Velocity–pressure form** (2-D and 3-D, steady or unsteady), fields ``u, v[, w], p``:

$$\partial_t\mathbf u + (\mathbf u\cdot\nabla)\mathbf u + \nabla p - \nu\,\Delta\mathbf u
= \mathbf F, \qquad \nabla\cdot\mathbf u = 0,$$

as two loss terms, ``momentum`` (a vector residual) and ``continuity``.

**Vorticity–stream-function form** (2-D), fields ``psi, omega`` with
$u = \psi_y$, $v = -\psi_x$ (so continuity holds exactly):

$$\omega + \Delta\psi = 0, \qquad
\partial_t\omega + u\,\omega_x + v\,\omega_y - \nu\,\Delta\omega = \nabla\times\mathbf F,$$

as the terms ``stream`` and ``transport``.

$\nu = 1/\text{Re}$ in the non-dimensional problems (unit velocity and length scales).
The pressure (and the stream function) are defined up to a constant: errors are
computed with their means removed (``mean_free``), and ``pressure_pin`` adds a term
fixing $p$ at one point when a gauge is wanted in the loss as well.

The residuals, both forms' terms and the boundary pieces are public in
`pinnkit.physics.flow` (the residuals stay importable from here). Problems (benchmarks
P2, P4, P5 of docs/benchmarks.md); this module holds the analytic flows, the other two
their own files:

- `kovasznay`: steady, analytic (P2 at Re = 20).
- `lid_driven_cavity` (`pinnkit.problems.cavity`): steady, reference = the Ghia, Ghia &
  Shin (1982) centreline tables (`pinnkit.problems.ghia`) for Re = 100, 400, 1000 (P4).
- `taylor_green`: unsteady, periodic, analytic (P5).
- `periodic_flow` (`pinnkit.problems.periodic_flow`): unsteady, periodic, from a given
  initial vorticity, optionally with Kolmogorov forcing; reference = the pseudo-spectral
  solver of `pinnkit.solvers`.
- `beltrami_flow`: unsteady 3-D, analytic (Ethier & Steinman 1994).
- `channel_flow`: steady Poiseuille flow with a parabolic inflow and a traction-free
  outflow, analytic.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import jax.numpy as jnp
import numpy as np

from ..geometry.domains import Box, SpaceTime
from ..physics import flow
from ..physics.constraints import HardDirichlet
from ..physics.flow import FORMS as FORMS
from ..physics.flow import check_form, equations, out_names, outflow_residual
from ..physics.flow import continuity_residual as continuity_residual
from ..physics.flow import momentum_residual as momentum_residual
from ..physics.flow import stream_residual as stream_residual
from ..physics.flow import transport_residual as transport_residual
from ..physics.problem import Problem
from ..physics.terms import Dirichlet, Equation, Initial

# The flow residuals and terms moved to the public `pinnkit.physics.flow`; the residuals
# above stay importable from here, and so do these old private names for one release.
_check_form, _equations, _out_names, _pin_term = check_form, equations, out_names, flow.pressure_pin


def transfinite_extension(
    g: Callable, lower: Sequence[float], upper: Sequence[float], axes: Sequence[int],
    t_axis: int | None = None,
) -> Callable:
    r"""Extends boundary data $g$ from the faces of a box into its interior (transfinite,
    or Coons, interpolation), evaluating $g$ on the faces only.

    With $P_a g = (1 - \xi_a)\,g|_{x_a = l_a} + \xi_a\,g|_{x_a = u_a}$,
    $\xi_a = (x_a - l_a)/(u_a - l_a)$, and for the time axis the one-sided
    $P_t g = g|_{t = t_0}$, the extension is the Boolean sum
    $G = \bigoplus_a P_a\, g = \sum_{S \neq \emptyset} (-1)^{|S| + 1} \prod_{a \in S} P_a\, g$,
    which equals $g$ on every face of `axes` (and on $t = t_0$) when $g$ is continuous.
    That is what a hard constraint $y = G + \phi N$ needs without borrowing the interior
    of an exact solution.

    **Arguments:**
    - `g`: pointwise boundary data ``x -> (k,)``.
    - `lower`, `upper`: the box (all coordinates).
    - `axes`: the coordinates whose two faces carry data.
    - `t_axis`: optional coordinate carrying data at its lower end only (initial data).

    **Returns:** ``G(x) -> (k,)``; it evaluates $g$ at $3^{|axes|} 2^{[t]} - 1$ face points.
    """
    sides = {a: (0, 1) for a in axes}
    if t_axis is not None:
        sides[t_axis] = (0,)
    subsets = [s for r in range(1, len(sides) + 1) for s in itertools.combinations(sides, r)]

    def extension(x):
        total = 0.0
        for subset in subsets:
            sign = 1.0 if len(subset) % 2 else -1.0
            for choice in itertools.product(*(sides[a] for a in subset)):
                weight, keep, face = sign, np.ones(x.shape[0]), np.zeros(x.shape[0])
                for a, side in zip(subset, choice, strict=True):
                    lo, hi = lower[a], upper[a]
                    if a != t_axis:
                        xi = (x[a] - lo) / (hi - lo)
                        weight = weight * (xi if side else 1 - xi)
                    keep[a], face[a] = 0.0, hi if side else lo
                # x·keep + face rather than `.at[].set`/`stack`: those fail inside shard_map
                # when they mix per-device values with constants.
                z = x * jnp.asarray(keep, x.dtype) + jnp.asarray(face, x.dtype)
                total = total + weight * g(z)
        return total

    return extension


# ------------------------------------------------------------------------ Kovasznay


def kovasznay_solution(x, Re: float = 20.0):
    r"""Kovasznay's exact flow behind a grid at one point ``x = (x, y)``:
    $u = 1 - e^{\lambda x}\cos 2\pi y$, $v = \frac{\lambda}{2\pi} e^{\lambda x}\sin 2\pi y$,
    $p = \tfrac12(1 - e^{2\lambda x})$, $\lambda = \text{Re}/2 - \sqrt{\text{Re}^2/4 + 4\pi^2}$.

    **Returns:** ``(u, v, p, psi, omega)`` with $\psi = y - e^{\lambda x}\sin(2\pi y)/2\pi$ and
    $\omega = v_x - u_y = (\lambda^2/2\pi - 2\pi)\,e^{\lambda x}\sin 2\pi y$.
    """
    lam = Re / 2 - math.sqrt(Re**2 / 4 + 4 * math.pi**2)
    e = jnp.exp(lam * x[0])
    c, s = jnp.cos(2 * jnp.pi * x[1]), jnp.sin(2 * jnp.pi * x[1])
    u = 1 - e * c
    v = lam / (2 * math.pi) * e * s
    p = 0.5 * (1 - e * e)  # products, not **: see _smoothed_lid
    psi = x[1] - e * s / (2 * math.pi)
    omega = (lam**2 / (2 * math.pi) - 2 * math.pi) * e * s
    return u, v, p, psi, omega


def kovasznay(
    Re: float = 20.0,
    form: str = "velocity_pressure",
    lower: Sequence[float] = (-0.5, -0.5),
    upper: Sequence[float] = (1.0, 1.5),
    pressure_pin: Sequence[float] | None = None,
) -> Problem:
    r"""Kovasznay flow (benchmark P2 at Re = 20): steady Navier–Stokes on
    $[-0.5, 1]\times[-0.5, 1.5]$ with the exact velocity as Dirichlet data on the boundary.

    **Arguments:**
    - `Re`: Reynolds number ($\nu = 1/\text{Re}$, coefficient ``nu``).
    - `form`: ``"velocity_pressure"`` (fields u, v, p) or ``"vorticity_streamfunction"``
      (fields psi, omega; their exact values are the boundary data).
    - `lower`, `upper`: the box.
    - `pressure_pin`: optional point where $p$ is fixed to its exact value (a
      ``pressure_pin`` term); the errors remove the pressure mean in any case.

    The hard constraint (``network.hard_constraint: true``) imposes the boundary data
    exactly on the velocity (or on psi and omega), leaving the pressure free.
    """
    check_form(form)
    Re = float(Re)
    domain = Box(lower, upper)
    out = out_names(form, 2)
    pick = (3, 4) if form == "vorticity_streamfunction" else (0, 1, 2)

    def exact(x):
        sol = kovasznay_solution(x, Re)
        return jnp.stack([sol[i] for i in pick]).astype(x.dtype)

    def wall(x):
        return exact(x)[:2]

    terms = {**equations(form, 2, unsteady=False), "boundary": Dirichlet("boundary", out[:2], wall)}
    if pressure_pin is not None:
        if form != "velocity_pressure":
            raise ValueError("pressure_pin needs form='velocity_pressure'")
        pinned = float(exact(jnp.asarray(pressure_pin))[2])
        terms["pressure_pin"] = flow.pressure_pin(domain, pressure_pin, pinned)
    return Problem(
        domain,
        out,
        terms,
        coeffs={"nu": 1.0 / Re},
        reference=exact,
        # The transform sees the boundary data only (never the interior solution).
        hard_constraint=HardDirichlet(domain.lower, domain.upper, (0, 1), (0, 1),
                                      value=transfinite_extension(wall, domain.lower, domain.upper, (0, 1))),
        enforced=("boundary",),
        mean_free=("p",) if form == "velocity_pressure" else ("psi",),
        name="kovasznay",
        description=f"P2: Kovasznay flow, Re = {Re:g} ({form.replace('_', '–')})",
    )



# ------------------------------------------------------------------------ Taylor–Green


def taylor_green(nu: float = 0.01, T: float = 1.0, form: str = "velocity_pressure") -> Problem:
    r"""Decaying Taylor–Green vortex (benchmark P5) on $[0, 2\pi]^2 \times [0, T]$:
    $u = -\cos x\sin y\,e^{-2\nu t}$, $v = \sin x\cos y\,e^{-2\nu t}$,
    $p = -\tfrac14(\cos 2x + \cos 2y)\,e^{-4\nu t}$ (in the other form
    $\psi = \cos x\cos y\,e^{-2\nu t}$, $\omega = 2\psi$).

    The flow is $2\pi$-periodic in $x$ and $y$ and the problem has no boundary terms:
    periodicity must come from the network, ``network.periodic: {x: 2π, y: 2π}``.

    **Arguments:**
    - `nu`: kinematic viscosity (coefficient ``nu``).
    - `T`: final time.
    - `form`: ``"velocity_pressure"`` or ``"vorticity_streamfunction"``.

    The hard constraint imposes the initial condition exactly: $y = y_0(x) + (t/T)\,N$
    for the velocity (or psi, omega).
    """
    from ..solvers import taylor_green as tg

    check_form(form)
    nu, T = float(nu), float(T)
    space = Box((0.0, 0.0), (2 * math.pi, 2 * math.pi))
    domain = SpaceTime(space, 0.0, T)
    out = out_names(form, 2)

    def fields(t, x, y):
        if form == "vorticity_streamfunction":
            psi = jnp.cos(x) * jnp.cos(y) * jnp.exp(-2 * nu * t)
            return psi, 2 * psi
        return tg(x, y, t, nu)

    def exact(z):
        return jnp.stack(fields(z[0], z[1], z[2])).astype(z.dtype)

    def initial(z):
        return jnp.stack(fields(jnp.zeros_like(z[0]), z[1], z[2])[:2]).astype(z.dtype)

    terms = {**equations(form, 2, unsteady=True), "initial": Initial(out[:2], initial)}
    return Problem(
        domain,
        out,
        terms,
        coeffs={"nu": nu},
        reference=exact,
        hard_constraint=HardDirichlet(*domain.bounds(), (), (0, 1), value=initial, t_axis=0),
        enforced=("initial",),
        gauge={"p" if form == "velocity_pressure" else "psi": "mean_per_time"},  # up to c(t)
        name="taylor_green",
        description=f"P5: Taylor–Green vortex, ν = {nu:g}, t ∈ [0, {T:g}]",
    )


# ------------------------------------------------------------------ Beltrami (3-D)


def beltrami_solution(z, a: float = math.pi / 4, d: float = math.pi / 2, nu: float = 1.0):
    r"""Ethier & Steinman's (1994) exact 3-D unsteady Navier–Stokes flow at ``z = (t, x, y, z)``:

    $u = -a[e^{ax}\sin(ay + dz) + e^{az}\cos(ax + dy)]\,e^{-\nu d^2 t}$ and cyclic
    permutations for $v, w$; $p = -\frac{a^2}{2}[e^{2ax} + e^{2ay} + e^{2az}
    + 2\sin(ax + dy)\cos(az + dx)e^{a(y+z)} + 2\sin(ay + dz)\cos(ax + dy)e^{a(z+x)}
    + 2\sin(az + dx)\cos(ay + dz)e^{a(x+y)}]\,e^{-2\nu d^2 t}$.

    **Returns:** ``(u, v, w, p)``.
    """
    t, x, y, zz = z[0], z[1], z[2], z[3]
    decay = jnp.exp(-nu * d**2 * t)
    ex, ey, ez = jnp.exp(a * x), jnp.exp(a * y), jnp.exp(a * zz)
    u = -a * (ex * jnp.sin(a * y + d * zz) + ez * jnp.cos(a * x + d * y)) * decay
    v = -a * (ey * jnp.sin(a * zz + d * x) + ex * jnp.cos(a * y + d * zz)) * decay
    w = -a * (ez * jnp.sin(a * x + d * y) + ey * jnp.cos(a * zz + d * x)) * decay
    p = -0.5 * a**2 * (
        ex * ex + ey * ey + ez * ez
        + 2 * jnp.sin(a * x + d * y) * jnp.cos(a * zz + d * x) * ey * ez
        + 2 * jnp.sin(a * y + d * zz) * jnp.cos(a * x + d * y) * ez * ex
        + 2 * jnp.sin(a * zz + d * x) * jnp.cos(a * y + d * zz) * ex * ey
    ) * decay * decay
    return u, v, w, p


def beltrami_flow(a: float = math.pi / 4, d: float = math.pi / 2, nu: float = 1.0, T: float = 1.0) -> Problem:
    r"""Beltrami flow (Ethier & Steinman 1994), the standard 3-D check: unsteady
    Navier–Stokes on $[-1, 1]^3 \times [0, T]$ with the exact velocity as initial and
    boundary data (see `beltrami_solution`).

    **Arguments:**
    - `a`, `d`: the flow's wavenumbers; `nu`: kinematic viscosity; `T`: final time.

    The hard constraint imposes the initial and boundary data exactly through
    `transfinite_extension` (53 evaluations of the data per point: slow; the soft terms
    are the default).
    """
    a, d, nu, T = float(a), float(d), float(nu), float(T)
    domain = SpaceTime(Box((-1.0,) * 3, (1.0,) * 3), 0.0, T)

    def exact(z):
        return jnp.stack(beltrami_solution(z, a, d, nu)).astype(z.dtype)

    def velocity(z):
        return exact(z)[:3]

    fields = ("u", "v", "w")
    terms = {
        **equations("velocity_pressure", 3, unsteady=True),
        "initial": Initial(fields, velocity),
        "boundary": Dirichlet("boundary", fields, velocity),
    }
    lower, upper = domain.bounds()
    return Problem(
        domain,
        (*fields, "p"),
        terms,
        coeffs={"nu": nu},
        reference=exact,
        hard_constraint=HardDirichlet(lower, upper, (1, 2, 3), (0, 1, 2), t_axis=0,
                                      value=transfinite_extension(velocity, lower, upper, (1, 2, 3), 0)),
        enforced=("initial", "boundary"),
        gauge={"p": "mean_per_time"},  # defined up to a function of time
        name="beltrami_flow",
        description=f"3-D Beltrami flow (Ethier–Steinman), ν = {nu:g}, t ∈ [0, {T:g}]",
    )


# -------------------------------------------------------- channel (inflow / outflow)


def channel_flow(Re: float = 100.0, length: float = 2.0, height: float = 1.0) -> Problem:
    r"""Plane Poiseuille flow in $[0, \ell] \times [0, h]$: parabolic inflow
    $u = 4y(h - y)/h^2$, $v = 0$ on the left, no-slip walls, and the traction-free
    ("do-nothing") outflow $\nu\,\partial_n\mathbf u - p\,\mathbf n = 0$ on the right.

    Exact: $u = 4y(h - y)/h^2$, $v = 0$, $p = 8\nu(\ell - x)/h^2$ (the outflow condition
    fixes the pressure level, so $p$ is compared as is).

    **Arguments:**
    - `Re`: Reynolds number on the centre-line velocity and $h$: $\nu = h/\text{Re}$.
    - `length`, `height`: $\ell$ and $h$.

    The hard constraint imposes no-slip on both walls ($y = 0, h$).
    """
    Re, ell, h = float(Re), float(length), float(height)
    nu = h / Re
    domain = Box((0.0, 0.0), (ell, h))

    def exact(x):
        u = 4 * x[1] * (h - x[1]) / h**2
        return jnp.stack([u, jnp.zeros_like(u), 8 * nu * (ell - x[0]) / h**2]).astype(x.dtype)

    terms = {
        **equations("velocity_pressure", 2, unsteady=False),
        "inflow": Dirichlet("left", ("u", "v"), lambda x: exact(x)[:2]),
        "outflow": Equation(outflow_residual, where="right"),  # outward normal +x
        "wall_bottom": Dirichlet("bottom", ("u", "v")),
        "wall_top": Dirichlet("top", ("u", "v")),
    }
    return Problem(
        domain,
        ("u", "v", "p"),
        terms,
        coeffs={"nu": nu},
        reference=exact,
        hard_constraint=HardDirichlet(domain.lower, domain.upper, (1,), (0, 1)),
        enforced=("wall_bottom", "wall_top"),
        name="channel_flow",
        description=f"Poiseuille channel, Re = {Re:g}: parabolic inflow, traction-free outflow",
    )


# The Ghia tables moved to their own module; these names stay importable from here.
from .ghia import GHIA_U as GHIA_U  # noqa: E402
from .ghia import GHIA_V as GHIA_V  # noqa: E402
from .ghia import GHIA_X as GHIA_X  # noqa: E402
from .ghia import GHIA_Y as GHIA_Y  # noqa: E402
from .ghia import ghia_deviation as ghia_deviation  # noqa: E402
from .ghia import ghia_points as ghia_points  # noqa: E402
