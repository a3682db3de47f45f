"""The run configuration: YAML → typed, frozen dataclasses, validated once.

Sections (docs/config.md): ``problem, network, sampler, diffops, weighting, optim, train,
mesh, numerics, checkpoint`` plus ``eval`` (evaluation grid). Every key has a default,
so a config file only states what differs (see ``docs/config.md`` for the reference).

Errors name the file, the key path, what was given and what is allowed, e.g.
``configs/p.yaml: optim.phases.0.lr: expected a number > 0, got -1.0``. Unknown keys are
errors with the closest allowed key suggested. Overrides ``a.b=value`` (``--set``) are
applied to the raw YAML before validation; list items are addressed by index
(``optim.phases.1.steps=500``). A file may start from another with ``base: other.yaml``
(merged one mapping level at a time, the file's own keys winning).
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from ..errors import ConfigError

# ------------------------------------------------------------------------- schema


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
    (``rwf``; PirateNet's least-squares ``pi_init`` of the last layer)."""

    kind: Literal["mlp", "modified_mlp", "pirate"] = "mlp"
    width: int = 64
    depth: int = 4
    activation: Literal["tanh", "sin", "gelu", "silu", "swish", "softplus", "sigmoid", "relu"] = (
        "tanh"
    )
    init: Literal["glorot_normal", "glorot_uniform", "he_normal", "lecun_normal", "default"] = (
        "glorot_normal"
    )
    normalize_inputs: bool = True
    hard_constraint: bool = False
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
    """``sampler``: global points per term, ``uniform``/``sobol``, fixed or resampled,
    optionally residual-adaptive (``adaptive``)."""

    method: Literal["uniform", "sobol"] = "uniform"
    resample: bool = False
    batch: dict[str, int] = field(default_factory=dict)
    adaptive: AdaptiveConfig | None = None


@dataclass(frozen=True)
class DiffOpsConfig:
    """``diffops``: the derivative method (``pinnkit.diffops.METHODS``). The default is the
    one-pass Taylor engine; ``autodiff`` (nested reverse mode) is the oracle."""

    method: str = "taylor"


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

    kind: Literal["fixed", "grad_norm", "ntk"] = "fixed"
    weights: dict[str, float] = field(default_factory=dict)
    update_every: int = 1000
    momentum: float = 0.9
    ntk_points: int = 256
    causal: CausalConfig | None = None


@dataclass(frozen=True)
class ScheduleConfig:
    """``optim.phases.N.schedule``: learning-rate schedule over the phase's steps."""

    kind: Literal["constant", "exponential_decay", "cosine", "warmup_cosine"] = "constant"
    decay_steps: int = 1000
    rate: float = 0.9
    warmup_steps: int = 0
    final_fraction: float = 0.0


@dataclass(frozen=True)
class PhaseConfig:
    """One optimiser phase. ``steps: null`` (at most one phase) takes the rest of
    ``train.steps``. ``adam``/``sgd``/``soap`` use ``lr`` and ``schedule`` (``soap``
    refreshes its eigenbases every ``precondition_frequency`` steps); ``lbfgs`` uses a
    zoom line search with ``memory`` past gradients; ``natural_gradient`` solves with the
    damped Gramian (``damping``) and picks the best of ``step_grid`` step sizes
    (``safeguard``: reject a step that raises the loss and raise the damping)."""

    kind: Literal["adam", "sgd", "lbfgs", "soap", "natural_gradient"] = "adam"
    steps: int | None = None
    lr: float = 1.0e-3
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    clip_norm: float | None = None
    memory: int = 10
    max_linesearch_steps: int = 16
    precondition_frequency: int = 10
    damping: float = 1.0e-10
    step_grid: int = 20
    safeguard: bool = False


@dataclass(frozen=True)
class OptimConfig:
    """``optim``: the optimiser phases, run in order (e.g. Adam then L-BFGS)."""

    phases: list[PhaseConfig] = field(default_factory=lambda: [PhaseConfig()])


