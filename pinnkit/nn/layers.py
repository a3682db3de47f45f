"""Networks: a field $x \\mapsto y$ with named inputs and outputs, acting on one point.

`Network` = input map (normalisation of the domain's bounding box onto $[-1, 1]^d$,
optionally followed by Fourier features) → core (`MLP`) → optional output transform
(a hard constraint, e.g. $u = g(x) + \\phi(x)\\,N(x)$ with $\\phi = 0$ on the boundary),
optionally made exactly even or odd in some coordinates (`Parity`).
Everything is an immutable Equinox module; batching is the caller's `vmap`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._types import Point, PRNGKey

ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "tanh": jnp.tanh,
    "sin": jnp.sin,
    "gelu": jax.nn.gelu,
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "softplus": jax.nn.softplus,
    "sigmoid": jax.nn.sigmoid,
    "relu": jax.nn.relu,  # second derivatives vanish: unfit for 2nd-order PDEs, kept for data terms
}

INITS = ("glorot_normal", "glorot_uniform", "he_normal", "lecun_normal", "default")


def _init_weight(key: PRNGKey, init: str, fan_out: int, fan_in: int, dtype) -> Array:
    if init == "glorot_normal":  # N(0, 2/(fan_in+fan_out)), as in the peer protocol
        std = math.sqrt(2.0 / (fan_in + fan_out))
        return std * jax.random.normal(key, (fan_out, fan_in), dtype)
    if init == "glorot_uniform":
        lim = math.sqrt(6.0 / (fan_in + fan_out))
        return jax.random.uniform(key, (fan_out, fan_in), dtype, -lim, lim)
    if init == "he_normal":
        return math.sqrt(2.0 / fan_in) * jax.random.normal(key, (fan_out, fan_in), dtype)
    if init == "lecun_normal":
        return math.sqrt(1.0 / fan_in) * jax.random.normal(key, (fan_out, fan_in), dtype)
    raise ValueError(f"unknown init {init!r}; allowed: {INITS}")


class MLP(eqx.Module):
    """Fully connected network $z \\mapsto W_L \\sigma(\\cdots \\sigma(W_1 z + b_1)) + b_L$.

    **Arguments:**
    - `in_size`, `out_size`: input and output widths.
    - `width`, `depth`: hidden width and number of hidden layers (``depth >= 1``).
    - `activation`: a name from ``ACTIVATIONS`` (stored by name so derivative engines can
      use a closed-form rule for it).
    - `init`: weight initialisation (``INITS``); biases start at zero except for
      ``"default"`` (Equinox's own uniform init).
    - `key`: PRNG key. `dtype`: parameter dtype.
    """

    layers: tuple[eqx.nn.Linear, ...]
    activation: str = eqx.field(static=True)

    def __init__(
        self,
        in_size: int,
        out_size: int,
        width: int,
        depth: int,
        activation: str = "tanh",
        init: str = "glorot_normal",
        *,
        key: PRNGKey,
        dtype=jnp.float32,
    ):
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; allowed: {tuple(ACTIVATIONS)}")
        if init not in INITS:
            raise ValueError(f"unknown init {init!r}; allowed: {INITS}")
        sizes = [in_size] + [width] * depth + [out_size]
        keys = jax.random.split(key, len(sizes) - 1)
        layers = []
        for k, (a, b) in zip(keys, zip(sizes[:-1], sizes[1:], strict=True), strict=True):
            lin = eqx.nn.Linear(a, b, key=k, dtype=dtype)
            if init != "default":
                w = _init_weight(k, init, b, a, dtype)
                lin = eqx.tree_at(lambda m: (m.weight, m.bias), lin, (w, jnp.zeros((b,), dtype)))
            layers.append(lin)
        self.layers = tuple(layers)
        self.activation = activation

    def __call__(self, z: Float[Array, " i"]) -> Float[Array, " o"]:
        act = ACTIVATIONS[self.activation]
        for layer in self.layers[:-1]:
            z = act(layer(z))
        return self.layers[-1](z)


class Normalize(eqx.Module):
    """Affine map of the box $[\\text{lower}, \\text{upper}]$ onto $[-1, 1]^d$."""

    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)

    def __call__(self, x: Point) -> Point:
        lo = jnp.asarray(self.lower, x.dtype)
        hi = jnp.asarray(self.upper, x.dtype)
        return 2.0 * (x - lo) / (hi - lo) - 1.0


class PeriodicEmbedding(eqx.Module):
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


class Parity(eqx.Module):
    r"""Exact parity under reflections $R_a: x_a \mapsto 2c_a - x_a$ about the centres
    $c_a$ of some coordinates: the symmetrised field is the group average

    $$\bar f(x) = \frac{1}{2^k}\sum_{S \subseteq \{a_1..a_k\}} \Big(\prod_{a\in S} s_a\Big)
    f\Big(\prod_{a \in S} R_a x\Big),$$

    with $s_a = -1$ (odd in $x_a$: $\bar f(R_a x) = -\bar f(x)$, so $\bar f = 0$ on
    $x_a = c_a$) or $+1$ (even). Every output gets the same parity. It costs $2^k$
    evaluations of $f$. Applied after the transform: a hard constraint whose data have
    the same parity stays exact (the average of functions that satisfy it).

    **Arguments:**
    - `axes`: coordinate indices; `centres`: $c_a$ (same units as $x_a$).
    - `signs`: $s_a$, ``-1.0`` (odd) or ``1.0`` (even) per axis.
    """

    axes: tuple[int, ...] = eqx.field(static=True)
    centres: tuple[float, ...] = eqx.field(static=True)
    signs: tuple[float, ...] = eqx.field(static=True)

    def elements(self) -> tuple[tuple[tuple[int, ...], float], ...]:
        """The $2^k$ group elements as ``(reflected axes, sign)``, identity first."""
        out = []
        for on in itertools.product((False, True), repeat=len(self.axes)):
            sub = tuple(a for a, o in zip(self.axes, on, strict=True) if o)
            sign = math.prod(s for s, o in zip(self.signs, on, strict=True) if o)
            out.append((sub, float(sign)))
        return tuple(out)

    def reflect(self, x: Point, sub: tuple[int, ...]) -> Point:
        """$x$ reflected in the coordinates ``sub`` (a subset of ``axes``)."""
        for a in sub:
            x = x.at[a].set(2.0 * self.centres[self.axes.index(a)] - x[a])
        return x

    def __call__(self, f: Callable[[Point], Array], x: Point) -> Array:
        elems = self.elements()
        ys = [sign * f(self.reflect(x, sub)) for sub, sign in elems]
        return sum(ys[1:], ys[0]) / len(elems)


class Network(eqx.Module):
    """A field $x \\mapsto y \\in \\mathbb{R}^m$ with named outputs ``out_names``.

    **Arguments:**
    - `core`: maps the embedded input to ``len(out_names)`` raw outputs (e.g. `MLP`).
    - `out_names`: names of the outputs, e.g. ``("u", "v", "p")``.
    - `in_names`: names of the input coordinates, e.g. ``("x", "y")``.
    - `embedding`: tuple of modules applied to $x$ in order (normalisation, Fourier...).
    - `transform`: optional ``transform(x, y) -> y`` (hard constraints).
    - `parity`: optional `Parity` (exact even/odd symmetry of the whole field).
    """

    core: eqx.Module
    out_names: tuple[str, ...] = eqx.field(static=True)
    in_names: tuple[str, ...] = eqx.field(static=True)
    embedding: tuple[eqx.Module, ...] = ()
    transform: eqx.Module | None = None
    parity: Parity | None = None

    def __call__(self, x: Point) -> Float[Array, " m"]:
        if self.parity is not None:
            return self.parity(self.unsymmetrised, x)
        return self.unsymmetrised(x)

    def unsymmetrised(self, x: Point) -> Float[Array, " m"]:
        """Embedding → core → transform, without the `Parity` average."""
        z = x
        for e in self.embedding:
            z = e(z)
        y = self.core(z)
        if self.transform is not None:
            y = self.transform(x, y)
        return y

    def fields(self, x: Point) -> dict[str, Array]:
        """Outputs by name at one point."""
        y = self(x)
        return {n: y[i] for i, n in enumerate(self.out_names)}


class HardDirichlet(eqx.Module):
    """Exact Dirichlet values on a box: $y_i = g_i(x) + \\phi(x)\\, N_i(x)$ for the constrained
    outputs, with $\\phi(x) = \\prod_a \\frac{(x_a - l_a)(u_a - x_a)}{((u_a - l_a)/2)^2}$ over the
    constrained axes (zero on those faces, 1 at the centre).

    **Arguments:**
    - `lower`, `upper`: the box corners (all coordinates, in order).
    - `axes`: the coordinate indices whose faces carry the condition (e.g. all spatial).
    - `outputs`: output indices constrained.
    - `value`: optional ``g(x) -> (len(outputs),)``; default zero.
    - `t_axis`: for an initial condition $y(t_0, x) = g(x)$ pass the time axis here:
      $\\phi$ then also contains $(t - t_0)/(t_1 - t_0)$.
    """

    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)
    axes: tuple[int, ...] = eqx.field(static=True)
    outputs: tuple[int, ...] = eqx.field(static=True)
    value: Callable | None = eqx.field(static=True, default=None)
    t_axis: int | None = eqx.field(static=True, default=None)

    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        phi = jnp.ones((), x.dtype)
        for a in self.axes:
            lo, hi = self.lower[a], self.upper[a]
            phi = phi * (x[a] - lo) * (hi - x[a]) / ((hi - lo) / 2) ** 2
        if self.t_axis is not None:
            a = self.t_axis
            phi = phi * (x[a] - self.lower[a]) / (self.upper[a] - self.lower[a])
        idx = jnp.asarray(self.outputs)
        g = jnp.zeros((len(self.outputs),), x.dtype) if self.value is None else self.value(x)
        return y.at[idx].set(g + phi * y[idx])


def build_embedding(
    in_names: Sequence[str],
    *,
    bounds: tuple[Sequence[float], Sequence[float]] | None,
    fourier: tuple[int, float] | None = None,
    periodic: dict[str, float] | None = None,
    input_map: eqx.Module | None = None,
    key: PRNGKey,
    dtype=jnp.float32,
) -> tuple[tuple[eqx.Module, ...], int]:
    """The input map [normalise | periodic | input_map] → [Fourier features] and its
    output size.

    ``periodic`` maps coordinate names to periods; those coordinates enter through a
    `PeriodicEmbedding` (which also normalises the others, so ``bounds`` is needed).
    ``input_map`` (e.g. `pinnkit.sphere.SphereEmbedding`, which has a ``size`` attribute:
    its output width) replaces both.
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
    if fourier is not None:
        dim, scale = fourier
        embedding.append(FourierFeatures(in_size, dim, scale, key=key, dtype=dtype))
        in_size = dim
    return tuple(embedding), in_size


def build_mlp_network(in_names: Sequence[str], out_names: Sequence[str], **kwargs) -> Network:
    """The standard network: [normalise | periodic | input_map] → [Fourier features] →
    MLP → [transform]; ``pinnkit.nn.nets.build_network("mlp", ...)``, whose keyword arguments
    (``width``, ``depth``, ``activation``, ``init``, ``bounds``, ``fourier``, ``periodic``,
    ``transform``, ``input_map``, ``key``, ``dtype``) it takes."""
    from .nets import build_network  # nets builds on this module

    return build_network("mlp", in_names, out_names, **kwargs)
