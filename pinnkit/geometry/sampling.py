"""Moved to `pinnkit.geometry.rejection` (its name says which side of sampling it is;
the training side is `pinnkit.train.collocation`); this path stays for one release."""

from .rejection import ESTIMATE_POINTS as ESTIMATE_POINTS
from .rejection import estimate_acceptance as estimate_acceptance
from .rejection import host_points as host_points
from .rejection import oversample as oversample
from .rejection import select as select
from .rejection import sobol_unit as sobol_unit
