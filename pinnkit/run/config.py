"""The run configuration: YAML → typed, frozen dataclasses, validated once.

Sections (docs/config.md): ``problem, network, sampler, diffops, weighting, optim, train,
mesh, numerics, checkpoint`` plus ``eval`` (evaluation grid). Every key has a default,
so a config file only states what differs (see ``docs/config.md`` for the reference; the
schema is `pinnkit.run.schema`).

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
import math
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from ..errors import ConfigError
from ..train.phases import PHASES
from . import yamlsafe

# The schema lives in pinnkit/run/schema.py; its names stay importable from here.
from .schema import PHASE_CONFIGS as PHASE_CONFIGS
from .schema import AdaptiveConfig as AdaptiveConfig
from .schema import CausalConfig as CausalConfig
from .schema import CheckpointConfig as CheckpointConfig
from .schema import CoeffConfig as CoeffConfig
from .schema import CornerConfig as CornerConfig
from .schema import DiffOpsConfig as DiffOpsConfig
from .schema import EvalConfig as EvalConfig
from .schema import FourierConfig as FourierConfig
from .schema import LoggingConfig as LoggingConfig
from .schema import MeshConfig as MeshConfig
from .schema import NetworkConfig as NetworkConfig
from .schema import NumericsConfig as NumericsConfig
from .schema import ObservationConfig as ObservationConfig
from .schema import OptimConfig as OptimConfig
from .schema import PhaseConfig as PhaseConfig
from .schema import ProblemConfig as ProblemConfig
from .schema import RunConfig as RunConfig
from .schema import RwfConfig as RwfConfig
from .schema import SamplerConfig as SamplerConfig
from .schema import ScheduleConfig as ScheduleConfig
from .schema import TrainConfig as TrainConfig
from .schema import WeightingConfig as WeightingConfig

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
    if tp == PhaseConfig:
        return _phase(value, path, where)
    if origin in (types.UnionType, typing.Union):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        alts = [a for a in args if a is not type(None)]
        for a in alts:
            try:
                return _convert(value, a, path, where)
            except (_Mismatch, ConfigError) as e:  # X | None: a mistake inside X is the message
                if isinstance(e, ConfigError) and len(alts) == 1:
                    raise
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
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            if not -(2**63) <= value < 2**63:
                raise ConfigError(f"{where}: {path}: {value} is outside the 64-bit integer range; "
                                  f"fix the value in the file or with --set {path}=...")
            return value
        raise _Mismatch
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-3" as a string
            try:
                value = float(value)
            except ValueError:
                raise _Mismatch from None
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:  # an integer beyond float range
                value = math.inf
            if not math.isfinite(value):
                raise ConfigError(f"{where}: {path}: expected a finite number, got {value!r}. Fix "
                                  f"the value in the file or with --set {path}=...")
            return value
        raise _Mismatch
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    raise TypeError(f"unsupported schema type {tp}")


# The options of the one flat phase schema before phases became one dataclass per kind:
# a run folder's config.yaml written then holds every one of them in every phase.
_LEGACY_PHASE_KEYS = {"lr", "schedule", "clip_norm", "memory", "max_linesearch_steps",
                      "precondition_frequency", "damping", "step_grid", "safeguard"}


def _phase(value, path: str, where: str):
    """``optim.phases.N``: the dataclass of its ``kind`` (tagged union)."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise _Mismatch
    kind = value.get("kind", "adam")
    configs = {k: c.Config for k, c in PHASES.items()}  # the registry as it is now
    if kind not in configs:
        raise ConfigError(
            f"{where}: {path}.kind: expected one of {', '.join(map(repr, configs))}, got "
            f"{kind!r}. Fix the value in the file or with --set {path}.kind=..."
        )
    cls = configs[kind]
    names = [f.name for f in dataclasses.fields(cls)]
    if _LEGACY_PHASE_KEYS <= set(value):  # a resolved config of the flat schema: the
        value = {k: v for k, v in value.items() if k in names}  # other kinds' keys were unused
    unknown = [k for k in value if k not in names]
    if unknown:
        others = sorted(k for k, c in configs.items()
                        if unknown[0] in {f.name for f in dataclasses.fields(c)})
        taken = f" ({', '.join(others)} phases do)" if others else ""
        raise ConfigError(
            f"{where}: {path}.{unknown[0]}: phases of kind {kind!r} do not take {unknown[0]!r}{taken}. "
            f"The options of kind {kind!r} are: {', '.join(names)}."
        )
    return _build(cls, value, path, where)


def _field(value, tp, path, where):
    try:
        return _convert(value, tp, path, where)
    except _Mismatch:
        raise ConfigError(
            f"{where}: {path}: expected {_type_name(tp)}, got {value!r} "
            f"({type(value).__name__}). Fix the value in the file or with --set {path}=..."
        ) from None


