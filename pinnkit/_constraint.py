"""`AbstractHardConstraint`: the one type of every hard constraint (a problem's
``hard_constraint``, used with ``network.hard_constraint: true``).

Its public home is `pinnkit.physics.constraints` (also `pinnkit.physics` and `pinnkit`);
it lives here, below physics, geometry and nn, because its final implementations live
on both sides of physics: `pinnkit.physics.constraints.HardDirichlet` and
`InitialValue` in physics, `pinnkit.geometry.distance.DistanceDirichlet` in geometry
(which physics imports, so geometry cannot import physics). The same arrangement as
`pinnkit._host.HostFunction`.
"""

from __future__ import annotations

import abc

import equinox as eqx
from jaxtyping import Array, Float

from ._types import Point


class AbstractHardConstraint(eqx.Module):
    """An output transform $y = T(x, N)$ whose result satisfies some of a problem's
    conditions exactly, whatever the network's raw output $N$ (boundary values, initial
    values); the problem names those conditions in ``Problem.enforced`` and the loss drops
    them when the config sets ``network.hard_constraint: true``.

    A subclass is final and implements `__call__`; a closed-form Taylor rule for it, if
    any, is registered beside it (`pinnkit.diffops.jets.taylor_rule`), otherwise the
    derivative engine's generic rule differentiates it.
    """

    @abc.abstractmethod
    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        """The constrained output at one point.

        **Arguments:**
        - `x`: the point, ``(dim,)``, all coordinates of the domain in order (time first
          in a space-time domain).
        - `y`: the network's raw output at ``x``, ``(m,)`` with ``m = len(out_names)``.

        **Returns:** the constrained output, ``(m,)``, same dtype as ``y``.
        """


class AbstractFieldConstraint(AbstractHardConstraint):
    """A hard constraint that needs the network's raw output as a function, not only its
    value at the point: a velocity that is the curl of a constrained stream function
    (`pinnkit.geometry.stream.StreamVelocity`) differentiates the raw output. The network
    calls `of_field` with its raw field; `__call__` is the same with the raw output held
    constant (its derivatives zero), for callers that have only a value.

    The derivative engine differentiates such a network by the Taylor rule registered for
    the constraint's type, if any, else by its generic rule. A field constraint's rule is
    called as ``rule(constraint, x_jet, raw_jet, plan=, keep=)``: ``x_jet`` the jet of the
    coordinates (first-order rows the unit vectors of ``plan.dirs``, no higher rows) and
    ``raw_jet(field_plan)`` the jet of the raw field at the same point for any plan the
    rule needs (`pinnkit.geometry.stream`'s asks for one order more than ``plan``)."""

    @abc.abstractmethod
    def of_field(self, x: Point, raw) -> Float[Array, " m"]:
        """The constrained output at ``x`` from ``raw(z) -> (m,)``, the network's raw output
        at any point ``z``."""

    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        return self.of_field(x, lambda z: y)
