"""Moved to `pinnkit.train.collocation` (its name says which side of sampling it is; the
geometry side is `pinnkit.geometry.rejection`); this path stays for one release."""

from .collocation import METHODS as METHODS
from .collocation import Sampler as Sampler
from .collocation import sobol_unit as sobol_unit
