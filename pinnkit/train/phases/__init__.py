"""Optimiser phases (`AbstractPhase`), one file per kind, and the registry that the
config schema and the builder read: a new phase is its file plus one line here.

| kind | class | file |
|---|---|---|
| ``adam``, ``sgd``, ``soap`` | `AdamPhase`, `SgdPhase`, `SoapPhase` | ``optax.py`` |
| ``lbfgs`` | `LbfgsPhase` | ``lbfgs.py`` |
| ``natural_gradient`` | `NaturalGradientPhase` | ``natural_gradient.py`` |
"""

from ._base import AbstractPhase as AbstractPhase
from .lbfgs import LbfgsPhase as LbfgsPhase
from .natural_gradient import NaturalGradientPhase as NaturalGradientPhase
from .optax import AdamPhase as AdamPhase
from .optax import ScheduleConfig as ScheduleConfig
from .optax import SgdPhase as SgdPhase
from .optax import SoapPhase as SoapPhase

PHASES: dict[str, type[AbstractPhase]] = {
    "adam": AdamPhase,
    "sgd": SgdPhase,
    "lbfgs": LbfgsPhase,
    "soap": SoapPhase,
    "natural_gradient": NaturalGradientPhase,
}
