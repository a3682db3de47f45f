"""Geometry: where a problem lives, its named boundary pieces, and how to sample them.

`AbstractDomain` and its two sampling kinds, `AbstractUnitCubeDomain` and
`AbstractRejectionDomain`, `Box`, `Interval`, `SpaceTime` (`domains`), and shapes beyond boxes:
signed-distance primitives, CSG, similarity transforms, triangle meshes, and
approximate distance functions for exact boundary conditions. Every shape is an
`AbstractDomain` (named coordinates, ``interior`` and named boundary pieces with outward
normals), so terms, samplers and problems use it as they use a `Box`; docs/geometry.md
is the guide.
"""

from .base import AbstractAtom as AbstractAtom
from .base import AbstractShape as AbstractShape
from .base import Frame as Frame
from .base import Part as Part
from .config import GeometryError as GeometryError
from .config import build_domain as build_domain
from .csg import Difference as Difference
from .csg import Intersection as Intersection
from .csg import Union as Union
from .csg import difference as difference
from .csg import intersection as intersection
from .csg import union as union
from .distance import DistanceDirichlet as DistanceDirichlet
from .distance import adf as adf
from .distance import signed_adf as signed_adf
from .domains import AbstractDomain as AbstractDomain
from .domains import AbstractRejectionDomain as AbstractRejectionDomain
from .domains import AbstractUnitCubeDomain as AbstractUnitCubeDomain
from .domains import Box as Box
from .domains import Interval as Interval
from .domains import SpaceTime as SpaceTime
from .mesh import TriangleMesh as TriangleMesh
from .primitives2d import Ellipse as Ellipse
from .primitives2d import Polygon as Polygon
from .primitives2d import Rectangle as Rectangle
from .primitives2d import Triangle as Triangle
from .primitives3d import Cuboid as Cuboid
from .primitives3d import Cylinder as Cylinder
from .primitives3d import ExtrudedPolygon as ExtrudedPolygon
from .round import AbstractRound as AbstractRound
from .round import Ball as Ball
from .round import Disk as Disk
from .transforms import Transformed as Transformed
from .transforms import rotate as rotate
from .transforms import scale as scale
from .transforms import translate as translate
