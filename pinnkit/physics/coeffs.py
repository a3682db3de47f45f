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
    """The physical value of a coefficient (a `Constrained`, a `CoeffField` -- itself, a
    function of the point -- or a plain array)."""
    return c.value() if isinstance(c, Constrained | CoeffField) else c


def values(coeffs) -> dict[str, Array]:
    """``{name: physical value}`` of a coefficient mapping."""
    return {k: value(v) for k, v in coeffs.items()}


class CoeffField(eqx.Module):
    """A coefficient that varies in space (and time), given by a small network:
    $c(x) = c_0\\,g(N(\\hat x))$ with $\\hat x$ the point mapped from the bounding box onto
    $[-1, 1]^d$, $g = \\exp$ (``"positive"``) or $g(s) = 1 + s$ (``"none"``), and the last
    layer of $N$ zero at the start, so that $c \\equiv c_0$ initially.

    Residuals call it at the point: ``c["k"](f.point) * f.laplacian("u")``; its
    derivatives in $x$ are not available through ``f`` (pointwise use only). `float(c)`
    is its mean over a $9^d$ grid of the box (what ``summary.json`` reports); evaluate
    the field itself from the trained coefficients (``load_run(DIR).coeffs["k"](x)``).
    Make it with `coeff_field`; list it in ``trainable`` like a scalar.
    """

    layers: tuple[tuple[Array, Array], ...]  # (W, b) per layer; tanh between (arrays only:
    # the residual's abstract trace sees every leaf of the coefficients)
    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)
    scale: float = eqx.field(static=True, default=1.0)
    transform: str = eqx.field(static=True, default="positive")

    def __call__(self, x) -> Array:
        lo = jnp.asarray(self.lower, x.dtype)
        hi = jnp.asarray(self.upper, x.dtype)
        z = 2 * (x - lo) / (hi - lo) - 1
        for i, (w, b) in enumerate(self.layers):
            z = w @ z + b
            if i < len(self.layers) - 1:
                z = jnp.tanh(z)
        s = z[0]
        return self.scale * (jnp.exp(s) if self.transform == "positive" else 1 + s)

    def value(self):
        return self

    def __float__(self) -> float:
        axes = [jnp.linspace(a, b, 9) for a, b in zip(self.lower, self.upper, strict=True)]
        pts = jnp.stack([m.ravel() for m in jnp.meshgrid(*axes, indexing="ij")], axis=-1)
        return float(jnp.mean(jax.vmap(self)(pts)))


def coeff_field(domain, init: float = 1.0, transform: str = "positive", width: int = 16,
                depth: int = 2, *, key) -> CoeffField:
    """A `CoeffField` over ``domain``'s bounding box, equal to ``init`` everywhere at the start."""
    if transform not in ("none", "positive"):
        raise ValueError(f"coefficient fields take transform 'none' or 'positive', got {transform!r}")
    if transform == "positive" and not init > 0:
        raise ValueError(f"transform 'positive' needs init > 0, got {init}")
    lo, hi = domain.bounds()
    sizes = [len(lo)] + [width] * depth
    keys = jax.random.split(key, depth)
    layers = [
        (jax.random.normal(k, (n_out, n_in)) * math.sqrt(2.0 / (n_in + n_out)), jnp.zeros((n_out,)))
        for k, n_in, n_out in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]
    layers.append((jnp.zeros((1, sizes[-1])), jnp.zeros((1,))))  # zero last layer: c = init
    return CoeffField(tuple(layers), tuple(map(float, lo)), tuple(map(float, hi)), float(init), transform)
