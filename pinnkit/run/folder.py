"""Run-folder safety: one writer per folder, and ``--overwrite`` that loses nothing.

**The lock.** A writer holds an exclusive `fcntl.flock` on ``RUN/.pinnkit.lock``, a file
naming its host and process id. A second writer exits with an error naming the holder.
The kernel drops the lock when its holder dies, however it dies; a lock file left behind
then only names the last holder, and the next writer takes it over with a message. If
the file is still locked but names a process of this host that no longer runs (the lock
was inherited by a child process), it is replaced the same way. File systems without
``flock`` (some Lustre or NFS mounts) fall back to the holder named in the file; see
docs/cluster.md.

**Replacing a run.** ``--overwrite`` does not delete anything before the new run has
been built and validated and is about to write. Then the old run's files move, by
renames inside the folder, into ``RUN/.pinnkit-replacing/``, which is renamed
``RUN/.pinnkit-replaced/`` once every file is in it. The old run is deleted only once the
new one has *earned* a checkpoint: one written at a scheduled step (``checkpoint.every``,
so after real training), or the final one of a run that ended ``successful``,
``converged``, ``early_stopped`` or ``max_time`` past step 0 (`earned`). A new run that
diverges, turns non-finite, is stopped by a signal or fails before that has its files
deleted and the old run moved back unchanged. A replacement killed outright (SIGKILL, a
node lost) leaves the old run aside: the next ``pinnkit train`` on the folder moves it
back first (`recover`), and the read-only commands name it (`stranded`) instead of
reading the half-started run.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import warnings
from pathlib import Path

from ..errors import RunDirError


class RunFolderWarning(UserWarning):
    """A run folder's stale lock was taken over (or its file system cannot lock), or a
    killed write's temporary files were deleted."""

LOCK_NAME = ".pinnkit.lock"
ASIDE_NAME = ".pinnkit-replaced"
# The aside folder while the old run moves into it, or back out of it: it holds old files
# only, and the folder's other entries are old files too (`recover` moves them all back).
MOVING_NAME = ".pinnkit-replacing"
OWN_NAMES = (LOCK_NAME, ASIDE_NAME, MOVING_NAME)
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _holder(fd: int) -> dict | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 4096).decode(errors="replace").strip()
        info = json.loads(text) if text else None
        return info if isinstance(info, dict) and {"host", "pid"} <= set(info) else None
    except (OSError, ValueError):
        return None


def _name(info: dict) -> str:
    return f"process {info['pid']} on host {info['host']}"


class RunLock:
    """The exclusive lock of one run folder (see the module docstring)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.fd: int | None = None
        self.me = {"host": socket.gethostname(), "pid": os.getpid()}

    def acquire(self) -> str | None:
        """Takes the lock or raises `RunDirError` naming the holder. Returns a message
        when a stale lock was taken over."""
        note = None
        for _ in range(3):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                info = _holder(fd)
                os.close(fd)
                if info and info["host"] == self.me["host"] and not _alive(int(info["pid"])):
                    os.unlink(self.path)  # held by an orphan of a dead writer: a new lock file
                    note = (f"the lock {self.path} named {_name(info)}, which no longer runs; "
                            "taking it over")
                    continue
                who = _name(info) if info else "another process"
                raise RunDirError(
                    f"{self.folder} is being written by {who} (lock {self.path}). Wait for that "
                    "run to end or stop it, or train into another --out folder."
                ) from None
            except OSError as e:
                if e.errno not in _NO_FLOCK:
                    os.close(fd)
                    raise
                note = self._without_flock(fd)
            try:  # the file we locked must still be the lock file (not unlinked meanwhile)
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            old = _holder(fd)
            if old and old != self.me and note is None:
                note = f"the lock {self.path} named {_name(old)}, which no longer holds it; taking it over"
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, (json.dumps(self.me) + "\n").encode())
            self.fd = fd
            return note
        raise RunDirError(f"cannot lock {self.folder}: its lock file keeps changing; is another "
                          "job starting in the same folder?")

    def _without_flock(self, fd: int) -> str:
        info = _holder(fd)
        if info and info != self.me:
            here = info["host"] == self.me["host"]
            if not here or _alive(int(info["pid"])):
                os.close(fd)
                raise RunDirError(
                    f"{self.folder}: this file system does not support locks, and {self.path} "
                    f"names {_name(info)} as its writer. If no job writes this folder, delete "
                    f"{self.path}; otherwise use another --out folder."
                )
        return f"{self.folder}: this file system does not support flock; the lock file alone guards it"

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)  # while still held: nobody can take a lock on the old file
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None


class Replaced:
    """An old run moved aside inside its folder while a new one starts (``--overwrite``)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.aside = self.folder / ASIDE_NAME
        self.moving = self.folder / MOVING_NAME
        self.names: list[str] = []

    def move_aside(self) -> None:
        recover(self.folder)  # a replacement killed earlier: its old run is the one to keep
        self.moving.mkdir()
        for p in sorted(self.folder.iterdir()):
            if p.name in OWN_NAMES:
                continue
            p.rename(self.moving / p.name)
            self.names.append(p.name)
        # One rename marks the move complete: a folder killed before it holds only old
        # files, which `recover` must keep; after it, the new run's, which it deletes.
        self.moving.rename(self.aside)

    def drop(self) -> None:
        """The new run has earned a checkpoint: the old one goes."""
        if self.aside.exists():
            shutil.rmtree(self.aside)
        self.names = []

    def restore(self) -> None:
        """The new run stopped before earning a checkpoint: its files go, the old ones
        come back unchanged."""
        if not self.aside.exists():
            return
        for p in self.folder.iterdir():
            if p.name in OWN_NAMES:
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        # Only old files from here on: a kill while they move back leaves a state that
        # `recover` completes without deleting anything.
        self.aside.rename(self.moving)
        _move_back(self.moving, self.folder)
        self.names = []


