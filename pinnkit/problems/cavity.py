r"""The lid-driven cavity (benchmark P4): steady Navier–Stokes on $[0, 1]^2$ with a moving
lid; its reference data are Ghia et al.'s centreline tables (`pinnkit.problems.ghia`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax.numpy as jnp

from ..geometry.domains import Box
from ..physics import flow
from ..physics.constraints import AbstractHardConstraint, HardDirichlet
from ..physics.problem import Problem
from ..physics.terms import Dirichlet


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
        **flow.equations("velocity_pressure", 2, unsteady=False),
        "lid": Dirichlet("top", ("u", "v"), lid_target),
        "wall_left": Dirichlet("left", ("u", "v")),
        "wall_right": Dirichlet("right", ("u", "v")),
        "wall_bottom": Dirichlet("bottom", ("u", "v")),
    }
    if pressure_pin is not None:
        terms["pressure_pin"] = flow.pressure_pin(domain, pressure_pin, 0.0)
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
        vectors={"velocity": ("u", "v")},
        name="lid_driven_cavity",
        description=f"P4: lid-driven cavity, Re = {Re:g}, {lid_profile} lid",
    )


class UniformLidTransform(AbstractHardConstraint):
    r"""Output transform for the uniform lid: $u = 4x(1-x)\,y\,N_u$ (zero on the fixed
    walls, free on the lid), $v = 16\,x(1-x)\,y(1-y)\,N_v$ (zero on every wall), $p = N_p$."""

    def __call__(self, x, y):
        sx = 4 * x[0] * (1 - x[0])
        return jnp.stack([sx * x[1] * y[0], sx * 4 * x[1] * (1 - x[1]) * y[1], y[2]])
