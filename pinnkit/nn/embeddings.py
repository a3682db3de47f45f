"""Input maps of a `pinnkit.nn.network.Network`: normalisation of the domain's bounding box
onto $[-1, 1]^d$, exact periodicity, squared coordinates, random Fourier features; each
with its Taylor rule
(`pinnkit.diffops.jets.taylor_rule`) below its definition.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._types import Point, PRNGKey
from ..diffops import jets


class AbstractTimeWindowed(eqx.Module):
    """An input map that time windows re-aim (``train.window_time: local``): the window
    $[a, b]$ of time coordinate ``t_axis`` becomes the map's time range. Training
    dispatches on this type, never on a network class."""

    @abc.abstractmethod
    def in_time_window(self, a: float, b: float, t_axis: int) -> AbstractTimeWindowed:
        """This map with window $[a, b]$ mapped where its time range was."""


def _box_in_window(e, a: float, b: float, t_axis: int):
    lo, hi = list(e.lower), list(e.upper)
    lo[t_axis], hi[t_axis] = a, b
    return dataclasses.replace(e, lower=tuple(lo), upper=tuple(hi))


class Normalize(AbstractTimeWindowed):
    """Affine map of the box $[\\text{lower}, \\text{upper}]$ onto $[-1, 1]^d$."""

    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)

    def in_time_window(self, a: float, b: float, t_axis: int) -> Normalize:
        return _box_in_window(self, a, b, t_axis)

    def __call__(self, x: Point) -> Point:
        lo = jnp.asarray(self.lower, x.dtype)
        hi = jnp.asarray(self.upper, x.dtype)
        return 2.0 * (x - lo) / (hi - lo) - 1.0


@jets.taylor_rule(Normalize)
def _normalize_jet(norm: Normalize, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    dtype = jet.value.dtype
    scale = 2.0 / (jnp.asarray(norm.upper, dtype) - jnp.asarray(norm.lower, dtype))
    first = None if jet.first is None else jet.first * scale[None]
    return jets.Jet(norm(jet.value), first, {k: r * scale for k, r in jet.rest.items()})


class PeriodicEmbedding(AbstractTimeWindowed):
    """Exact periodicity: each periodic coordinate $x_c$ (period $L_c$) becomes
    $(\\cos(2\\pi x_c/L_c), \\sin(2\\pi x_c/L_c))$; the others are mapped affinely from
    $[\\text{lower}, \\text{upper}]$ onto $[-1, 1]$. Output size: $d$ + number of periodic
    coordinates. Any function of these features is exactly $L_c$-periodic in $x_c$.
    """

    periods: tuple[float | None, ...] = eqx.field(static=True)
    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)

    def __call__(self, x: Point) -> Float[Array, " k"]:
        feats = []
        for i, period in enumerate(self.periods):
            if period is None:
                lo, hi = self.lower[i], self.upper[i]
                feats.append((2.0 * (x[i] - lo) / (hi - lo) - 1.0)[None])
            else:
                w = 2.0 * jnp.pi / period
                feats.append(jnp.stack([jnp.cos(w * x[i]), jnp.sin(w * x[i])]))
        return jnp.concatenate(feats)

    def in_time_window(self, a: float, b: float, t_axis: int) -> PeriodicEmbedding:
        return _box_in_window(self, a, b, t_axis)


@jets.taylor_rule(PeriodicEmbedding)
def _periodic_jet(pe: PeriodicEmbedding, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    # every feature is phi(c x_i): phi = identity (normalised coordinate, the offset does not
    # matter to derivatives), cos or sin (periodic coordinate, c = 2 pi / period)
    idx, scale, kinds = [], [], []  # kinds: 0 identity, 1 cos, 2 sin
    for i, period in enumerate(pe.periods):
        if period is None:
            idx += [i]
            scale += [2.0 / (pe.upper[i] - pe.lower[i])]
            kinds += [0]
        else:
            idx += [i, i]
            scale += [2.0 * math.pi / period] * 2
            kinds += [1, 2]
    scale = jnp.asarray(scale, jet.value.dtype)
    sel = lambda r: r[..., np.asarray(idx)] * scale.reshape((1,) * (r.ndim - 1) + (-1,))
    angle = sel(jet.value)
    feats = jets.Jet(
        angle, None if jet.first is None else sel(jet.first), {k: sel(r) for k, r in jet.rest.items()}
    )
    sin, cos = jnp.sin(angle), jnp.cos(angle)
    one, zero = jnp.ones_like(angle), jnp.zeros_like(angle)
    is_lin, is_cos = np.asarray(kinds) == 0, np.asarray(kinds) == 1

    def nth(j):  # phi^(j) of every feature, j >= 1
        periodic = jnp.where(is_cos, (cos, -sin, -cos, sin)[j % 4], (sin, cos, -sin, -cos)[j % 4])
        return jnp.where(is_lin, one if j == 1 else zero, periodic)

    derivs = [pe(jet.value)] + [nth(j) for j in range(1, plan.order + 1)]
    return jets.elementwise(feats, derivs, plan)


def _twice(r: Array) -> Array:
    """``[r, r]`` along the feature axis: one jet feeding two element-wise maps."""
    return jnp.concatenate([r, r], axis=-1)


class SquareFeatures(eqx.Module):
    """$z \\mapsto [z, z \\odot z]$: the inputs and their squares (output size $2k$).

    Why: a zero-bias MLP's tangent space reaches a cubic $x_i^2 x_j$ only through
    first-layer weights aligned with the axes, which training learns slowly in high $d$
    (docs/benchmarks.md, "Square features"); with $z_i^2$ as inputs the first layer's
    weight gradients hold $z_i^2\\,\\sigma'(w \\cdot z)$, i.e. every $x_i^2 x_j$. Costs
    $k \\times$ width more first-layer weights.
    """

    def __call__(self, z: Point) -> Float[Array, " k"]:
        return jnp.concatenate([z, z * z])


@jets.taylor_rule(SquareFeatures)
def _square_jet(sq: SquareFeatures, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    # [z, z] through the element-wise map (identity | square), derivatives (1, 0, ...) | (2z, 2, 0, ...)
    both = jets.Jet(_twice(jet.value), None if jet.first is None else _twice(jet.first),
                    {k: _twice(r) for k, r in jet.rest.items()})
    z = jet.value
    one, zero = jnp.ones_like(z), jnp.zeros_like(z)
    derivs = [sq(z), jnp.concatenate([one, 2.0 * z]), jnp.concatenate([zero, 2.0 * one])]
    derivs += [jnp.concatenate([zero, zero])] * max(0, plan.order - 2)
    return jets.elementwise(both, derivs[: plan.order + 1], plan)


class FourierFeatures(eqx.Module):
    """Random Fourier features $z \\mapsto [\\cos(2\\pi B z), \\sin(2\\pi B z)]$, $B \\sim N(0, s^2)$.

    ``B`` is fixed (not trained): it lives in a non-trainable field read through
    `jax.lax.stop_gradient`.
    """

    B: Float[Array, "k d"]

    def __init__(self, in_size: int, dim: int, scale: float, *, key: PRNGKey, dtype=jnp.float32):
        if dim % 2:
            raise ValueError(f"Fourier feature dim must be even: actual={dim}")
        self.B = scale * jax.random.normal(key, (dim // 2, in_size), dtype)

    def __call__(self, z: Point) -> Float[Array, " k"]:
        proj = 2.0 * jnp.pi * (jax.lax.stop_gradient(self.B) @ z)
        return jnp.concatenate([jnp.cos(proj), jnp.sin(proj)])


@jets.taylor_rule(FourierFeatures)
def _fourier_jet(ff: FourierFeatures, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    B = 2.0 * jnp.pi * jax.lax.stop_gradient(ff.B)
    proj = 2.0 * jnp.pi * (jax.lax.stop_gradient(ff.B) @ jet.value)  # as FourierFeatures does
    # [cos p, sin p] is one element-wise map of [p, p] with per-element derivatives
    both = jets.Jet(
        _twice(proj),
        None if jet.first is None else _twice(jet.first @ B.T),
        {k: _twice(B @ r) for k, r in jet.rest.items()},
    )
    sin, cos = jnp.sin(proj), jnp.cos(proj)
    cyc_cos, cyc_sin = (cos, -sin, -cos, sin), (sin, cos, -sin, -cos)
    derivs = [jnp.concatenate([cyc_cos[j % 4], cyc_sin[j % 4]]) for j in range(plan.order + 1)]
    return jets.elementwise(both, derivs, plan)


def build_embedding(
    in_names: Sequence[str],
    *,
    bounds: tuple[Sequence[float], Sequence[float]] | None,
    fourier: tuple[int, float] | None = None,
    periodic: dict[str, float] | None = None,
    input_map: eqx.Module | None = None,
    squares: bool = False,
    key: PRNGKey,
    dtype=jnp.float32,
) -> tuple[tuple[eqx.Module, ...], int]:
    """The input map [normalise | periodic | input_map] → [squares] → [Fourier features]
    and its output size.

    ``periodic`` maps coordinate names to periods; those coordinates enter through a
    `PeriodicEmbedding` (which also normalises the others, so ``bounds`` is needed).
    ``input_map`` (e.g. `pinnkit.sphere.SphereEmbedding`, which has a ``size`` attribute:
    its output width) replaces both. ``squares`` appends $z_i^2$ (`SquareFeatures`).
    """
    embedding: list[eqx.Module] = []
    in_size = len(in_names)
    if input_map is not None:
        embedding.append(input_map)
        in_size = input_map.size
    elif periodic:
        if bounds is None:
            raise ValueError("a periodic embedding needs the domain bounds")
        periods = tuple(periodic.get(c) for c in in_names)
        embedding.append(
            PeriodicEmbedding(periods, tuple(map(float, bounds[0])), tuple(map(float, bounds[1])))
        )
        in_size += sum(p is not None for p in periods)
    elif bounds is not None:
        embedding.append(Normalize(tuple(map(float, bounds[0])), tuple(map(float, bounds[1]))))
    if squares:
        embedding.append(SquareFeatures())
        in_size *= 2
    if fourier is not None:
        dim, scale = fourier
        embedding.append(FourierFeatures(in_size, dim, scale, key=key, dtype=dtype))
        in_size = dim
    return tuple(embedding), in_size
