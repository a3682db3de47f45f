"""``kind: natural_gradient``: the energy natural gradient / damped Gauss-Newton step of
`pinnkit.optim.natural_gradient` (Müller & Zeinhofer 2023), with the Gramian and the
gradient from `Loss.gauss_newton` and a grid line search on the same loss. For small
networks, preferably in float64.

The Gramian is formed from the whole batch with the fixed term weights and the
sampler's own points (``gauss_newton`` below), so the builder rejects gradient
accumulation, adaptive or causal weights and adaptive point sets with this phase.
"""


from dataclasses import dataclass
from typing import ClassVar, Literal

import optax

from ...optim import natural_gradient
from ._base import AbstractOptimizerPhase, positive_or_null, with_grad_norm


@dataclass(frozen=True)
class NaturalGradientConfig:
    """``kind: natural_gradient``: damping $\\lambda = $ ``damping`` $\\cdot\\operatorname{tr}(G)/P$,
    the best of ``step_grid`` step sizes $1, 2^{-1}, \\dots$; ``safeguard``: reject a step
    that raises the loss and raise the damping; stop the phase early at a relative loss
    change ``tol`` or a gradient norm ``grad_tol`` (null: never)."""

    kind: Literal["natural_gradient"] = "natural_gradient"
    steps: int | None = None
    damping: float = 1.0e-10
    step_grid: int = 20
    safeguard: bool = False
    tol: float | None = None
    grad_tol: float | None = None

    def problems(self) -> list[tuple[str, str, object]]:
        checks = [
            ("damping", self.damping >= 0, "expected a number >= 0", self.damping),
            ("step_grid", self.step_grid >= 1, "expected an integer >= 1", self.step_grid),
        ]
        bad = [(k, msg, v) for k, ok, msg, v in checks if not ok]
        return bad + positive_or_null(self, ("tol", "grad_tol"))

    def state_words(self, n_params: int, rows: int) -> float:
        """Words a step holds (the memory plan): the P x P Gramian and the ``rows`` x P
        residual Jacobian."""
        return float(n_params) ** 2 + rows * n_params


class NaturalGradientPhase(AbstractOptimizerPhase):
    kind: ClassVar[str] = "natural_gradient"
    Config: ClassVar[type] = NaturalGradientConfig
    line_search: ClassVar[bool] = True
    gauss_newton: ClassVar[bool] = True
    updates_weights: ClassVar[bool] = False

    @classmethod
    def from_config(cls, cfg, start, steps, coeff_lrs):
        del coeff_lrs  # no learning rate: the line search sets the step
        opt = natural_gradient(damping=cfg.damping, grid=cfg.step_grid, safeguard=cfg.safeguard)
        return cls(start, steps, opt, cfg.tol, cfg.grad_tol)

    def step(self, loss, params, state, key, arrays, ctx):
        # Gramian and gradient in one pass; the line search evaluates the same loss.
        total, terms, gram, grads = loss.gauss_newton(params, key, arrays)
        updates, state = self.optimizer.update(
            grads, state, params, gramian=gram,
            value_fn=lambda p: loss.value(p, key, arrays, ctx), value=total,
        )
        params = optax.apply_updates(params, updates)
        metrics = {"loss": total, "terms": terms, "step_size": state.step_size}
        return params, state, with_grad_norm(self, metrics, grads)
