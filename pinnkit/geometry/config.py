"""Shapes from a YAML tree (``problem.params.domain``), for built-in and expression problems.

```yaml
domain:
  difference:
    - rectangle: {lower: [0, 0], upper: [2.2, 0.41],
                  names: {left: inlet, right: outlet, bottom: walls, top: walls}}
    - disk: {center: [0.2, 0.2], radius: 0.05, name: cylinder}
  t: [0, 1]          # optional: a space-time cylinder over the shape
  coords: [x, y]     # optional coordinate names (default x, y[, z])
```

A node is a mapping with one key, the kind (`KINDS`). Numbers may be constant
expressions (``2*pi``, ``0.41/2``). Every mistake raises `GeometryError` (a
`pinnkit.errors.ConfigError`: exit status 2 through the CLI) naming the key path, e.g.
``problem.params.domain.difference.1.disk.radius``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from pathlib import Path

import jax
import jax.numpy as jnp

from ..errors import ConfigError
from ..errors import did_you_mean as _suggest
from .base import AbstractShape, tolerance
from .csg import difference, intersection, union
from .domains import SpaceTime
from .primitives2d import Ellipse, Polygon, Rectangle, Triangle
from .primitives3d import Cuboid, Cylinder, ExtrudedPolygon
from .round import Ball, Disk
from .transforms import rotate, scale, translate


class GeometryError(ConfigError):
    """An impossible or misspelt shape in a config."""


class _BadValue(ValueError):
    """A value that a YAML form below refuses, reported as ``{node}.{key}: ...`` (and, with
    ``show``, the value as written)."""

    def __init__(self, key: str, message: str, show: bool = False):
        super().__init__(message)
        self.key, self.show = key, show


# YAML forms of the constructors whose Python arguments read differently
def _triangle(vertices, name=None, names=None, coords=("x", "y")):
    """`Triangle` from ``vertices: [a, b, c]``."""
    if not (isinstance(vertices, list) and len(vertices) == 3):
        got = len(vertices) if isinstance(vertices, list) else repr(vertices)
        raise _BadValue("vertices", f"a triangle has 3 vertices, got {got}")
    return Triangle(*vertices, name=name, names=names, coords=coords)


def _extrusion(vertices, z, name=None, names=None, coords=("x", "y", "z")):
    """`ExtrudedPolygon` from ``vertices`` and ``z: [z0, z1]``."""
    if not (isinstance(z, list) and len(z) == 2):
        raise _BadValue("z", "expected [z0, z1]", show=True)
    return ExtrudedPolygon(vertices, z[0], z[1], name=name, names=names, coords=coords)


def _mesh(file, name=None, names=None, scale=1.0, backend="auto", adf=None, adf_radius=None,
          coords=("x", "y", "z")):
    """`TriangleMesh.from_file` (``file`` found relative to the config by `_primitive`;
    ``names`` renames the file's named parts, e.g. an STL's ``solid`` blocks;
    ``backend``: ``auto``, ``warp`` or ``jax``; ``adf``: the hard constraint's distance
    function, a key of pinnkit.geometry.mesh.MESH_ADFS; ``adf_radius``: the reach of its
    ``blend``)."""
    from .mesh import DEFAULT_ADF, TriangleMesh

    return TriangleMesh.from_file(file, scale=scale, name=name, names=names, coords=coords,
                                  backend=backend, adf_radius=adf_radius,
                                  adf=DEFAULT_ADF if adf is None else adf)


# The one table of shapes: YAML key -> constructor. A node's keys are the constructor's
# parameters (those without a default are required); ``coords`` is no key (the domain's
# ``coords`` give it) and its default's length is the shape's dimension. Parameters named
# in `_RAW` pass as written; every other value goes through `_number`. Adding a primitive
# is its class plus one line here (docs/geometry.md, "Adding a shape").
SHAPES: dict[str, Callable[..., AbstractShape]] = {
    "rectangle": Rectangle,
    "disk": Disk,
    "ellipse": Ellipse,
    "polygon": Polygon,
    "triangle": _triangle,
    "box": Cuboid,
    "ball": Ball,
    "cylinder": Cylinder,
    "extrusion": _extrusion,
    "mesh": _mesh,
}
# the operations on shapes: a list of shapes, and a ``shape`` with the function's parameters
CSG: dict[str, Callable[..., AbstractShape]] = {
    "union": union, "intersection": intersection, "difference": difference}
TRANSFORMS: dict[str, Callable[..., AbstractShape]] = {
    "translate": translate, "rotate": rotate, "scale": scale}
KINDS = (*SHAPES, *CSG, *TRANSFORMS)
_RAW = ("name", "names", "file", "backend", "adf")


def parameters(kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The (required, optional) keys of a primitive or transform node of ``kind``, read
    from its constructor's signature."""
    sig = inspect.signature(SHAPES.get(kind) or TRANSFORMS[kind])
    ps = [p for p in sig.parameters.values()
          if p.name != "coords" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return (tuple(p.name for p in ps if p.default is p.empty),
            tuple(p.name for p in ps if p.default is not p.empty))


def dimension(kind: str) -> int:
    """The dimension of the primitive ``kind``: the length of its default ``coords``."""
    return len(inspect.signature(SHAPES[kind]).parameters["coords"].default)


def _number(v, key: str):
    """A number, a constant expression string, or a (nested) list of them."""
    if isinstance(v, list | tuple):
        return [_number(x, f"{key}.{i}") for i, x in enumerate(v)]
    if isinstance(v, bool):
        raise GeometryError(f"{key}: expected a number, got {v!r}.")
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        from ..expr import Resolver, Symbols

        comps = Resolver(Symbols((), (), (), key=key)).components(v, key)
        if len(comps) == 1 and comps[0].is_const:
            return float(comps[0].value)
    raise GeometryError(f"{key}: expected a number or a constant expression such as 2*pi, got {v!r}.")


def build_shape(node, key: str, coords=None, base_dir: str | Path | None = None, *,
                _features: list | None = None) -> AbstractShape:
    """The shape of one tree node (see the module docstring). ``_features`` collects
    ``[key, primitive, scale]`` for each primitive below the node (`build_domain` checks
    their sizes against the float resolution)."""
    if not isinstance(node, Mapping) or len(node) != 1:
        raise GeometryError(
            f"{key}: a shape is a mapping with one key, its kind ({', '.join(KINDS)}), e.g. "
            f"{{disk: {{center: [0, 0], radius: 1}}}}; got {node!r}."
        )
    (kind, spec), = node.items()
    here = f"{key}.{kind}"
    if kind not in KINDS:
        raise GeometryError(
            f"{key}: unknown shape {kind!r}.{_suggest(kind, KINDS)} Shapes: {', '.join(KINDS)}.")
    if kind in CSG:
        if not isinstance(spec, list | tuple) or len(spec) < 2:
            raise GeometryError(f"{here}: expected a list of at least two shapes, got {spec!r}.")
        shapes = [build_shape(s, f"{here}.{i}", coords, base_dir, _features=_features)
                  for i, s in enumerate(spec)]
        dims = {s.dim for s in shapes}
        if len(dims) > 1:
            raise GeometryError(f"{here}: combines 2-D and 3-D shapes; use shapes of one dimension.")
        try:
            return CSG[kind](*shapes)
        except ValueError as e:
            raise GeometryError(f"{here}: {e}.") from None
    required, optional = parameters(kind)
    if not isinstance(spec, Mapping):
        raise GeometryError(f"{here}: expected a mapping with keys {', '.join(required)}, got {spec!r}.")
    for k in spec:
        if k not in (*required, *optional):
            allowed = (*required, *optional)
            raise GeometryError(
                f"{here}: unknown key {k!r}.{_suggest(k, allowed)} Allowed: {', '.join(allowed)}.")
    missing = [k for k in required if k not in spec]
    if missing:
        raise GeometryError(f"{here}: missing {', '.join(missing)} (required: {', '.join(required)}).")
    try:
        if kind in TRANSFORMS:
            start = len(_features) if _features is not None else 0
            inner = build_shape(spec["shape"], f"{here}.shape", coords, base_dir, _features=_features)
            args = {k: _number(v, f"{here}.{k}") for k, v in spec.items() if k != "shape"}
            out = TRANSFORMS[kind](inner, **args)
            if kind == "scale" and _features is not None and isinstance(args["factor"], float):
                for f in _features[start:]:
                    f[2] *= abs(args["factor"])
            return out
        out = _primitive(kind, spec, here, coords, base_dir)
        if _features is not None:
            _features.append([here, out, 1.0])
        return out
    except ValueError as e:
        if isinstance(e, ConfigError):
            raise
        raise GeometryError(f"{here}: {e}.") from None


def _primitive(kind, spec, here, coords, base_dir):
    if "names" in spec and not isinstance(spec["names"], Mapping):
        raise GeometryError(
            f"{here}.names: expected a mapping {{default name: new name}}, got {spec['names']!r}.")
    dim = dimension(kind)
    c = tuple(coords) if coords is not None else ("x", "y", "z")[:dim]
    if len(c) != dim:
        raise GeometryError(f"{here}: a {dim}-D shape, but the domain's coordinates are {list(c)}.")
    args = {k: v if k in _RAW else _number(v, f"{here}.{k}") for k, v in spec.items()}
    if "file" in args:
        path = Path(str(args["file"]))
        if not path.is_absolute() and base_dir is not None and (Path(base_dir) / path).exists():
            path = Path(base_dir) / path
        args["file"] = path
    try:
        return SHAPES[kind](**args, coords=c)
    except _BadValue as e:
        shown = f", got {spec[e.key]!r}" if e.show else ""
        raise GeometryError(f"{here}.{e.key}: {e}{shown}.") from None


def resolve_files(params: Mapping, base_dir: str | Path | None) -> dict:
    """``params`` with the mesh files of its geometry trees found relative to ``base_dir``
    (the config file's folder) first, then the current folder, as observation files are:
    a relative ``file`` that exists under ``base_dir`` becomes that path; others are kept
    (and a missing one is reported by `TriangleMesh.from_file`); a parameter ``{file: PATH}``
    (a data table, e.g. `dfg_assimilation`'s ``data``) is found the same way."""
    if base_dir is None:
        return dict(params)

    def walk(node):
        if isinstance(node, list | tuple):
            return [walk(v) for v in node]
        if not isinstance(node, Mapping):
            return node
        out = {k: walk(v) for k, v in node.items()}
        mesh = out.get("mesh")
        if isinstance(mesh, Mapping) and isinstance(mesh.get("file"), str):
            path = Path(mesh["file"])
            if not path.is_absolute() and (Path(base_dir) / path).exists():
                out["mesh"] = {**mesh, "file": str(Path(base_dir) / path)}
        return out

    def data_file(node):  # a parameter {file: PATH}: an observation table
        path = Path(node["file"])
        if not path.is_absolute() and (Path(base_dir) / path).exists():
            return {**node, "file": str(Path(base_dir) / path)}
        return node

    return {k: walk(v) if is_geometry(v) else
            data_file(v) if isinstance(v, Mapping) and isinstance(v.get("file"), str) else v
            for k, v in params.items()}


def is_geometry(spec) -> bool:
    """Whether a ``domain`` mapping is a geometry tree (one key is a shape kind)."""
    return isinstance(spec, Mapping) and any(k in KINDS for k in spec)


def check_resolution(shape: AbstractShape, features) -> None:
    """Refuses a primitive narrower than the run's float resolution at the domain's
    extent: below `pinnkit.geometry.base.tolerance` (64 ulp of the bounding box's
    diagonal, in float32 unless ``numerics.x64``) its surface cannot be told from its
    centre, and a distance of it underflows (a hole of radius 1e-300 would leave u = 0)."""
    x64 = bool(jax.config.read("jax_enable_x64"))
    dtype = jnp.float64 if x64 else jnp.float32
    lo, hi = shape.bbox()
    extent = math.dist(lo, hi)
    tol = tolerance(dtype, extent)
    for key, prim, factor in features:
        plo, phi = prim.bbox()
        size = factor * min(b - a for a, b in zip(plo, phi, strict=True))
        if size <= tol:
            kind = key.rsplit(".", 1)[-1]
            hint = "" if x64 else (f", or set numerics.x64: true (float64 resolves "
                                   f"{tolerance(jnp.float64, extent):.3g} here)")
            raise GeometryError(
                f"{key}: the {kind} is {size:.3g} across, below the resolution of "
                f"{jnp.dtype(dtype).name} for this domain (64 ulp of its extent {extent:.3g}: "
                f"{tol:.3g}); points closer than that count as touching, so its boundary cannot "
                f"be sampled nor its distance computed. Make it at least {tol:.3g} across, remove "
                f"it{hint}."
            )


def build_domain(spec: Mapping, key: str = "problem.params.domain", base_dir=None):
    """A shape, or a `SpaceTime` over it, from ``{<kind>: ..., t: [t0, t1], coords: [...]}``;
    checks that the interior and every named boundary are non-empty."""
    spec = dict(spec)
    t, coords = spec.pop("t", None), spec.pop("coords", None)
    kinds = [k for k in spec if k in KINDS]
    extra = [k for k in spec if k not in KINDS]
    if len(kinds) != 1 or extra:
        raise GeometryError(
            f"{key}: give exactly one shape ({', '.join(KINDS)}), optionally with t: [t0, t1] and "
            f"coords: [...]; got keys {sorted(spec)}.{_suggest(extra[0], KINDS) if extra else ''}"
        )
    names_ok = isinstance(coords, list | tuple) and all(isinstance(c, str) for c in coords)
    if coords is not None and (not names_ok or "t" in coords or len(set(coords)) != len(coords)):
        raise GeometryError(
            f"{key}.coords: expected distinct coordinate names other than 't', got {coords!r}.")
    features: list = []
    shape = build_shape({kinds[0]: spec[kinds[0]]}, key, coords, base_dir, _features=features)
    check_resolution(shape, features)
    for piece in shape.pieces():
        try:
            shape.acceptance(piece)
        except ValueError as e:
            raise GeometryError(f"{key}: {e}.") from None
    if t is None:
        return shape
    t = _number(t, f"{key}.t")
    if not (isinstance(t, list) and len(t) == 2 and t[0] < t[1]):
        raise GeometryError(f"{key}.t: expected [t0, t1] with t0 < t1, got {t!r}.")
    return SpaceTime(shape, t[0], t[1])
