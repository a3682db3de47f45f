"""Moved to `pinnkit.gridio.writers` (below run and plot); this path stays for one release."""

from ..gridio.writers import to_netcdf as to_netcdf
from ..gridio.writers import write as write
