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

Problems (benchmarks P2, P4, P5 of ``docs/benchmarks.md``):

- `kovasznay`: steady, analytic (P2 at Re = 20).
- `lid_driven_cavity`: steady, reference = the Ghia, Ghia & Shin (1982) centreline
  tables (`GHIA_U`, `GHIA_V`, `ghia_deviation`) for Re = 100, 400, 1000 (P4).
- `taylor_green`: unsteady, periodic, analytic (P5).
- `periodic_flow`: unsteady, periodic, from a given initial vorticity, optionally with
  Kolmogorov forcing; reference = the pseudo-spectral solver of `pinnkit.solvers`.
- `beltrami_flow`: unsteady 3-D, analytic (Ethier & Steinman 1994).
- `channel_flow`: steady Poiseuille flow with a parabolic inflow and a traction-free
  outflow, analytic.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._loader import is_callable_spec, load_callable
from ..geometry.domains import Box, SpaceTime
from ..nn.layers import HardDirichlet
from ..physics.problem import Problem
from ..physics.terms import Dirichlet, Equation, Initial, Observation

FORMS = ("velocity_pressure", "vorticity_streamfunction")

# A pinned point is an Observation term, whose rows are sharded over the devices: the
# point is repeated so that its count divides any device count up to 8.
_PIN_COPIES = 8


# ------------------------------------------------------------------------ residuals


def momentum_residual(
    f,
    c,
    velocity: Sequence[str] = ("u", "v"),
    pressure: str = "p",
    unsteady: bool = False,
    force: Callable | None = None,
):
    r"""$\partial_t u_i + u_j \partial_j u_i + \partial_i p - \nu\,\Delta u_i - F_i$ for every $i$.

    **Arguments:**
    - `f`, `c`: the `Fields` view and the coefficients (``c["nu"]``: kinematic viscosity).
    - `velocity`: the velocity fields, one per spatial coordinate, in coordinate order.
    - `pressure`: the pressure field.
    - `unsteady`: include $\partial_t \mathbf u$ (the domain has a ``t`` coordinate).
    - `force`: optional body force ``force(point, velocity) -> (d,)``.

    **Returns:** the residual vector, shape ``(d,)``.
    """
    coords = f.layout.spatial
    vel = [f[name] for name in velocity]
    rows = []
    for i, ui in enumerate(velocity):
        r = sum(vel[j] * f.partial(ui, cj) for j, cj in enumerate(coords))
        r = r + f.partial(pressure, coords[i]) - c["nu"] * f.laplacian(ui)
        if unsteady:
            r = r + f.partial(ui, "t")
        rows.append(r)
    res = jnp.stack(rows)
    if force is not None:
        res = res - force(f.point, jnp.stack(vel))
    return res


def continuity_residual(f, c, velocity: Sequence[str] = ("u", "v")):
    r"""$\nabla\cdot\mathbf u$."""
    return f.divergence(tuple(velocity))


def stream_residual(f, c):
    r"""$\omega + \Delta\psi$ (fields ``psi``, ``omega``)."""
    return f["omega"] + f.laplacian("psi")


def transport_residual(f, c, unsteady: bool = False, curl_force: Callable | None = None):
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


def _check_form(form: str) -> None:
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}: actual={form!r}")


def _equations(form: str, dim: int, unsteady: bool, force=None, curl_force=None) -> dict:
    """The interior terms of either form."""
    if form == "vorticity_streamfunction":
        if dim != 2:
            raise ValueError(f"the vorticity–stream-function form is 2-D only: actual dim={dim}")
        return {
            "stream": Equation(stream_residual),
            "transport": Equation(
                functools.partial(transport_residual, unsteady=unsteady, curl_force=curl_force)
            ),
        }
    vel = ("u", "v", "w")[:dim]
    return {
        "momentum": Equation(
            functools.partial(momentum_residual, velocity=vel, unsteady=unsteady, force=force)
        ),
        "continuity": Equation(functools.partial(continuity_residual, velocity=vel)),
    }


def _out_names(form: str, dim: int) -> tuple[str, ...]:
    return ("psi", "omega") if form == "vorticity_streamfunction" else (*("u", "v", "w")[:dim], "p")


