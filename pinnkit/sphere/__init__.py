"""PDEs on the sphere: the `Sphere` domain (Cartesian points, area-uniform sampling,
Gaussian grids and quadrature), the pole-regular `SphereEmbedding`, and tangent-plane
surface operators (`pinnkit.sphere.ops`)."""

from .domain import DAY as DAY
from .domain import EARTH_OMEGA as EARTH_OMEGA
from .domain import EARTH_RADIUS as EARTH_RADIUS
from .domain import GRAVITY as GRAVITY
from .domain import Sphere as Sphere
from .domain import SphereEmbedding as SphereEmbedding
from .domain import area_mean as area_mean
from .domain import gaussian_grid as gaussian_grid
from .domain import lonlat_to_xyz as lonlat_to_xyz
from .domain import williamson_errors as williamson_errors
from .domain import xyz_to_lonlat as xyz_to_lonlat
