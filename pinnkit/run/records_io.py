"""Reading a run folder's records: ``summary.json`` and ``metrics.jsonl``, tolerant of
damage (a damaged summary reads as missing, damaged log lines are skipped with a word),
so that no evaluation of a run stops on its log."""

from __future__ import annotations

import warnings
from pathlib import Path

from .. import _jsonsafe as jsonsafe


def read_summary(out: Path) -> dict | None:
    """summary.json's record, or None when it is missing or damaged (not a JSON object)."""
    path = Path(out) / "summary.json"
    try:  # is_file: a FIFO or device is not read
        got = jsonsafe.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError, RecursionError):
        return None
    return got if isinstance(got, dict) else None


def read_history(run_dir: Path) -> list[dict]:
    """metrics.jsonl's records; damaged lines (not a JSON object) are skipped with one
    warning, so that a damaged log never stops an evaluation."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    out, bad = [], []
    try:
        lines = path.read_text().splitlines()
    except (OSError, ValueError) as e:
        warnings.warn(f"cannot read {path} ({e}); the loss history is left out", stacklevel=2)
        return []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = jsonsafe.loads(line)
        except (ValueError, RecursionError):
            rec = None
        if isinstance(rec, dict) and isinstance(rec.get("step"), int):
            out.append(rec)
        else:
            bad.append(i)
    if bad:
        warnings.warn(f"{path}: {len(bad)} damaged line(s) skipped (first: line {bad[0]})", stacklevel=2)
    return out
