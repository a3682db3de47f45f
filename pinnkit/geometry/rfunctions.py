"""R-function pieces shared by the distance functions of shapes (`pinnkit.geometry.distance`)
and of triangle meshes (`pinnkit.geometry.mesh_adf`): a module of its own, below both, so
neither imports the other (`pinnkit.geometry.distance` imports meshes to dispatch on them)."""

from __future__ import annotations

import jax.numpy as jnp

from .._types import Scalar


def _sqrt(s: Scalar) -> Scalar:
    pos = s > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, s, 1.0)), 0.0)


def trimmed(f: Scalar, t: Scalar | None) -> Scalar:
    """The ADF of a trimmed surface: $\\sqrt{f^2 + \\rho^2}$, $\\rho = (\\sqrt{t^2+f^4}-t)/2$
    (written $f^4 / (2(\\sqrt{t^2+f^4}+t))$ for $t > 0$: no cancellation); $|f|$ untrimmed."""
    if t is None:
        return jnp.abs(f)
    f4 = f**4
    root = _sqrt(t * t + f4)
    pos = t > 0
    rho = jnp.where(pos, f4 / (2.0 * jnp.where(pos, root + t, 1.0)), 0.5 * (root - t))
    return _sqrt(f * f + rho * rho)


def r_and(a: Scalar, b: Scalar) -> Scalar:
    """R-conjunction $a + b - \\sqrt{a^2 + b^2}$: $\\ge 0$ iff both are."""
    return a + b - _sqrt(a * a + b * b)
