"""`Run`: everything training needs, as data. The builder (`pinnkit.run.build.build_run`)
fills it from a config; training reads only its fields, never the config.

A `Run` can equally be written by hand (a problem, a network, a sampler, a derivative
method, phases from `pinnkit.train.phases`, a mesh): nothing in `pinnkit.train` knows
where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax.numpy as jnp
from jax.sharding import Mesh

from ..diffops import AbstractDiffMethod
from ..physics.problem import Problem
from ..physics.terms import Initial
from .adaptive import Adaptive
from .collocation import Sampler
from .phases import AbstractPhase
from .weighting import Weighting


@dataclass(frozen=True)
class TimeWindows:
    """Time marching (`pinnkit.train.windows`): ``count`` windows of `Run.total_steps`
    steps each.

    **Arguments:**
    - `count`: number of windows $N \\ge 2$.
    - `local_time`: each window's network sees its own interval mapped onto $[-1, 1]$
      (else the whole interval's normalisation).
    - `restored`: `Initial` terms that a hard constraint without a time restart removed
      from the problem; after window 0 they impose continuity softly, with
      `restored_batch` points and `restored_weights` weights.
    """

    count: int
    local_time: bool = False
    restored: dict[str, Initial] = field(default_factory=dict)
    restored_batch: dict[str, int] = field(default_factory=dict)
    restored_weights: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Run:
    """The training spec.

    **Arguments:**
    - `problem`, `network`, `sampler`, `method`: what is solved, the initial network,
      the collocation points, the derivative method.
    - `phases`: the optimiser phases, consecutive from step 0.
    - `weights`: fixed term weights (adaptive weighting: the initial ones).
    - `mesh`: devices on the ``"data"`` axis (None: only for loading, not training).
    - `dtype`: ``jnp.float32`` or ``jnp.float64``.
    - `weighting`: adaptive/causal weighting (`Weighting`) or None; `adaptive`:
      residual-adaptive point sets (`Adaptive`) or None.
    - `seed`: of the network's initialisation (done by the builder), the point sets
      (``fold_in(key(seed), 1)``), the step keys (``2``) and adaptive sets (``3``).
    - `chunk`: steps per compiled dispatch; `log_every`: steps between logged records;
      `eval_every`: steps between evaluations (0: never); `checkpoint_every`: steps
      between checkpoints (0: only at the end); `checkpoint_keep`: newest kept.
    - `windows`: time marching (`TimeWindows`), or None for one window.
    - `divergence_factor`: stop as ``diverged`` once a loss exceeds its best so far by
      this factor.
    - `max_time`, `max_cpu_time`: stop (outcome ``max_time``) before this many wall or
      process CPU seconds of training are spent (None: no limit); a chunk that would
      overrun is shortened to the steps that fit (`pinnkit.train.records.TimeBudget`).
    - `name`: the problem's name, for messages.
    - `record`: the resolved configuration as plain data, stored in checkpoint headers
      (their ``model_sha256`` is compared on resume); training reads no key of it.
    - `config`: the object the spec was built from, kept for the run folder
      (`pinnkit.run`); training never reads it.
    """

    problem: Problem
    network: Any
    sampler: Sampler
    method: AbstractDiffMethod
    phases: tuple[AbstractPhase, ...]
    weights: dict[str, float]
    mesh: Mesh | None
    dtype: Any = jnp.float32
    weighting: Weighting | None = None
    adaptive: Adaptive | None = None
    seed: int = 0
    chunk: int = 100
    log_every: int = 100
    eval_every: int = 0
    checkpoint_every: int = 1000
    checkpoint_keep: int = 3
    windows: TimeWindows | None = None
    divergence_factor: float = 1.0e6
    max_time: float | None = None
    max_cpu_time: float | None = None
    name: str = ""
    record: dict = field(default_factory=dict)
    config: Any = field(default=None, compare=False)

    @property
    def total_steps(self) -> int:
        """Steps of one window: the end of the last phase."""
        return self.phases[-1].end

    @property
    def n_windows(self) -> int:
        return self.windows.count if self.windows is not None else 1
