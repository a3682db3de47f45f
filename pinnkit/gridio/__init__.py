"""Fields on a grid (`Gridded`, grid specs) and their file writers (CSV, NPZ, NetCDF,
VTK): plain numpy, below the run directory and the figures that both use them."""
