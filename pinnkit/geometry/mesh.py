"""Closed triangle meshes (STL, OBJ, PLY... through trimesh) as 3-D shapes.

`TriangleMesh.from_file` reads a mesh with trimesh and refuses one that is not
watertight with consistent winding (a solid needs an inside). In ``jax.numpy``, usable in
the training step, with cost $O(T)$ per point for $T$ triangles:

- inside test: the generalised winding number $w(x) = \\frac{1}{4\\pi}\\sum_f \\Omega_f(x)$
  (solid angles, Van Oosterom & Strackee 1983), $w \\approx 1$ inside, $0$ outside;
- signed distance: the exact distance to the nearest triangle, signed by $w$;
- boundary sampling uniform in area (triangle by area, then barycentric), with the
  face normal of the nearest triangle.

With ``backend="warp"`` (the default ``"auto"`` when ``warp-lang`` is installed: the
``meshfast`` extra) the same questions go through NVIDIA Warp's BVH
(`pinnkit.geometry.mesh_warp`): on the host (`host_signed_distance`, `host_contains`,
evaluation grids, fixed sets) and inside ``jit`` through ``jax.pure_callback`` (the
interior candidates' inside test, `sdf` with its exact first derivative), $O(\\log T)$
per point instead of $O(T)$ (scripts/bench_geometry.py ``--mesh``). With
``backend="jax"`` (or without Warp) the host path is trimesh with an R-tree index.

A file whose parts are named (an ASCII STL of several ``solid NAME`` blocks, the way
CFD tools name an STL's patches; OBJ groups ``g NAME`` or objects ``o NAME``) gives one
boundary piece per name (``wall``, ``inlet``, ``outlet``...), sampled by area and used in a
config's conditions as a CSG shape's named boundaries are; the solid (inside test, signed
distance) is still the whole closed surface. A file with one part is one piece,
``surface``.

A mesh's distance is not smooth (it has kinks on the medial axis); hard Dirichlet
constraints use a smooth approximate distance, ``adf`` in `MESH_ADFS`: ``potential``
(`pinnkit.geometry.mesh_potential`, the same for every triangulation, $O(T)$ per point)
or ``blend`` (`pinnkit.geometry.mesh_adf`, of the triangles within ``adf_radius``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .base import AbstractAtom, AbstractShape, Frame, Part, relabel
from .mesh_potential import PotentialADF, solid_angle_terms

_CHUNK = 256  # points per block in the O(points x triangles) loops (memory ~ chunk * T)


def _blend(triangles: np.ndarray, radius: float):
    from .mesh_adf import MeshADF

    return MeshADF(triangles, radius)


def _potential(triangles: np.ndarray, radius: float):
    return PotentialADF(triangles)  # no reach: every triangle counts


# The one table of a mesh's hard-constraint distances: ``adf`` -> (triangles, adf_radius) ->
# a function of one point (docs/geometry.md, "Triangle meshes").
MESH_ADFS = {"potential": _potential, "blend": _blend}
DEFAULT_ADF = "blend"


def _tri_distance2(p, tri):
    """Squared distance from one point ``p`` (3,) to each triangle ``tri`` (T, 3, 3)."""
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    n = jnp.cross(b - a, c - a)
    nn = jnp.sum(n * n, 1)
    w = p[None, :] - a
    # barycentric coordinates of the projection onto the plane
    s = jnp.sum(jnp.cross(b - a, w) * n, 1) / nn  # weight of c
    t = jnp.sum(jnp.cross(w, c - a) * n, 1) / nn  # weight of b
    inside = (s >= 0) & (t >= 0) & (s + t <= 1)
    plane = jnp.sum(w * n, 1) ** 2 / nn

    def seg(u, v):
        e = v - u
        h = jnp.clip(jnp.sum((p[None, :] - u) * e, 1) / jnp.sum(e * e, 1), 0.0, 1.0)
        return jnp.sum((p[None, :] - u - h[:, None] * e) ** 2, 1)

    edges = jnp.minimum(jnp.minimum(seg(a, b), seg(b, c)), seg(c, a))
    return jnp.where(inside, plane, edges)


def _winding(p, tri):
    """Generalised winding number of the closed surface ``tri`` about ``p``."""
    num, den = solid_angle_terms(p, tri)
    return jnp.sum(2.0 * jnp.arctan2(num, den)) / (4.0 * jnp.pi)


class MeshSurface(AbstractAtom):
    """The triangles of a closed mesh as one boundary atom."""

    triangles: np.ndarray  # (T, 3, 3), outward (counter-clockwise seen from outside)
    name: str = eqx.field(static=True)
    smooth: _LazyADF | None = eqx.field(static=True, default=None)

    def _areas(self):
        t = self.triangles
        return 0.5 * np.linalg.norm(np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]), axis=1)

    def measure(self):
        return float(self._areas().sum())

    def from_unit(self, u):
        area = self._areas()
        edges = jnp.asarray(np.cumsum(area) / area.sum(), u.dtype)
        k = jnp.minimum(jnp.searchsorted(edges, u[:, 0], side="right"), len(area) - 1)
        starts = jnp.concatenate([jnp.zeros((1,), u.dtype), edges[:-1]])
        s = jnp.clip((u[:, 0] - starts[k]) / (edges - starts)[k], 0.0, 1.0)
        tri = jnp.asarray(self.triangles, u.dtype)[k]
        r1, r2 = jnp.sqrt(s)[:, None], u[:, 1:2]
        return (1 - r1) * tri[:, 0] + r1 * (1 - r2) * tri[:, 1] + r1 * r2 * tri[:, 2]

    def normal(self, y):
        tri = jnp.asarray(self.triangles, y.dtype)
        k = jnp.argmin(_tri_distance2(y, tri))
        n = jnp.cross(tri[k, 1] - tri[k, 0], tri[k, 2] - tri[k, 0])
        return n / jnp.sqrt(jnp.sum(n * n))

    def distance(self, y):
        d2 = jnp.min(_tri_distance2(y, jnp.asarray(self.triangles, y.dtype)))
        return jnp.where(d2 > 0, jnp.sqrt(jnp.where(d2 > 0, d2, 1.0)), 0.0)

    def level(self, y):
        raise ValueError("a triangle mesh's distance function is pinnkit.geometry.mesh_adf's "
                         "(per triangle), not a level function")

    def adf(self, y):
        """The smooth approximate distance of the mesh's ``adf`` (`MESH_ADFS`) at ``y`` (3,)."""
        return self.smooth.get()(y)


