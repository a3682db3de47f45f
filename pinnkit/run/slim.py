"""``pinnkit slim RUN --out DIR``: a copy of a trained run folder without optimiser state.

A dense quasi-Newton phase (SSBFGS, SSBroyden) keeps a $P \\times P$ inverse Hessian in its
state, so its checkpoints are ~$8P^2$ bytes (87 MB for the 3.4k-parameter DFG network)
where the model is ~$8P$. The copy keeps every file of the run folder (config,
summary, metrics, plots, window folders) and replaces each ``checkpoints/`` folder by
its newest valid checkpoint written model-only (`pinnkit.train.checkpoint.MODEL_ONLY`:
the parameters and the adaptive extra state, the same header), which `load_run`,
``pinnkit eval | plot | predict | export`` and notebooks read like the original;
``--resume`` refuses it with a clear message.

Only pinnkit's own entries are copied (`OWN`: config, metrics, summary, plots,
tensorboard, windows), and of those only regular files and folders: a link (say
``notes.txt -> /etc/shadow``), a FIFO or a device file is never read, and a file of the
user's is left behind, each named in one warning. The copy is built in a hidden folder
beside ``--out`` and renamed to it at the end, so a failure leaves no half-written output.
"""

from __future__ import annotations

import os
import shutil
import stat
import warnings
from pathlib import Path

import equinox as eqx

from ..errors import RunDirError
from ..train import checkpoint as ckpt
from ..train.step import init_extra, split_model
from ..train.windows import window_dir, window_run
from .build import build_run
from .folder import ASIDE_NAME, LOCK_NAME, check_parent
from .rundir import read_config

__all__ = ["slim_run", "OWN"]

OWN = ("config.yaml", "metrics.jsonl", "summary.json", "plots", "tensorboard", "windows", "checkpoints",
       "best")
"""The top-level entries of a run folder that pinnkit writes, and so that slim copies."""


def _copy_file(src: Path, dst: Path) -> bool:
    """Copies ``src`` if it is a regular file (opened without following a link or waiting
    on a FIFO, so what is checked is what is read); False otherwise."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # O_NOFOLLOW on a link: ELOOP
        return False
    with os.fdopen(fd, "rb") as fin:
        if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
            return False
        with open(dst, "xb") as fout:
            shutil.copyfileobj(fin, fout)
    shutil.copystat(src, dst, follow_symlinks=False)
    return True


def _copy_own(src: Path, dst: Path, skip: set[Path]) -> list[str]:
    """Copies the regular files and folders of ``src``'s `OWN` entries into ``dst``, less
    the folders in ``skip``; returns what was left out, ``"PATH (why)"``."""
    left: list[str] = []
    todo = [(src, dst)]
    while todo:
        s, d = todo.pop()
        for entry in sorted(os.scandir(s), key=lambda e: e.name):
            path, rel = Path(entry.path), Path(entry.path).relative_to(src)
            if s == src and entry.name not in OWN:
                if entry.name not in (LOCK_NAME, ASIDE_NAME):
                    left.append(f"{rel} (not pinnkit's)")
                continue
            if entry.is_symlink():
                left.append(f"{rel} (a link)")
            elif entry.is_dir(follow_symlinks=False):
                if path.resolve() not in skip:
                    (d / entry.name).mkdir()
                    todo.append((path, d / entry.name))
            elif not _copy_file(path, d / entry.name):
                left.append(f"{rel} (not a regular file)")
    return left


def _newest(folder: Path, params, phases, extra):
    """``(step, header, (params, extra))`` of the newest valid checkpoint in ``folder``,
    or None when it holds none (all of them damaged: `RunDirError`)."""
    found = ckpt.newest_valid(folder)
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
    check_parent(out)  # refused before any work: the copy could not be written
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunDirError(f"{out} exists and is not empty; choose a new --out folder (slim never overwrites)")
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise RunDirError(f"--out {out} is inside the run folder {src}; choose a folder outside it")
    if config.train.time_windows <= 1:  # damaged checkpoints refused before the build compiles
        ckpt.newest_valid(src / "checkpoints",
                          f"{src / 'checkpoints'}: no valid checkpoint to copy; was training started?")
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

    before = sum(p.lstat().st_size for folder, _ in pieces for p in ckpt.list_checkpoints(folder))
    skip = {folder.resolve() for folder, _ in pieces}
    drop = ("format", "step", "payload_sha256")  # save writes its own
    tmp = out.parent / f".{out.name}.slim-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        left = _copy_own(src, tmp, skip)
        for folder, (step, head, tree) in pieces:
            ckpt.save(tmp / folder.relative_to(src), step, tree,
                      {**{k: v for k, v in head.items() if k not in drop}, "contents": ckpt.MODEL_ONLY})
        os.replace(tmp, out)  # onto a missing or empty folder: all or nothing
    except OSError as e:  # RunDirError too: a checkpoint that could not be written
        why = e.strerror or "a checkpoint could not be written (is the disk full?)"
        raise RunDirError(f"cannot write --out {out}: {why}. Choose a folder you can "
                          "write to, on a file system with free space; nothing was written") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if left:
        shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        warnings.warn(f"slim copied pinnkit's own files only, leaving out {shown}; copy what "
                      "belongs with the run yourself (never a link out of it)", stacklevel=2)
    written = [ckpt.list_checkpoints(out / folder.relative_to(src))[-1] for folder, _ in pieces]
    return {"checkpoints": written, "bytes_before": before,
            "bytes_after": sum(p.stat().st_size for p in written)}
