"""Derivatives of the network's named outputs, by coordinate name.

Residuals are written against `Fields` (``f.partial("u", "x")``, ``f.laplacian("u")``,
``f.grad``, ``f.divergence``, ``f.hessian``); the configured method computes what they ask
for. ``METHODS`` maps the config's ``diffops.method`` names to method classes.
"""

from ._autodiff import Autodiff as Autodiff
from ._autodiff import ForwardOverReverse as ForwardOverReverse
from ._base import AbstractDiffMethod as AbstractDiffMethod
from ._base import Fields as Fields
from ._base import Layout as Layout
from ._base import Request as Request
from ._base import collect_requests as collect_requests
from ._taylor import Taylor as Taylor
from ._taylor import activation_derivatives as activation_derivatives

METHODS = {
    "autodiff": Autodiff,
    "fwd_rev": ForwardOverReverse,
    "taylor": Taylor,
}
