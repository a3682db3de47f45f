"""First-order phases: an optax gradient transformation on the loss's gradient, with a
learning-rate schedule, optional gradient clipping and per-coefficient learning rates.

``adam`` (`optax.adam`), ``sgd`` (`optax.sgd`) and ``soap`` (`pinnkit.optim.soap`,
Adam in the eigenbasis of Shampoo's preconditioner) share everything but the
transformation: each is a final class naming its transformation and its config.
Another optax optimiser is one more such class here plus its line in the registry
(`pinnkit.train.phases.PHASES`).
"""


import abc
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import jax
import optax

from ...optim import soap
from ._base import AbstractOptimizerPhase, StepResult, positive_or_null, with_grad_norm


@dataclass(frozen=True)
class ScheduleConfig:
    """``optim.phases.N.schedule``: the schedule of the learning rate (first-order
    phases) or of the fixed ``step_size`` (``natural_gradient``) over the phase's steps."""

    kind: Literal["constant", "exponential_decay", "cosine", "warmup_cosine"] = "constant"
    decay_steps: int = 1000
    rate: float = 0.9
    warmup_steps: int = 0
    final_fraction: float = 0.0

    def problems(self) -> list[tuple[str, str, object]]:
        """``(schedule.KEY, what is expected, value)`` for each value out of range."""
        checks = [
            ("decay_steps", self.decay_steps >= 1, "expected >= 1", self.decay_steps),
            ("rate", 0 < self.rate <= 1, "expected 0 < rate <= 1", self.rate),
            ("warmup_steps", self.warmup_steps >= 0, "expected >= 0", self.warmup_steps),
            ("final_fraction", 0 <= self.final_fraction <= 1, "expected a fraction in [0, 1]",
             self.final_fraction),
        ]
        return [(f"schedule.{k}", msg, v) for k, ok, msg, v in checks if not ok]

    def horizon(self, steps: int) -> int | None:
        """``steps``, the phase's length, where the schedule reads it (a cosine, a
        warm-up), else None (`AbstractOptimizerPhase.horizon`)."""
        reads = self.kind in ("cosine", "warmup_cosine") or self.warmup_steps > 0
        return steps if reads else None


@dataclass(frozen=True)
class GradientConfig:
    """Options of every first-order phase. ``steps: null`` (at most one phase) takes the
    rest of ``train.steps``; ``lr`` and ``schedule`` set the learning rate; ``clip_norm``
    clips the gradient's global norm first; ``freeze`` names trainable coefficients that
    this phase leaves where they are (e.g. a frequency held until the flow oscillates,
    then trained by a later phase)."""

    kind: str = "adam"
    steps: int | None = None
    lr: float = 1.0e-3
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    clip_norm: float | None = None
    freeze: list[str] = field(default_factory=list)

    def problems(self) -> list[tuple[str, str, object]]:
        """``(key, what is expected, value)`` for each value out of range (empty: valid)."""
        bad = [] if self.lr > 0 else [("lr", "expected a number > 0", self.lr)]
        if len(set(self.freeze)) != len(self.freeze):
            bad.append(("freeze", "expected distinct coefficient names", list(self.freeze)))
        return bad + self.schedule.problems() + positive_or_null(self, ("clip_norm",))

    @property
    def numbers(self) -> tuple[str, ...]:
        """The options the compiled step reads at run time (`AbstractPhase.numbers`): the
        clipping norm, and the learning rate unless a schedule is built from it."""
        return ("clip_norm", *(("lr",) if self.schedule.kind == "constant" else ()))

    def state_words(self, n_params: int, rows: int) -> float:
        """Words of optimiser state for ``n_params`` parameters (the memory plan): two
        moments (Adam; SOAP's in its eigenbasis, whose Kronecker factors are not counted)."""
        return 2.0 * n_params


@dataclass(frozen=True)
class AdamConfig(GradientConfig):
    """``kind: adam``: optax's Adam."""

    kind: Literal["adam"] = "adam"


@dataclass(frozen=True)
class SgdConfig(GradientConfig):
    """``kind: sgd``: plain gradient descent."""

    kind: Literal["sgd"] = "sgd"

    def state_words(self, n_params: int, rows: int) -> float:
        return 0.0


@dataclass(frozen=True)
class SoapConfig(GradientConfig):
    """``kind: soap``: SOAP; the eigenbases are refreshed every ``precondition_frequency``
    steps."""

    kind: Literal["soap"] = "soap"
    precondition_frequency: int = 10

    def problems(self):
        bad = super().problems()
        if self.precondition_frequency < 1:
            bad.append(("precondition_frequency", "expected an integer >= 1",
                        self.precondition_frequency))
        return bad


