"""Shape aliases used across pinnkit (jaxtyping).

A *point* is one location in the problem's coordinate space, ordered as the domain's
``coords`` (e.g. ``("t", "x")``); *points* stack them along a leading batch axis.
"""

from typing import Any, TypeAlias

from jaxtyping import Array, Float, PRNGKeyArray

Point: TypeAlias = Float[Array, " d"]
Points: TypeAlias = Float[Array, "n d"]
Scalar: TypeAlias = Float[Array, ""]
Residual: TypeAlias = Float[Array, " r"]
PRNGKey: TypeAlias = PRNGKeyArray
PyTree: TypeAlias = Any
