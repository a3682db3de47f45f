"""`AbstractPhase`: one optimiser phase of a run, ``steps`` steps from global step ``start``.

A phase is an equinox Module in the abstract-or-final pattern. What the scanned step
(`pinnkit.train.step`) and the builder must know about it is declared, not probed:

- ``kind``: its name in ``optim.phases.N.kind`` and in the `PHASES` registry;
- ``Config``: the frozen dataclass of its options (``optim.phases.N``), with
  ``problems()`` listing the values it rejects and ``state_words(n_params, rows)`` the
  words of optimiser state a step holds (the memory plan, `pinnkit.run.memplan`);
- ``line_search``: its step evaluates the loss again (``loss.value``) at trial points;
- ``gauss_newton``: its step needs the residual Jacobian (``loss.gauss_newton``) and so
  the whole batch at once (no gradient accumulation) and a loss it can see entirely:
  fixed term weights, the sampler's own points, no causal weights;
- ``updates_weights``: adaptive loss weights keep moving during it (a quasi-Newton
  model breaks when its objective changes, so L-BFGS freezes them).

``init(params)`` gives the optimiser state (the layout stored in checkpoints);
``step(loss, params, state, key, arrays, ctx)`` one update and the step's metrics
(``loss`` and ``terms`` measured before the update, plus what the phase adds).
"""


import abc
from typing import Any

import equinox as eqx
import optax
from equinox import AbstractClassVar, AbstractVar
from jaxtyping import Array, PRNGKeyArray


class AbstractPhase(eqx.Module):
    """One optimiser phase (see the module docstring).

    **Attributes:**
    - `start`: first global step of the phase; `steps`: its length.
    - `optimizer`: the optax transformation that holds the phase's state.
    - `tol`: stop the phase once a step changes the loss by at most ``tol`` relative
      to the previous step's loss (None: never); `grad_tol`: once the gradient's
      global 2-norm is at most this (None: never). Only second-order phases take them
      from the config (``optim.phases.N.tol``, ``grad_tol``).
    """

    kind: AbstractClassVar[str]
    Config: AbstractClassVar[type]
    line_search: AbstractClassVar[bool]
    gauss_newton: AbstractClassVar[bool]
    updates_weights: AbstractClassVar[bool]

    start: AbstractVar[int]
    steps: AbstractVar[int]
    optimizer: AbstractVar[optax.GradientTransformation]
    tol: AbstractVar[float | None]
    grad_tol: AbstractVar[float | None]

    @property
    def end(self) -> int:
        return self.start + self.steps

    @property
    def stops_early(self) -> bool:
        """Whether the phase has a stopping tolerance (`tol` or `grad_tol`)."""
        return self.tol is not None or self.grad_tol is not None

    @classmethod
    @abc.abstractmethod
    def from_config(cls, cfg, start: int, steps: int, coeff_lrs: dict[str, float]) -> "AbstractPhase":
        """The phase of config ``cfg`` (a ``Config``) over ``[start, start + steps)``;
        ``coeff_lrs``: learning rates of coefficients that have their own
        (``problem.coeffs.NAME.lr``), for the phases that take them."""

    @abc.abstractmethod
    def init(self, params) -> Any:
        """The optimiser state at the phase's first step."""

    @abc.abstractmethod
    def step(self, loss, params, state, key: PRNGKeyArray, arrays: dict, ctx: dict
             ) -> tuple[Any, Any, dict[str, Array]]:
        """``(params, state, metrics)`` after one update on the step's batch. ``loss`` is
        the run's `pinnkit.train.loss.Loss`; ``ctx`` its `Loss.context` at this step."""


class AbstractOptimizerPhase(AbstractPhase):
    """A phase whose state is that of one optax transformation, ``optimizer`` (every
    built-in kind): the fields and `init` they share. Final subclasses declare the
    class attributes and implement `from_config` and `step`."""

    start: int = eqx.field(static=True)
    steps: int = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    tol: float | None = eqx.field(static=True, default=None)
    grad_tol: float | None = eqx.field(static=True, default=None)

    def init(self, params):
        return self.optimizer.init(params)


def positive_or_null(cfg, keys: tuple[str, ...]) -> list[tuple[str, str, object]]:
    """``problems()`` entries for the options ``keys`` of ``cfg`` that are neither null
    nor > 0 (tolerances, clipping norms)."""
    bad = [(k, getattr(cfg, k)) for k in keys]
    return [(k, "expected a number > 0 or null", v) for k, v in bad if not (v is None or v > 0)]


def with_grad_norm(phase: AbstractPhase, metrics: dict, grads) -> dict:
    """``metrics`` plus ``grad_norm`` $\\|\\nabla L\\|_2$ when the phase stops on it."""
    if phase.grad_tol is None:
        return metrics
    return {**metrics, "grad_norm": optax.tree.norm(grads)}

