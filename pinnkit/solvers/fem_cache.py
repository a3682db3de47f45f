"""Cached finite-element solutions: one ``.npz`` per content hash of the inputs.

A file holds the solution's coefficient vector and a few figures of the solve
(``meta``, JSON). The mesh is not stored: it is regenerated from the geometry (Netgen
meshes deterministically, in well under the solve's time), and a stored vector whose
length differs from the regenerated space's is ignored, so a changed mesher can never
pair a vector with the wrong mesh. Files are written to a temporary name and renamed,
so a killed run leaves no half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import PinnkitError

FORMAT = 1  # bump when the meaning of a stored vector changes


class FemCacheError(PinnkitError, OSError):
    """The cache folder cannot be used (a file in its place, no permission)."""


def digest(*parts) -> str:
    """The sha256 (first 20 hex digits) of JSON-able ``parts`` and the format version."""
    text = json.dumps([FORMAT, *parts], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def default_folder() -> Path:
    """``$XDG_CACHE_HOME/pinnkit/fem``, else ``~/.cache/pinnkit/fem``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pinnkit" / "fem"


def path_for(cache, kind: str, key: str) -> Path | None:
    """The file for ``key``: ``cache`` is True (the default folder), False/None (no
    cache) or a folder."""
    if cache is False or cache is None:
        return None
    folder = default_folder() if cache is True else Path(cache).expanduser()
    return folder / f"{kind}_{key}.npz"


def load(path: Path | None, size: int) -> tuple[np.ndarray, dict] | None:
    """``(vector, meta)`` stored at ``path`` if it exists, is readable and has ``size``
    entries; otherwise None (the solution is recomputed and the entry rewritten)."""
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            vec, meta = np.asarray(f["vec"], np.float64), json.loads(str(f["meta"]))
    except (OSError, ValueError, KeyError):  # damaged or foreign: recompute
        return None
    if vec.shape != (size,) or not np.all(np.isfinite(vec)):
        return None
    return vec, meta


def store(path: Path, vec: np.ndarray, meta: dict) -> None:
    """Write ``vec`` and ``meta`` to ``path`` atomically (temporary file, then rename)."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=folder)
    except OSError as e:
        raise FemCacheError(
            f"cannot write the finite-element cache folder {folder} ({e.strerror or e}); give "
            "a writable folder with cache=PATH, or cache=False to solve without caching."
        ) from None
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, vec=np.asarray(vec, np.float64), meta=np.array(json.dumps(meta)))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