def _pin_term(domain, point: Sequence[float], value: float) -> Observation:
    point = np.asarray(point, np.float64)
    if point.shape != (domain.dim,):
        raise ValueError(
            f"pressure_pin must be a point with {domain.dim} coordinates {domain.coords}: "
            f"actual={point.tolist()}"
        )
    return Observation(
        np.repeat(point[None], _PIN_COPIES, axis=0),
        np.full((_PIN_COPIES, 1), value, np.float64),
        fields=("p",),
    )


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
    _check_form(form)
    Re = float(Re)
    domain = Box(lower, upper)
    out = _out_names(form, 2)
    pick = (3, 4) if form == "vorticity_streamfunction" else (0, 1, 2)

    def exact(x):
        sol = kovasznay_solution(x, Re)
        return jnp.stack([sol[i] for i in pick]).astype(x.dtype)

    def wall(x):
        return exact(x)[:2]

    terms = {**_equations(form, 2, unsteady=False), "boundary": Dirichlet("boundary", out[:2], wall)}
    if pressure_pin is not None:
        if form != "velocity_pressure":
            raise ValueError("pressure_pin needs form='velocity_pressure'")
        terms["pressure_pin"] = _pin_term(domain, pressure_pin, float(exact(jnp.asarray(pressure_pin))[2]))
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


# ------------------------------------------------------------ lid-driven cavity (P4)

# Ghia, Ghia & Shin (1982), J. Comput. Phys. 48:387, Table I (u on the vertical line
# x = 0.5) and Table II (v on the horizontal line y = 0.5). Re = 100 as in
# benchmark P4; Re = 400 and 1000 as printed in the paper.
GHIA_Y = np.array([1.0, 0.9766, 0.9688, 0.9609, 0.9531, 0.8516, 0.7344, 0.6172, 0.5, 0.4531,
                   0.2813, 0.1719, 0.1016, 0.0703, 0.0625, 0.0547, 0.0])
GHIA_X = np.array([1.0, 0.9688, 0.9609, 0.9531, 0.9453, 0.9063, 0.8594, 0.8047, 0.5, 0.2344,
                   0.2266, 0.1563, 0.0938, 0.0781, 0.0703, 0.0625, 0.0])
GHIA_U = {
    100: np.array([1.0, 0.84123, 0.78871, 0.73722, 0.68717, 0.23151, 0.00332, -0.13641, -0.20581,
                   -0.21090, -0.15662, -0.10150, -0.06434, -0.04775, -0.04192, -0.03717, 0.0]),
    400: np.array([1.0, 0.75837, 0.68439, 0.61756, 0.55892, 0.29093, 0.16256, 0.02135, -0.11477,
                   -0.17119, -0.32726, -0.24299, -0.14612, -0.10338, -0.09266, -0.08186, 0.0]),
    1000: np.array([1.0, 0.65928, 0.57492, 0.51117, 0.46604, 0.33304, 0.18719, 0.05702, -0.06080,
                    -0.10648, -0.27805, -0.38289, -0.29730, -0.22220, -0.20196, -0.18109, 0.0]),
}
GHIA_V = {
    100: np.array([0.0, -0.05906, -0.07391, -0.08864, -0.10313, -0.16914, -0.22445, -0.24533,
                   0.05454, 0.17527, 0.17507, 0.16077, 0.12317, 0.10890, 0.10091, 0.09233, 0.0]),
    # x = 0.9063 (NaN): the paper prints -0.23827, which is not monotone between its
    # neighbours (-0.22847, -0.44993) and ~15% off grid-converged solutions (~-0.388);
    # left out rather than guessed.
    400: np.array([0.0, -0.12146, -0.15663, -0.19254, -0.22847, np.nan, -0.44993, -0.38598,
                   0.05186, 0.30174, 0.30203, 0.28124, 0.22965, 0.20920, 0.19713, 0.18360, 0.0]),
    1000: np.array([0.0, -0.21388, -0.27669, -0.33714, -0.39188, -0.51550, -0.42665, -0.31966,
                    0.02526, 0.32235, 0.33075, 0.37095, 0.32627, 0.30353, 0.29012, 0.27485, 0.0]),
}


