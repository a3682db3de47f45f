"""Optimiser phases (`AbstractPhase`), one file per kind, and the registry that the
config schema and the builder read: a new phase is its file plus one line here.

| kind | class | file |
|---|---|---|
| ``adam``, ``sgd``, ``soap`` | `AdamPhase`, `SgdPhase`, `SoapPhase` | ``optax.py`` |
| ``lbfgs`` | `LbfgsPhase` | ``lbfgs.py`` |
| ``natural_gradient`` | `NaturalGradientPhase` | ``natural_gradient.py`` |
| ``ssbfgs``, ``ssbroyden`` | `SsbfgsPhase`, `SsbroydenPhase` | ``quasi_newton.py`` |
"""

from ...errors import ConfigError
from ._base import AbstractPhase as AbstractPhase
from .lbfgs import LbfgsPhase as LbfgsPhase
from .natural_gradient import NaturalGradientPhase as NaturalGradientPhase
from .optax import AdamPhase as AdamPhase
from .optax import GradientConfig
from .optax import ScheduleConfig as ScheduleConfig
from .optax import SgdPhase as SgdPhase
from .optax import SoapPhase as SoapPhase
from .quasi_newton import SsbfgsPhase as SsbfgsPhase
from .quasi_newton import SsbroydenPhase as SsbroydenPhase

PHASES: dict[str, type[AbstractPhase]] = {
    "adam": AdamPhase,
    "sgd": SgdPhase,
    "lbfgs": LbfgsPhase,
    "soap": SoapPhase,
    "natural_gradient": NaturalGradientPhase,
    "ssbfgs": SsbfgsPhase,
    "ssbroyden": SsbroydenPhase,
}


def check_frozen(configs, trainable, problem: str) -> None:
    """Raises `ConfigError` if a phase's ``freeze`` (first-order phases) names a coefficient
    that is not among ``trainable``, the problem's trainable coefficients."""
    for i, cfg in enumerate(configs):
        bad = sorted(set(cfg.freeze) - set(trainable)) if isinstance(cfg, GradientConfig) else []
        if bad:
            raise ConfigError(
                f"optim.phases.{i}.freeze: {bad} are not trainable coefficients of problem "
                f"{problem!r}; its trainable coefficients are {sorted(trainable) or 'none'} "
                "(problem.trainable makes more of its coefficients trainable)")