@dataclass(frozen=True)
class TrainConfig:
    """``train``: total steps, steps per dispatch (``chunk``), logging cadence, seed, and the
    memory options for large problems (``accumulate``, ``remat``, ``donate``), and time
    marching in ``time_windows`` windows of ``steps`` steps each (`pinnkit.train.windows`), whose
    networks see time normalised over the whole interval or their own (``window_time``)."""

    steps: int = 1000
    chunk: int = 100
    log_every: int = 100
    eval_every: int = 0
    seed: int = 0
    accumulate: int = 1
    remat: Literal["none", "dots", "full"] = "none"
    donate: bool = False
    time_windows: int = 1
    window_time: Literal["global", "local"] = "global"


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
    """``eval``: reference-error grid (``resolution`` points per coordinate)."""

    resolution: int = 101
    batch: int = 16384


@dataclass(frozen=True)
class LoggingConfig:
    """``logging``: live curves besides ``metrics.jsonl`` (`pinnkit.run.live`):
    ``tensorboard`` writes TensorBoard event files to ``RUN/tensorboard`` (the
    ``tensorboard`` extra), read from the JSONL every ``every_s`` seconds."""

    tensorboard: bool = False
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


# --------------------------------------------------------------- conversion


def _type_name(tp) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (types.UnionType, typing.Union):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    if origin is list:
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return f"a mapping of names to {_type_name(typing.get_args(tp)[1])}"
    return {int: "an integer", float: "a number", bool: "true/false", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


class _Mismatch(Exception):
    pass


def _convert(value, tp, path: str, where: str):
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (types.UnionType, typing.Union):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(value, a, path, where)
            except (_Mismatch, ConfigError):
                continue
        raise _Mismatch
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
        raise _Mismatch
    if dataclasses.is_dataclass(tp):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise _Mismatch
        return _build(tp, value, path, where)
    if origin is list:
        if not isinstance(value, list):
            raise _Mismatch
        (item,) = typing.get_args(tp)
        return [_field(v, item, f"{path}.{i}", where) for i, v in enumerate(value)]
    if origin is dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise _Mismatch
        _, vt = typing.get_args(tp)
        return {str(k): _field(v, vt, f"{path}.{k}", where) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _Mismatch
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "1e-3" as a string
            try:
                return float(value)
            except ValueError:
                raise _Mismatch from None
        raise _Mismatch
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    raise TypeError(f"unsupported schema type {tp}")


def _field(value, tp, path, where):
    try:
        return _convert(value, tp, path, where)
    except _Mismatch:
        raise ConfigError(
            f"{where}: {path}: expected {_type_name(tp)}, got {value!r} "
            f"({type(value).__name__}). Fix the value in the file or with --set {path}=..."
        ) from None


def _build(cls, data: dict, path: str, where: str):
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.name != "source_dir"]
    kwargs = {}
    for k, v in data.items():
        key = f"{path}.{k}" if path else str(k)
        if k not in names:
            close = difflib.get_close_matches(str(k), names, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{where}: unknown key {key!r}.{hint} Allowed keys"
                f"{' in ' + repr(path) if path else ''}: {', '.join(names)}."
            )
        kwargs[k] = _field(v, hints[k], key, where)
    return cls(**kwargs)


# --------------------------------------------------------------- validation


def _check(cond: bool, where: str, path: str, msg: str, value) -> None:
    if not cond:
        raise ConfigError(f"{where}: {path}: {msg}, got {value!r}.")


def validate(cfg: RunConfig, where: str) -> RunConfig:
    """Range checks that types cannot express. Returns ``cfg`` unchanged."""
    from ..diffops import METHODS

    n, t = cfg.network, cfg.train
    for k, o in cfg.problem.observations.items():
        _check(bool(o.file), where, f"problem.observations.{k}.file", "expected a file name", o.file)
        _check(bool(o.fields), where, f"problem.observations.{k}.fields",
               "expected the observed fields ({field: column} or a list)", o.fields)
    for k, c in cfg.problem.coeffs.items():
        pc = f"problem.coeffs.{k}"
        if c.lr is not None:
            _check(c.lr > 0, where, f"{pc}.lr", "expected a number > 0 or null", c.lr)
        if c.transform == "positive" and c.init is not None:
            _check(c.init > 0, where, f"{pc}.init", "transform 'positive' needs init > 0", c.init)
        if c.transform == "bounded":
            ok = c.lower is not None and c.upper is not None and c.lower < c.upper
            _check(ok, where, f"{pc}.lower", "transform 'bounded' needs lower < upper", (c.lower, c.upper))
            if c.init is not None:
                _check(c.lower < c.init < c.upper, where, f"{pc}.init",
                       f"expected a value inside ({c.lower}, {c.upper})", c.init)
    _check(n.width >= 1, where, "network.width", "expected an integer >= 1", n.width)
    _check(n.depth >= 1, where, "network.depth", "expected an integer >= 1", n.depth)
    if n.fourier is not None:
        _check(
            n.fourier.dim >= 2 and n.fourier.dim % 2 == 0, where, "network.fourier.dim",
            "expected an even integer >= 2", n.fourier.dim,
        )
        _check(n.fourier.scale > 0, where, "network.fourier.scale", "expected > 0", n.fourier.scale)
    for k, v in n.periodic.items():
        _check(v > 0, where, f"network.periodic.{k}", "expected a period > 0", v)
    for k, v in n.parity.items():
        _check(v in ("odd", "even"), where, f"network.parity.{k}",
               "expected odd or even (the field's symmetry under reflection of that coordinate "
               "about the centre of the domain)", v)
    if n.rwf is not None:
        _check(n.rwf.std >= 0, where, "network.rwf.std", "expected a number >= 0", n.rwf.std)
    if n.pi_init is not None:
        _check(n.kind == "pirate", where, "network.pi_init",
               "the physics-informed initialisation fits a PirateNet's last layer; set "
               "network.kind: pirate or pi_init: null", n.pi_init)
        _check(not n.hard_constraint, where, "network.pi_init",
               "it fits the raw network output, which a hard constraint transforms; set "
               "network.hard_constraint: false or pi_init: null", n.pi_init)
    _check(n.pi_points >= 1, where, "network.pi_points", "expected an integer >= 1", n.pi_points)
    for k, v in cfg.sampler.batch.items():
        _check(v >= 1, where, f"sampler.batch.{k}", "expected an integer >= 1", v)
    _check(
        cfg.diffops.method in METHODS, where, "diffops.method",
        f"expected one of {sorted(METHODS)}", cfg.diffops.method,
    )
    for k, v in cfg.weighting.weights.items():
        _check(v >= 0, where, f"weighting.weights.{k}", "expected a number >= 0", v)
    w = cfg.weighting
    _check(w.update_every >= 1, where, "weighting.update_every", "expected an integer >= 1", w.update_every)
    _check(0 <= w.momentum < 1, where, "weighting.momentum", "expected 0 <= momentum < 1", w.momentum)
    _check(w.ntk_points >= 1, where, "weighting.ntk_points", "expected an integer >= 1", w.ntk_points)
    if w.causal is not None:
        c = w.causal
        _check(c.chunks >= 1, where, "weighting.causal.chunks", "expected an integer >= 1", c.chunks)
        _check(c.tol > 0, where, "weighting.causal.tol", "expected a number > 0", c.tol)
        if c.final_tol is not None:
            _check(c.final_tol > 0, where, "weighting.causal.final_tol", "expected > 0 or null", c.final_tol)
    a = cfg.sampler.adaptive
    if a is not None:
        _check(a.every >= 1, where, "sampler.adaptive.every", "expected an integer >= 1", a.every)
        _check(a.pool >= 1, where, "sampler.adaptive.pool", "expected an integer >= 1", a.pool)
        _check(a.k >= 0, where, "sampler.adaptive.k", "expected a number >= 0", a.k)
        _check(a.c >= 0, where, "sampler.adaptive.c", "expected a number >= 0", a.c)
        _check(0 < a.rar_fraction <= 1, where, "sampler.adaptive.rar_fraction",
               "expected a fraction in (0, 1]", a.rar_fraction)
        if a.until_step is not None:
            _check(a.until_step >= 1, where, "sampler.adaptive.until_step",
                   "expected an integer >= 1 (e.g. the last Adam step + 1) or null for no limit",
                   a.until_step)
    _check(t.steps >= 1, where, "train.steps", "expected an integer >= 1", t.steps)
    _check(t.chunk >= 1, where, "train.chunk", "expected an integer >= 1", t.chunk)
    _check(t.log_every >= 1, where, "train.log_every", "expected an integer >= 1", t.log_every)
    _check(t.eval_every >= 0, where, "train.eval_every", "expected an integer >= 0", t.eval_every)
    _check(t.seed >= 0, where, "train.seed", "expected an integer >= 0", t.seed)
    _check(t.accumulate >= 1, where, "train.accumulate", "expected an integer >= 1", t.accumulate)
    _check(t.time_windows >= 1, where, "train.time_windows", "expected an integer >= 1", t.time_windows)
    phases = cfg.optim.phases
    _check(len(phases) >= 1, where, "optim.phases", "expected at least one phase", phases)
    nulls = [i for i, p in enumerate(phases) if p.steps is None]
    _check(
        len(nulls) <= 1, where, "optim.phases",
        "at most one phase may leave 'steps' empty (it takes the rest of train.steps)",
        [p.steps for p in phases],
    )
    for i, p in enumerate(phases):
        pp = f"optim.phases.{i}"
        _check(p.lr > 0, where, f"{pp}.lr", "expected a number > 0", p.lr)
        if p.steps is not None:
            _check(p.steps >= 1, where, f"{pp}.steps", "expected an integer >= 1 or null", p.steps)
        _check(p.memory >= 1, where, f"{pp}.memory", "expected an integer >= 1", p.memory)
        s = p.schedule
        _check(s.decay_steps >= 1, where, f"{pp}.schedule.decay_steps", "expected >= 1", s.decay_steps)
        _check(0 < s.rate <= 1, where, f"{pp}.schedule.rate", "expected 0 < rate <= 1", s.rate)
        _check(s.warmup_steps >= 0, where, f"{pp}.schedule.warmup_steps", "expected >= 0", s.warmup_steps)
        _check(
            0 <= s.final_fraction <= 1, where, f"{pp}.schedule.final_fraction",
            "expected a fraction in [0, 1]", s.final_fraction,
        )
        if p.clip_norm is not None:
            _check(p.clip_norm > 0, where, f"{pp}.clip_norm", "expected > 0 or null", p.clip_norm)
            _check(p.kind != "natural_gradient", where, f"{pp}.clip_norm",
                   "a natural_gradient phase chooses its step by line search and clips nothing; "
                   "set clip_norm: null", p.clip_norm)
        _check(p.precondition_frequency >= 1, where, f"{pp}.precondition_frequency",
               "expected an integer >= 1", p.precondition_frequency)
        _check(p.damping >= 0, where, f"{pp}.damping", "expected a number >= 0", p.damping)
        _check(p.step_grid >= 1, where, f"{pp}.step_grid", "expected an integer >= 1", p.step_grid)
    steps = cfg.phase_steps()
    total = sum(steps)
    if nulls:
        _check(
            steps[nulls[0]] >= 1, where, "train.steps",
            f"the phases with fixed steps use {total - steps[nulls[0]]} steps and leave none "
            f"for phase {nulls[0]} (steps: null); raise train.steps",
            t.steps,
        )
    else:
        _check(
            total == t.steps, where, "train.steps",
            f"the optimiser phases add up to {total} steps; make train.steps equal to that "
            "or leave one phase's steps empty (null)", t.steps,
        )
    m = cfg.mesh.data
    _check(m == -1 or m >= 1, where, "mesh.data", "expected -1 or >= 1", m)
    _check(cfg.checkpoint.every >= 0, where, "checkpoint.every", "expected >= 0", cfg.checkpoint.every)
    _check(cfg.checkpoint.keep >= 1, where, "checkpoint.keep", "expected >= 1", cfg.checkpoint.keep)
    _check(cfg.eval.resolution >= 2, where, "eval.resolution", "expected >= 2", cfg.eval.resolution)
    _check(cfg.eval.batch >= 1, where, "eval.batch", "expected >= 1", cfg.eval.batch)
    _check(cfg.logging.every_s > 0, where, "logging.every_s", "expected a number > 0", cfg.logging.every_s)
    return cfg


# ------------------------------------------------------------- files and overrides


def _read_yaml(path: Path) -> dict:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} not found (current folder: {Path.cwd()})") from None
    except OSError as e:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        pos = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{path}: invalid YAML{pos}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    base = data.pop("base", None)
    if base is not None:
        if not isinstance(base, str):
            raise ConfigError(f"{path}: base: expected a file path, got {base!r}")
        parent = _read_yaml((path.parent / base) if not Path(base).is_absolute() else Path(base))
        data = _merge(parent, data)
    return data


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"optim.phases.0.lr=3e-4"`` → ``(["optim","phases","0","lr"], 3e-4)`` (YAML value)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. --set train.steps=2000")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def apply_overrides(data: dict, overrides: list[str], where: str = "--set") -> dict:
    """Applies ``a.b=value`` overrides to raw config data (a new dict is returned)."""
    import copy

    data = _fill_phases(copy.deepcopy(data))
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for i, k in enumerate(path[:-1]):
            if isinstance(node, list):
                if not (k.isdigit() and int(k) < len(node)):
                    raise ConfigError(
                        f"{where} {text!r}: {'.'.join(path[: i + 1])} must be an index < {len(node)}"
                    )
                node = node[int(k)]
                continue
            if not isinstance(node, dict):
                raise ConfigError(f"{where} {text!r}: {'.'.join(path[:i])} is not a section")
            node = node.setdefault(k, {} if not (path[i + 1].isdigit()) else [])
            if node is None:
                node = {}
        last = path[-1]
        if isinstance(node, list):
            idx = int(last) if last.isdigit() else -1
            if idx == len(node):
                node.append(value)
            elif 0 <= idx < len(node):
                node[idx] = value
            else:
                raise ConfigError(f"{where} {text!r}: index {last} out of range ({len(node)} items)")
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise ConfigError(f"{where} {text!r}: {'.'.join(path[:-1])} is not a section")
    return data