def ghia_points() -> tuple[np.ndarray, np.ndarray]:
    """``(points_u, points_v)``: the Ghia sample points $(0.5, y_i)$ and $(x_i, 0.5)$, ``(17, 2)``."""
    pu = np.stack([np.full_like(GHIA_Y, 0.5), GHIA_Y], axis=1)
    pv = np.stack([GHIA_X, np.full_like(GHIA_X, 0.5)], axis=1)
    return pu, pv


def ghia_deviation(run_or_network, Re: float | None = None) -> dict[str, float]:
    r"""Maximum absolute deviation of a cavity solution from Ghia et al.'s centreline data.

    **Arguments:**
    - `run_or_network`: a `pinnkit.RunData` (from `pinnkit.load_run`), or any pointwise
      callable ``(x, y) -> (u, v, ...)`` (a trained `Network`, a reference function).
    - `Re`: 100, 400 or 1000; default: the run's ``problem.params.Re``.

    **Returns:** ``{"u": max_i |u(0.5, y_i) - u_i|, "v": max_i |v(x_i, 0.5) - v_i|,
    "max": the larger}`` (points the tables leave out, NaN, are skipped).
    """
    from ..run.metrics import predict

    if hasattr(run_or_network, "predict"):
        run = run_or_network
        names = run.problem.out_names
        Re = float(run.config.problem.params.get("Re", 100.0)) if Re is None else Re
        evaluate = run.predict
    else:
        names = getattr(run_or_network, "out_names", ("u", "v"))
        dtype = jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
        evaluate = functools.partial(predict, run_or_network, dtype=dtype)
        Re = 100.0 if Re is None else Re
    key = int(round(Re))
    if key not in GHIA_U or abs(Re - key) > 1e-9:
        raise ValueError(f"Ghia et al.'s tables cover Re = {sorted(GHIA_U)}: actual Re={Re}")
    pu, pv = ghia_points()
    u = evaluate(pu)[:, names.index("u")]
    v = evaluate(pv)[:, names.index("v")]
    du = float(np.nanmax(np.abs(u - GHIA_U[key])))
    dv = float(np.nanmax(np.abs(v - GHIA_V[key])))
    return {"u": du, "v": dv, "max": max(du, dv)}


def _smoothed_lid(x, width: float):
    # Products only: inside the sharded loss the derivative engine pushes constant
    # (unsharded) tangents through the hard constraint, and the JVP rule of `x ** n`
    # then trips JAX's varying-manual-axes check.
    a, b = jnp.tanh(x / width), jnp.tanh((1 - x) / width)
    return a * b * a * b


def lid_profile_fn(kind: str, width: float) -> Callable:
    r"""The lid velocity $u_\text{lid}(x)$ on $[0, 1]$.

    - ``"uniform"``: 1 (Ghia's lid; discontinuous at the two upper corners).
    - ``"smoothed"``: $\tanh^2(x/\delta)\,\tanh^2((1 - x)/\delta)$ with $\delta$ = `width`:
      within $10^{-3}$ of 1 beyond $x \approx 4.1\delta$ from a corner; it and its slope
      vanish at the corners.
    """
    if kind == "uniform":
        return lambda x: jnp.ones_like(x)
    if kind == "smoothed":
        if not width > 0:
            raise ValueError(f"lid_width must be > 0: actual={width}")
        return lambda x: _smoothed_lid(x, width)
    raise ValueError(f"lid_profile must be 'uniform' or 'smoothed': actual={kind!r}")


