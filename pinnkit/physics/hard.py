"""Hard constraints that time marching can restart.

A hard constraint is a network output transform ``(x, y) -> y`` that satisfies a
condition exactly (`pinnkit.nn.layers.Network.transform`). Time marching
(`pinnkit.train.windows`) needs, at each window edge $\\tau_w$, the same constraint with
the previous window's state as its data; a transform declares that it can do so by
being an `AbstractTimeRestart`. Other hard constraints are exact in the first window
and imposed as a soft term after it.
"""


import abc
from collections.abc import Callable

import equinox as eqx
from jaxtyping import Array, Float

from .._types import Point


class AbstractTimeRestart(eqx.Module):
    """A hard initial condition on $[t_0, t_1]$ that can restart on another interval."""

    @abc.abstractmethod
    def restart(self, t0: float, t1: float, value: Callable[[Point], Array]) -> "AbstractTimeRestart":
        """The same constraint on $[t_0, t_1]$ with initial state ``value(x) -> (m,)``."""

    @abc.abstractmethod
    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        """The constrained output at ``x`` from the raw network output ``y``."""