class TriangleMesh(AbstractShape):
    """A watertight triangle mesh as a solid. Boundary name ``surface``.

    **Arguments:**
    - `vertices`: ``(V, 3)``; `faces`: ``(F, 3)`` vertex indices, consistently wound.
    - `name`: the boundary's name (default ``surface``). `coords`: default x, y, z.
    - `adf`: the hard constraint's distance function, a key of `MESH_ADFS`; `adf_radius`:
      the reach of ``blend``'s (default a quarter of the smallest bounding-box side).

    Raises `ValueError` for a mesh that is not watertight or not consistently wound
    (checked with trimesh). Outward orientation is fixed if the volume comes out negative.
    """

    triangles: np.ndarray  # (T, 3, 3), grouped by part: part k is rows sizes[:k].sum() on
    labels: tuple[str, ...] = eqx.field(static=True)  # one boundary name per part
    sizes: tuple[int, ...] = eqx.field(static=True)  # triangles per part
    coords: tuple[str, ...] = eqx.field(static=True)
    volume: float = eqx.field(static=True)
    backend: str = eqx.field(static=True)
    bvh: _LazyBVH | None = eqx.field(static=True)
    smooth: _LazyADF = eqx.field(static=True)
    part_smooth: tuple[_LazyADF, ...] = eqx.field(static=True)
    source: str | None = eqx.field(static=True)

    def __init__(self, vertices, faces, name=None, names: Mapping | None = None, coords=("x", "y", "z"),
                 backend: str = "auto", adf_radius: float | None = None, groups=None,
                 source: str | None = None, adf: str = DEFAULT_ADF):
        """``groups``: optional ``(F,)`` part names, one per face (the file's named solids;
        default: one part ``surface``), renamed by ``name``/``names``; ``source``: the
        file it came from (named in error messages)."""
        import trimesh

        what = f"mesh file {source!r}" if source else "mesh"
        vertices = np.asarray(vertices, np.float64)
        faces = np.asarray(faces, np.int64)
        check_coordinates(vertices, what)
        groups = np.full(len(faces), "surface") if groups is None else np.asarray(groups, str)
        if groups.shape != (len(faces),):
            raise ValueError(f"{what}: groups must name each of the {len(faces)} faces: actual "
                             f"shape {groups.shape}")
        m = trimesh.Trimesh(vertices, faces, process=True)
        check_solid(m, what)
        if len(m.faces) != len(faces):  # processing keeps the faces (no validate=True): kept in step
            raise ValueError(f"{what}: reading dropped {len(faces) - len(m.faces)} faces")
        if m.volume < 0:
            m.invert()
        parts = tuple(dict.fromkeys(groups.tolist()))
        order = np.concatenate([np.flatnonzero(groups == g) for g in parts])
        self.triangles = np.asarray(m.triangles, np.float64)[order]
        self.sizes = tuple(int((groups == g).sum()) for g in parts)
        self.volume = float(m.volume)
        self.labels = relabel(parts, name, names, what)
        self.coords = tuple(coords)
        self.source = None if source is None else str(source)
        self.backend = resolve_backend(backend)
        self.bvh = _LazyBVH(self.triangles) if self.backend == "warp" else None
        t = self.triangles.reshape(-1, 3)
        if adf_radius is None:
            adf_radius = 0.25 * float((t.max(0) - t.min(0)).min())
        if not (isinstance(adf_radius, (int, float)) and math.isfinite(adf_radius) and adf_radius > 0):
            raise ValueError(f"mesh adf_radius must be a number > 0 (the reach of the smooth distance "
                             f"function used by network.hard_constraint): actual={adf_radius!r}")
        if not isinstance(adf, str) or adf not in MESH_ADFS:
            raise ValueError(f"mesh adf must be one of {list(MESH_ADFS)}: actual={adf!r} (the "
                             "distance function of network.hard_constraint: 'potential' from a "
                             "surface potential, 'blend' of the triangles within adf_radius)")
        self.smooth = _LazyADF(self.triangles, adf, float(adf_radius))
        # a piece's own smooth distance (zero on its triangles only); the whole one for one part
        self.part_smooth = ((self.smooth,) if len(parts) == 1 else
                            tuple(_LazyADF(tri, adf, float(adf_radius)) for tri in self.part_triangles()))

    def part_triangles(self) -> tuple[np.ndarray, ...]:
        """The triangles of each part, ``(T_k, 3, 3)``, in the order of `labels`."""
        return tuple(np.split(self.triangles, np.cumsum(self.sizes)[:-1]))

    @staticmethod
    def from_file(path, scale: float = 1.0, name=None, names=None, coords=("x", "y", "z"),
                  backend: str = "auto", adf_radius: float | None = None,
                  adf: str = DEFAULT_ADF) -> TriangleMesh:
        """Reads ``path`` (any format trimesh reads: STL, OBJ, PLY, OFF...), scaled by ``scale``."""
        import trimesh

        resolve_backend(backend)  # a bad or missing backend before reading the file

        path = Path(path)
        if not path.is_file():
            raise ValueError(f"mesh file {str(path)!r} not found; give a path relative to the "
                             "config file or an absolute path")
        try:
            scale = float(scale)
        except (TypeError, ValueError):
            raise ValueError(f"mesh scale must be a number: actual={scale!r}") from None
        # a negative scale mirrors the mesh (its normals then point inwards), 0 collapses it
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"mesh scale must be finite and > 0 (a factor applied to the file's "
                             f"coordinates; a negative one would mirror the solid): actual={scale!r}")
        what = f"mesh file {str(path)!r}"
        truncated = _truncated_stl(path)
        if truncated:
            raise ValueError(f"{what} is truncated: {truncated}; export the mesh again")
        try:
            # unprocessed: processing drops NaN vertices, which then reads as a hole
            m = trimesh.load(str(path), force="mesh", process=False)
        except Exception as e:  # trimesh raises many types (even ImportError) for unreadable files
            raise ValueError(f"{what} is truncated or not a mesh trimesh can read as "
                             f"{path.suffix or 'a mesh'} ({type(e).__name__}); export it again as "
                             "STL, OBJ, PLY or OFF") from None
        if len(m.faces) == 0:
            raise ValueError(f"{what} has no triangles (empty, truncated or not a mesh)")
        check_coordinates(np.asarray(m.vertices), what)
        check_coordinates(np.asarray(m.vertices) * scale, f"{what} scaled by {scale:g}")
        named = _named_parts(path)
        if named is not None:  # the same triangles, grouped by the file's part names
            vertices, faces, groups = named
        else:
            vertices, faces, groups = np.asarray(m.vertices), np.asarray(m.faces), None
        m = trimesh.Trimesh(vertices, faces, process=True)  # what trimesh.load would give
        check_solid(m, what)
        return TriangleMesh(vertices * scale, faces, name, names, coords, backend, adf_radius,
                            groups=groups, source=str(path), adf=adf)

    def surface(self):
        """``(vertices (V, 3), triangles (F, 3), part (F,), names)``: the surface with shared
        vertices, ``part`` the index into ``names`` (the boundary names) of each triangle
        (`pinnkit.gridio.gridded.Surface`, the VTK output's surface)."""
        t = self.triangles.reshape(-1, 3)
        vertices, inverse = np.unique(t, axis=0, return_inverse=True)
        names = tuple(dict.fromkeys(self.labels))
        part = np.repeat([names.index(n) for n in self.labels], self.sizes)
        return vertices, inverse.reshape(-1, 3), part, names

    def trimesh(self):
        """The mesh as a ``trimesh.Trimesh`` (host-side queries)."""
        import trimesh

        t = self.triangles.reshape(-1, 3)
        return trimesh.Trimesh(t, np.arange(t.shape[0]).reshape(-1, 3), process=True)

    def _tri(self, dtype):
        return jnp.asarray(self.triangles, dtype)

    def winding(self, x):
        """Generalised winding number at one point (1 inside, 0 outside)."""
        return _winding(x, self._tri(x.dtype))

    def sdf(self, x):
        if self.backend == "warp":
            return _bvh_sdf(self.bvh, x)
        d2 = jnp.min(_tri_distance2(x, self._tri(x.dtype)))
        d = jnp.where(d2 > 0, jnp.sqrt(jnp.where(d2 > 0, d2, 1.0)), 0.0)
        return jnp.where(self.winding(x) > 0.5, -d, d)

    def parts(self):
        return tuple(Part(MeshSurface(tri, name, smooth), name, Frame.identity(3))
                     for tri, name, smooth in zip(self.part_triangles(), self.labels, self.part_smooth,
                                                  strict=True))

    def candidates(self, u, piece):
        if piece != "interior":
            return super().candidates(u, piece)
        lo, hi = (jnp.asarray(b, u.dtype)[None, :] for b in self.bbox())
        x = lo + u * (hi - lo)
        if self.backend == "warp":  # ray parity through the BVH, on the host
            shape = jax.ShapeDtypeStruct(x.shape[:-1], jnp.bool_)
            return x, jax.pure_callback(self.bvh.contains, shape, x, vmap_method="expand_dims")
        w = jax.lax.map(self.winding, x, batch_size=_CHUNK)  # the sign alone: no distances
        return x, w > 0.5

    def bbox(self):
        t = self.triangles.reshape(-1, 3)
        return tuple(float(v) for v in t.min(0)), tuple(float(v) for v in t.max(0))

    def measure(self):
        return self.volume

    def inside(self, points):
        return self.host_contains(points)  # evaluation grids: the spatial index, not O(T) per point

    def host_contains(self, points) -> np.ndarray:
        """Inside test on the host (Warp's BVH, else trimesh ray tests with its R-tree)."""
        if self.backend == "warp":
            return self.bvh.contains(points)
        return np.asarray(self.trimesh().contains(np.asarray(points, np.float64)))

    def host_signed_distance(self, points) -> np.ndarray:
        """Signed distance (negative inside) on the host (Warp's BVH, else trimesh
        proximity with its R-tree)."""
        if self.backend == "warp":
            return self.bvh.signed_distance(points)
        import trimesh

        return -trimesh.proximity.signed_distance(self.trimesh(), np.asarray(points, np.float64))


