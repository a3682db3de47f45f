"""``kind: ssbfgs`` and ``kind: ssbroyden``: the dense self-scaled quasi-Newton methods of
`pinnkit.optim.quasi_newton` (Urbán, Stefanou & Pons 2025; Kiyani et al. 2025) as
training phases, with the strong-Wolfe zoom line search re-evaluating the loss on the
same batch (as ``lbfgs``). No learning rate: the line search sets the step.

They keep a dense $P \\times P$ inverse Hessian, so they are for networks of a few
thousand parameters, in float64 (in float32 the curvature pairs $y^\\top s$ drown in
rounding long before the loss reaches the accuracy these methods are for; a phase built
without x64 warns once). Adaptive loss weights are frozen during the phase (a changing
objective breaks the curvature pairs).

Per-step metrics: the loss and its terms *after* the step, at the point the line search
accepted (its evaluation there is the next step's at the parameters: on fixed points,
`pinnkit.train.loss.Loss.fixed`, a step then evaluates the loss once fewer), ``step_size``
$\\alpha_k$, ``curvature`` $y_k^\\top s_k$ and ``scaling`` $\\tau_k$ of the step (1 when the
update was skipped), ``trials``: the points the line search evaluated (the loss
evaluations of the step, less the one at the parameters when it is not reused). A step
not taken (a non-finite trial) reports the loss at the parameters and the terms of the
trial it refused.
"""


import warnings
from dataclasses import dataclass
from typing import ClassVar, Literal

import jax
import optax

from ...optim import ssbfgs, ssbroyden
from ._base import AbstractOptimizerPhase, StepResult, positive_or_null, with_grad_norm

_warned_x64 = False


@dataclass(frozen=True)
class SelfScaledConfig:
    """Options of ``ssbfgs`` and ``ssbroyden``: at most ``max_linesearch_steps`` zoom
    iterations per step, the strong-Wolfe constants ``slope_rtol`` ($c_1$, default 1e-4)
    and ``curv_rtol`` ($c_2$, 0.9); ``max_memory_gib``: refuse a network whose dense
    matrices (three $P \\times P$ copies at the peak) need more (null: half the device's
    memory); stop the phase early at a relative loss change ``tol`` or a gradient norm
    ``grad_tol`` (null: never); ``step_guess``: the line search's first trial, ``unit``
    ($\\alpha = 1$, default) or ``last`` (1.25 times the last accepted step, at most 1)."""

    kind: str = "ssbfgs"
    steps: int | None = None
    max_linesearch_steps: int = 16
    slope_rtol: float = 1.0e-4
    curv_rtol: float = 0.9
    max_memory_gib: float | None = None
    tol: float | None = None
    grad_tol: float | None = None
    step_guess: str = "unit"

    def problems(self) -> list[tuple[str, str, object]]:
        checks = [
            ("max_linesearch_steps", self.max_linesearch_steps >= 1, "expected an integer >= 1",
             self.max_linesearch_steps),
            ("slope_rtol", 0 < self.slope_rtol < self.curv_rtol, "expected 0 < slope_rtol < curv_rtol",
             self.slope_rtol),
            ("curv_rtol", 0 < self.curv_rtol < 1, "expected a number in (0, 1)", self.curv_rtol),
            ("step_guess", self.step_guess in ("unit", "last"), "expected unit or last", self.step_guess),
        ]
        bad = [(k, msg, v) for k, ok, msg, v in checks if not ok]
        return bad + positive_or_null(self, ("max_memory_gib", "tol", "grad_tol"))

    # read at run time (`AbstractPhase.numbers`); the line search's constants are compiled in
    numbers = ("tol", "grad_tol")

    def state_words(self, n_params: int, rows: int) -> float:
        """Words of optimiser state (the memory plan): the $P \\times P$ inverse Hessian
        plus the line search's vectors (iterate, gradient, direction: a few $P$)."""
        return float(n_params) ** 2 + 6.0 * n_params


@dataclass(frozen=True)
class SsbfgsConfig(SelfScaledConfig):
    """``kind: ssbfgs``: self-scaled BFGS (Oren-Luenberger factor capped at 1)."""

    kind: Literal["ssbfgs"] = "ssbfgs"


@dataclass(frozen=True)
class SsbroydenConfig(SelfScaledConfig):
    """``kind: ssbroyden``: self-scaled Broyden (the Broyden parameter and the scaling
    chosen per step)."""

    kind: Literal["ssbroyden"] = "ssbroyden"


def _warn_without_x64(kind: str) -> None:
    global _warned_x64
    if not _warned_x64 and not jax.config.jax_enable_x64:  # reads the flag, never sets it
        _warned_x64 = True
        warnings.warn(f"a {kind} phase in float32: its curvature pairs lose precision near "
                      "convergence; set numerics.x64: true", stacklevel=3)


class AbstractSelfScaledPhase(AbstractOptimizerPhase):
    """A dense quasi-Newton phase; final subclasses name the transformation."""

    line_search: ClassVar[bool] = True
    gauss_newton: ClassVar[bool] = False
    updates_weights: ClassVar[bool] = False

    @classmethod
    def from_config(cls, cfg, start, steps, coeff_lrs):
        del coeff_lrs  # one joint quasi-Newton model: a single optimiser
        _warn_without_x64(cls.kind)
        limit = None if cfg.max_memory_gib is None else cfg.max_memory_gib * 2.0**30
        make = ssbroyden if cfg.kind == "ssbroyden" else ssbfgs
        opt = make(cfg.max_linesearch_steps, slope_rtol=cfg.slope_rtol, curv_rtol=cfg.curv_rtol,
                   max_memory_bytes=limit, step_guess=cfg.step_guess)
        return cls(start, steps, opt, cfg.tol, cfg.grad_tol, options=cfg)

    def step(self, loss, params, state, key, arrays, ctx):
        # the loss at params is the line search loop's first evaluation: one loss in the
        # program; on a fixed objective it is the last search's at the point it accepted
        reuse = self.optimizer.reusable(state) if loss.fixed(ctx) else None
        updates, state, aux = self.optimizer.search_step(
            state, params, lambda p: loss.value_and_grad(p, key, arrays, ctx), reuse)
        params = optax.apply_updates(params, updates)
        ls = state.linesearch
        metrics = {"loss": ls.value, **aux, "step_size": state.step_size,
                   "curvature": state.curvature, "scaling": state.tau,
                   "trials": ls.info.num_linesearch_steps}
        return StepResult(params, state, with_grad_norm(self, metrics, ls.grad))


class SsbfgsPhase(AbstractSelfScaledPhase):
    """Self-scaled BFGS (``kind: ssbfgs``, `SsbfgsConfig`; `pinnkit.optim.quasi_newton`):
    a dense inverse-Hessian model, scaled at every update."""

    kind: ClassVar[str] = "ssbfgs"
    Config: ClassVar[type] = SsbfgsConfig


class SsbroydenPhase(AbstractSelfScaledPhase):
    """Self-scaled Broyden (``kind: ssbroyden``, `SsbroydenConfig`; `pinnkit.optim.quasi_newton`):
    the Broyden-family update of the same dense model."""

    kind: ClassVar[str] = "ssbroyden"
    Config: ClassVar[type] = SsbroydenConfig
