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
renames inside the folder, into ``RUN/.pinnkit-replaced/``; they are deleted once the new
run has written its first checkpoint, and moved back if it fails before that.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
from pathlib import Path

from ..errors import RunDirError

LOCK_NAME = ".pinnkit.lock"
ASIDE_NAME = ".pinnkit-replaced"
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
        self.names: list[str] = []

    def move_aside(self) -> None:
        if self.aside.exists():  # left by a replacement that was killed
            if has_checkpoint(self.folder):  # ... after its first checkpoint: the new run won
                shutil.rmtree(self.aside)
            else:  # ... before it: the old run is still the one to keep
                self.names = [p.name for p in self.aside.iterdir()]
                self.restore()
        self.aside.mkdir()
        for p in sorted(self.folder.iterdir()):
            if p.name in (LOCK_NAME, ASIDE_NAME):
                continue
            p.rename(self.aside / p.name)
            self.names.append(p.name)

    def drop(self) -> None:
        """The new run has a checkpoint: the old one goes."""
        if self.aside.exists():
            shutil.rmtree(self.aside)
        self.names = []

    def restore(self) -> None:
        """The new run failed before its first checkpoint: its files go, the old ones
        come back unchanged."""
        if not self.aside.exists():
            return
        for p in self.folder.iterdir():
            if p.name in (LOCK_NAME, ASIDE_NAME):
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        for name in self.names:
            (self.aside / name).rename(self.folder / name)
        self.aside.rmdir()
        self.names = []


def has_checkpoint(folder: Path) -> bool:
    """True once a checkpoint file exists (written atomically: a final name means a
    complete file), in ``checkpoints/`` or a window's."""
    dirs = [folder / "checkpoints", *sorted((folder / "windows").glob("w*/checkpoints"))]
    return any(any(d.glob("step_*.eqx")) for d in dirs if d.is_dir())