def described(domain) -> str:
    """How an error message names ``domain``: ``the mesh file 'PATH'`` for a triangle mesh
    read from a file (a missing boundary name is then the file's), else ``the domain``."""
    if isinstance(domain, TriangleMesh) and domain.source:
        return f"the mesh file {domain.source!r}"
    return "the domain"


BACKENDS = ("auto", "warp", "jax")


def resolve_backend(backend: str) -> str:
    """``"warp"`` or ``"jax"``: ``"auto"`` is Warp where ``warp-lang`` imports, else JAX;
    ``"warp"`` without it raises `pinnkit.geometry.mesh_warp.MissingBackend` (one paragraph)."""
    from . import mesh_warp

    if backend not in BACKENDS:
        raise ValueError(f"mesh backend must be one of {list(BACKENDS)}: actual={backend!r} "
                         "('warp': NVIDIA Warp's BVH, 'jax': the built-in O(triangles) queries)")
    if backend == "auto":
        return "warp" if mesh_warp.warp_available() else "jax"
    if backend == "warp":
        mesh_warp.require_warp()
    return backend


class _LazyBVH:
    """Warp's BVH over ``triangles``, built on first use (hashed by identity: a static
    field of the mesh). The callbacks take and return NumPy arrays of any leading shape."""

    def __init__(self, triangles: np.ndarray):
        self.triangles = triangles
        self._mesh = None

    def get(self):
        if self._mesh is None:
            from .mesh_warp import WarpMesh

            self._mesh = WarpMesh(self.triangles)
        return self._mesh

    def contains(self, x) -> np.ndarray:
        x = np.asarray(x)
        return self.get().contains(x).reshape(x.shape[:-1])

    def signed_distance(self, x) -> np.ndarray:
        x = np.asarray(x)
        return self.get().signed_distance(x).reshape(x.shape[:-1])

    def distance_and_gradient(self, x):
        """(signed distance, its gradient $\\pm(x - c)/|x - c|$, c the closest point)."""
        x = np.asarray(x)
        d, c, n = self.get().query(x)
        r = x.reshape(-1, 3) - c
        norm = np.linalg.norm(r, axis=1, keepdims=True)
        # on the surface (|x - c| = 0) the gradient is the face normal
        g = np.where(norm > 0, np.sign(d)[:, None] * r / np.where(norm > 0, norm, 1.0), n)
        return (d.reshape(x.shape[:-1]).astype(x.dtype), g.reshape(x.shape).astype(x.dtype))


