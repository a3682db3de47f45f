"""Many runs side by side: the records behind ``pinnkit runs DIR...`` and ``pinnkit
compare RUN...`` (`pinnkit.cli.runs`), read from the run folders alone (config.yaml,
summary.json, metrics.jsonl: no JAX, no checkpoint).

- `find_runs`: the run folders under some folders (a folder holding ``config.yaml`` is
  a run and is not searched further), with a one-line note per folder that looks like a
  damaged run (run files without a readable ``config.yaml``, a damaged ``summary.json``);
- `read_run`: one run folder as a `RunRecord`, or a `RunDirError` naming what is wrong;
- `changed_keys`: the dotted config keys whose values differ between the runs;
- `table`: one row per run (path, problem, changed keys, steps, wall time, final errors,
  outcome) as text columns, `format_table` aligns them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._jsonsafe import metric_scalars as metric_scalars
from ..errors import RunDirError
from . import yamlsafe
from .records_io import read_history, read_summary

# Files only a run folder holds: a folder with one of them but no readable config.yaml is
# a damaged run (noted), a folder with none is just a folder (searched silently).
RUN_FILES = ("summary.json", "metrics.jsonl", "checkpoints")
# config.yaml's bookkeeping, not settings: never a "changed key"
_META = ("versions", "source_dir")


@dataclass
class RunRecord:
    """One run folder as `read_run` reads it.

    **Fields:** ``path``; ``config``: config.yaml flattened to dotted keys
    (``optim.phases.0.lr``); ``summary``: summary.json's record, None for a run that has
    not finished (or was killed); ``history``: metrics.jsonl's records."""

    path: Path
    config: dict[str, object]
    summary: dict | None
    history: list[dict] = field(default_factory=list)

    @property
    def problem(self) -> str:
        return str((self.summary or {}).get("problem") or self.config.get("problem.name", "?"))


def flatten(tree, prefix: str = "") -> dict[str, object]:
    """Nested mappings and lists as ``{"a.b.0.c": leaf}`` (an empty mapping or list is a
    leaf, so that ``{}`` and a filled one differ)."""
    if isinstance(tree, dict) and tree:
        items = ((str(k), v) for k, v in tree.items())
    elif isinstance(tree, list) and tree:
        items = ((str(i), v) for i, v in enumerate(tree))
    else:
        return {prefix: tree}
    out: dict[str, object] = {}
    for k, v in items:
        out.update(flatten(v, f"{prefix}.{k}" if prefix else k))
    return out


