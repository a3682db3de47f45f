r"""A divergence-free hard no-slip for flow past a cylinder in a channel (DFG 2D-1).

The distance-function constraint of `pinnkit.problems.dfg.no_slip` writes
$\mathbf u = \mathbf g + \phi\,\mathbf N$ with the lifting $\mathbf g = (1 - w)(U(y), 0)$,
$w$ the blend weight of the cylinder. That lifting is not divergence-free: about the
cylinder $\nabla\cdot\mathbf g = -U\,\partial_x w$ is of order $U/R$, and it is a net
sink ($\int\nabla\cdot\mathbf g = -1.7\cdot10^{-3}$ m²/s within $r < 0.07$, 2 % of the
channel's flux), which $\phi\mathbf N$ must cancel. A trained network cancels it where
its collocation points are and leaves part of it in the first millimetres next to the
wall, where a few thousand uniform points put almost none: the shipped seed-1 run loses
0.36 % of the flux there, unevenly above and below the cylinder, and that is its lift
error (docs/navier_stokes.md, "Why the lift was wrong").

`StreamLifting` keeps $\phi$ and $\mathbf N$ and replaces the lifting by the curl of a
stream function,
$$\mathbf g = \nabla^\perp\Psi_g = (\partial_y\Psi_g, -\partial_x\Psi_g), \qquad
\Psi_g = \Psi_{in}(y) + h(r)\,\big(c - \Psi_{in}(y)\big),$$
$\Psi_{in}(y) = \int_0^y U$ the inflow's stream function, $r$ the distance to the
cylinder's centre, $h = 1 - S\big((r - R)/(\rho - R)\big)$ with a step $S$ (`PROFILES`:
``wall``, $1 - (1 - s)^4(1 + 4s)$, the default, or ``septic``, $35s^4 - 84s^5 + 70s^6 -
20s^7$), so $h = 1$ and $h' = 0$ on the cylinder, $h = 0$ for $r \ge \rho$ with its
first three derivatives vanishing there ($\mathbf g$ is $C^2$ and the momentum
residual continuous) and $c = \Psi_{in}(y_c)$, the stream function's value on the
cylinder if the flux split by the cylinder's height. Then $\nabla\cdot\mathbf g = 0$
identically; on the cylinder $\mathbf g = 0$; for $r \ge \rho$ $\mathbf g = (U(y), 0)$,
the inflow on the inlet and 0 on the walls (they must lie at $r \ge \rho$). The ``wall``
step puts the displaced flux next to the cylinder, as the flow does: its own momentum
residual (no network, no pressure) has a mean square 0.062 at $\rho = 0.2$, against 0.13
at 0.15 and 0.32 for the septic step at 0.15 (the distance blend's: 0.0032). The
actual split of the flux differs from $c$ by little (DFG 2D-1: 0.039565 against
0.039500 m²/s below the cylinder); $\phi\mathbf N$ carries the rest.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._constraint import AbstractHardConstraint
from .._types import Point
from ..diffops import jets
from ..geometry.distance import DistanceDirichlet, affine_lifting_jet


def inflow_stream(y, U_max: float, height: float):
    r"""$(\Psi_{in}, U)$: the parabolic inflow's stream function $\int_0^y U$ and $U(y) =
    4U_m y(H - y)/H^2$."""
    k = 4 * U_max / height**2
    return k * y * y * (height / 2 - y / 3), k * y * (height - y)


def septic_step(s):
    r"""$(S_7(s), S_7'(s))$ for $s \in [0, 1]$ (clip outside): $35s^4 - 84s^5 + 70s^6 - 20s^7$,
    $140 s^3(1 - s)^3$: flat to third order at both ends."""
    s = jnp.clip(s, 0.0, 1.0)
    s2 = s * s
    s3 = s2 * s
    t = 1 - s
    return s3 * s * (35 + s * (-84 + s * (70 - 20 * s))), 140 * s3 * t * t * t


def wall_step(s):
    r"""$(S(s), S'(s))$ for $s \in [0, 1]$ (clip outside): $S = 1 - (1 - s)^4(1 + 4s)$,
    $S' = 20 s (1 - s)^3$: $S(0) = S'(0) = 0$ (the flux next to the wall grows like
    $s^2$, the velocity like $s$: a wall's profile) and flat to third order at $s = 1$;
    its slope peaks at $s = 1/4$, where a boundary layer's speed does, not mid-band."""
    s = jnp.clip(s, 0.0, 1.0)
    t = 1 - s
    t2 = t * t
    return 1 - t2 * t2 * (1 + 4 * s), 20 * s * t2 * t


PROFILES = {"wall": wall_step, "septic": septic_step}


class StreamLifting(AbstractHardConstraint):
    """Hard inflow and no-slip with a divergence-free lifting (module docstring): the
    distance function $\\phi$ of ``base`` (a `DistanceDirichlet` on the velocity), the
    lifting $\\nabla^\\perp\\Psi_g$. Outputs other than ``velocity`` pass through as
    ``base`` leaves them."""

    base: DistanceDirichlet
    U_max: float = eqx.field(static=True)
    height: float = eqx.field(static=True)
    center: tuple[float, float] = eqx.field(static=True)
    radius: float = eqx.field(static=True)
    outer: float = eqx.field(static=True)
    profile: str = eqx.field(static=True, default="wall")

    def __check_init__(self):
        if self.profile not in PROFILES:
            raise ValueError(f"StreamLifting: profile must be one of {sorted(PROFILES)}: "
                             f"actual={self.profile!r}")
        cx, cy = self.center
        if not self.radius < self.outer <= min(cx, cy, self.height - cy):
            raise ValueError(
                f"StreamLifting: need radius < outer <= the cylinder's distance to the inlet and "
                f"the walls ({min(cx, cy, self.height - cy)}): actual radius={self.radius}, "
                f"outer={self.outer}")

    def velocity(self, x: Point) -> Float[Array, "2"]:
        """The lifting $\\mathbf g(x) = \\nabla^\\perp\\Psi_g$ in closed form."""
        dx, dy = x[0] - self.center[0], x[1] - self.center[1]
        r = jnp.sqrt(dx * dx + dy * dy)
        psi, u_in = inflow_stream(x[1], self.U_max, self.height)
        c, _ = inflow_stream(self.center[1], self.U_max, self.height)
        step, slope = PROFILES[self.profile]((r - self.radius) / (self.outer - self.radius))
        h = 1 - step
        dh = -slope / (self.outer - self.radius) / jnp.maximum(r, self.radius)  # h'(r) / r
        jump = c - psi
        # grad Psi_g = (1 - h) grad Psi_in + jump h'(r) e_r, grad Psi_in = (0, U)
        return jnp.stack([(1 - h) * u_in + jump * dh * dy, -jump * dh * dx])

    def lifting(self, x: Point, m: int) -> tuple[Float[Array, " m"], Float[Array, " m"]]:
        """$(A, D)$ with ``self(x, y)`` $= A + D\\,y$: ``base``'s, the velocity's $A$ replaced."""
        a, d = self.base.lifting(x, m)
        return jnp.concatenate([self.velocity(x), a[2:]]), d

    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        a, d = self.lifting(x, y.shape[0])
        return a + d * y


@jets.taylor_rule(StreamLifting)
def _stream_lifting_jet(sl: StreamLifting, x_jet: jets.Jet, y_jet: jets.Jet, *,
                        plan: jets.Plan, keep) -> jets.Jet:
    return affine_lifting_jet(sl.lifting, x_jet, y_jet, plan)  # affine in y, as DistanceDirichlet