class _LazyADF:
    """``MESH_ADFS[kind]`` of ``triangles``, built on first use (the blend's table takes a
    second; only hard constraints need it)."""

    def __init__(self, triangles: np.ndarray, kind: str, radius: float):
        self.triangles, self.kind, self.radius = triangles, kind, radius
        self._adf = None

    def get(self):
        if self._adf is None:
            self._adf = MESH_ADFS[self.kind](self.triangles, self.radius)
        return self._adf


@partial(jax.custom_jvp, nondiff_argnums=(0,))
def _bvh_sdf(bvh: _LazyBVH, x):
    """Signed distance through the BVH (a host callback); first derivative exact, the
    higher ones zero (the callback has no curvature)."""
    shape = (jax.ShapeDtypeStruct(x.shape[:-1], x.dtype), jax.ShapeDtypeStruct(x.shape, x.dtype))
    return jax.pure_callback(bvh.distance_and_gradient, shape, x, vmap_method="expand_dims")[0]


@_bvh_sdf.defjvp
def _bvh_sdf_jvp(bvh, primals, tangents):
    (x,), (dx,) = primals, tangents
    shape = (jax.ShapeDtypeStruct(x.shape[:-1], x.dtype), jax.ShapeDtypeStruct(x.shape, x.dtype))
    d, g = jax.pure_callback(bvh.distance_and_gradient, shape, x, vmap_method="expand_dims")
    return d, jnp.sum(jax.lax.stop_gradient(g) * dx, axis=-1)


