"""Axis and colour-bar labels with units, shared by the field and sphere figures (their
own module, so that `pinnkit.plot.fields` and `pinnkit.plot.sphere` need not import each
other for them)."""

from __future__ import annotations

_PRETTY = {"degC": "°C", "K": "K", "1": ""}


def unit_text(name: str, units: dict[str, str]) -> str:
    """The unit of ``name`` for a label (``"°C"`` for ``degC``; ``""`` if dimensionless
    or unknown)."""
    u = units.get(name, "")
    return _PRETTY.get(u, u)


def label(name: str, units: dict[str, str]) -> str:
    """``"t (day)"``, ``"T (°C)"``, or the bare name without a (dimensional) unit."""
    u = unit_text(name, units)
    return f"{name} ({u})" if u else name
