"""Checkpoints: one file per save, a JSON header line followed by Equinox leaves.

``checkpoints/step_00001000.eqx``::

    {"format": 1, "step": 1000, "phase": 0, "payload_sha256": "...", ...}\\n
    <eqx.tree_serialise_leaves bytes of (params, opt_state, extra)>

A model-only checkpoint (header ``"contents": "model"``, written by `pinnkit slim`) holds
``(params, extra)`` alone: it evaluates, plots and predicts, and refuses to resume.

The header is also the run's manifest: step, optimiser phase, device and process
counts, hashes of the config, package versions, time (see `manifest`).

Writes are atomic (temporary file in the same folder, fsync, rename), so a crash or a
full disk never leaves a half-written checkpoint under a real name; the payload hash
detects a file truncated by other means, and loading skips it with a warning.

Parameters and optimiser state are replicated on every device, so a checkpoint is a
plain host copy: written once (by process 0) and restorable onto any number of devices
or processes, which only changes where the arrays are placed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import re
import stat
import time
import warnings
from importlib import metadata
from pathlib import Path

import equinox as eqx

from ..errors import RunDirError
from ..parallel.distributed import to_host

FORMAT = 1
_NAME = re.compile(r"^step_(\d{8})\.eqx$")


_PACKAGES = ("pinnkit", "jax", "jaxlib", "equinox", "optax", "diffrax", "numpy")


def package_versions() -> dict[str, str]:
    """Python and package versions, recorded in run directories and checkpoints."""
    out = {"python": platform.python_version()}
    for p in _PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


def config_hash(data: dict) -> str:
    """sha256 of a config dict (key order independent)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


MODEL_SECTIONS = ("problem", "network", "numerics")

# Keys added to the model sections after checkpoints were first written, with the value
# that means "as before" (new options default to the old behaviour). A checkpoint whose
# hash is that of the config without them is the same model, so it still resumes.
ADDED_MODEL_KEYS: dict[tuple[str, str], object] = {
    ("network", "singular"): [],  # corner enrichment (pinnkit.geometry.singular)
    ("network", "squares"): False,  # squared inputs (pinnkit.nn.embeddings.SquareFeatures)
    ("network", "allow_exact_lift"): False,  # an exact solution's lift, opted in (run/exactlift.py)
}


def _model_sections(config: dict) -> dict:
    return {k: config[k] for k in MODEL_SECTIONS if k in config}


def model_hashes(config: dict) -> set[str]:
    """The ``model_sha256`` values a checkpoint of the same model may carry: that of
    ``config``'s model sections, and, for each earlier version of the schema, that of the
    same sections without the `ADDED_MODEL_KEYS` added since (listed oldest first), when
    they hold their neutral value (checkpoints written before them)."""
    model = _model_sections(config)
    hashes = {config_hash(model)}
    added = list(ADDED_MODEL_KEYS.items())
    for first in range(len(added)):  # a checkpoint that knew the keys before added[first]
        older = {k: dict(v) if isinstance(v, dict) else v for k, v in model.items()}
        for (section, key), neutral in added[first:]:
            if isinstance(older.get(section), dict) and older[section].get(key, neutral) == neutral:
                older[section].pop(key, None)
        hashes.add(config_hash(older))
    return hashes


