"""``logging.wandb``: Weights & Biases through the ``wandb`` package (the ``wandb`` extra).

The default ``mode: offline`` never touches the network: the run is written to
``RUN/wandb/offline-run-*/`` and ``wandb sync`` uploads it later (from a login node of a
cluster, say). ``WANDB_MODE`` in the environment wins over the config, as in wandb.
"""

from __future__ import annotations

from pathlib import Path

from .base import AbstractScalarWriter, require


class WandbWriter(AbstractScalarWriter):
    """One W&B run: ``project``, ``name``, files under ``log_dir/wandb``; ``mode``:
    ``offline`` or ``online``; ``config``: the resolved run config (W&B's run config)."""

    def __init__(self, log_dir: str | Path, *, project: str, name: str, mode: str = "offline",
                 config: dict | None = None):
        wandb = require("wandb", "logging.wandb", "wandb")
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        # console="off": progress lines are pinnkit's own, not captured twice; no system
        # metrics sampler thread (it is not training's, and costs a CPU on small machines)
        settings = wandb.Settings(silent=True, console="off", x_disable_stats=True)
        self._run = wandb.init(project=project, name=name, dir=str(log_dir), mode=mode,
                               config=config or {}, settings=settings, reinit="create_new")

    def scalars(self, step, values):
        self._run.log(dict(values), step=int(step))

    def close(self):
        self._run.finish()
