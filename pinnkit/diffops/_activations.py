"""Closed-form derivatives of the activations: $[\\sigma(a), \\sigma'(a), \\dots, \\sigma^{(K)}(a)]$.

Keyed by the names of `pinnkit.nn.layers.ACTIVATIONS`; the element-wise rule of the jet
algebra (`pinnkit.diffops.jets.elementwise`) takes these lists.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._algebra import block_sizes


@functools.cache
def _poly_chain(dy: tuple[float, ...], order: int) -> tuple[np.ndarray, ...]:
    """For $y' = q(y)$ (polynomial ``dy``), the polynomials $P_k$ with $y^{(k)} = P_k(y)$."""
    P = np.polynomial.polynomial
    polys = [np.array([0.0, 1.0])]
    for _ in range(order):
        polys.append(P.polymul(P.polyder(polys[-1]), dy))
    return tuple(polys)


def _horner(coeffs: np.ndarray, y: Array) -> Array:
    coeffs = np.trim_zeros(coeffs, "b")
    if len(coeffs) == 0:
        return jnp.zeros_like(y)
    acc = jnp.full_like(y, float(coeffs[-1]))
    for c in coeffs[-2::-1]:
        acc = acc * y + float(c) if c else acc * y
    return acc


def _tanh_derivs(a: Array, k: int) -> list[Array]:
    t = jnp.tanh(a)  # tanh' = 1 - tanh^2
    return [t] + [_horner(P, t) for P in _poly_chain((1.0, 0.0, -1.0), k)[1:]]


def _sigmoid_derivs(a: Array, k: int) -> list[Array]:
    s = jax.nn.sigmoid(a)  # sigmoid' = sigmoid - sigmoid^2
    return [s] + [_horner(P, s) for P in _poly_chain((0.0, 1.0, -1.0), k)[1:]]


def _times_x(a: Array, g: list[Array], value: Array) -> list[Array]:
    """Derivatives of $a\\,g(a)$ from those of $g$: $(ag)^{(k)} = a g^{(k)} + k g^{(k-1)}$."""
    return [value] + [a * g[k] + k * g[k - 1] for k in range(1, len(g))]


def _gelu_derivs(a: Array, k: int) -> list[Array]:
    # jax.nn.gelu (approximate=True): a * C(a), C = (1 + tanh(u)) / 2, u = c (a + 0.044715 a^3)
    c, q = math.sqrt(2.0 / math.pi), 0.044715
    u = [c * (a + q * a**3), c * (1.0 + 3.0 * q * a * a), 6.0 * c * q * a]
    u += [jnp.full_like(a, 6.0 * c * q), jnp.zeros_like(a)] + [jnp.zeros_like(a)] * k
    t = _tanh_derivs(u[0], k)
    tanh_u = [t[0]]
    for n in range(1, k + 1):
        terms = [
            cnt * t[j] * functools.reduce(operator.mul, [u[m] for m in ks]) for j, cnt, ks in block_sizes(n)
        ]
        tanh_u.append(functools.reduce(operator.add, terms))
    cdf = [0.5 * (1.0 + tanh_u[0])] + [0.5 * d for d in tanh_u[1:]]
    return _times_x(a, cdf, jax.nn.gelu(a))


def _silu_derivs(a: Array, k: int) -> list[Array]:
    return _times_x(a, _sigmoid_derivs(a, k), jax.nn.silu(a))


def _softplus_derivs(a: Array, k: int) -> list[Array]:
    return [jax.nn.softplus(a)] + _sigmoid_derivs(a, k - 1) if k else [jax.nn.softplus(a)]


def _sin_derivs(a: Array, k: int) -> list[Array]:
    s, c = jnp.sin(a), jnp.cos(a)
    return [(s, c, -s, -c)[j % 4] for j in range(k + 1)]


def _relu_derivs(a: Array, k: int) -> list[Array]:
    # jax.nn.relu's rule: derivative 0 at 0; all higher derivatives vanish
    out = [jax.nn.relu(a), (a > 0).astype(a.dtype)]
    return (out + [jnp.zeros_like(a)] * k)[: k + 1]


def _nested_jvp_derivs(fn: Callable, a: Array, k: int) -> list[Array]:
    """Any element-wise ``fn``: $\\sigma^{(j)}$ by $j$ nested jvps with tangent 1."""
    out, g = [fn(a)], fn
    for _ in range(k):
        g = functools.partial(_derivative, g)
        out.append(g(a))
    return out


def _derivative(g: Callable, z: Array) -> Array:
    return jax.jvp(g, (z,), (jnp.ones_like(z),))[1]


_ACTIVATION_DERIVS: dict[str, Callable[[Array, int], list[Array]]] = {
    "tanh": _tanh_derivs,
    "sin": _sin_derivs,
    "gelu": _gelu_derivs,
    "silu": _silu_derivs,
    "swish": _silu_derivs,
    "softplus": _softplus_derivs,
    "sigmoid": _sigmoid_derivs,
    "relu": _relu_derivs,
}



def activation_derivatives(
    name: str, a: Array, order: int, fn: Callable[[Array], Array] | None = None
) -> list[Array]:
    """$[\\sigma(a), \\sigma'(a), \\dots, \\sigma^{(\\text{order})}(a)]$ element-wise for the
    activation ``name`` (a name of `pinnkit.nn.layers.ACTIVATIONS`), in closed form; for a
    name without a closed form here, by nested `jax.jvp` of ``fn`` (the activation itself),
    which is then required.

    **Raises:** `ValueError` for a name without a closed form when ``fn`` is ``None``.
    """
    rule = _ACTIVATION_DERIVS.get(name)
    if rule is not None:
        return rule(a, order)
    if fn is None:
        raise ValueError(
            f"no closed-form derivatives for the activation {name!r} (known: "
            f"{tuple(_ACTIVATION_DERIVS)}); pass the function as `fn` to take them by nested jvp"
        )
    return _nested_jvp_derivs(fn, a, order)
