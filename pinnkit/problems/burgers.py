r"""Viscous Burgers equation (benchmark P3), forward and with an unknown viscosity.

$$u_t + u\,u_x = \nu\,u_{xx},\quad x\in[-1, 1],\ t\in[0, 1],\quad u(x, 0) = -\sin\pi x,
\quad u(\pm 1, t) = 0.$$

Coordinates ``(t, x)``; field ``u``; coefficient ``nu``. The reference is the exact
Cole–Hopf solution (`pinnkit.solvers.burgers_cole_hopf`, numpy float64), a
`HostFunction`: evaluation computes it on the host (it is never differentiated).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..geometry.domains import Interval, SpaceTime
from ..physics.constraints import HardDirichlet
from ..physics.host import HostFunction
from ..physics.problem import Problem
from ..physics.terms import Dirichlet, Equation, Initial
from ..solvers import BURGERS_NU, burgers_cole_hopf


def burgers_pde(f, c):
    """$u_t + u u_x - \\nu u_{xx}$ at one point."""
    return f.partial("u", "t") + f["u"] * f.partial("u", "x") - c["nu"] * f.partial("u", "x", "x")


def burgers_exact(nu: float) -> HostFunction:
    """Exact solution ``(t, x) -> (1,)`` for viscosity ``nu``, computed on the host."""

    def host(z: np.ndarray) -> np.ndarray:  # (n, 2) float64 -> (n, 1)
        return burgers_cole_hopf(z[:, 1], z[:, 0], nu=nu)[:, None]

    return HostFunction(host, 1)


def _initial_lifting(z):
    return -jnp.sin(jnp.pi * z[1:2])  # (1,): u0(x), zero at x = +-1


def burgers(nu: float = BURGERS_NU) -> Problem:
    """P3: viscous Burgers on $[-1, 1]\\times[0, 1]$, $u(x,0) = -\\sin\\pi x$, $u(\\pm1) = 0$.

    **Arguments:**
    - `nu`: viscosity (coefficient ``nu``; default $0.01/\\pi$).

    The hard constraint (``network.hard_constraint: true``) is
    $u = -\\sin\\pi x + t\\,(1 - x^2)\\,N(t, x)$: $-\\sin\\pi x$ satisfies both the
    initial and the boundary condition, so both hold exactly.
    """
    domain = SpaceTime(Interval(-1.0, 1.0), 0.0, 1.0)
    return Problem(
        domain,
        ("u",),
        {
            "pde": Equation(burgers_pde),
            "initial": Initial(("u",), lambda z: -jnp.sin(jnp.pi * z[1])),
            "boundary": Dirichlet("boundary", ("u",)),
        },
        coeffs={"nu": float(nu)},
        reference=burgers_exact(float(nu)),
        hard_constraint=HardDirichlet(*domain.bounds(), (1,), (0,), value=_initial_lifting, t_axis=0),
        enforced=("initial", "boundary"),
        name="burgers",
        description=f"P3: viscous Burgers, nu = {float(nu):.5g}",
    )