# Coordinates above this are refused: squared distances and the winding number's triple
# products of such vertices overflow float32 (3.4e38) in the training step.
MAX_COORDINATE = 1e12


def check_coordinates(v: np.ndarray, what: str) -> None:
    """Finite vertices of magnitude at most `MAX_COORDINATE`, else `ValueError` naming
    the first offending vertex."""
    bad = ~np.isfinite(v).all(axis=-1) if v.size else np.zeros(0, bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what} has {int(bad.sum())} vertices that are not finite numbers "
                         f"(NaN or infinity), the first vertex {i} at {v[i].tolist()}; fix or "
                         "remove them in the file")
    big = np.abs(v).max(axis=-1) > MAX_COORDINATE if v.size else np.zeros(0, bool)
    if big.any():
        i = int(np.flatnonzero(big)[0])
        raise ValueError(f"{what} has coordinates beyond +-{MAX_COORDINATE:g} (vertex {i} at "
                         f"{v[i].tolist()}), where distances overflow; rescale the mesh (mesh.scale) "
                         "to the problem's units")


def _truncated_stl(path: Path) -> str | None:
    """Why a binary STL file is cut short (its header counts more triangles than it
    holds), or None. An ASCII STL starts with ``solid`` and is left to trimesh."""
    if path.suffix.lower() != ".stl":
        return None
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(84)
    if head[:5].lower() == b"solid":
        return None
    if size < 84:
        return f"{size} bytes, less than a binary STL's 84-byte header"
    count = int.from_bytes(head[80:84], "little")
    want = 84 + 50 * count
    if size < want:
        return f"its header counts {count} triangles ({want} bytes), the file has {size} bytes"
    return None