def lid_driven_cavity(
    Re: float = 100.0,
    lid_profile: str = "uniform",
    lid_width: float = 0.05,
    pressure_pin: Sequence[float] | None = None,
) -> Problem:
    r"""Lid-driven cavity (benchmark P4): steady Navier–Stokes on $[0, 1]^2$, no-slip walls,
    the lid $y = 1$ moving with $u = u_\text{lid}(x)$, $v = 0$.

    **Arguments:**
    - `Re`: Reynolds number ($\nu = 1/\text{Re}$). The reference data (`ghia_deviation`)
      exist for 100, 400 and 1000.
    - `lid_profile`: ``"uniform"`` ($u = 1$ on the whole lid, as in Ghia et al.; the
      corner singularity is left to the soft ``lid`` term) or ``"smoothed"`` (see
      `lid_profile_fn`; continuous, so every boundary condition can be exact).
    - `lid_width`: $\delta$ of the smoothed profile.
    - `pressure_pin`: optional point where $p = 0$ is imposed (a ``pressure_pin`` term).

    The hard constraint for the smoothed lid is $u = y\,u_\text{lid}(x) + \phi N_u$,
    $v = \phi N_v$, $\phi = 16\,x(1-x)\,y(1-y)$ (all four wall terms enforced). Its
    continuity residual $y\,u_\text{lid}'(x) = O(1/\delta)$ in the corners is left to the
    network; a divergence-free lifting $(\partial_y\psi_L, -\partial_x\psi_L)$ with
    $\psi_L = u_\text{lid}(x)\,h(y)$ moves that corner residual into the momentum equation
    and trained worse (docs/navier_stokes.md). For the uniform lid it is
    $u = 4x(1-x)\,y\,N_u$, $v = \phi N_v$: no-slip on the three fixed walls and $v = 0$ on
    the lid are exact; the lid's $u = 1$ stays a loss term, so that the network chooses
    how $u$ falls from 1 to 0 in the corners.

    There is no full-field reference: `ghia_deviation` measures the error.
    """
    Re = float(Re)
    lid = lid_profile_fn(lid_profile, float(lid_width))
    domain = Box((0.0, 0.0), (1.0, 1.0))

    def lid_target(x):
        return jnp.stack([lid(x[0]), jnp.zeros_like(x[0])])

    terms = {
        **_equations("velocity_pressure", 2, unsteady=False),
        "lid": Dirichlet("top", ("u", "v"), lid_target),
        "wall_left": Dirichlet("left", ("u", "v")),
        "wall_right": Dirichlet("right", ("u", "v")),
        "wall_bottom": Dirichlet("bottom", ("u", "v")),
    }
    if pressure_pin is not None:
        terms["pressure_pin"] = _pin_term(domain, pressure_pin, 0.0)
    walls = ("wall_left", "wall_right", "wall_bottom")
    if lid_profile == "smoothed":

        def lifting(x):
            return jnp.stack([x[1] * lid(x[0]), 0 * x[1]])

        hard = HardDirichlet(domain.lower, domain.upper, (0, 1), (0, 1), value=lifting)
        enforced = ("lid", *walls)
    else:
        hard = UniformLidTransform()
        enforced = walls
    return Problem(
        domain,
        ("u", "v", "p"),
        terms,
        coeffs={"nu": 1.0 / Re},
        hard_constraint=hard,
        enforced=enforced,
        mean_free=("p",),
        name="lid_driven_cavity",
        description=f"P4: lid-driven cavity, Re = {Re:g}, {lid_profile} lid",
    )


class UniformLidTransform(eqx.Module):
    r"""Output transform for the uniform lid: $u = 4x(1-x)\,y\,N_u$ (zero on the fixed
    walls, free on the lid), $v = 16\,x(1-x)\,y(1-y)\,N_v$ (zero on every wall), $p = N_p$."""

    def __call__(self, x, y):
        sx = 4 * x[0] * (1 - x[0])
        return jnp.stack([sx * x[1] * y[0], sx * 4 * x[1] * (1 - x[1]) * y[1], y[2]])


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

    _check_form(form)
    nu, T = float(nu), float(T)
    space = Box((0.0, 0.0), (2 * math.pi, 2 * math.pi))
    domain = SpaceTime(space, 0.0, T)
    out = _out_names(form, 2)

    def fields(t, x, y):
        if form == "vorticity_streamfunction":
            psi = jnp.cos(x) * jnp.cos(y) * jnp.exp(-2 * nu * t)
            return psi, 2 * psi
        return tg(x, y, t, nu)

    def exact(z):
        return jnp.stack(fields(z[0], z[1], z[2])).astype(z.dtype)

    def initial(z):
        return jnp.stack(fields(jnp.zeros_like(z[0]), z[1], z[2])[:2]).astype(z.dtype)

    terms = {**_equations(form, 2, unsteady=True), "initial": Initial(out[:2], initial)}
    return Problem(
        domain,
        out,
        terms,
        coeffs={"nu": nu},
        reference=exact,
        hard_constraint=HardDirichlet(*domain.bounds(), (), (0, 1), value=initial, t_axis=0),
        enforced=("initial",),
        mean_free=("p",) if form == "velocity_pressure" else ("psi",),
        name="taylor_green",
        description=f"P5: Taylor–Green vortex, ν = {nu:g}, t ∈ [0, {T:g}]",
    )


