"""Classical reference solvers that provide ground truth for the benchmark problems.

- `spectral_ns2d`: pseudo-spectral 2-D incompressible Navier–Stokes on a periodic box
  (vorticity form, 2/3 dealiasing, integrating factor + adaptive Tsit5), the exact
  Taylor–Green vortex (P5) and exact Fourier interpolation of grid fields.
- `burgers`: the exact viscous Burgers solution (P3) by Cole–Hopf and Gauss–Hermite
  quadrature.
- `allen_cahn`: the Allen–Cahn reference (P6) by Fourier spectral ETDRK4.
- `shallow_water`: the shallow-water equations on the sphere, Williamson test 6 (C4),
  by the spectral model dinosaur (the optional ``climate`` extra, imported on first use).
- `fem_ns`, `fem_unsteady` (with `fem_geometry`, `fem_cache`): incompressible flow on a
  2-D pinnkit shape by Taylor–Hood finite elements, steady (Newton) and BDF2, forces by
  the volume formula, cached solutions (the optional ``fem`` extra, NGSolve; import the
  modules themselves: nothing here imports them).

Nothing here changes JAX's configuration; functions that need float64 for their stated
accuracy say so, and the caller enables it (``with jax.enable_x64(True): ...``).
"""

from .allen_cahn import allen_cahn_grid as allen_cahn_grid
from .allen_cahn import allen_cahn_initial_condition as allen_cahn_initial_condition
from .allen_cahn import allen_cahn_reference as allen_cahn_reference
from .allen_cahn import periodic_interpolate as periodic_interpolate
from .allen_cahn import solve_allen_cahn as solve_allen_cahn
from .burgers import BURGERS_NU as BURGERS_NU
from .burgers import burgers_cole_hopf as burgers_cole_hopf
from .burgers import burgers_reference as burgers_reference
from .shallow_water import solve_shallow_water as solve_shallow_water
from .shallow_water import williamson6_initial as williamson6_initial
from .shallow_water import williamson6_reference as williamson6_reference
from .spectral_ns2d import KolmogorovForcing as KolmogorovForcing
from .spectral_ns2d import fourier_interpolate as fourier_interpolate
from .spectral_ns2d import periodic_grid as periodic_grid
from .spectral_ns2d import pressure_from_velocity as pressure_from_velocity
from .spectral_ns2d import primitive_from_vorticity as primitive_from_vorticity
from .spectral_ns2d import solve_vorticity as solve_vorticity
from .spectral_ns2d import taylor_green as taylor_green
from .spectral_ns2d import taylor_green_vorticity as taylor_green_vorticity
from .spectral_ns2d import velocity_from_vorticity as velocity_from_vorticity
from .spectral_ns2d import vorticity_from_velocity as vorticity_from_velocity
