"""Live loggers: one `AbstractScalarWriter` subclass per service, one file each
(`tensorboard`, `wandb`, `mlflow`), all fed the same scalars by `pinnkit.run.live`.

`writers` builds those a config's ``logging`` section asks for; `check` refuses, before
anything is written, a config whose logger's package is missing (one paragraph naming the
extra to install). Another service is one more file with its writer and one entry in
`make`.
"""

from __future__ import annotations

from pathlib import Path

from .base import AbstractScalarWriter as AbstractScalarWriter
from .base import FanOut as FanOut
from .base import require
from .tensorboard import TensorBoardWriter as TensorBoardWriter

# config key -> (module to import, extra that installs it)
PACKAGES = {"tensorboard": ("tensorboardX", "tensorboard"), "wandb": ("wandb", "wandb"),
            "mlflow": ("mlflow", "mlflow")}


def wanted(logging_cfg) -> list[str]:
    """The loggers a ``logging`` section turns on, in `PACKAGES`' order."""
    return [k for k in PACKAGES if getattr(logging_cfg, k) not in (None, False)]


def check(logging_cfg) -> None:
    """Imports each wanted logger's package; a `ConfigError` for the first one missing."""
    for key in wanted(logging_cfg):
        require(PACKAGES[key][0], f"logging.{key}", PACKAGES[key][1])


def _flat(prefix: str, value, out: dict) -> dict:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value
    return out


def make(key: str, cfg, out: Path, purge_step: int | None) -> AbstractScalarWriter:
    """The writer of logger ``key`` for run config ``cfg`` writing beside run folder ``out``."""
    section = getattr(cfg.logging, key)
    name = getattr(section, "name", None) or out.resolve().name
    if key == "tensorboard":
        return TensorBoardWriter(out / "tensorboard", purge_step=purge_step)
    if key == "wandb":
        from .wandb import WandbWriter

        return WandbWriter(out, project=section.project, name=name, mode=section.mode,
                           config=cfg.to_dict())
    from .mlflow import MlflowWriter

    return MlflowWriter(out, experiment=section.experiment, name=name,
                        tracking_uri=section.tracking_uri, params=_flat("", cfg.to_dict(), {}))


def writers(cfg, out: Path, purge_step: int | None = None) -> AbstractScalarWriter | None:
    """All the writers ``cfg.logging`` asks for, as one (None: none asked for)."""
    made: list[AbstractScalarWriter] = []
    try:
        for key in wanted(cfg.logging):
            made.append(make(key, cfg, out, purge_step))
    except BaseException:
        FanOut(made).close()
        raise
    return None if not made else made[0] if len(made) == 1 else FanOut(made)
