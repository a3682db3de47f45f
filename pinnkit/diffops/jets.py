"""The jet algebra and rule registry of the Taylor engine, for layers' own Taylor rules.

A layer gets a fast rule by registering one in its own file (the engine knows no layer
class)::

    from pinnkit.diffops import jets

    @jets.taylor_rule(Scaled)
    def _scaled_jet(m: Scaled, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
        return jets.scale(jets.propagate(m.inner, jet, plan=plan, keep=keep), m.factor)

- `Jet`: value, first-order block and higher rows (`Row`, named by `RowKind`);
- `Plan`: which rows are carried (``plan.dirs``, ``plan.rest``, ``plan.order``);
- rules to compose: `linear` ($Wz + b$), `elementwise` (any element-wise $\\sigma$ given
  its derivatives, e.g. `activation_derivatives`), `product` (Leibniz), `scale`, `add`,
  `propagate` (a sub-module, by its own rule or the generic one), `generic` (any JAX
  function of jets, by nested `jax.jvp`), `of_point` (a function of the input point
  alone, in one trace: the $A(x)$, $D(x)$ of an output transform $A + D\\,y$).

docs/diffops.md ("How to add a network with a fast Taylor rule") walks through it.
"""

from ._activations import activation_derivatives as activation_derivatives
from ._algebra import Jet as Jet
from ._algebra import Plan as Plan
from ._algebra import add as add
from ._algebra import elementwise as elementwise
from ._algebra import input_jet as input_jet
from ._algebra import linear as linear
from ._algebra import make_plan as make_plan
from ._algebra import product as product
from ._algebra import scale as scale
from ._algebra import select as select
from ._generic import generic as generic
from ._pointwise import of_point as of_point
from ._rows import Row as Row
from ._rows import RowKind as RowKind
from ._rows import partial_row as partial_row
from ._taylor import TaylorRule as TaylorRule
from ._taylor import has_rule as has_rule
from ._taylor import network_jet as network_jet
from ._taylor import propagate as propagate
from ._taylor import taylor_rule as taylor_rule