def _move_back(moving: Path, folder: Path) -> list[str]:
    names = sorted(p.name for p in moving.iterdir())
    for name in names:
        if (folder / name).exists() or (folder / name).is_symlink():
            raise RunDirError(
                f"{folder}: cannot move {moving / name} back, {folder / name} exists. Move "
                f"the files of {moving}/ back by hand (they are the old run), then try again.")
        (moving / name).rename(folder / name)
    moving.rmdir()
    return names


def recover(folder: Path) -> list[str]:
    """Moves back an old run that a killed ``--overwrite`` left aside (the caller holds
    the folder's lock) and returns its entries' names; ``[]`` if there is none. The
    half-started new run's files are deleted: it never earned a checkpoint, or its old
    run would have been deleted."""
    folder = Path(folder)
    moving = folder / MOVING_NAME
    if _aside(moving):  # killed while the old run moved aside or back: nothing new here
        return _move_back(moving, folder)
    old = Replaced(folder)
    if not _aside(old.aside):
        return []
    old.names = sorted(p.name for p in old.aside.iterdir())
    names = list(old.names)
    old.restore()
    return names


def _aside(path: Path) -> bool:
    """Whether ``path`` (``.pinnkit-replaced`` or ``-replacing``) is a folder pinnkit moved
    an old run into; anything else under that name is refused, never followed: a link
    would make `recover` move another folder's files in."""
    if not (path.is_symlink() or path.exists()):
        return False
    if path.is_symlink() or not path.is_dir():
        raise RunDirError(
            f"{path} is {'a link' if path.is_symlink() else 'not a folder'}: pinnkit keeps an old "
            "run there while --overwrite replaces it, and never follows or deletes such an "
            "entry. Remove it (or move it out of the run folder) and run the command again.")
    return True


def stranded(folder: Path) -> str | None:
    """A paragraph naming an old run that ``--overwrite`` moved aside in ``folder`` (a
    replacement in progress, or one that was killed), for the commands that only read;
    ``None`` if there is none. Takes no lock and changes nothing."""
    folder = Path(folder)
    aside = next((folder / n for n in (ASIDE_NAME, MOVING_NAME) if _aside(folder / n)), None)
    if aside is None:
        return None
    if (who := writer(folder)) is not None:
        return (f"{folder} is being replaced (--overwrite) by {_name(who)}: its old run is in "
                f"{aside}/ until the new run earns its first checkpoint. Wait for that, or for "
                "the run to end, and try again.")
    return (f"{folder} holds the start of a new run whose `--overwrite` was killed before its "
            f"first checkpoint; the old run it replaced is intact (in {aside}/). Any `pinnkit "
            f"train ... --out {folder}` moves it back first: `pinnkit train --out {folder} "
            "--resume` to keep and continue the old run, or `pinnkit train CONFIG --out "
            f"{folder} --overwrite` to replace it again.")


