"""Moved to `pinnkit.gridio.gridded` (below run and plot); this path stays for one release."""

from ..gridio.gridded import Gridded as Gridded
from ..gridio.gridded import check_spec as check_spec
from ..gridio.gridded import grid_of as grid_of
