"""Strict JSON for summary.json and metrics.jsonl.

JSON has no NaN or infinity (Python's ``json`` writes ``NaN``/``Infinity``, which strict
parsers reject). A non-finite number is written as ``null`` and named, with its value, in
the record's ``"nonfinite"`` mapping (dotted paths), e.g.
``{"rel_l2": {"u": null}, "nonfinite": {"rel_l2.u": "nan"}}``.
"""

from __future__ import annotations

import json
import math

import numpy as np


def strict(record: dict) -> dict:
    """``record`` with non-finite floats replaced by ``None`` and listed under
    ``"nonfinite"`` (only when there are any)."""
    found: dict[str, str] = {}

    def clean(x, path):
        if isinstance(x, dict):
            return {k: clean(v, f"{path}.{k}" if path else str(k)) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v, f"{path}.{i}") for i, v in enumerate(x)]
        if isinstance(x, np.generic):
            x = x.item()
        if isinstance(x, float) and not math.isfinite(x):
            found[path] = "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
            return None
        return x

    out = clean(record, "")
    if found:
        out["nonfinite"] = {**out.get("nonfinite", {}), **found}
    return out


def dumps(record: dict, **kw) -> str:
    """``json.dumps`` of `strict` ``(record)``; never writes NaN or Infinity."""
    return json.dumps(strict(record), allow_nan=False, **kw)


def loads(text: str):
    """A record written by `dumps`, its ``"nonfinite"`` values restored as floats (the
    flag is kept)."""
    record = json.loads(text)
    if isinstance(record, dict):
        for path, value in (record.get("nonfinite") or {}).items():
            *parents, last = path.split(".")
            node = record
            try:
                for k in parents:
                    node = node[int(k)] if isinstance(node, list) else node[k]
                if isinstance(node, list):
                    node[int(last)] = float(value)
                else:
                    node[last] = float(value)
            except (KeyError, IndexError, ValueError, TypeError):
                continue  # a hand-edited record: leave it
    return record


def metric_scalars(metrics, prefix: str = "") -> dict[str, float]:
    """The finite numbers of a problem's ``metrics`` record (nested mappings as dotted
    names; strings, lists and nulls left out)."""
    out: dict[str, float] = {}
    if isinstance(metrics, dict):
        for k, v in metrics.items():
            out.update(metric_scalars(v, f"{prefix}{k}."))
    elif isinstance(metrics, int | float) and not isinstance(metrics, bool) and math.isfinite(metrics):
        out[prefix[:-1]] = float(metrics)
    return out