# ------------------------------------------------------- periodic flow (spectral reference)


def _omega0_function(spec, L: float) -> Callable:
    """``omega0(x, y)`` on arrays from a name, a list of modes or a callable (see `periodic_flow`)."""
    k = 2 * math.pi / L
    if spec == "taylor_green":
        return lambda x, y: 2 * jnp.cos(k * x) * jnp.cos(k * y)
    if callable(spec):
        return spec
    if is_callable_spec(spec):
        return load_callable(spec, what="problem.params.omega0")
    if isinstance(spec, str):
        raise ValueError(
            f"omega0 must be 'taylor_green', a list of modes [mx, my, amplitude(, phase)] or "
            f"'path/to/file.py:function': actual={spec!r}"
        )
    modes = [tuple(float(v) for v in m) for m in spec]
    for m in modes:
        if len(m) not in (3, 4) or m[0] != int(m[0]) or m[1] != int(m[1]) or m[:2] == (0.0, 0.0):
            raise ValueError(
                f"each omega0 mode is [mx, my, amplitude] or [mx, my, amplitude, phase] with "
                f"integer wavenumbers, not both zero: actual={list(m)}"
            )

    def omega0(x, y):
        return sum(m[2] * jnp.cos(k * (m[0] * x + m[1] * y) + (m[3] if len(m) == 4 else 0.0))
                   for m in modes)

    return omega0


def _hashable(spec):
    if isinstance(spec, list | tuple):
        return tuple(_hashable(v) for v in spec)
    if isinstance(spec, Mapping):
        return tuple(sorted((k, _hashable(v)) for k, v in spec.items()))
    return spec