def writer(folder: Path) -> dict | None:
    """The holder of ``folder``'s lock (host, pid) if a live process holds it, else
    ``None``; probes with a shared lock, released at once, and writes nothing."""
    try:
        # O_NONBLOCK: a FIFO under the lock's name must not hang a reader
        fd = os.open(Path(folder) / LOCK_NAME, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd) or {"host": "an unknown host", "pid": "?"}
        except OSError as e:  # no flock here: trust a named live process of this host
            info = _holder(fd) if e.errno in _NO_FLOCK else None
            if info and (info["host"] != socket.gethostname() or _alive(int(info["pid"]))):
                return info
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def earned_checkpoint(folder: Path) -> bool:
    """True once a checkpoint past step 0 exists (written atomically: a final name means a
    complete file), in ``checkpoints/`` or a window's. While a new run trains, only a
    scheduled checkpoint (or a finished window's last) can be one: the unscheduled ones,
    of a run that stops, are written after training."""
    dirs = [folder / "checkpoints", *sorted((folder / "windows").glob("w*/checkpoints"))]
    return any(p.name != "step_00000000.eqx" for d in dirs if d.is_dir() for p in d.glob("step_*.eqx"))


def remove_temp_files(folder: Path) -> list[tuple[Path, int]]:
    """Deletes the temporary files that writers killed mid-write left in a run folder (the
    caller holds its lock, so no writer of this folder is running) and returns each with
    its size. Only names of pinnkit's own pattern (`checkpoint.TEMP_NAME`) in the folders
    pinnkit writes to; no other file is touched."""
    from ..train.checkpoint import TEMP_NAME

    folder = Path(folder)
    windows = [] if (folder / "windows").is_symlink() else [
        *sorted((folder / "windows").glob("w*")), *sorted((folder / "windows").glob("w*/checkpoints"))]
    dirs = [folder, folder / "checkpoints", *windows]
    removed = []
    for d in dirs:
        if not d.is_dir() or d.is_symlink():
            continue
        for p in d.iterdir():
            if TEMP_NAME.match(p.name) and p.is_file() and not p.is_symlink():
                size = p.stat().st_size
                p.unlink(missing_ok=True)
                removed.append((p, size))
    return removed


def check_parent(out: Path) -> None:
    """Refuses an output path whose nearest existing parent is a file (nothing under it
    can be written, for root too), before any work."""
    for parent in Path(out).parents:
        if parent.exists():
            if not parent.is_dir():
                raise RunDirError(f"--out {out}: {parent} is a file, not a folder; choose another --out")
            return


def restored_message(res, out: Path) -> str:
    """The message of a new run deleted and the old one put back (`Replaced.restore`);
    ``res``: the new run's `pinnkit.train.loop.FitResult`."""
    from ..train.records import result_message
    # RESULTS' messages read "what happened; what was kept. What to do": the middle part
    # is not true of a run that was deleted, so only the first and last are quoted.
    what, _, rest = result_message(res.result, res.detail).partition(";")
    advice = rest.partition(". ")[2] if res.result.failed else ""
    return (f"--overwrite kept the old run: the new one stopped at step {res.step} ({what}) "
            f"before it earned a checkpoint, so it was deleted and {out} holds the old run "
            "again, unchanged. A new run replaces the old one once it writes a scheduled "
            "checkpoint (checkpoint.every) or ends successful, converged, early stopped or at its "
            "time limit past step 0." + (f" {advice[0].upper()}{advice[1:]}." if advice else ""))


def earned(res) -> bool:
    """Whether a new run's last checkpoint replaces an old run (`train_to_dir`): it ended
    by its own config's rule, past step 0. A stop (diverged, non-finite, a signal) before
    the first scheduled checkpoint does not."""
    from ..train.loop import RESULTS

    return res.step > 0 and res.result in (RESULTS.successful, RESULTS.converged, RESULTS.max_time,
                                           RESULTS.early_stopped)


def warn_temp_files_removed(out: Path) -> None:
    """`remove_temp_files`, and one warning naming what it deleted."""
    removed = remove_temp_files(out)
    if removed:
        mib = sum(n for _, n in removed) / 2**20
        warnings.warn(
            f"deleted {len(removed)} temporary file(s) ({mib:.1f} MiB: "
            f"{', '.join(str(p.relative_to(out)) for p, _ in removed[:3])}"
            f"{', ...' if len(removed) > 3 else ''}) left in {out} by a write that was killed",
            RunFolderWarning, stacklevel=3)
