"""Derivatives of the network's named outputs, by coordinate name.

Residuals are written against `Fields` (``f.partial("u", "x")``, ``f.laplacian("u")``,
``f.grad``, ``f.divergence``, ``f.hessian``); the configured method computes what they ask
for. ``METHODS`` maps the config's ``diffops.method`` names to method classes,
``ESTIMATORS`` the ``diffops.estimator`` names to the stochastic Taylor estimators
(`STDE`, `SDGD`: unbiased Laplacian, second-order and bi-Laplacian estimates at a cost
that does not grow with the dimension).
"""

from ._activations import activation_derivatives as activation_derivatives
from ._autodiff import Autodiff as Autodiff
from ._autodiff import ForwardOverReverse as ForwardOverReverse
from ._base import AbstractDiffMethod as AbstractDiffMethod
from ._base import Fields as Fields
from ._base import Layout as Layout
from ._base import Request as Request
from ._base import collect_requests as collect_requests
from ._custom import cos_sqrt as cos_sqrt
from ._custom import exprel as exprel
from ._custom import log1p_over_x as log1p_over_x
from ._custom import polar as polar
from ._custom import safe_atan2 as safe_atan2
from ._custom import safe_norm as safe_norm
from ._custom import safe_sqrt as safe_sqrt
from ._custom import sigmoid as sigmoid
from ._custom import sinc as sinc
from ._custom import sinc_sqrt as sinc_sqrt
from ._custom import softplus as softplus
from ._custom import spherical as spherical
from ._custom import versin_over_x2 as versin_over_x2
from ._stochastic import SDGD as SDGD
from ._stochastic import STDE as STDE
from ._stochastic import AbstractEstimator as AbstractEstimator
from ._taylor import Taylor as Taylor

# ``diffops.estimator`` names (besides ``exact``, the method itself)
ESTIMATORS = {"stde": STDE, "sdgd": SDGD}

METHODS = {
    "autodiff": Autodiff,
    "fwd_rev": ForwardOverReverse,
    "taylor": Taylor,
}
