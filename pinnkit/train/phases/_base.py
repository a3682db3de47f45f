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
  model breaks when its objective changes, so L-BFGS freezes them);
- ``learning_rate``: the network's learning rate the phase was built with (a float or
  an optax schedule of the phase's own step), None for phases that choose their step
  (a line search, the natural gradient): the live log reads it from the built phase.

``init(params)`` gives the optimiser state (the layout stored in checkpoints);
``step(loss, params, state, key, arrays, ctx)`` one update and the step's metrics
(``loss`` and ``terms`` measured before the update, plus what the phase adds).

Numbers and programs: the options a compiled step reads as run-time inputs are the
phase's ``numbers`` (its ``Config`` declares their names, ``Config.numbers``: learning
rate, damping, tolerances...); everything else the step depends on is its ``program``.
The training loop compiles a chunk once per ``program`` and passes each phase's numbers
as arguments (`pinnkit.train.step.make_chunk` traces the step of ``phase.at(numbers)``),
so that two phases that differ only in numbers (``natural_gradient`` at damping 1e-3,
then 1e-4) share one compiled program.
"""


import abc
import dataclasses
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

import equinox as eqx
import optax
from equinox import AbstractClassVar, AbstractVar
from jaxtyping import Array, PRNGKeyArray


class StepResult(NamedTuple):
    """What `AbstractPhase.step` returns.

    - `params`: the ``(network, coefficients)`` tree after the update.
    - `state`: the optimiser state after the update (the layout of `AbstractPhase.init`).
    - `metrics`: scalars of the step by name: ``loss`` (the weighted total), ``terms``
      (``{term: mean square}``), both measured *before* the update, plus what the phase
      adds (``grad_norm`` when it stops on the gradient, a line search's step...).
    """

    params: Any
    state: Any
    metrics: dict[str, Array]


class AbstractPhase(eqx.Module):
    """One optimiser phase (see the module docstring).

    **Attributes:**
    - `start`: first global step of the phase; `steps`: its length.
    - `optimizer`: the optax transformation that holds the phase's state.
    - `tol`: stop the phase once a step changes the loss by at most ``tol`` relative
      to the previous step's loss (None: never); `grad_tol`: once the gradient's
      global 2-norm is at most this (None: never). Only second-order phases take them
      from the config (``optim.phases.N.tol``, ``grad_tol``).
    - `learning_rate`: the network's learning rate (float or ``step -> rate`` schedule,
      the phase's step counted from 0) its optimiser was built with; None where the
      phase chooses its own step.
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
    learning_rate: AbstractVar[float | Callable[[int], Array] | None]

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
    def step(self, loss, params, state, key: PRNGKeyArray, arrays: dict[str, Array],
             ctx: dict[str, Any]) -> StepResult:
        """One update on the step's batch.

        **Arguments:**
        - `loss`: the run's `pinnkit.train.loss.Loss` (value, gradient, residual rows,
          Gauss–Newton Jacobian).
        - `params`: the ``(network, coefficients)`` tree before the update.
        - `state`: the optimiser state before the update.
        - `key`: this step's key (``fold_in(train_key, step)``), for stochastic losses.
        - `arrays`: the step's batch, ``{term: points (n, dim)}`` (rows of data terms).
        - `ctx`: `Loss.context` at this step (term weights, causal weights, NTK state).

        **Returns:** a `StepResult` ``(params, state, metrics)``.
        """

    @property
    @abc.abstractmethod
    def numbers(self) -> dict[str, float]:
        """The options the compiled step reads at run time, by name (a float each; the
        unset ones, None, are part of the `program`)."""

    @property
    @abc.abstractmethod
    def program(self) -> Hashable:
        """What the compiled step depends on besides `numbers` (not ``start``): phases
        with equal programs run one compiled chunk, each with its own numbers."""

    @abc.abstractmethod
    def at(self, numbers: dict[str, Any]) -> "AbstractPhase":
        """The phase with ``numbers`` (arrays: traced inputs of a chunk) in place of its
        own `numbers`, for tracing its step."""


class AbstractOptimizerPhase(AbstractPhase):
    """A phase whose state is that of one optax transformation, ``optimizer`` (every
    built-in kind): the fields, `init` and the numbers they share. Final subclasses
    declare the class attributes and implement `from_config` and `step`; `from_config`
    passes the ``options`` it read (its ``Config``) and the ``coeff_lrs`` it used (a
    phase built without options has no numbers: its program is its own).

    - `options`: the phase's ``Config``; its ``numbers`` (a tuple of option names)
      are the options its step reads at run time.
    - `coeff_lrs`: ``((coefficient, lr), ...)`` given to `from_config`.
    - `horizon`: the phase's length where its step reads it (a schedule over the phase's
      steps), else None; part of the program.
    """

    start: int = eqx.field(static=True)
    steps: int = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    # numbers: arrays in a traced step (`at`), so not static
    tol: float | None = None
    grad_tol: float | None = None
    learning_rate: float | Callable[[int], Array] | None = None
    options: Any = eqx.field(static=True, default=None)
    coeff_lrs: tuple[tuple[str, float], ...] = eqx.field(static=True, default=())
    horizon: int | None = eqx.field(static=True, default=None)

    def init(self, params):
        return self.optimizer.init(params)

    @property
    def numbers(self) -> dict[str, float]:
        cfg = self.options
        if cfg is None:
            return {}
        return {k: float(getattr(cfg, k)) for k in cfg.numbers if getattr(cfg, k) is not None}

    @property
    def program(self) -> Hashable:
        if self.options is None:
            return (type(self), id(self))
        blank = dataclasses.replace(self.options, steps=None, **dict.fromkeys(self.numbers, 0.0))
        return (type(self), repr(blank), self.coeff_lrs, self.horizon)

    def at(self, numbers):
        if not numbers:
            return self
        cfg = dataclasses.replace(self.options, **numbers)
        return self.from_config(cfg, self.start, self.steps, dict(self.coeff_lrs))


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



def line_search_update(optimizer, loss, params, state, key, arrays, ctx):
    """One update of a transformation with a line search on the loss (``lbfgs``,
    ``ssbfgs``, ``ssbroyden``: optax's ``value``, ``grad``, ``value_fn`` protocol):
    ``(params, state, total, aux, grads)`` with the loss, its aux and its gradient
    measured before the update."""
    (total, aux), grads = loss.value_and_grad(params, key, arrays, ctx)
    updates, state = optimizer.update(
        grads, state, params, value=total, grad=grads,
        value_fn=lambda p: loss.value(p, key, arrays, ctx),
    )
    return optax.apply_updates(params, updates), state, total, aux, grads
