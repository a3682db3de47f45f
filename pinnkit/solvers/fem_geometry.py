r"""pinnkit 2-D shapes as Netgen/OpenCASCADE faces, and their triangle meshes.

The finite-element reference (`pinnkit.solvers.fem_ns`) meshes the *same* domain a
pinnkit problem samples: the shape tree (`Rectangle`, `Polygon`/`Triangle`, `Disk`,
`Ellipse`, `union` / `intersection` / `difference`, `translate` / `rotate` / `scale`) is
rebuilt as an OpenCASCADE face in `netgen.occ`, every edge carrying the pinnkit boundary
name of the piece it came from (``inlet``, ``walls``, ``cylinder`` ...). OpenCASCADE's
booleans keep edge names, so a name survives CSG exactly as pinnkit's trimmed parts do
(two rectangles side by side lose their shared wall in both). Netgen then meshes the
face with curved (isoparametric) elements on curved edges.

Shapes outside that list (triangle meshes, 3-D shapes, a `SpaceTime`) are refused with
one paragraph (`FemGeometryError`). The optional ``fem`` extra (``pip install -e .[fem]``:
``ngsolve``, which brings ``netgen-mesher``) is imported on first use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..errors import PinnkitError
from ..geometry import Difference, Disk, Ellipse, Intersection, Polygon, Rectangle, Transformed, Union
from ..geometry.base import Frame


class FemGeometryError(PinnkitError, ValueError):
    """A shape the finite-element mesher cannot rebuild, an unknown boundary name, or an
    impossible input (mesh size, viscosity, order, time step)."""


def ngsolve_modules():
    """``(ngsolve, netgen.occ)``, or a one-paragraph error naming the ``fem`` extra."""
    try:
        import netgen.occ as occ
        import ngsolve
    except ImportError as e:
        raise PinnkitError(
            "the finite-element flow reference needs NGSolve, an optional dependency that is not "
            f"installed ({e}); install the fem extra with `pip install -e .[fem]` (or "
            "`pip install ngsolve`, which brings the netgen mesher; PyPI wheels, no system "
            "packages)."
        ) from None
    return ngsolve, occ


def _world(frame: Frame, pts) -> np.ndarray:
    """Points ``(n, 2)`` of a primitive's frame mapped to the world: $s R y + b$."""
    r, s, b = np.asarray(frame.rotation), frame.scale, np.asarray(frame.shift)
    return s * np.asarray(pts, np.float64) @ r.T + b


def _polygon_face(occ, corners: np.ndarray, labels) -> object:
    """The face bounded by ``corners`` (counter-clockwise after the frame: a similarity
    keeps the orientation), edge ``i`` (corner ``i`` to ``i + 1``) named ``labels[i]``."""
    wp = occ.WorkPlane()
    wp.MoveTo(*corners[0])
    for i in range(1, len(corners)):
        wp.LineTo(*corners[i], name=labels[i - 1])
    wp.Close(name=labels[-1])
    return wp.Face()


def _leaf(occ, shape, frame: Frame):
    if isinstance(shape, Rectangle):
        (x0, y0), (x1, y1) = shape.lower, shape.upper
        corners = _world(frame, [(x0, y0), (x1, y0), (x1, y1), (x0, y1)])
        return _polygon_face(occ, corners, shape.labels)  # bottom, right, top, left
    if isinstance(shape, Polygon):
        return _polygon_face(occ, _world(frame, shape.vertices), shape.labels)
    if isinstance(shape, Disk):
        c = _world(frame, [shape.center])[0]
        face = occ.Circle((float(c[0]), float(c[1])), shape.radius * frame.scale).Face()
        face.edges.name = shape.labels[0]
        return face
    if isinstance(shape, Ellipse):
        c = _world(frame, [shape.center])[0]
        (ax, ay), rot = shape.axes, np.asarray(frame.rotation)
        major = rot @ (np.array([1.0, 0.0]) if ax >= ay else np.array([0.0, 1.0]))
        a, b = max(ax, ay) * frame.scale, min(ax, ay) * frame.scale
        # the work plane's x axis along the major axis: OpenCASCADE needs major >= minor
        axes = occ.Axes((float(c[0]), float(c[1]), 0.0), n=occ.Z,
                        h=occ.Dir(float(major[0]), float(major[1]), 0.0))
        face = occ.WorkPlane(axes).Ellipse(a, b).Face()
        face.edges.name = shape.labels[0]
        return face
    return None


def occ_face(shape, frame: Frame | None = None):
    """The `netgen.occ` face of a pinnkit 2-D shape, edges named by pinnkit's boundary
    names. Raises `FemGeometryError` for a shape it cannot rebuild."""
    _, occ = ngsolve_modules()
    frame = Frame.identity(2) if frame is None else frame
    if isinstance(shape, Transformed):
        return occ_face(shape.shape, shape.frame.then(frame))
    leaf = _leaf(occ, shape, frame)
    if leaf is not None:
        return leaf
    if isinstance(shape, Union | Intersection):
        faces = [occ_face(s, frame) for s in shape.shapes]
        out = faces[0]
        for f in faces[1:]:
            out = out + f if isinstance(shape, Union) else out * f
        return out
    if isinstance(shape, Difference):
        return occ_face(shape.base, frame) - occ_face(shape.cut, frame)
    raise FemGeometryError(
        f"the finite-element mesher cannot rebuild a {type(shape).__name__}: it meshes 2-D "
        "pinnkit shapes built from rectangle, polygon/triangle, disk and ellipse with union, "
        "intersection, difference and translate/rotate/scale (the shapes of the flow configs); "
        "a triangle mesh, a 3-D shape or a space-time domain has no finite-element reference "
        "here. Describe the domain with those primitives (docs/geometry.md) or leave out the "
        "reference."
    )


