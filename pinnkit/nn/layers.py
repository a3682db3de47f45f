"""Layers: activations, weight initialisations and `MLP`, the default core of a
`pinnkit.nn.network.Network` (the other cores are in `pinnkit.nn.nets`). `Network` and
`Parity` moved to `pinnkit.nn.network`; this path re-exports them for one release.

Each class with a closed-form Taylor rule registers it below its definition
(`pinnkit.diffops.jets.taylor_rule`); the derivative engine knows no class of this file.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._types import PRNGKey
from ..diffops import jets
from ..physics.constraints import HardDirichlet as HardDirichlet  # moved; path kept one release
from .network import Network as Network  # moved; path kept one release
from .network import Parity as Parity  # moved; path kept one release

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


def activate(name: str, jet: jets.Jet, plan: jets.Plan) -> jets.Jet:
    """The jet of the activation ``ACTIVATIONS[name]`` applied element-wise, from its
    closed-form derivatives (`pinnkit.diffops.jets.activation_derivatives`)."""
    derivs = jets.activation_derivatives(name, jet.value, plan.order, ACTIVATIONS[name])
    return jets.elementwise(jet, derivs, plan)


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


@jets.taylor_rule(eqx.nn.Linear)
def _linear_jet(lin: eqx.nn.Linear, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    if not (isinstance(lin.in_features, int) and isinstance(lin.out_features, int)):
        return jets.generic(lin, (jet,), plan)  # "scalar" features reshape: leave it to jvp
    return jets.linear(jet, lin.weight, lin.bias, keep)


@jets.taylor_rule(MLP)
def _mlp_jet(mlp: MLP, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    # each layer by its own rule (`eqx.nn.Linear` above, an RWF `nets.Dense`), each
    # activation in closed form; the last layer computes only the rows kept
    *hidden, last = mlp.layers
    for layer in hidden:
        jet = activate(mlp.activation, jets.propagate(layer, jet, plan=plan), plan)
    return jets.propagate(last, jet, plan=plan, keep=keep)
