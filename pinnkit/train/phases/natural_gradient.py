"""``kind: natural_gradient``: the energy natural gradient / damped Gauss-Newton step
(Müller & Zeinhofer 2023) with a grid line search on the same loss. For small networks,
preferably in float64.

``solver: gramian`` (the default) with ``momentum: 0`` and no fixed ``step_size`` is
`pinnkit.optim.natural_gradient` on the $P \\times P$ Gramian of `Loss.gauss_newton`,
$O(NP^2 + P^3)$ per step. Any other choice runs
`pinnkit.optim.woodbury_natural_gradient` on the weighted residual rows
(`Loss.residual_rows`): ``woodbury`` solves in point space,
$d = -\\hat J^\\top(\\hat J\\hat J^\\top + \\lambda I_N)^{-1}\\hat r$, $O(N^2P + N^3)$, the
cheaper one when the $N$ residual rows are fewer than the $P$ parameters; ``auto``
picks ``woodbury`` when $N < P$ and ``gramian`` otherwise (decided when the step is
compiled, from the shapes); ``momentum`` $\\mu > 0$ adds SPRING's momentum (Goldshlager
et al. 2024, Guzmán-Cordero et al. 2025); ``step_size`` replaces the line search by a
fixed step, which ``schedule`` may decay over the phase (the first-order phases'
schedules, on $\\eta$ instead of the learning rate). Both solves give the same
direction (the push-through identity) with the same damping $\\lambda$.

The Gramian is formed from the whole batch with the fixed term weights (``gauss_newton``
below) on the step's points (the adaptive point sets where there are some), so the builder
rejects gradient accumulation and adaptive or causal weights with this phase.
"""


from dataclasses import dataclass, field
from typing import ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from ...optim import natural_gradient, woodbury_natural_gradient
from ...optim.natgrad import refreshes
from ._base import AbstractOptimizerPhase, StepResult, positive_or_null, with_grad_norm
from .optax import ScheduleConfig, schedule


@dataclass(frozen=True)
class NaturalGradientConfig:
    """``kind: natural_gradient``: damping $\\lambda = $ ``damping`` $\\cdot\\operatorname{tr}(G)/P$,
    the best of ``step_grid`` step sizes $1, 2^{-1}, \\dots$; ``safeguard``: reject a step
    that raises the loss and raise the damping; stop the phase early at a relative loss
    change ``tol`` or a gradient norm ``grad_tol`` (null: never). ``solver``: ``gramian``
    (default), ``woodbury`` or ``auto``; ``momentum``: SPRING's $\\mu \\in [0, 1)$ (0: off);
    ``step_size``: a fixed step instead of the line search (null: the line search),
    ``schedule`` its schedule over the phase's steps (`ScheduleConfig`: ``step_size`` in
    the place of the learning rate; needs ``step_size``); ``refresh``: form the Gramian
    on every ``refresh``-th step only, the steps between reusing its factor with their
    own gradient (`pinnkit.optim.natural_gradient`'s lazy Gauss-Newton; 1: every step);
    the module docstring says which solve each choice runs."""

    kind: Literal["natural_gradient"] = "natural_gradient"
    steps: int | None = None
    damping: float = 1.0e-10
    step_grid: int = 20
    safeguard: bool = False
    solver: Literal["gramian", "woodbury", "auto"] = "gramian"
    momentum: float = 0.0
    step_size: float | None = None
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    tol: float | None = None
    grad_tol: float | None = None
    refresh: int = 1

    @property
    def numbers(self) -> tuple[str, ...]:
        """The options the compiled step reads at run time (`AbstractPhase.numbers`): the
        damping, the tolerances, and the fixed step unless a schedule is built from it
        (``momentum`` chooses the solve: part of the program)."""
        return ("damping", "tol", "grad_tol", *(("step_size",) if self.schedule.kind == "constant" else ()))

    @property
    def uses_rows(self) -> bool:
        """Whether the step runs on the residual rows (`woodbury_natural_gradient`)
        rather than the Gramian of the plain method."""
        return self.solver != "gramian" or self.momentum != 0 or self.step_size is not None

    def problems(self) -> list[tuple[str, str, object]]:
        checks = [
            ("damping", self.damping >= 0, "expected a number >= 0", self.damping),
            ("step_grid", self.step_grid >= 1, "expected an integer >= 1", self.step_grid),
            ("momentum", 0 <= self.momentum < 1, "expected a number in [0, 1)", self.momentum),
            ("refresh", self.refresh >= 1 and (self.refresh == 1 or not (self.safeguard or self.uses_rows)),
             "expected an integer >= 1; above 1 only with solver: gramian and no safeguard, momentum "
             "or step_size", self.refresh),
            ("safeguard", not (self.safeguard and self.uses_rows),
             "the safeguard is only for solver: gramian without momentum or step_size", self.safeguard),
            ("schedule.kind", self.schedule.kind == "constant" or self.step_size is not None,
             "a schedule decays the fixed step: set step_size too (the line search has no "
             "schedule)", self.schedule.kind),
        ]
        bad = [(k, msg, v) for k, ok, msg, v in checks if not ok]
        return bad + self.schedule.problems() + positive_or_null(self, ("step_size", "tol", "grad_tol"))

    def state_words(self, n_params: int, rows: int) -> float:
        """Words a step holds (the memory plan): the ``rows`` x P residual Jacobian plus
        the P x P Gramian, or (woodbury, and auto with ``rows`` < P) the ``rows`` x
        ``rows`` kernel and the momentum vector."""
        point_space = self.solver == "woodbury" or (self.solver == "auto" and rows < n_params)
        if point_space:
            return float(rows) ** 2 + rows * n_params + n_params
        lazy = float(n_params) ** 2 if self.refresh > 1 else 0.0  # the kept factor
        return float(n_params) ** 2 + rows * n_params + (n_params if self.uses_rows else 0) + lazy


