"""``kind: lbfgs``: optax's L-BFGS with a zoom line search (strong Wolfe conditions)
that re-evaluates the loss on the same batch. No learning rate: the line search sets
the step. Adaptive loss weights are frozen during the phase (a changing objective
breaks the curvature pairs)."""


from dataclasses import dataclass
from typing import ClassVar, Literal

import optax

from ...optim.linesearch import zoom_linesearch
from ._base import AbstractOptimizerPhase, StepResult, line_search_update, positive_or_null, with_grad_norm
from .optax import clipped


@dataclass(frozen=True)
class LbfgsConfig:
    """``kind: lbfgs``: ``memory`` past gradient pairs, at most ``max_linesearch_steps``
    line-search iterations per step, optional ``clip_norm``; stop the phase early at a
    relative loss change ``tol`` or a gradient norm ``grad_tol`` (null: never)."""

    kind: Literal["lbfgs"] = "lbfgs"
    steps: int | None = None
    memory: int = 10
    max_linesearch_steps: int = 16
    clip_norm: float | None = None
    tol: float | None = None
    grad_tol: float | None = None

    def problems(self) -> list[tuple[str, str, object]]:
        checks = [
            ("memory", self.memory >= 1, "expected an integer >= 1", self.memory),
            ("max_linesearch_steps", self.max_linesearch_steps >= 1, "expected an integer >= 1",
             self.max_linesearch_steps),
        ]
        bad = [(k, msg, v) for k, ok, msg, v in checks if not ok]
        return bad + positive_or_null(self, ("clip_norm", "tol", "grad_tol"))

    numbers = ("clip_norm", "tol", "grad_tol")  # read at run time (`AbstractPhase.numbers`)

    def state_words(self, n_params: int, rows: int) -> float:
        """Words of optimiser state (the memory plan): ``memory`` pairs of parameter vectors."""
        return 2.0 * self.memory * n_params


class LbfgsPhase(AbstractOptimizerPhase):
    """L-BFGS with a zoom line search (``kind: lbfgs``, `LbfgsConfig`: memory, line-search
    steps); stops on ``tol`` / ``grad_tol``; adaptive weights frozen during it."""

    kind: ClassVar[str] = "lbfgs"
    Config: ClassVar[type] = LbfgsConfig
    line_search: ClassVar[bool] = True
    gauss_newton: ClassVar[bool] = False
    updates_weights: ClassVar[bool] = False

    @classmethod
    def from_config(cls, cfg, start, steps, coeff_lrs):
        del coeff_lrs  # one joint quasi-Newton model: a single optimiser
        # optax's zoom line search, the loss traced once in it (`pinnkit.optim.linesearch`)
        ls = zoom_linesearch(cfg.max_linesearch_steps)
        opt = clipped(optax.lbfgs(memory_size=cfg.memory, linesearch=ls), cfg.clip_norm)
        return cls(start, steps, opt, cfg.tol, cfg.grad_tol, options=cfg)

    def step(self, loss, params, state, key, arrays, ctx):
        params, state, total, aux, grads = line_search_update(self.optimizer, loss, params, state,
                                                              key, arrays, ctx)
        return StepResult(params, state, with_grad_norm(self, {"loss": total, **aux}, grads))