def describe(shape) -> object:
    """A JSON-able description of the shape tree (kinds, numbers, names): the geometry's
    part of a solution's cache key."""
    if isinstance(shape, Transformed):
        f = shape.frame
        return {"transformed": describe(shape.shape), "rotation": f.rotation, "scale": f.scale,
                "shift": f.shift}
    if isinstance(shape, Union | Intersection):
        return {type(shape).__name__.lower(): [describe(s) for s in shape.shapes]}
    if isinstance(shape, Difference):
        return {"difference": [describe(shape.base), describe(shape.cut)]}
    fields = {Rectangle: ("lower", "upper"), Polygon: ("vertices",), Disk: ("center", "radius"),
              Ellipse: ("center", "axes")}.get(type(shape))
    if fields is None:
        occ_face(shape)  # raises the refusal paragraph
    return {type(shape).__name__.lower(): {k: getattr(shape, k) for k in fields},
            "labels": shape.labels}


def boundary_names(shape) -> tuple[str, ...]:
    """The boundary names the mesh of ``shape`` has (sorted)."""
    face = occ_face(shape)
    return tuple(sorted({e.name for e in face.edges}))


def reentrant_vertices(shape, face) -> list:
    r"""The vertices of ``face`` (the `occ_face` of ``shape``) where the shape is
    re-entrant (interior angle $> \pi$): more than 60 % of a small circle around the
    vertex (radius $10^{-3}$ of the bounding box's diagonal, 72 points; a 270-degree
    corner has 75 %) lies inside the shape. A disk's seam vertex (half inside) and convex
    corners (a quarter) are not. (The radius stays well above `AbstractDomain.inside`'s
    tolerance, ~1e-5 of the diagonal in float32, which counts points that close as inside.)"""
    lo, hi = shape.bbox()
    r = 1e-3 * math.dist(lo, hi)
    t = np.linspace(0.0, 2 * math.pi, 72, endpoint=False)
    ring = r * np.stack([np.cos(t), np.sin(t)], axis=1)
    verts = list(face.vertices)
    if not verts:
        return []
    centers = np.array([(v.p.x, v.p.y) for v in verts], np.float64)
    inside = shape.inside((centers[:, None, :] + ring[None]).reshape(-1, 2)).reshape(len(verts), -1)
    return [v for v, k in zip(verts, inside.mean(axis=1), strict=True) if k > 0.6]


def make_mesh(shape, maxh: float, boundary_maxh: Mapping[str, float] | None = None,
              curve: int = 3, corner_maxh: float | None = None):
    r"""The Netgen triangle mesh of ``shape`` (an `ngsolve.Mesh`).

    **Arguments:** ``maxh``: the largest element size (length units of the shape);
    ``boundary_maxh``: smaller sizes on named boundaries (``{"cylinder": 0.001}``; the mesh
    grades away from them); ``curve``: the polynomial order of the curved boundary
    elements (isoparametric; 3 keeps the $O(h^3)$ velocity error of P2 on a circle);
    ``corner_maxh``: the element size at every re-entrant corner (`reentrant_vertices`;
    None: no local size), where a Stokes flow's pressure is unbounded ($r^{\lambda-1}$,
    $\lambda \approx 0.544$ at 270 degrees) and a uniform mesh's pressure error gathers;
    the mesh grades away from it at Netgen's default rate.
    """
    ng, occ = ngsolve_modules()
    if not (isinstance(maxh, int | float) and math.isfinite(maxh) and maxh > 0):
        raise FemGeometryError(f"mesh size maxh must be a positive number: actual={maxh!r}")
    face = occ_face(shape)
    names = {e.name for e in face.edges}
    for name, h in dict(boundary_maxh or {}).items():
        if name not in names:
            raise FemGeometryError(
                f"boundary_maxh names the boundary {name!r}, which the shape does not have; its "
                f"boundaries are {sorted(names)}")
        if not (isinstance(h, int | float) and math.isfinite(h) and h > 0):
            raise FemGeometryError(f"boundary_maxh[{name!r}] must be a positive number: actual={h!r}")
        for e in face.edges:
            if e.name == name:
                e.maxh = float(h)
    if corner_maxh is not None:
        if not (isinstance(corner_maxh, int | float) and math.isfinite(corner_maxh) and corner_maxh > 0):
            raise FemGeometryError(f"corner_maxh must be a positive number or None: actual={corner_maxh!r}")
        for v in reentrant_vertices(shape, face):
            v.maxh = float(corner_maxh)
    mesh = ng.Mesh(occ.OCCGeometry(face, dim=2).GenerateMesh(maxh=float(maxh)))
    if curve > 1:
        mesh.Curve(int(curve))
    return mesh

