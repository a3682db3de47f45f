"""The rows a Taylor jet carries, by name.

A row is a Taylor coefficient of the same shape as the quantity it belongs to; which
one is told by its `Row`: a `RowKind` and the coordinate axes it involves.
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class RowKind(enum.StrEnum):
    """What a row holds (the string values are short labels for printing).

    - `PARTIAL`: $\\partial_\\alpha z$ for the sorted multi-index ``axes`` $= \\alpha$
      (one axis: a first-order row, stored in the jet's first-order block);
    - `LAPLACIAN`: $\\Delta_S z = \\sum_{a \\in S} \\partial_a^2 z$ over ``axes`` $= S$;
    - `GRAD_LAPLACIAN`: $\\partial_c \\Delta_S z$, ``axes`` $= (c, *S)$;
    - `BILAPLACIAN`: $\\Delta_S^2 z$ over ``axes`` $= S$ (the last two are the collapsed
      rows of a bi-Laplacian, `pinnkit.diffops._bilaplacian`).
    """

    PARTIAL = "p"
    LAPLACIAN = "l"
    GRAD_LAPLACIAN = "gl"
    BILAPLACIAN = "b"


class Row(NamedTuple):
    """One row label: its kind and the axes it involves."""

    kind: RowKind
    axes: tuple[int, ...]

    @property
    def is_first_order(self) -> bool:
        return self.kind is RowKind.PARTIAL and len(self.axes) == 1


def partial_row(*axes: int) -> Row:
    """The row $\\partial_\\alpha$ of the multi-index ``axes`` (sorted here)."""
    return Row(RowKind.PARTIAL, tuple(sorted(axes)))
