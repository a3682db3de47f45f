"""The run configuration's schema: one frozen dataclass per section (``problem, network,
sampler, diffops, weighting, optim, train, mesh, numerics, checkpoint, eval``), every key
with its default (docs/config.md is the reference; tests/test_docs.py checks it against
these classes). Allowed names come from the runtime tables (network kinds, activations,
initialisations, phases, remat modes, weighting kinds, sampler methods), not restated.
`pinnkit.run.config` reads YAML into these and validates ranges."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from ..nn.layers import ACTIVATIONS, INITS
from ..nn.nets import KINDS as NET_KINDS
from ..train.collocation import METHODS as SAMPLER_METHODS
from ..train.loss import REMAT
from ..train.phases import PHASES
from ..train.phases.optax import AdamConfig
from ..train.phases.optax import ScheduleConfig as ScheduleConfig
from ..train.weighting import KINDS as WEIGHTING_KINDS


@dataclass(frozen=True)
class CoeffConfig:
    """``problem.coeffs.NAME``: a coefficient to learn (inverse problems). ``init``: its
    starting value (null: the problem's value); ``transform``: ``none``, ``positive``
    ($c_0 e^\\theta$) or ``bounded`` ($a + (b-a)\\sigma(\\theta)$ with ``lower``/``upper``);
    ``lr``: its own Adam/SGD learning rate (null: the phase's)."""

    init: float | None = None
    transform: Literal["none", "positive", "bounded"] = "none"
    lower: float | None = None
    upper: float | None = None
    lr: float | None = None


@dataclass(frozen=True)
class ObservationConfig:
    """``problem.observations.NAME``: an observation term read from ``file`` (CSV, NPZ,
    NetCDF; path relative to the config file): ``fields`` maps observed fields to columns,
    ``coords`` coordinates to columns (default: same names), optional ``weight`` or
    ``sigma`` (noise standard deviation) column."""

    file: str = ""
    fields: dict[str, str] | list[str] = field(default_factory=dict)
    coords: dict[str, str] = field(default_factory=dict)
    weight: str | None = None
    sigma: str | None = None


@dataclass(frozen=True)
class ProblemConfig:
    """``problem``: which PDE. ``name``: a built-in (``pinnkit problems``) or
    ``path/to/file.py:factory``; ``params``: keyword arguments of the factory;
    ``trainable``: coefficient names to learn; ``coeffs``: how to learn them."""

    name: str = "poisson2d"
    params: dict[str, Any] = field(default_factory=dict)
    trainable: list[str] = field(default_factory=list)
    coeffs: dict[str, CoeffConfig] = field(default_factory=dict)
    observations: dict[str, ObservationConfig] = field(default_factory=dict)


@dataclass(frozen=True)
class FourierConfig:
    """``network.fourier``: random Fourier features of ``dim`` outputs, std ``scale``."""

    dim: int = 64
    scale: float = 1.0


@dataclass(frozen=True)
class RwfConfig:
    """``network.rwf``: random weight factorisation $W = \\operatorname{diag}(e^s) V$,
    $s \\sim N(\\text{mean}, \\text{std}^2)$ at initialisation."""

    mean: float = 1.0
    std: float = 0.1


@dataclass(frozen=True)
class CornerConfig:
    """``network.singular.N``: a corner singular enrichment (`pinnkit.geometry.singular`)
    at the corner ``at`` of a 2-D shape: cut-off ``radius`` (default the largest that
    meets only the corner's edges), ``terms`` exponents (default those below 2), the
    ``fields`` enriched (default all)."""

    at: list[float] = field(default_factory=list)
    radius: float | None = None
    terms: int | None = None
    fields: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NetworkConfig:
    """``network``: the core ``kind`` (``mlp``, ``modified_mlp``: ``depth`` hidden layers
    of ``width`` units; ``pirate``: ``depth`` residual blocks), its input map and options
    (``squares``: append the squared normalised inputs, `pinnkit.nn.embeddings.SquareFeatures`;
    ``rwf``; PirateNet's least-squares ``pi_init`` of the last layer)."""

    kind: Literal[NET_KINDS] = "mlp"
    width: int = 64
    depth: int = 4
    activation: Literal[tuple(ACTIVATIONS)] = "tanh"
    init: Literal[INITS] = "glorot_normal"
    normalize_inputs: bool = True
    hard_constraint: bool = False
    allow_exact_lift: bool = False
    squares: bool = False
    fourier: FourierConfig | None = None
    periodic: dict[str, float] = field(default_factory=dict)
    parity: dict[str, str] = field(default_factory=dict)
    rwf: RwfConfig | None = None
    pi_init: str | None = None
    pi_points: int = 2048
    singular: list[CornerConfig] = field(default_factory=list)


@dataclass(frozen=True)
class AdaptiveConfig:
    """``sampler.adaptive``: residual-based adaptive points for ``terms`` (default: the
    ``interior`` terms). Every ``every`` steps a pool of ``pool`` × batch candidates is
    scored by |r|; ``rad`` redraws the set with density ∝ |r|^k/mean(|r|^k)
    + c, ``rar`` replaces the oldest ``rar_fraction`` of the set by the top candidates;
    no updates at steps >= ``until_step`` when set (see docs/training_recipes.md)."""

    kind: Literal["rad", "rar"] = "rad"
    every: int = 1000
    pool: int = 8
    k: float = 1.0
    c: float = 1.0
    rar_fraction: float = 0.1
    terms: list[str] = field(default_factory=list)
    until_step: int | None = None


@dataclass(frozen=True)
class SamplerConfig:
    """``sampler``: global points per term, ``uniform``/``sobol``, fixed or resampled
    (``resample``; every ``resample_every`` steps), optionally residual-adaptive
    (``adaptive``)."""

    method: Literal[SAMPLER_METHODS] = "uniform"
    resample: bool = False
    resample_every: int = 1
    batch: dict[str, int] = field(default_factory=dict)
    adaptive: AdaptiveConfig | None = None


@dataclass(frozen=True)
class DiffOpsConfig:
    """``diffops``: the derivative method (``pinnkit.diffops.METHODS``). The default is the
    one-pass Taylor engine; ``autodiff`` (nested reverse mode) is the oracle.
    ``estimator``: ``exact`` (default) or a stochastic Taylor estimator of the Laplacian,
    second-order and bi-Laplacian requests (``pinnkit.diffops.ESTIMATORS``: ``stde``,
    ``sdgd``) with ``samples`` random directions / dimensions per point and step, drawn
    per ``point`` or per ``step`` (``draw``)."""

    method: str = "taylor"
    estimator: str = "exact"
    samples: int = 16
    draw: str = "point"

    def problems(self) -> list[tuple[str, str, object]]:
        """``(key, what is expected, value)`` for the first option out of range (empty:
        valid); ``method`` itself is checked against ``METHODS`` by the loader."""
        from ..diffops import ESTIMATORS

        names = ("exact", *ESTIMATORS)
        if self.estimator not in names:
            return [("estimator", f"expected one of {names}", self.estimator)]
        if self.estimator == "exact":
            return []
        est = ESTIMATORS[self.estimator]
        if self.method != "taylor":
            return [("method", f"the {self.estimator} estimator runs on the Taylor engine; set "
                     "diffops.method: taylor or diffops.estimator: exact", self.method)]
        if not (isinstance(self.samples, int) and self.samples >= est.min_samples):
            return [("samples", f"expected an integer >= {est.min_samples} (random {est.unit} per "
                     "point and step)", self.samples)]
        if self.draw not in ("point", "step"):
            return [("draw", "expected point (own directions per point) or step (one set per step)",
                     self.draw)]
        return []


@dataclass(frozen=True)
class CausalConfig:
    """``weighting.causal``: causal weights over ``chunks`` time slices with tolerance
    ``tol`` (growing geometrically to ``final_tol`` when set)."""

    chunks: int = 32
    tol: float = 1.0
    final_tol: float | None = None


@dataclass(frozen=True)
class WeightingConfig:
    """``weighting``: per-term loss weights, fixed (missing terms weigh 1) or adaptive
    (``grad_norm``, ``ntk``; ``weights`` are then the initial values), and optional
    causal weights (``causal``)."""

    kind: Literal[WEIGHTING_KINDS] = "fixed"
    weights: dict[str, float] = field(default_factory=dict)
    update_every: int = 1000
    momentum: float = 0.9
    ntk_points: int = 256
    causal: CausalConfig | None = None


# ``optim.phases.N``: one optimiser phase, a tagged union over the kinds of the phase
# registry (`pinnkit.train.phases.PHASES`): ``kind`` selects the dataclass (each lives in
# its phase's file), and an option of another kind is an error listing the kind's own.
# (The loader reads the registry at load time, so a phase registered later loads too.)
PHASE_CONFIGS: dict[str, type] = {k: cls.Config for k, cls in PHASES.items()}
PhaseConfig = typing.Union[tuple(PHASE_CONFIGS.values())]  # noqa: UP007 (built at run time)


@dataclass(frozen=True)
class OptimConfig:
    """``optim``: the optimiser phases, run in order (e.g. Adam then L-BFGS)."""

    phases: list[PhaseConfig] = field(default_factory=lambda: [AdamConfig()])


@dataclass(frozen=True)
class EarlyStoppingConfig:
    """``train.early_stopping``: end the run (outcome ``early_stopped``) once the evaluated
    ``metric`` (``rel_l2.FIELD``, ``linf.FIELD``, ``metrics.NAME``, ``coeffs.NAME``) has
    not improved by more than ``min_delta`` in ``patience`` evaluations (``mode``: ``min``
    for errors, ``max``); needs ``train.eval_every`` (`pinnkit.train.callbacks.EarlyStopping`)."""

    metric: str = ""
    patience: int = 5
    min_delta: float = 0.0
    mode: Literal["min", "max"] = "min"

    def problems(self) -> list[tuple[str, str, object]]:
        """``(key, what is expected, value)`` for the first option out of range."""
        if not self.metric:
            return [("metric", "expected the name of an evaluated metric, e.g. rel_l2.u or "
                     "metrics.c_D", self.metric)]
        if self.patience < 1:
            return [("patience", "expected an integer >= 1 (evaluations)", self.patience)]
        if self.min_delta < 0:
            return [("min_delta", "expected a number >= 0", self.min_delta)]
        return []


@dataclass(frozen=True)
class TrainConfig:
    """``train``: total steps, steps per dispatch (``chunk``), logging cadence, seed, and the
    memory options for large problems (``accumulate``, ``remat``, ``donate``), and time
    marching in ``time_windows`` windows of ``steps`` steps each (`pinnkit.train.windows`), whose
    networks see time normalised over the whole interval or their own (``window_time``);
    the run stops as ``diverged`` when a loss exceeds its best by ``divergence_factor``,
    before ``max_time`` wall or ``max_cpu_time`` process CPU seconds are spent (null: no
    limit), and when ``early_stopping`` says so."""

    steps: int = 1000
    chunk: int = 100
    log_every: int = 100
    eval_every: int = 0
    seed: int = 0
    accumulate: int | Literal["auto"] = 1
    remat: Literal[REMAT] = "none"
    donate: bool = False
    time_windows: int = 1
    window_time: Literal["global", "local"] = "global"
    divergence_factor: float = 1.0e6
    max_time: float | None = None
    max_cpu_time: float | None = None
    early_stopping: EarlyStoppingConfig | None = None

    def problems(self) -> list[tuple[str, str, object]]:
        """``(key, what is expected, value)`` for the first time limit or early-stopping
        option out of range."""
        for name in ("max_time", "max_cpu_time"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                return [(name, "expected seconds > 0 or null", value)]
        if self.early_stopping is not None:
            if self.eval_every < 1:
                return [("eval_every", "train.early_stopping watches evaluations: expected an "
                         "integer >= 1 (steps between them)", self.eval_every)]
            return [(f"early_stopping.{k}", m, v) for k, m, v in self.early_stopping.problems()]
        return []


@dataclass(frozen=True)
class MeshConfig:
    """``mesh``: devices on the ``data`` axis; -1 = all visible devices."""

    data: int = -1


@dataclass(frozen=True)
class NumericsConfig:
    """``numerics``: float64 on/off and matmul precision, applied by the CLI only."""

    x64: bool = False
    matmul_precision: Literal["default", "high", "highest"] = "highest"


@dataclass(frozen=True)
class CheckpointConfig:
    """``checkpoint``: save every ``every`` steps (0: only at the end), keep ``keep``."""

    every: int = 1000
    keep: int = 3


@dataclass(frozen=True)
class EvalConfig:
    """``eval``: reference-error grid (``resolution`` points per coordinate); ``extra_metrics``:
    functions ``path/to/file.py:name`` (or ``module:name``) of the trained model, as a
    `pinnkit.run.metrics.Predictor`, returning ``{name: number}``, evaluated and logged
    with the problem's own metrics (`pinnkit.ExtraMetrics`); ``validation_points``: the loss
    terms' residuals on that many fresh points per term at every evaluation (0: off;
    `pinnkit.train.validation`); ``keep_best``: an evaluated metric to minimise
    (``metrics.validation``, ``rel_l2.FIELD``, ...; null: off): the parameters where it was
    lowest are kept in ``best/`` and are the model that summary.json, the plots and
    ``pinnkit eval`` report (`pinnkit.train.best`)."""

    resolution: int = 101
    batch: int = 16384
    extra_metrics: list[str] = field(default_factory=list)
    validation_points: int = 0
    keep_best: str | None = None


@dataclass(frozen=True)
class WandbConfig:
    """``logging.wandb``: Weights & Biases (the ``wandb`` extra), in ``project`` under
    ``name`` (null: the run folder's name), files in ``RUN/wandb``; ``mode``: ``offline``
    (default: no network; ``wandb sync RUN/wandb/offline-run-*`` uploads later) or
    ``online``."""

    project: str = "pinnkit"
    name: str | None = None
    mode: Literal["offline", "online"] = "offline"


@dataclass(frozen=True)
class MlflowConfig:
    """``logging.mlflow``: MLflow (the ``mlflow`` extra), into ``tracking_uri`` (null: a
    file store in ``RUN/mlruns``), experiment ``experiment``, run name ``name`` (null:
    the run folder's name)."""

    tracking_uri: str | None = None
    experiment: str = "pinnkit"
    name: str | None = None


@dataclass(frozen=True)
class LoggingConfig:
    """``logging``: live curves besides ``metrics.jsonl`` (`pinnkit.run.live`), read
    from the JSONL every ``every_s`` seconds, to TensorBoard event files in
    ``RUN/tensorboard`` (``tensorboard``: the ``tensorboard`` extra), W&B (``wandb``) and
    MLflow (``mlflow``), the same scalars to each (`pinnkit.run.loggers`)."""

    tensorboard: bool = False
    wandb: WandbConfig | None = None
    mlflow: MlflowConfig | None = None
    every_s: float = 2.0


@dataclass(frozen=True)
class RunConfig:
    problem: ProblemConfig = field(default_factory=ProblemConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    diffops: DiffOpsConfig = field(default_factory=DiffOpsConfig)
    weighting: WeightingConfig = field(default_factory=WeightingConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    numerics: NumericsConfig = field(default_factory=NumericsConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    # Folder of the config file: user files named in it resolve relative to it.
    source_dir: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("source_dir")
        return d

    def phase_steps(self) -> list[int]:
        """Steps of each optimiser phase, the ``null`` one filled in."""
        fixed = sum(p.steps or 0 for p in self.optim.phases)
        return [
            p.steps if p.steps is not None else self.train.steps - fixed
            for p in self.optim.phases
        ]
