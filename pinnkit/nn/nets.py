"""Network cores beyond the plain MLP: modified MLP, PirateNet, random weight factorisation.

All act on one (embedded) point $z$ and plug into `pinnkit.nn.Network` as its ``core``,
after any input map (normalisation, `FourierFeatures`, `PeriodicEmbedding`).

- `Dense`: $z \\mapsto Wz + b$ with, under *random weight factorisation* (RWF, Wang et al.
  2022), $W = \\operatorname{diag}(e^{s})\\,V$: $V$ and $s$ are trained, $s \\sim N(\\mu, \\sigma)$
  at initialisation and $V = \\operatorname{diag}(e^{-s}) W_0$, so that the initial function
  equals the plain network's.
- `ModifiedMLP` (Wang, Teng & Perdikaris 2021): two encoders $U = \\sigma(W_U z + b_U)$,
  $V = \\sigma(W_V z + b_V)$ and gated hidden layers $Z_k = \\sigma(W_k H_{k-1} + b_k)$,
  $H_k = (1 - Z_k) \\odot U + Z_k \\odot V$, $H_0 = z$; output $W H_L + b$.
- `PirateNet` (Wang, Li, Chen & Perdikaris 2024): the same encoders of the embedding
  $\\Phi = z$, and residual blocks
  $f = \\sigma(W_1 x + b_1)$, $z_1 = f \\odot U + (1-f) \\odot V$,
  $g = \\sigma(W_2 z_1 + b_2)$, $z_2 = g \\odot U + (1-g) \\odot V$,
  $h = \\sigma(W_3 z_2 + b_3)$, $x \\leftarrow \\alpha h + (1-\\alpha) x$ with a trainable gate
  $\\alpha$ per block, initialised to 0: the initial network is the linear model
  $W \\Phi + b$ of its embedding, whose last layer `physics_informed_init` can fit by least
  squares to given data (e.g. the initial condition).

Each registers its closed-form Taylor rule below its definition
(`pinnkit.diffops.jets.taylor_rule`), which `pinnkit.diffops.Taylor` takes.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._types import PRNGKey
from ..diffops import jets
from .embeddings import build_embedding
from .layers import ACTIVATIONS, INITS, MLP, _init_weight, activate
from .network import Network

KINDS = ("mlp", "modified_mlp", "pirate")


class Dense(eqx.Module):
    """Affine layer $z \\mapsto Wz + b$, $W$ optionally factorised as
    $\\operatorname{diag}(e^{s}) V$ (``log_scale`` $= s$; ``None``: $W = V$)."""

    weight: Float[Array, "o i"]
    bias: Float[Array, " o"]
    log_scale: Float[Array, " o"] | None = None

    def matrix(self) -> Float[Array, "o i"]:
        """The effective weight $W$."""
        if self.log_scale is None:
            return self.weight
        return jnp.exp(self.log_scale)[:, None] * self.weight

    def __call__(self, z: Float[Array, " i"]) -> Float[Array, " o"]:
        return self.matrix() @ z + self.bias


@jets.taylor_rule(Dense)
def _dense_jet(layer: Dense, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    # RWF: W = e^s V is formed once, then the rows go through one matmul as for a plain layer
    return jets.linear(jet, layer.matrix(), layer.bias, keep)


def dense(
    in_size: int,
    out_size: int,
    init: str,
    rwf: tuple[float, float] | None,
    *,
    key: PRNGKey,
    dtype=jnp.float32,
) -> Dense:
    """A `Dense` layer: $W_0$ from ``init`` (`pinnkit.nn.layers.INITS`), zero bias (``"default"``:
    Equinox's uniform weight and bias). ``rwf = (mu, sigma)``: factorise
    $W_0 = \\operatorname{diag}(e^s) V$ with $s \\sim N(\\mu, \\sigma^2)$ per output unit."""
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; allowed: {INITS}")
    # W0 from ``key`` itself, as `pinnkit.nn.MLP` does: an RWF MLP starts as the plain one
    if init == "default":
        lin = eqx.nn.Linear(in_size, out_size, key=key, dtype=dtype)
        w, b = lin.weight, lin.bias
    else:
        w, b = _init_weight(key, init, out_size, in_size, dtype), jnp.zeros((out_size,), dtype)
    if rwf is None:
        return Dense(w, b)
    mu, sigma = rwf
    s = mu + sigma * jax.random.normal(jax.random.fold_in(key, 1), (out_size,), dtype)
    return Dense(jnp.exp(-s)[:, None] * w, b, s)


def gate(z: Array, a: Array, b: Array) -> Array:
    """$(1 - z) \\odot a + z \\odot b$, written $a + z \\odot (b - a)$."""
    return a + z * (b - a)


def _gate_jet(z: jets.Jet, a: jets.Jet, b: jets.Jet, plan: jets.Plan) -> jets.Jet:
    """The jet of `gate`, by Leibniz's rule for its one product."""
    return jets.add(a, jets.product(z, jets.add(b, jets.scale(a, -1.0)), plan))


class ModifiedMLP(eqx.Module):
    """Modified MLP (module docstring): encoders ``encoder_u``, ``encoder_v`` of the input,
    ``depth`` gated hidden layers, affine output."""

    encoder_u: Dense
    encoder_v: Dense
    hidden: tuple[Dense, ...]
    out: Dense
    activation: str = eqx.field(static=True)

    def __call__(self, z: Float[Array, " i"]) -> Float[Array, " o"]:
        act = ACTIVATIONS[self.activation]
        u, v = act(self.encoder_u(z)), act(self.encoder_v(z))
        h = z
        for layer in self.hidden:
            h = gate(act(layer(h)), u, v)
        return self.out(h)


def _encoders(m: ModifiedMLP | PirateNet, jet: jets.Jet, plan: jets.Plan):
    """The jet map of one activated layer of the gated core ``m``, and its encoders'
    jets $U$, $V$."""

    def act(layer, z: jets.Jet) -> jets.Jet:
        return activate(m.activation, jets.propagate(layer, z, plan=plan), plan)

    return act, act(m.encoder_u, jet), act(m.encoder_v, jet)


@jets.taylor_rule(ModifiedMLP)
def _modified_mlp_jet(m: ModifiedMLP, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    act, u, v = _encoders(m, jet, plan)
    h = jet
    for layer in m.hidden:
        h = _gate_jet(act(layer, h), u, v, plan)
    return jets.propagate(m.out, h, plan=plan, keep=keep)


class PirateBlock(eqx.Module):
    """One adaptive residual block of a `PirateNet`; ``alpha`` is its scalar gate."""

    dense1: Dense
    dense2: Dense
    dense3: Dense
    alpha: Float[Array, ""]


class PirateNet(eqx.Module):
    """PirateNet (module docstring): encoders of the embedding, ``blocks``, affine output.
    With every ``alpha = 0`` it is the linear model ``out(z)`` of its input."""

    encoder_u: Dense
    encoder_v: Dense
    blocks: tuple[PirateBlock, ...]
    out: Dense
    activation: str = eqx.field(static=True)

    def features(self, z: Float[Array, " i"]) -> Float[Array, " i"]:
        """The last block's output $x^{(L)}$, the input of the output layer."""
        act = ACTIVATIONS[self.activation]
        u, v = act(self.encoder_u(z)), act(self.encoder_v(z))
        x = z
        for b in self.blocks:
            z1 = gate(act(b.dense1(x)), v, u)  # f*U + (1-f)*V
            z2 = gate(act(b.dense2(z1)), v, u)
            h = act(b.dense3(z2))
            x = b.alpha * h + (1.0 - b.alpha) * x
        return x

    def __call__(self, z: Float[Array, " i"]) -> Float[Array, " o"]:
        return self.out(self.features(z))


@jets.taylor_rule(PirateNet)
def _pirate_jet(m: PirateNet, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    act, u, v = _encoders(m, jet, plan)
    x = jet
    for b in m.blocks:
        z1 = _gate_jet(act(b.dense1, x), v, u, plan)
        z2 = _gate_jet(act(b.dense2, z1), v, u, plan)
        h = act(b.dense3, z2)
        x = jets.add(jets.scale(h, b.alpha), jets.scale(x, 1.0 - b.alpha))
    return jets.propagate(m.out, x, plan=plan, keep=keep)


def make_core(
    kind: str,
    in_size: int,
    out_size: int,
    *,
    width: int,
    depth: int,
    activation: str,
    init: str,
    rwf: tuple[float, float] | None = None,
    key: PRNGKey,
    dtype=jnp.float32,
) -> eqx.Module:
    """The core of ``kind`` (`KINDS`). ``depth``: hidden layers (``mlp``,
    ``modified_mlp``) or residual blocks of three layers (``pirate``); ``width``: hidden
    units (the encoders' and blocks' inner width). ``rwf``: factorise every layer."""
    if kind not in KINDS:
        raise ValueError(f"unknown network kind {kind!r}; allowed: {KINDS}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; allowed: {tuple(ACTIVATIONS)}")
    mk = lambda k, a, b: dense(a, b, init, rwf, key=k, dtype=dtype)  # noqa: E731
    if kind == "mlp":
        mlp = MLP(in_size, out_size, width, depth, activation, init, key=key, dtype=dtype)
        if rwf is None:
            return mlp
        keys = jax.random.split(key, len(mlp.layers))
        pairs = zip(keys, mlp.layers, strict=True)
        layers = tuple(mk(k, lin.in_features, lin.out_features) for k, lin in pairs)
        return eqx.tree_at(lambda m: m.layers, mlp, layers)
    ku, kv, ko, kh = jax.random.split(key, 4)
    enc_u, enc_v = mk(ku, in_size, width), mk(kv, in_size, width)
    if kind == "modified_mlp":
        keys = jax.random.split(kh, depth)
        hidden = tuple(mk(k, in_size if i == 0 else width, width) for i, k in enumerate(keys))
        return ModifiedMLP(enc_u, enc_v, hidden, mk(ko, width, out_size), activation)
    blocks = []
    for k in jax.random.split(kh, depth):
        k1, k2, k3 = jax.random.split(k, 3)
        blocks.append(PirateBlock(mk(k1, in_size, width), mk(k2, width, width),
                                  mk(k3, width, in_size), jnp.zeros((), dtype)))
    return PirateNet(enc_u, enc_v, tuple(blocks), mk(ko, in_size, out_size), activation)


def build_network(
    kind: str,
    in_names: Sequence[str],
    out_names: Sequence[str],
    *,
    width: int,
    depth: int,
    activation: str,
    init: str,
    bounds: tuple[Sequence[float], Sequence[float]] | None,
    fourier: tuple[int, float] | None = None,
    periodic: dict[str, float] | None = None,
    rwf: tuple[float, float] | None = None,
    transform: eqx.Module | None = None,
    input_map: eqx.Module | None = None,
    squares: bool = False,
    key: PRNGKey,
    dtype=jnp.float32,
) -> Network:
    """input map (`pinnkit.nn.embeddings.build_embedding`) → core of ``kind`` (`make_core`)
    → [transform]. With ``kind="mlp"`` and ``rwf=None`` this is `build_mlp_network`."""
    kf, km = jax.random.split(key)
    embedding, in_size = build_embedding(
        in_names, bounds=bounds, fourier=fourier, periodic=periodic, input_map=input_map,
        squares=squares, key=kf, dtype=dtype,
    )
    core = make_core(kind, in_size, len(out_names), width=width, depth=depth,
                     activation=activation, init=init, rwf=rwf, key=km, dtype=dtype)
    return Network(core, tuple(out_names), tuple(in_names), embedding, transform)


def build_mlp_network(in_names: Sequence[str], out_names: Sequence[str], **kwargs) -> Network:
    """The standard network: [normalise | periodic | input_map] → [Fourier features] →
    MLP → [transform]; ``build_network("mlp", ...)``, whose keyword arguments (``width``,
    ``depth``, ``activation``, ``init``, ``bounds``, ``fourier``, ``periodic``,
    ``transform``, ``input_map``, ``key``, ``dtype``) it takes."""
    return build_network("mlp", in_names, out_names, **kwargs)


def physics_informed_init(
    net: Network,
    points: Float[Array, "n d"],
    targets: Float[Array, "n k"],
    outputs: Sequence[int],
) -> Network:
    """PirateNet's physics-informed initialisation: the output layer's rows ``outputs``
    become the least-squares fit $\\min_{W, b} \\sum_j \\|W x^{(L)}(p_j) + b - y_j\\|^2$ of the
    ``targets`` $y_j$ at ``points`` $p_j$, where $x^{(L)}$ are the last block's outputs
    (the embedding itself while every $\\alpha = 0$). Solved with `numpy.linalg.lstsq`
    (minimum-norm solution, so more features than points is fine). Under RWF the
    factorised weight keeps its scales $s$: $V = \\operatorname{diag}(e^{-s}) W$.
    """
    core = net.core
    if type(core) is not PirateNet:
        raise ValueError(f"physics-informed init needs a PirateNet core: actual={type(core).__name__}")
    if net.transform is not None:
        raise ValueError("physics-informed init fits the raw output; it cannot be used with a transform")

    def feats(x):
        z = x
        for e in net.embedding:
            z = e(z)
        return core.features(z)

    phi = np.asarray(jax.vmap(feats)(points), np.float64)
    design = np.concatenate([phi, np.ones((phi.shape[0], 1))], axis=1)
    sol, *_ = np.linalg.lstsq(design, np.asarray(targets, np.float64), rcond=None)
    out = core.out
    w, b = np.array(out.matrix(), np.float64), np.array(out.bias, np.float64)
    idx = np.asarray(list(outputs))
    w[idx], b[idx] = sol[:-1].T, sol[-1]
    if out.log_scale is not None:
        w = np.exp(-np.asarray(out.log_scale, np.float64))[:, None] * w
    dtype = out.weight.dtype
    new_out = Dense(jnp.asarray(w, dtype), jnp.asarray(b, dtype), out.log_scale)
    return eqx.tree_at(lambda n: n.core.out, net, new_out)