def read_run(path: str | Path) -> RunRecord:
    """Reads run folder ``path``. Raises `RunDirError` (one sentence naming the file)
    when it is no run folder (no ``config.yaml``), or its config or summary is damaged."""
    path = Path(path)
    cfg_path = path / "config.yaml"
    if not path.is_dir():
        raise RunDirError(f"{path} is not a folder")
    if not cfg_path.is_file():
        raise RunDirError(f"{path} is not a pinnkit run folder: config.yaml is missing")
    try:
        data = yamlsafe.loads(yamlsafe.read_text(cfg_path, "run config"), str(cfg_path))
    except Exception as e:  # noqa: BLE001 - any unreadable config is one note, never a traceback
        raise RunDirError(f"{cfg_path} cannot be read: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict) or not isinstance(data.get("problem"), dict):
        raise RunDirError(f"{cfg_path} is damaged: it is not the mapping of sections pinnkit writes")
    summary = read_summary(path)
    if summary is None and (path / "summary.json").exists():
        raise RunDirError(f"{path / 'summary.json'} is damaged (not a JSON object)")
    config = flatten({k: v for k, v in data.items() if k not in _META})
    return RunRecord(path, config, summary, read_history(path))


def find_runs(folders: Iterable[str | Path]) -> tuple[list[RunRecord], list[str]]:
    """The runs under ``folders`` (each folder itself if it is a run, else searched
    recursively, in name order) and the notes on what was skipped: a folder that does
    not exist, a damaged run (`read_run`'s message), a folder with no run under it.
    Symbolic links to folders are not followed (no loops)."""
    runs: list[RunRecord] = []
    notes: list[str] = []
    seen: set[Path] = set()
    for top in map(Path, folders):
        if not top.is_dir():
            notes.append(f"{top}: no such folder")
            continue
        before = (len(runs), len(notes))
        for dirpath, dirnames, filenames in os.walk(top):
            here = Path(dirpath)
            names = set(dirnames) | set(filenames)
            dirnames[:] = sorted(d for d in dirnames if not (here / d).is_symlink())
            if "config.yaml" not in names and not any(n in names for n in RUN_FILES):
                continue
            if "config.yaml" not in names and here.name == "checkpoints":
                continue
            dirnames[:] = []  # a run's own subfolders (checkpoints, plots, windows) are its own
            key = here.resolve()
            if key in seen:
                continue
            seen.add(key)
            try:
                runs.append(read_run(here))
            except RunDirError as e:
                notes.append(f"skipped {e}")
        if (len(runs), len(notes)) == before:
            notes.append(f"{top}: no run folders (none holds a config.yaml)")
    return runs, notes


def changed_keys(configs: Sequence[dict[str, object]]) -> list[str]:
    """The dotted keys whose value is not the same in every config (a key missing from
    some counts as changed), in the configs' order. Empty for fewer than two."""
    if len(configs) < 2:
        return []
    keys = list(dict.fromkeys(k for c in configs for k in c))
    return [k for k in keys if len({repr(c[k]) if k in c else "<missing>" for c in configs}) > 1]


def _num(v) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        return str(v)
    return f"{v:.3g}" if 1e-3 <= abs(v) < 1e4 or v == 0 else f"{v:.2e}"


# A run's "changed" cell: at most this many keys (then "+N keys"), values cut to this length.
MAX_KEYS, MAX_VALUE = 6, 24


def _compact(key: str, value) -> str:
    text = "-" if value is None else _num(value)
    return f"{key}={text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + '…'}"


def changed_text(config: dict[str, object], keys: Sequence[str]) -> str:
    """``key=value`` for the changed ``keys`` this run has (a key only other runs have is
    left out: another problem's parameters), at most `MAX_KEYS`; ``-`` for none."""
    own = [_compact(k, config[k]) for k in keys if k in config]
    if len(own) > MAX_KEYS:
        own = [*own[:MAX_KEYS], f"(+{len(own) - MAX_KEYS} keys)"]
    return " ".join(own) or "-"


def wall_text(seconds) -> str:
    """``6.0 s``, ``2 min 5 s``, ``1 h 3 min``."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not math.isfinite(seconds):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s} s" if m < 60 else f"{m // 60} h {m % 60} min"


def errors_text(summary: dict | None, limit: int = 4) -> str:
    """The final errors: ``rel_l2`` per field (``u 2.7e-03``), else the problem's own
    metrics (``c_D 5.57``), at most ``limit`` of them."""
    if not summary:
        return "-"
    rel = {k: v for k, v in (summary.get("rel_l2") or {}).items()}
    items = list(rel.items()) if rel else list(metric_scalars(summary.get("metrics")).items())
    if not items:
        return "-"
    more = f" (+{len(items) - limit})" if len(items) > limit else ""
    def one(v):  # errors span decades: always mantissa and exponent
        if v is None:
            return "nan"
        return f"{v:.2e}" if rel and isinstance(v, int | float) else _num(v)

    return ", ".join(f"{k} {one(v)}" for k, v in items[:limit]) + more


def _steps(rec: RunRecord) -> str:
    s = rec.summary
    if s and isinstance(s.get("steps"), int):
        total = s.get("total_steps")
        return f"{s['steps']}/{total}" if isinstance(total, int) else str(s["steps"])
    last = max((h["step"] for h in rec.history), default=None)
    return "-" if last is None else f"{last + 1}?"


def _outcome(rec: RunRecord) -> str:
    if rec.summary is None:
        return "unfinished (no summary.json)"
    out = str(rec.summary.get("outcome", "?"))
    if rec.summary.get("exact_in_training"):
        out += " (exact lift)"
    return out


def table(runs: Sequence[RunRecord], root: Path | None = None) -> tuple[list[str], list[list[str]]]:
    """``(header, rows)``: per run its path (relative to ``root`` when under it), problem,
    changed config keys (`changed_text`), steps (``done/total``; ``N?``
    from the log of an unfinished run), wall time, final errors and outcome."""
    keys = changed_keys([r.config for r in runs])
    header = ["run", "problem", "changed", "steps", "wall", "errors", "outcome"]
    rows = []
    for r in runs:
        path = r.path
        if root is not None:
            try:
                path = r.path.resolve().relative_to(root.resolve())
            except ValueError:
                pass
        changed = changed_text(r.config, keys)
        rows.append([str(path), r.problem, changed, _steps(r),
                     wall_text((r.summary or {}).get("wall_s")), errors_text(r.summary), _outcome(r)])
    return header, rows


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart; the last column unpadded."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, *rows]]
    return "\n".join(lines)