def _fill_phases(data: dict) -> dict:
    """Lets ``--set optim.phases.0.lr=...`` work without restating the default phase."""
    optim = data.get("optim")
    if optim is None:
        data["optim"] = optim = {}
    if isinstance(optim, dict) and optim.get("phases") is None:
        optim["phases"] = [{}]  # one default (Adam) phase, as the schema's default
    return data


def from_dict(data: dict, where: str = "<config>", source_dir: str | None = None) -> RunConfig:
    cfg = _build(RunConfig, data, "", where)
    cfg = dataclasses.replace(cfg, source_dir=source_dir)
    return validate(cfg, where)


def from_dict_with_overrides(data: dict, overrides: list[str] | None, where: str,
                             source_dir: str | None = None) -> RunConfig:
    """`from_dict` of ``data`` with ``--set`` ``overrides`` applied. An error that only
    the overrides cause is reported against the first ``--set KEY=VALUE`` after which the
    config no longer validates, not against the file ``where``."""
    if not overrides:
        return from_dict(data, where=where, source_dir=source_dir)
    try:
        return from_dict(apply_overrides(data, overrides), where=where, source_dir=source_dir)
    except ConfigError as full:
        try:
            from_dict(data, where=where, source_dir=source_dir)
        except ConfigError:
            raise full from None  # the file alone is wrong already: report it as it is
        for k, text in enumerate(overrides):
            try:
                from_dict(apply_overrides(data, overrides[: k + 1]), where=f"--set {text}",
                          source_dir=source_dir)
            except ConfigError as e:
                raise ConfigError(f"{e} (from the command line; the file {where} alone is valid)") from None
        raise full from None  # only the overrides together fail: say so as found


def load_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Reads, overrides and validates a config file. Raises `ConfigError` (naming the
    ``--set`` override that causes it, if one does)."""
    path = Path(path)
    data = _read_yaml(path)
    return from_dict_with_overrides(data, overrides, str(path), str(path.parent.resolve()))


def dump_config(cfg: RunConfig, extra: dict | None = None) -> str:
    """YAML text of the resolved config (every key), with ``extra`` (e.g. versions) first."""
    body = yaml.safe_dump(cfg.to_dict(), sort_keys=False, default_flow_style=None)
    head = yaml.safe_dump(extra, sort_keys=False) if extra else ""
    return head + body
