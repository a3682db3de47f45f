"""No exact solution in training unless asked: a hard constraint whose lift (its value
for a zero network) is the exact solution hands the network the answer, and the error
then reported measures the lift. `check_exact_lift` (called by the builder for
``network.hard_constraint: true``) refuses it with one paragraph, or, with
``network.allow_exact_lift: true``, warns (`ExactLiftWarning`, one ``pinnkit: warning:``
line) and the run's summary.json records it (``exact_in_training``: `exact_lift_record`).
"""

from __future__ import annotations

import warnings

from ..errors import ConfigError
from ..physics.constraints import exact_lift_fields
from ..physics.problem import Problem
from ..problems.expression import HardValueIsExactWarning as HardValueIsExactWarning
from .config import RunConfig


class ExactLiftWarning(UserWarning):
    """A run trains with ``network.allow_exact_lift: true``: its hard constraint's lift is
    the exact solution."""


def exact_lift_note(fields) -> str:
    """summary.json's ``exact_in_training.note`` (and the warning) for lifted ``fields``."""
    return (f"the hard constraint's lift is the exact solution for {', '.join(fields)} "
            "(network.allow_exact_lift: true): the network starts at the answer, so the errors "
            "measure the constraint, not what training found")


def check_exact_lift(cfg: RunConfig, problem: Problem, warn: bool = True) -> tuple[str, ...]:
    """Refuses a hard constraint whose lift is the exact solution (`exact_lift_fields`:
    the answer would be handed to the network) unless the config opts in with
    ``network.allow_exact_lift: true``, which warns (`ExactLiftWarning`; ``warn=False``:
    not again for a problem already warned about). Returns the lifted fields."""
    fields = exact_lift_fields(problem)
    if not fields:
        return ()
    if not cfg.network.allow_exact_lift:
        hint = (" For poisson_domain give problem.params.boundary_value: an expression equal to "
                "the exact solution on the boundary only (0 when it vanishes there); without it "
                "the boundary data come from `exact`, and its lift is the solution itself."
                if cfg.problem.name == "poisson_domain" else
                " Give boundary/initial values that are right only on their piece of the boundary.")
        raise ConfigError(
            f"network.hard_constraint: true would train from the exact solution: the lift that the "
            f"hard constraint of problem {cfg.problem.name!r} imposes (its value for a zero network) "
            f"equals the exact solution inside the domain for {', '.join(fields)}, so the network "
            f"starts at the answer and the reported error measures nothing.{hint} Or impose the "
            "boundary data by a loss term (network.hard_constraint: false), or, to check the "
            "constraint itself on purpose, set network.allow_exact_lift: true (the run then warns "
            "and records it in summary.json under exact_in_training)."
        )
    if warn:
        warnings.warn(exact_lift_note(fields), ExactLiftWarning, stacklevel=3)
    return fields


def exact_lift_record(cfg: RunConfig, problem: Problem) -> dict:
    """``{"exact_in_training": {"fields": [...], "note": ...}}`` for summary.json when the
    run opted in and its lift is exact, else ``{}``."""
    if not (cfg.network.hard_constraint and cfg.network.allow_exact_lift):
        return {}
    fields = exact_lift_fields(problem)
    return {"exact_in_training": {"fields": list(fields), "note": exact_lift_note(fields)}} if fields else {}
