"""`Network`: a field $x \\mapsto y$ with named inputs and outputs, acting on one point.

`Network` = input map (`pinnkit.nn.embeddings`: normalisation of the domain's bounding
box onto $[-1, 1]^d$, optionally followed by Fourier features) → core (`MLP` in
`pinnkit.nn.layers`, the others in `pinnkit.nn.nets`) → optional output transform (a hard
constraint, e.g. $u = g(x) + \\phi(x)\\,N(x)$ with $\\phi = 0$ on the boundary), optionally
made exactly even or odd in some coordinates (`Parity`). Everything is an immutable
Equinox module; batching is the caller's `vmap`. The Taylor rules are registered below
each class (`pinnkit.diffops.jets.taylor_rule`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._constraint import AbstractFieldConstraint
from .._types import Point
from ..diffops import jets


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
        if isinstance(self.transform, AbstractFieldConstraint):
            return self.transform.of_field(x, self.raw)
        y = self.raw(x)
        if self.transform is not None:
            y = self.transform(x, y)
        return y

    def raw(self, x: Point) -> Float[Array, " m"]:
        """Embedding → core: the output before the transform."""
        z = x
        for e in self.embedding:
            z = e(z)
        return self.core(z)

    def fields(self, x: Point) -> dict[str, Array]:
        """Outputs by name at one point."""
        y = self(x)
        return {n: y[i] for i, n in enumerate(self.out_names)}


@jets.taylor_rule(Network)
def _network_jet(net: Network, x_jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    if isinstance(net.transform, AbstractFieldConstraint):  # differentiates the raw field itself
        if net.parity is None and not plan.free and not x_jet.rest and jets.has_rule(net.transform):
            return jets.propagate(net.transform, x_jet, functools.partial(_raw_jet, net, x_jet.value),
                                  plan=plan, keep=keep)
        return jets.generic(lambda z: jnp.atleast_1d(net(z)), (x_jet,), plan)
    if net.parity is None:
        return _chain(net, x_jet, plan, keep)
    if type(net.parity) is not Parity:  # a user's own symmetrisation: only jvp is safe
        return jets.generic(lambda z: jnp.atleast_1d(net(z)), (x_jet,), plan)
    # x -> R x is affine: its jet has the value R x and first-order rows R e_d (the
    # reflected directions negated), so the fast rules run unchanged on each copy.
    x = x_jet.value
    copies = []
    for sub, sign in net.parity.elements():
        if plan.free:  # rows along any directions: negate their reflected components
            flip = np.array([-1.0 if a in sub else 1.0 for a in range(x.shape[0])])[None, :]
        else:  # row i is e_{dirs[i]}: negate the reflected rows
            flip = np.array([-1.0 if d in sub else 1.0 for d in plan.dirs])[:, None]
        first = None if x_jet.first is None else x_jet.first * jnp.asarray(flip, x.dtype)
        jet = _chain(net, jets.Jet(net.parity.reflect(x, sub), first, {}), plan, keep)
        copies.append(jets.scale(jet, sign / len(net.parity.elements())))
    return functools.reduce(jets.add, copies)


def _raw_jet(net: Network, x: Point, plan: jets.Plan) -> jets.Jet:
    """The jet of the raw field (embedding → core) at ``x`` for ``plan`` (the coordinates'
    own directions): what a field constraint's rule asks for, at the orders it needs."""
    jet = jets.input_jet(x, plan)
    for emb in net.embedding:
        jet = jets.propagate(emb, jet, plan=plan)
    return jets.propagate(net.core, jet, plan=plan)


def _chain(net: Network, x_jet: jets.Jet, plan: jets.Plan, keep) -> jets.Jet:
    """Embedding → core → transform, each by its own rule where it has one."""
    jet = x_jet
    for emb in net.embedding:
        jet = jets.propagate(emb, jet, plan=plan)
    # without a transform, the core's last layer only computes the rows the caller reads
    jet = jets.propagate(net.core, jet, plan=plan, keep=keep if net.transform is None else None)
    if net.transform is not None:
        jet = jets.propagate(net.transform, x_jet, jet, plan=plan)
    return jet