def _named_parts(path: Path):
    """``(vertices, faces, groups)`` of a file with several named parts (ASCII STL
    ``solid NAME`` blocks; OBJ ``g``/``o`` names), ``groups`` the part name of each face;
    None for a file of one part (or another format): it is the one piece ``surface``."""
    import trimesh

    suffix = path.suffix.lower()
    if suffix == ".stl":
        with open(path, "rb") as f:
            if f.read(5).lower() != b"solid":  # binary STL: one unnamed solid
                return None
        kwargs = {}
    elif suffix == ".obj":
        kwargs = {"split_objects": True, "split_groups": True, "group_material": False}
    else:
        return None
    scene = trimesh.load(str(path), force="scene", process=False, **kwargs)
    geoms = [(str(k), g) for k, g in scene.geometry.items()
             if isinstance(g, trimesh.Trimesh) and len(g.faces)]
    if len(geoms) < 2:
        return None
    offsets = np.cumsum([0] + [len(g.vertices) for _, g in geoms])
    vertices = np.concatenate([np.asarray(g.vertices, np.float64) for _, g in geoms])
    faces = np.concatenate([np.asarray(g.faces, np.int64) + o
                            for (_, g), o in zip(geoms, offsets[:-1], strict=True)])
    groups = np.concatenate([np.full(len(g.faces), k) for k, g in geoms])
    return vertices, faces, groups


def check_solid(m, what: str) -> None:
    if not m.is_watertight:
        raise ValueError(f"{what} is not watertight (it has boundary edges or holes), so it has no "
                         "inside; close it (e.g. trimesh's fill_holes) or export a closed solid")
    if not m.is_winding_consistent:
        raise ValueError(f"{what} has inconsistently wound triangles; fix the face orientation "
                         "(e.g. trimesh's fix_normals) before using it as a domain")
