"""``pinnkit slim RUN --out DIR``: a copy of a trained run folder without optimiser state.

A dense quasi-Newton phase (SSBFGS, SSBroyden) keeps a $P \\times P$ inverse Hessian in its
state, so its checkpoints are ~$8P^2$ bytes (87 MB for the 3.4k-parameter DFG network)
where the model is ~$8P$. The copy keeps every file of the run folder (config,
summary, metrics, plots, window folders) and replaces each ``checkpoints/`` folder by
its newest valid checkpoint written model-only (`pinnkit.train.checkpoint.MODEL_ONLY`:
the parameters and the adaptive extra state, the same header), which `load_run`,
``pinnkit eval | plot | predict | export`` and notebooks read like the original;
``--resume`` refuses it with a clear message.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import equinox as eqx

from ..errors import RunDirError
from ..train import checkpoint as ckpt
from ..train.step import init_extra, split_model
from ..train.windows import window_dir, window_run
from .build import build_run
from .rundir import read_config

__all__ = ["slim_run"]


def _newest(folder: Path, params, phases, extra):
    """``(step, header, (params, extra))`` of the newest valid checkpoint in ``folder``,
    or None."""
    found = ckpt.latest_valid(folder)
    if found is None:
        return None
    path, head = found
    return int(head["step"]), head, ckpt.load_model(path, head, params, phases, extra)


def slim_run(run_dir: str | Path, out: str | Path) -> dict:
    """Copies run folder ``run_dir`` to ``out`` (which must not exist or be empty) with
    model-only checkpoints (module docstring). Returns ``{"checkpoints": [paths],
    "bytes_before": int, "bytes_after": int}`` (the checkpoint folders' sizes)."""
    src, out = Path(run_dir), Path(out)
    config = read_config(src)  # names the folder when it is not a run folder
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunDirError(f"{out} exists and is not empty; choose a new --out folder (slim never overwrites)")
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise RunDirError(f"--out {out} is inside the run folder {src}; choose a folder outside it")
    run = build_run(config, with_mesh=False)
    extra = init_extra(run)
    pieces = []  # (checkpoint folder, its newest checkpoint read once)
    if run.n_windows > 1:  # each window's network has its own layout (its hard restart)
        prev = None
        for w in range(run.n_windows):
            folder = window_dir(src, w) / "checkpoints"
            params, static = split_model(window_run(run, w, prev))
            newest = _newest(folder, params, run.phases, extra) if folder.is_dir() else None
            if newest is None:
                break
            pieces.append((folder, newest))
            prev = eqx.combine(newest[2][0], static)[0]
    else:
        folder = src / "checkpoints"
        newest = _newest(folder, split_model(run)[0], run.phases, extra)
        if newest is None:
            raise RunDirError(f"{folder}: no valid checkpoint to copy; was training started?")
        pieces.append((folder, newest))

    before = sum(p.stat().st_size for folder, _ in pieces for p in ckpt.list_checkpoints(folder))
    skip = {folder.resolve() for folder, _ in pieces}
    shutil.copytree(src, out, dirs_exist_ok=True,
                    ignore=lambda d, names: [n for n in names if (Path(d) / n).resolve() in skip])
    drop = ("format", "step", "payload_sha256")  # save writes its own
    written = [ckpt.save(out / folder.relative_to(src), step, tree,
                         {**{k: v for k, v in head.items() if k not in drop}, "contents": ckpt.MODEL_ONLY})
               for folder, (step, head, tree) in pieces]
    return {"checkpoints": written, "bytes_before": before,
            "bytes_after": sum(p.stat().st_size for p in written)}