def schedule(cfg, lr: float, steps: int):
    """The learning rate of ``cfg.schedule`` (a `ScheduleConfig`; ``cfg`` is any phase
    config that has one) from ``lr`` over ``steps`` steps (a constant or an optax
    schedule)."""
    s = cfg.schedule
    if s.kind == "constant":
        return lr
    if s.kind == "exponential_decay" and s.warmup_steps > 0:  # linear warm-up from 0 first
        return optax.warmup_exponential_decay_schedule(
            0.0, lr, min(s.warmup_steps, steps - 1), s.decay_steps, s.rate
        )
    if s.kind == "exponential_decay":
        return optax.exponential_decay(lr, s.decay_steps, s.rate)
    if s.kind == "cosine":
        return optax.cosine_decay_schedule(lr, steps, alpha=s.final_fraction)
    return optax.warmup_cosine_decay_schedule(
        0.0, lr, min(s.warmup_steps, steps - 1), steps, end_value=lr * s.final_fraction
    )


def clipped(opt, clip_norm: float | None):
    """``opt`` after clipping the gradient to global norm ``clip_norm`` (None: ``opt``)."""
    return opt if clip_norm is None else optax.chain(optax.clip_by_global_norm(clip_norm), opt)


def per_coefficient(transforms: dict[str, optax.GradientTransformation], own: set[str]):
    """`optax.multi_transform` over the ``(network, coeffs)`` tree: ``transforms["net"]``
    for the network and the other coefficients, ``transforms["coeff:NAME"]`` for each
    coefficient in ``own``."""

    def labels(params):
        net, coeffs = params
        return (
            jax.tree_util.tree_map(lambda _: "net", net),
            {k: jax.tree_util.tree_map(lambda _, k=k: f"coeff:{k}" if k in own else "net", v)
             for k, v in coeffs.items()},
        )

    return optax.multi_transform(transforms, labels)


class AbstractOptaxPhase(AbstractOptimizerPhase):
    """A first-order phase: ``optimizer.update(grads, state, params)``; it never stops
    early (no ``tol`` in its config). Final subclasses name the transformation
    (`transformation`) and the config class."""

    line_search: ClassVar[bool] = False
    gauss_newton: ClassVar[bool] = False
    updates_weights: ClassVar[bool] = True

    @staticmethod
    @abc.abstractmethod
    def transformation(cfg, lr) -> optax.GradientTransformation:
        """The transformation of config ``cfg`` at learning rate (or schedule) ``lr``."""

    @classmethod
    def from_config(cls, cfg, start, steps, coeff_lrs):
        def build(rate):
            return clipped(cls.transformation(cfg, rate), cfg.clip_norm)

        net_rate = schedule(cfg, cfg.lr, steps)
        opt = build(net_rate)
        # Coefficients with their own lr get their own optimiser; frozen ones a zero update
        # (no state, so the phase's other leaves see exactly the optimiser they would).
        own = {f"coeff:{k}": build(schedule(cfg, lr, steps))
               for k, lr in coeff_lrs.items() if k not in cfg.freeze}
        own |= {f"coeff:{k}": optax.set_to_zero() for k in cfg.freeze}
        if own:
            opt = per_coefficient({"net": opt, **own}, set(coeff_lrs) | set(cfg.freeze))
        return cls(start, steps, opt, learning_rate=net_rate, options=cfg,
                   coeff_lrs=tuple(sorted(coeff_lrs.items())), horizon=cfg.schedule.horizon(steps))

    def step(self, loss, params, state, key, arrays, ctx):
        (total, aux), grads = loss.value_and_grad(params, key, arrays, ctx)
        updates, state = self.optimizer.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        return StepResult(params, state, with_grad_norm(self, {"loss": total, **aux}, grads))


class AdamPhase(AbstractOptaxPhase):
    """Adam (``optim.phases.N.kind: adam``, `AdamConfig`): `optax.adam` at the phase's
    learning rate or schedule."""

    kind: ClassVar[str] = "adam"
    Config: ClassVar[type] = AdamConfig

    @staticmethod
    def transformation(cfg, lr):
        return optax.adam(lr)


class SgdPhase(AbstractOptaxPhase):
    """Plain gradient descent (``kind: sgd``, `SgdConfig`): `optax.sgd` at the phase's
    learning rate or schedule."""

    kind: ClassVar[str] = "sgd"
    Config: ClassVar[type] = SgdConfig

    @staticmethod
    def transformation(cfg, lr):
        return optax.sgd(lr)


class SoapPhase(AbstractOptaxPhase):
    """SOAP, Adam in the eigenbasis of a Shampoo preconditioner (``kind: soap``,
    `SoapConfig`; `pinnkit.optim.soap`), refreshed every ``precondition_frequency`` steps."""

    kind: ClassVar[str] = "soap"
    Config: ClassVar[type] = SoapConfig

    @staticmethod
    def transformation(cfg, lr):
        return soap(lr, precondition_frequency=cfg.precondition_frequency)
