"""Optimisers beyond optax's: `soap` (Shampoo-preconditioned Adam), the energy natural
gradient / Gauss-Newton step (`pinnkit.optim.natgrad`), its Jacobian form solved in point
or parameter space with SPRING momentum (`pinnkit.optim.woodbury`), and the dense
self-scaled quasi-Newton methods `ssbfgs` / `ssbroyden` (`pinnkit.optim.quasi_newton`),
and optax's zoom line search with the objective traced once (`pinnkit.optim.linesearch`)."""

from .linesearch import zoom_linesearch as zoom_linesearch
from .natgrad import NaturalGradientState as NaturalGradientState
from .natgrad import SafeguardedState as SafeguardedState
from .natgrad import natural_gradient as natural_gradient
from .quasi_newton import SelfScaledState as SelfScaledState
from .quasi_newton import check_dense_memory as check_dense_memory
from .quasi_newton import dense_memory_bytes as dense_memory_bytes
from .quasi_newton import ssbfgs as ssbfgs
from .quasi_newton import ssbroyden as ssbroyden
from .soap import ScaleBySoapState as ScaleBySoapState
from .soap import scale_by_soap as scale_by_soap
from .soap import soap as soap
from .woodbury import WoodburyState as WoodburyState
from .woodbury import gram_rows as gram_rows
from .woodbury import natural_gradient_direction as natural_gradient_direction
from .woodbury import weighted_rows as weighted_rows
from .woodbury import woodbury_natural_gradient as woodbury_natural_gradient