def did_you_mean(name, valid) -> str:
    """`` Did you mean 'x'?`` for the closest of ``valid`` to a mistyped ``name`` (difflib's
    default cut-off), or ``""``: the hint of every unknown-key and unknown-name error."""
    close = difflib.get_close_matches(str(name), list(valid), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _build(cls, data: dict, path: str, where: str):
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.name != "source_dir"]
    kwargs = {}
    for k, v in data.items():
        key = f"{path}.{k}" if path else str(k)
        if k not in names:
            raise ConfigError(
                f"{where}: unknown key {key!r}.{did_you_mean(k, names)} Allowed keys"
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
    every = cfg.sampler.resample_every
    _check(isinstance(every, int) and every >= 1, where, "sampler.resample_every",
           "expected an integer >= 1", every)
    _check(every == 1 or cfg.sampler.resample, where, "sampler.resample_every",
           "fresh points every k steps need sampler.resample: true (else the points never change)", every)
    _check(cfg.diffops.method in METHODS, where, "diffops.method",
           f"expected one of {sorted(METHODS)}", cfg.diffops.method)
    for key, msg, value in cfg.diffops.problems():
        _check(False, where, f"diffops.{key}", msg, value)
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
    # The step counter is an int32 on the device; the key from jax.random.key keeps 32 bits.
    _check(1 <= t.steps < 2**31, where, "train.steps",
           "expected an integer from 1 to 2147483647 (2**31 - 1)", t.steps)
    _check(t.chunk >= 1, where, "train.chunk", "expected an integer >= 1", t.chunk)
    _check(t.log_every >= 1, where, "train.log_every", "expected an integer >= 1", t.log_every)
    _check(t.eval_every >= 0, where, "train.eval_every", "expected an integer >= 0", t.eval_every)
    _check(0 <= t.seed < 2**32, where, "train.seed",
           "expected an integer from 0 to 4294967295 (2**32 - 1; larger seeds would wrap around "
           "to the same key)", t.seed)
    _check(t.accumulate == "auto" or t.accumulate >= 1, where, "train.accumulate",
           "expected an integer >= 1 or 'auto'", t.accumulate)
    _check(t.time_windows >= 1, where, "train.time_windows", "expected an integer >= 1", t.time_windows)
    _check(t.divergence_factor > 1, where, "train.divergence_factor", "expected a number > 1",
           t.divergence_factor)
    for key, msg, value in t.problems():  # time limits, early stopping
        _check(False, where, f"train.{key}", msg, value)
    phases = cfg.optim.phases
    _check(len(phases) >= 1, where, "optim.phases", "expected at least one phase", phases)
    nulls = [i for i, p in enumerate(phases) if p.steps is None]
    _check(len(nulls) <= 1, where, "optim.phases",
           "at most one phase may leave 'steps' empty (it takes the rest of train.steps)",
           [p.steps for p in phases])
    for i, p in enumerate(phases):
        pp = f"optim.phases.{i}"
        if p.steps is not None:
            _check(p.steps >= 1, where, f"{pp}.steps", "expected an integer >= 1 or null", p.steps)
        for key, msg, value in p.problems():  # the kind's own range checks
            _check(False, where, f"{pp}.{key}", msg, value)
    steps = cfg.phase_steps()
    total = sum(steps)
    if nulls:
        _check(steps[nulls[0]] >= 1, where, "train.steps",
               f"the phases with fixed steps use {total - steps[nulls[0]]} steps and leave none "
               f"for phase {nulls[0]} (steps: null); raise train.steps", t.steps)
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
    for key, low in (("resolution", 2), ("batch", 1), ("validation_points", 0)):
        _check(getattr(cfg.eval, key) >= low, where, f"eval.{key}", f"expected an integer >= {low}",
               getattr(cfg.eval, key))
    _check(cfg.logging.every_s > 0, where, "logging.every_s", "expected a number > 0", cfg.logging.every_s)
    return cfg


# ------------------------------------------------------------- files and overrides


MAX_BASE_DEPTH = 16


def _read_yaml(path: Path, chain: tuple[Path, ...] = ()) -> dict:
    """A config file's data with its ``base:`` chain merged in (bounded, see `yamlsafe`)."""
    here = path.resolve()
    if here in chain:
        names = " -> ".join(str(p) for p in (*chain, here))
        raise ConfigError(f"{path}: base: the chain {names} comes back to a file already read; "
                          "remove the base: key that closes the cycle")
    if len(chain) >= MAX_BASE_DEPTH:
        raise ConfigError(f"{path}: base: more than {MAX_BASE_DEPTH} files deep; flatten the chain")
    data = yamlsafe.loads(yamlsafe.read_text(path), str(path))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    base = data.pop("base", None)
    if base is not None:
        if not isinstance(base, str):
            raise ConfigError(f"{path}: base: expected a file path, got {base!r}")
        parent = (path.parent / base) if not Path(base).is_absolute() else Path(base)
        data = _merge(_read_yaml(parent, (*chain, here)), data)
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
    value = yamlsafe.loads(raw, f"--set {key.strip()}=...", invalid=raw) if raw.strip() else None
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
