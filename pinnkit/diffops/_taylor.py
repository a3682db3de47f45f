"""Taylor mode: every derivative a residual asks for, in one forward pass.

The requests decide which rows a jet carries (`pinnkit.diffops._algebra.make_plan`); the jet
of the input $x$ is $(x, e_{a_1}, \\dots, e_{a_p})$ with no higher rows, and it is pushed
through the network module by module. Each module goes through the *Taylor rule* its own
file registered for its exact type (`taylor_rule`; the layers of `pinnkit.nn` register
theirs in `pinnkit/nn/layers.py`, `network.py` and `nets.py`), built from the jet algebra of
`pinnkit.diffops.jets`; a module without one, and any callable that is not a module,
goes through the *generic* rule built from nested `jax.jvp`, which is correct for any JAX
function (`pinnkit.diffops._generic`). This engine knows no network class.

Why this representation rather than univariate jets along polarisation directions
(Griewank–Utke–Walther interpolation): for the sparse sets of mixed partials PDEs use, the
closed set of multi-indices is no larger than the directional coefficients needed (all of
$u_{xxxx}, u_{xxyy}, u_{yyyy}$ and their lower orders at $d = 2$: 13 rows, against
$1 + 4\\binom{d+3}{4} = 21$ for interpolation), and without interpolation weights there is
no cancellation, so the result agrees with nested reverse mode to rounding.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

from .._types import Point, Scalar
from ._algebra import Jet, Plan, input_jet, make_plan
from ._base import AbstractDiffMethod, Request
from ._generic import generic
from ._rows import Row, RowKind, partial_row

# A rule maps ``(module, *jets, plan=, keep=)`` to the jet of ``module(*z)``: one jet per
# argument of the module's ``__call__`` (an embedding or core takes one, an output
# transform ``(x, y)`` two). ``keep`` is the set of rows the caller still reads from the
# output (``None``: all of them); a rule may skip computing the others.
TaylorRule = Callable[..., Jet]

_RULES: dict[type, TaylorRule] = {}


def taylor_rule(cls: type) -> Callable[[TaylorRule], TaylorRule]:
    """Registers the decorated function as the fast Taylor rule of modules of type ``cls``.

    Registered for the *exact* type: a subclass may override ``__call__``, and then only
    the generic rule is safe, so it does not inherit the rule (it may register its own).
    Use it in the file that defines ``cls``::

        @taylor_rule(MyLayer)
        def _my_layer_jet(layer: MyLayer, jet: Jet, *, plan: Plan, keep) -> Jet:
            return linear(jet, layer.weight, layer.bias, keep)

    **Raises:** `ValueError` if ``cls`` has a rule already.
    """

    def register(rule: TaylorRule) -> TaylorRule:
        if cls in _RULES:
            raise ValueError(f"{cls.__qualname__} has a Taylor rule already: {_RULES[cls].__qualname__}")
        _RULES[cls] = rule
        return rule

    return register


def has_rule(module) -> bool:
    """Whether ``module`` (exactly its type) has a registered fast rule."""
    return type(module) in _RULES


def propagate(module: Callable, *jets: Jet, plan: Plan, keep: frozenset | None = None) -> Jet:
    """The jet of ``module(*z)`` from the jets of its arguments: by the rule registered for
    ``type(module)``, else by the generic rule (``keep`` is then ignored)."""
    rule = _RULES.get(type(module))
    if rule is None:
        return generic(module, jets, plan)
    return rule(module, *jets, plan=plan, keep=keep)


def network_jet(
    net: Callable[[Point], Array],
    x: Point,
    plan: Plan,
    force_generic: bool = False,
    first: Array | None = None,
) -> Jet:
    """The jet of the whole network at ``x``, of which only the requested rows are needed.
    ``first``: the input's first-order rows ``(len(plan.dirs), d)`` when they are not the
    unit vectors of ``plan.dirs`` (directions of a ``plan.free`` plan)."""
    x_jet = input_jet(x, plan) if first is None else Jet(x, first, {})
    rule = None if force_generic else _RULES.get(type(net))
    if rule is None:
        return generic(lambda z: jnp.atleast_1d(net(z)), (x_jet,), plan)
    return rule(net, x_jet, plan=plan, keep=plan.needed)


class Taylor(AbstractDiffMethod):
    """Every requested derivative, for all outputs at once, in one forward propagation of
    a truncated Taylor expansion through the network (Taylor mode / forward Laplacian).

    A residual that asks for $u$, $\\nabla u$, $\\Delta u$ and $u_t$ pays for one
    propagation of $1 + d + 1$ rows, not for three derivative passes; the Laplacian is
    propagated as one row and never through a $d \\times d$ Hessian. Mixed partials of
    order 2–4 (and higher) are carried as one row per multi-index that the request needs;
    a bi-Laplacian (`Fields.biharmonic`) as $d$ rows $\\partial_c \\Delta u$ and one row
    $\\Delta^2 u$ on top of the Hessian rows.

    Every module with a registered rule (`taylor_rule`: all of `pinnkit.nn`'s networks,
    cores, embeddings and `HardDirichlet`) goes through its closed-form rule; any other
    layer or transform and any other callable (for example a user's own Equinox module
    passed as the network) go through a generic nested-`jax.jvp` rule with the same result.
    Training differentiates this forward propagation in reverse mode
    (`jax.value_and_grad` over the parameters), which needs no special support; forward
    mode over it works too (no `custom_vjp` inside).

    **Arguments:**

    - `force_generic`: use the generic rule for the whole network (for tests and
      benchmarks). Default `False`.
    """

    force_generic: bool = eqx.field(static=True, default=False)

    def derivatives(
        self, net: Callable[[Point], Array], x: Point, requests: Sequence[Request]
    ) -> dict[Request, Scalar]:
        plan = make_plan(requests)
        jet = network_jet(net, x, plan, self.force_generic)
        return {r: read_request(jet, plan, r) for r in requests}


def read_request(jet: Jet, plan: Plan, r: Request, all_outputs: bool = False) -> Array:
    """The value of request ``r`` from the network's jet (``all_outputs``: the whole row,
    every output, instead of output ``r.out``)."""
    pick = (lambda row: row) if all_outputs else (lambda row: row[r.out])
    if r.kind == "laplacian":
        if (lap := Row(RowKind.LAPLACIAN, r.axes)) in plan.rest:
            return pick(jet.row_or_zero(lap, plan.dirs))
        if r.axes:
            diag = [pick(jet.row_or_zero(partial_row(a, a), plan.dirs)) for a in r.axes]
            return functools.reduce(operator.add, diag)
        return jnp.zeros(jet.value.shape if all_outputs else (), jet.value.dtype)
    if r.kind == "biharmonic":
        return pick(jet.row_or_zero(Row(RowKind.BILAPLACIAN, r.axes), plan.dirs))
    if r.axes:
        return pick(jet.row_or_zero(Row(RowKind.PARTIAL, r.axes), plan.dirs))
    return pick(jet.value)