def _truncate(coef: np.ndarray, rel_tol: float) -> np.ndarray:
    """Centred coefficients ``(..., n, n)`` (``fftshift``-ed, modes -n/2..n/2-1) cut to the
    smallest square band $|m_x|, |m_y| \\le K$ outside which every coefficient is below
    ``rel_tol`` times the largest; returns ``(..., 2K + 1, 2K + 1)``."""
    n = coef.shape[-1]
    mag = np.abs(coef).reshape(-1, n, n).max(axis=0)
    m = np.arange(n) - n // 2
    reach = np.maximum(np.abs(m)[:, None], np.abs(m)[None, :])
    significant = reach[mag > rel_tol * mag.max()]
    # The Nyquist row/column has no symmetric partner: never keep it.
    K = int(min(significant.max() if significant.size else 0, (n - 1) // 2))
    keep = slice(n // 2 - K, n // 2 + K + 1)
    return coef[..., keep, keep]


def _fourier_eval(coef, L: float, x, y):
    r"""$\mathrm{Re}\sum_{m_x, m_y} c_{m_x m_y} e^{2\pi i (m_x x + m_y y)/L}$ for centred
    coefficients ``(..., M, M)``, $M = 2K + 1$, at one point."""
    K = (coef.shape[-1] - 1) // 2
    k = jnp.arange(-K, K + 1, dtype=x.dtype) * (2 * math.pi / L)
    ex, ey = jnp.exp(1j * k * x), jnp.exp(1j * k * y)
    return jnp.real(jnp.einsum("...ij,i,j->...", coef, ex, ey)).astype(x.dtype)


def _complex(a: np.ndarray, dtype) -> np.ndarray:
    return a.astype(np.complex128 if dtype == jnp.float64 else np.complex64)


@functools.lru_cache(maxsize=8)
def spectral_snapshots(omega0, nu: float, T: float, forcing, n: int, n_times: int, L: float,
                       form: str) -> np.ndarray:
    r"""Solves the periodic problem with `pinnkit.solvers.solve_vorticity` (float64,
    rtol 1e-10) at ``n_times`` equally spaced times and returns the centred Fourier
    coefficients of the fields of `form`, shape ``(n_times, n_fields, M, M)``
    (see `_truncate`; coefficients below 1e-11 of the largest are dropped). Cached."""
    from ..solvers import (
        KolmogorovForcing,
        periodic_grid,
        primitive_from_vorticity,
        solve_vorticity,
    )

    force = None if forcing is None else KolmogorovForcing(**dict(forcing))
    with jax.enable_x64(True):
        x, y = periodic_grid(n, L, jnp.float64)
        w0 = jnp.asarray(_omega0_function(omega0, L)(x, y), jnp.float64)
        w0 = w0 - jnp.mean(w0)  # a torus carries no net vorticity
        times = np.linspace(0.0, T, n_times)
        omega = solve_vorticity(w0, nu, times, L, force, rtol=1e-10, atol=1e-12)
        if form == "vorticity_streamfunction":
            m = np.fft.fftfreq(n, 1.0 / n) * (2 * math.pi / L)
            k2 = m[:, None] ** 2 + m[None, :] ** 2
            w_hat = np.fft.fft2(np.asarray(omega), axes=(-2, -1))
            psi = np.real(np.fft.ifft2(np.where(k2 > 0, w_hat / np.where(k2 > 0, k2, 1), 0), axes=(-2, -1)))
            fields = np.stack([psi, np.asarray(omega)], axis=1)
        else:
            fields = np.stack([np.stack([np.asarray(a) for a in primitive_from_vorticity(w, L)])
                               for w in omega])
    coef = np.fft.fftshift(np.fft.fft2(fields, norm="forward", axes=(-2, -1)), axes=(-2, -1))
    return _truncate(coef, 1e-11)


def _cubic_weights(tau):
    """Lagrange weights of the nodes 0, 1, 2, 3 at ``tau``."""
    nodes = range(4)
    return jnp.stack([
        math.prod(1.0 / (k - j) for j in nodes if j != k) * functools.reduce(
            lambda acc, j: acc * (tau - j), [j for j in nodes if j != k], jnp.ones_like(tau))
        for k in nodes
    ])


def spectral_reference(coef: np.ndarray, t0: float, t1: float, L: float) -> Callable:
    r"""A pointwise, JAX-traceable reference ``(t, x, y) -> fields`` from snapshots
    ``coef`` ``(n_times, n_fields, M, M)`` at equally spaced times in $[t_0, t_1]$:
    the exact Fourier series in space, cubic Lagrange interpolation between the four
    nearest snapshots in time (error $O(\Delta t^4)$).

    Memory: a `vmap` over $B$ points gathers $B \times 4\,n_\text{fields} M^2$ complex
    numbers; keep ``eval.batch`` near 2048.
    """
    n_times = coef.shape[0]
    if n_times < 4:
        raise ValueError(f"spectral_reference needs at least 4 snapshots: actual={n_times}")
    dt = (t1 - t0) / (n_times - 1)

    def reference(z):
        c = jnp.asarray(_complex(coef, z.dtype))
        s = (z[0] - t0) / dt
        first = jnp.clip(jnp.floor(s).astype(jnp.int32) - 1, 0, n_times - 4)
        w = _cubic_weights(s - first)
        near = jax.lax.dynamic_slice_in_dim(c, first, 4, axis=0)
        ct = jnp.tensordot(w.astype(c.dtype), near, axes=1)
        return _fourier_eval(ct, L, z[1], z[2])

    return reference


def periodic_flow(
    omega0=((1, 1, 2.0), (2, -1, 1.0, 0.5), (1, 3, 0.5, 1.0)),
    nu: float = 0.01,
    T: float = 1.0,
    forcing: Mapping | None = None,
    L: float = 2 * math.pi,
    form: str = "velocity_pressure",
    n: int = 64,
    n_times: int = 41,
) -> Problem:
    r"""2-D periodic flow on $[0, L]^2 \times [0, T]$ from a given initial vorticity, with
    the pseudo-spectral solver (`pinnkit.solvers.solve_vorticity`) as the reference.

    **Arguments:**
    - `omega0`: the initial vorticity: ``"taylor_green"`` ($2\cos kx \cos ky$,
      $k = 2\pi/L$); a list of modes ``[mx, my, a]`` or ``[mx, my, a, phase]`` giving
      $\sum a\cos(k(m_x x + m_y y) + \text{phase})$; or ``"path/to/file.py:function"``
      (a callable ``(x, y) -> omega`` on arrays). Its mean is removed.
    - `nu`: kinematic viscosity.
    - `T`: final time.
    - `forcing`: optional Kolmogorov forcing ``{amplitude: A, wavenumber: m, drag: α}``:
      body force $(A\sin(2\pi m y/L), 0) - \alpha\mathbf u$ (see
      `pinnkit.solvers.KolmogorovForcing`).
    - `L`: period in $x$ and $y$ (use ``network.periodic: {x: L, y: L}``).
    - `form`: ``"velocity_pressure"`` or ``"vorticity_streamfunction"``.
    - `n`: spectral grid points per direction; `n_times`: stored snapshots (the
      reference interpolates between them in time, to ~1e-7 for smooth flows at the
      defaults).

    The initial data (``initial`` term, hard constraint) come from the same Fourier
    series at $t = 0$; building the problem runs the solver once (cached per process).
    """
    _check_form(form)
    nu, T, L = float(nu), float(T), float(L)
    forcing = None if forcing is None else dict(forcing)
    if forcing is not None:
        unknown = set(forcing) - {"amplitude", "wavenumber", "drag"}
        if unknown or "amplitude" not in forcing or "wavenumber" not in forcing:
            raise ValueError(
                f"forcing needs amplitude and wavenumber (and optionally drag): actual={forcing}"
            )
    coef = spectral_snapshots(_hashable(omega0), nu, T, _hashable(forcing), int(n), int(n_times), L, form)
    initial_coef = _truncate(coef[0, :2], 1e-11)
    reference = spectral_reference(coef, 0.0, T, L)

    def initial(z):
        return _fourier_eval(jnp.asarray(_complex(initial_coef, z.dtype)), L, z[1], z[2])

    force = curl_force = None
    if forcing is not None:
        amp, kf = float(forcing["amplitude"]), 2 * math.pi * int(forcing["wavenumber"]) / L
        drag = float(forcing.get("drag", 0.0))

        def force(z, vel):
            return jnp.stack([amp * jnp.sin(kf * z[2]), jnp.zeros_like(z[2])]) - drag * vel

        def curl_force(z, omega):
            return -amp * kf * jnp.cos(kf * z[2]) - drag * omega

    domain = SpaceTime(Box((0.0, 0.0), (L, L)), 0.0, T)
    out = _out_names(form, 2)
    terms = {
        **_equations(form, 2, unsteady=True, force=force, curl_force=curl_force),
        "initial": Initial(out[:2], initial),
    }
    return Problem(
        domain,
        out,
        terms,
        coeffs={"nu": nu},
        reference=reference,
        hard_constraint=HardDirichlet(*domain.bounds(), (), (0, 1), value=initial, t_axis=0),
        enforced=("initial",),
        mean_free=("p",) if form == "velocity_pressure" else ("psi",),
        name="periodic_flow",
        description=f"2-D periodic flow, ν = {nu:g}, t ∈ [0, {T:g}]"
        + (", Kolmogorov forcing" if forcing else ""),
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
        **_equations("velocity_pressure", 3, unsteady=True),
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
        mean_free=("p",),
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

    def outflow(f, c):
        # Outward normal +x: ν ∂u/∂x - p and ν ∂v/∂x.
        return jnp.stack([c["nu"] * f.partial("u", "x") - f["p"], c["nu"] * f.partial("v", "x")])

    terms = {
        **_equations("velocity_pressure", 2, unsteady=False),
        "inflow": Dirichlet("left", ("u", "v"), lambda x: exact(x)[:2]),
        "outflow": Equation(outflow, where="right"),
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