def manifest(config: dict, *, phase: int, n_devices: int, n_processes: int, seed: int) -> dict:
    """Header fields describing where a checkpoint comes from.

    ``model_sha256`` hashes the sections that fix the parameters' structure and meaning
    (problem, network, numerics); a resume checks it. ``config_sha256`` hashes all.
    """
    return {
        "phase": phase,
        "n_devices": n_devices,
        "n_processes": n_processes,
        "seed": seed,
        "config_sha256": config_hash(config),
        "model_sha256": config_hash(_model_sections(config)),
        "versions": package_versions(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def checkpoint_path(folder: Path, step: int) -> Path:
    return Path(folder) / f"step_{step:08d}.eqx"


# The temporary files of `atomic_write_bytes` (``.step_00000040.eqx.tmp1234``): a writer
# killed mid-write leaves one, which the next ``pinnkit train`` on the folder deletes
# (`pinnkit.run.folder.remove_temp_files`, by exactly this pattern).
TEMP_NAME = re.compile(r"^\.(step_\d{8}\.eqx|config\.yaml|summary\.json|metrics\.jsonl|timing\.json)"
                       r"\.tmp\d+$")


def temp_path(path: Path, pid: int | None = None) -> Path:
    """The temporary file that process ``pid`` (default: this one) writes ``path`` through."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp{os.getpid() if pid is None else pid}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Writes ``data`` to ``path`` atomically; on failure the old file is untouched."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise RunDirError(
            f"cannot write {path}: {e.strerror or e}. Free disk space or choose another "
            "--out folder; earlier checkpoints and files are intact."
        ) from None


def save(folder: Path, step: int, tree, header: dict, keep: int | None = None) -> Path:
    """Saves ``tree`` (arrays; replicated, so read from a local device without any
    communication) as step ``step``. Call it on one process only."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunDirError(f"cannot create {folder}: {e.strerror or e}") from None
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, to_host(tree))
    payload = buf.getvalue()
    head = {"format": FORMAT, "step": int(step), **header}
    head["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    path = checkpoint_path(folder, step)
    atomic_write_bytes(path, json.dumps(head).encode() + b"\n" + payload)
    if keep is not None:
        for old in list_checkpoints(folder)[:-keep]:
            old.unlink(missing_ok=True)
    return path


def list_checkpoints(folder: Path) -> list[Path]:
    """Checkpoint files in ``folder``, oldest first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


# The header fields pinnkit reads, with their JSON types; the first four are required.
# Unknown fields are kept (a newer pinnkit may add some).
_REQUIRED = ("format", "step", "phase", "payload_sha256")
_FIELDS = {"format": int, "step": int, "phase": int, "payload_sha256": str, "contents": str,
           "model_sha256": str, "config_sha256": str, "n_devices": int, "n_processes": int,
           "seed": int, "versions": dict, "time": str}
_JSON_TYPES = {int: "an integer", str: "a string", dict: "an object"}


def _json_kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(value), "null")


def check_header(head, name: str | None = None) -> dict:
    """``head`` if it is a checkpoint header pinnkit can use, else ``ValueError`` saying
    which field is missing or of which wrong type. Every reader of a checkpoint goes through
    here (`read_header`), so a damaged header is one message in every command. ``name``
    (the file's name, ``step_XXXXXXXX.eqx``) must agree with the header's step."""
    if not isinstance(head, dict):
        raise ValueError(f"the header is {_json_kind(head)}, not a JSON object")
    for key in _REQUIRED:
        if key not in head:
            raise ValueError(f"the header has no {key!r} field")
    for key, kind in _FIELDS.items():
        value = head.get(key)
        if key in head and (not isinstance(value, kind) or isinstance(value, bool)):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise ValueError(f"header field {key!r} is {_json_kind(value)} ({shown}), not "
                             f"{_JSON_TYPES[kind]}")
    if head["format"] != FORMAT:
        raise ValueError(f"unknown checkpoint format {head['format']!r}")
    for key in ("step", "phase", "n_devices", "n_processes", "seed"):
        if key in head and head[key] < 0:
            raise ValueError(f"header field {key!r} is {head[key]}, not an integer >= 0")
    if name is not None and (m := _NAME.match(name)) and int(m.group(1)) != head["step"]:
        raise ValueError(f"the header's step {head['step']} is not the file name's {int(m.group(1))}")
    return head


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file ``path``: a FIFO, device or folder is refused without
    blocking on it, and a link is followed only to a file in the same folder (a link out of
    a run folder is not part of the run)."""
    path = Path(path)
    if path.is_symlink() and path.resolve().parent != path.parent.resolve():
        raise ValueError(f"it is a link to {path.resolve()}, outside its folder")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError("it is not a regular file (a FIFO, device or folder)")
        return f.read()


def read_header(path: Path) -> tuple[dict, bytes]:
    """Header and payload of a checkpoint; raises ``ValueError`` if it is damaged (not a
    regular file in its folder, no header line, a header field missing or of the wrong
    type (`check_header`), or a payload that does not match its hash)."""
    raw = _read_regular(path)
    line, sep, payload = raw.partition(b"\n")
    if not sep:
        raise ValueError("no header line")
    try:
        head = json.loads(line)
    except RecursionError:  # `[[[[...` a hundred thousand deep
        raise ValueError("the header is nested too deeply to be one") from None
    head = check_header(head, Path(path).name)
    if hashlib.sha256(payload).hexdigest() != head["payload_sha256"]:
        raise ValueError("payload hash mismatch (truncated or corrupted file)")
    return head, payload


def load(path: Path, template) -> tuple[dict, object]:
    """Loads the tree saved in ``path`` into the structure of ``template``. A checkpoint
    whose leaves do not fit ``template`` (another network or optimiser layout than the
    run's config builds) raises `RunDirError` naming the file."""
    head, payload = read_header(path)
    try:
        return head, eqx.tree_deserialise_leaves(io.BytesIO(payload), template)
    except Exception as e:  # eqx raises TreePathError / ValueError / struct errors here
        raise RunDirError(
            f"{path}: the checkpoint does not fit the layout that the run's config builds "
            f"({type(e).__name__}: {e}). It was written by another config (network size, "
            "optimiser phases or their options) or another pinnkit version; load it with "
            "the config.yaml and pinnkit version that wrote it, or train anew with --overwrite."
        ) from None


MODEL_ONLY = "model"
"""Header ``contents`` of a checkpoint that holds the model alone, ``(params, extra)``
without the optimiser state (`pinnkit slim`): loadable for evaluation, not resumable."""


PARAMS_ONLY = "params"
"""Header ``contents`` of a checkpoint that holds the parameters alone (a run's ``best/``,
`pinnkit.run.best`): loadable for evaluation, not resumable."""


def is_model_only(head: dict) -> bool:
    """Whether the checkpoint with header ``head`` lacks the optimiser state."""
    return head.get("contents") in (MODEL_ONLY, PARAMS_ONLY)


def load_model(path: Path, head: dict, params, phases, extra):
    """``(params, extra)`` of checkpoint ``path`` (header ``head``), full or model-only:
    ``params`` and ``extra`` are the templates; a full checkpoint's optimiser state is
    read with the template of the phase its header names (``phases[head["phase"]]``, the
    last one past the end) and dropped."""
    if is_model_only(head):
        return load(path, (params, extra))[1]
    phase = phases[min(int(head["phase"]), len(phases) - 1)]
    tree = load(path, (params, phase.init(params), extra))[1]
    return tree[0], tree[2]


def _scan(folder: Path) -> tuple[tuple[Path, dict] | None, list[str]]:
    """The newest undamaged checkpoint in ``folder`` (or None), and why each newer one was
    skipped (``"NAME: reason"``). A ``folder`` that is a link out of its run folder is
    refused (`RunDirError`): its files are not the run's."""
    folder = Path(folder)
    if folder.is_symlink() and folder.resolve().parent != folder.parent.resolve():
        raise RunDirError(
            f"{folder} is a link to {folder.resolve()}, outside the run folder {folder.parent}: "
            "pinnkit reads a run's checkpoints only from its own folder. Replace the link by "
            "a copy of the folder it points to, then run the command again."
        )
    skipped = []
    for path in reversed(list_checkpoints(folder)):
        try:
            head, _ = read_header(path)
        except (OSError, ValueError) as e:
            skipped.append(f"{path.name}: {e.strerror if isinstance(e, OSError) and e.strerror else e}")
            continue
        return (path, head), skipped
    return None, skipped


def _warn_skipped(folder: Path, skipped: list[str]) -> None:
    for reason in skipped:
        warnings.warn(f"skipping damaged checkpoint {Path(folder) / reason}", stacklevel=3)


def latest_valid(folder: Path) -> tuple[Path, dict] | None:
    """The newest undamaged checkpoint and its header; damaged ones are skipped with a
    warning."""
    found, skipped = _scan(folder)
    _warn_skipped(folder, skipped)
    return found


def newest_valid(folder: Path, missing: str | None = None) -> tuple[Path, dict] | None:
    """Like `latest_valid`, but a folder whose checkpoints are all damaged raises
    `RunDirError`, one paragraph naming each file's damage (not a warning per file and
    then "no checkpoint"); a folder without any checkpoint raises ``missing`` (a
    `RunDirError` message), or returns None when ``missing`` is None."""
    found, skipped = _scan(folder)
    if found is None and skipped:
        shown = "; ".join(skipped[:3]) + (f"; and {len(skipped) - 3} more" if len(skipped) > 3 else "")
        raise RunDirError(
            f"{folder}: every checkpoint is damaged ({shown}), so there is no model to load. "
            "Restore the checkpoints/ files from a copy of the run, or train anew into this "
            "folder with --overwrite (or into another --out)."
        )
    if found is None and missing is not None:
        raise RunDirError(missing)
    _warn_skipped(folder, skipped)
    return found
