"""Figures: solution/reference/error fields and loss curves, flow figures, sphere maps
(and the NetCDF export of sphere fields)."""

from .fields import write_plots as write_plots
