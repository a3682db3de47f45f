"""The logger family's base: `AbstractScalarWriter` (one subclass per service, one file
each) and `require`, the one-paragraph error for a missing optional package."""

from __future__ import annotations

import abc
import importlib
from collections.abc import Mapping

from ...errors import ConfigError


class AbstractScalarWriter(abc.ABC):
    """Where live scalars go: TensorBoard, W&B, MLflow (`pinnkit.run.loggers`), or any
    tracking service."""

    @abc.abstractmethod
    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        """Records ``values`` (``{tag: number}``, tags like ``loss/pde``) at ``step``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Flushes and releases the writer."""


class FanOut(AbstractScalarWriter):
    """Several writers as one: each gets every scalar; `close` closes all of them (the
    first error raised after the others are closed)."""

    def __init__(self, writers: list[AbstractScalarWriter]):
        self.writers = list(writers)

    def scalars(self, step, values):
        for w in self.writers:
            w.scalars(step, values)

    def close(self):
        err = None
        for w in self.writers:
            try:
                w.close()
            except Exception as e:  # noqa: BLE001 (close the others first)
                err = err or e
        if err is not None:
            raise err


def require(module: str, key: str, extra: str):
    """``import module``, or a `ConfigError` naming the config key and the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"{key} needs the {module} package, which is not installed: pip install "
            f"'pinnkit[{extra}]' (or remove {key} from the config's logging section)"
        ) from None
