"""Axis and colour-bar labels with units, shared by the field and sphere figures (their
own module, so that `pinnkit.plot.fields` and `pinnkit.plot.sphere` need not import each
other for them).

A problem's ``units`` are UDUNITS strings (what NetCDF files carry). One that begins
with a number, such as the shallow-water geopotential's ``4.05924e+13 m2 day-2`` (the
field is non-dimensional, measured in that multiple of m² day⁻²), is a scale factor, not
a unit a reader can use on an axis: labels show such a field without a unit.
"""

from __future__ import annotations

import re

_PRETTY = {"degC": "°C", "K": "K", "1": ""}
# a UDUNITS unit that starts with a numeric factor ("4.05924e+13 m2 day-2", "100 m")
_SCALED = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?(\s|\*|$)")
_PLURAL = {"day": "days", "year": "years", "hour": "hours", "minute": "minutes", "second": "seconds"}


def unit_text(name: str, units: dict[str, str]) -> str:
    """The unit of ``name`` for a label (``"°C"`` for ``degC``; ``""`` if dimensionless,
    unknown, or a scaled unit such as ``4.05924e+13 m2 day-2``)."""
    u = units.get(name, "")
    if _SCALED.match(u):
        return ""
    return _PRETTY.get(u, u)


def label(name: str, units: dict[str, str]) -> str:
    """``"t (day)"``, ``"T (°C)"``, or the bare name without a (dimensional) unit."""
    u = unit_text(name, units)
    return f"{name} ({u})" if u else name


def when(name: str, value: float, units: dict[str, str]) -> str:
    """``"t = 5 days"``, ``"t = 1 day"``, ``"t = 0.25 s"``, ``"t = 3"``: a coordinate's value
    (3 significant digits) with its unit, a word unit in the plural unless the value is 1."""
    u = unit_text(name, units)
    v = f"{value:.3g}"
    if u in _PLURAL and v != "1":
        u = _PLURAL[u]
    return f"{name} = {v}" + (f" {u}" if u else "")
