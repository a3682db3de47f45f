"""``logging.tensorboard: true``: TensorBoard event files through tensorboardX."""

from __future__ import annotations

from pathlib import Path

from .base import AbstractScalarWriter, require


class TensorBoardWriter(AbstractScalarWriter):
    """TensorBoard event files in ``log_dir`` through tensorboardX (the ``tensorboard``
    extra). ``purge_step``: TensorBoard hides the events at or after it that earlier
    writers left in the folder (a resumed run)."""

    def __init__(self, log_dir: str | Path, purge_step: int | None = None):
        tbx = require("tensorboardX", "logging.tensorboard", "tensorboard")
        self._w = tbx.SummaryWriter(logdir=str(log_dir), purge_step=purge_step, flush_secs=5)

    def scalars(self, step, values):
        for tag, v in values.items():
            self._w.add_scalar(tag, v, global_step=step)

    def close(self):
        self._w.flush()
        self._w.close()