class NaturalGradientPhase(AbstractOptimizerPhase):
    """``rows``: the step runs on the residual rows (`NaturalGradientConfig.uses_rows`)."""

    kind: ClassVar[str] = "natural_gradient"
    Config: ClassVar[type] = NaturalGradientConfig
    line_search: ClassVar[bool] = True
    gauss_newton: ClassVar[bool] = True
    updates_weights: ClassVar[bool] = False
    rows: bool = eqx.field(static=True, default=False)
    refresh: int = eqx.field(static=True, default=1)

    @classmethod
    def from_config(cls, cfg, start, steps, coeff_lrs):
        del coeff_lrs  # no learning rate: the line search or step_size sets the step
        if cfg.uses_rows:
            eta = None if cfg.step_size is None else schedule(cfg, cfg.step_size, steps)
            opt = woodbury_natural_gradient(damping=cfg.damping, grid=cfg.step_grid, solver=cfg.solver,
                                            momentum=cfg.momentum, learning_rate=eta)
        else:
            opt = natural_gradient(damping=cfg.damping, grid=cfg.step_grid, safeguard=cfg.safeguard,
                                   refresh=cfg.refresh)
        horizon = None if cfg.step_size is None else cfg.schedule.horizon(steps)
        return cls(start, steps, opt, cfg.tol, cfg.grad_tol, rows=cfg.uses_rows, options=cfg,
                   horizon=horizon, refresh=cfg.refresh)

    def step(self, loss, params, state, key, arrays, ctx):
        value_fn = lambda p: loss.value(p, key, arrays, ctx)  # noqa: E731
        if self.rows:  # point- or parameter-space solve from the weighted residual rows
            total, terms, jac, res = loss.residual_rows(params, key, arrays, ctx["points"])
            updates, state = self.optimizer.update(params, state, params, jacobian=jac, residual=res,
                                                   value_fn=value_fn, value=total)
            grads = ravel_pytree(params)[1](jac.T @ res)  # grad L = J^T r (grad_tol only)
        else:  # Gramian and gradient in one pass (refresh > 1: on refresh steps only); the line
            # search evaluates the same loss
            def stale():  # refresh > 1 between refreshes: the gradient alone (the Gramian is unread)
                (total, aux), grads = loss.value_and_grad(params, key, arrays, ctx)
                return total, aux["terms"], jnp.zeros_like(state.factor), grads

            fresh = lambda: loss.gauss_newton(params, key, arrays, ctx["points"])  # noqa: E731
            total, terms, gram, grads = (
                fresh() if self.refresh == 1 else jax.lax.cond(refreshes(state, self.refresh), fresh, stale))
            updates, state = self.optimizer.update(grads, state, params, gramian=gram,
                                                   value_fn=value_fn, value=total)
        params = optax.apply_updates(params, updates)
        metrics = {"loss": total, "terms": terms, "step_size": state.step_size}
        return StepResult(params, state, with_grad_norm(self, metrics, grads))
