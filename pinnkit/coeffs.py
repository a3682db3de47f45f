r"""Constrained coefficients for inverse problems.

A trainable coefficient is stored as an unconstrained parameter $\theta$ and reaches the
residuals as $c = g(\theta)$:

| transform | $g(\theta)$ | range |
|---|---|---|
| ``"none"`` | $\theta$ | $\mathbb R$ |
| ``"positive"`` | $c_0\,e^{\theta}$ | $(0, \infty)$ |
| ``"bounded"`` | $a + (b - a)\,\sigma(\theta)$ | $(a, b)$ |

``"positive"`` carries the initial value's scale $c_0$ so that $\theta$ starts at 0 and a
step in $\theta$ is a *relative* change of $c$: one learning rate suits a viscosity of
$10^{-3}$ and a diffusivity of $0.5$ alike.

`Constrained` is an Equinox module holding $\theta$; `float(c)` and `value(c)` give the
physical value, so the summary (``float(v)`` of every coefficient) reports $c$, not
$\theta$, and `Problem.residuals` passes $c$ to the residuals.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

TRANSFORMS = ("none", "positive", "bounded")


class Constrained(eqx.Module):
    """A scalar coefficient $c = g(\\theta)$ with trainable $\\theta$ (see module docstring).

    Build it with `constrained(value, transform, lower, upper)` from the physical value.
    """

    raw: Array
    transform: str = eqx.field(static=True, default="none")
    scale: float = eqx.field(static=True, default=1.0)
    lower: float | None = eqx.field(static=True, default=None)
    upper: float | None = eqx.field(static=True, default=None)

    def value(self) -> Array:
        if self.transform == "positive":
            return self.scale * jnp.exp(self.raw)
        if self.transform == "bounded":
            return self.lower + (self.upper - self.lower) * jax.nn.sigmoid(self.raw)
        return self.raw

    def __float__(self) -> float:
        return float(self.value())


def constrained(value: float, transform: str = "none", lower: float | None = None,
                upper: float | None = None, dtype=None) -> Constrained:
    """The `Constrained` coefficient whose physical value is ``value``.

    Raises ``ValueError`` if ``value`` is outside the transform's range.
    """
    value = float(value)
    if transform not in TRANSFORMS:
        raise ValueError(f"unknown coefficient transform {transform!r}; allowed: {TRANSFORMS}")
    if transform == "positive":
        if not value > 0:
            raise ValueError(f"transform 'positive' needs an initial value > 0, got {value}")
        return Constrained(jnp.zeros((), dtype), "positive", scale=value)
    if transform == "bounded":
        if lower is None or upper is None or not lower < upper:
            raise ValueError(f"transform 'bounded' needs lower < upper, got ({lower}, {upper})")
        if not lower < value < upper:
            raise ValueError(f"transform 'bounded': initial value {value} is not inside ({lower}, {upper})")
        s = (value - lower) / (upper - lower)
        raw = jnp.asarray(math.log(s / (1 - s)), dtype)
        return Constrained(raw, "bounded", lower=float(lower), upper=float(upper))
    return Constrained(jnp.asarray(value, dtype), "none")


def value(c) -> Array:
    """The physical value of a coefficient (a `Constrained` or a plain array)."""
    return c.value() if isinstance(c, Constrained) else c


def values(coeffs) -> dict[str, Array]:
    """``{name: physical value}`` of a coefficient mapping."""
    return {k: value(v) for k, v in coeffs.items()}
