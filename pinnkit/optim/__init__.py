"""Optimisers beyond optax's: `soap` (Shampoo-preconditioned Adam) and the energy natural
gradient / Gauss-Newton step (`pinnkit.optim.natgrad`)."""

from .natgrad import NaturalGradientState as NaturalGradientState
from .natgrad import SafeguardedState as SafeguardedState
from .natgrad import natural_gradient as natural_gradient
from .soap import ScaleBySoapState as ScaleBySoapState
from .soap import scale_by_soap as scale_by_soap
from .soap import soap as soap
