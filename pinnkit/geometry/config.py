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

import difflib
import math
from collections.abc import Mapping
from pathlib import Path

import jax
import jax.numpy as jnp

from ..errors import ConfigError
from .base import AbstractShape, tolerance
from .csg import Intersection, Union, difference
from .domains import SpaceTime
from .primitives2d import Ellipse, Polygon, Rectangle, Triangle
from .primitives3d import Cuboid, Cylinder, ExtrudedPolygon
from .round import Ball, Disk
from .transforms import rotate, scale, translate


class GeometryError(ConfigError):
    """An impossible or misspelt shape in a config."""


# kind -> (required keys, optional keys)
PRIMITIVES = {
    "rectangle": (("lower", "upper"), ("name", "names")),
    "disk": (("center", "radius"), ("name", "names")),
    "ellipse": (("center", "axes"), ("name", "names")),
    "polygon": (("vertices",), ("name", "names")),
    "triangle": (("vertices",), ("name", "names")),
    "box": (("lower", "upper"), ("name", "names")),
    "ball": (("center", "radius"), ("name", "names")),
    "cylinder": (("center", "radius", "height"), ("name", "names")),
    "extrusion": (("vertices", "z"), ("name", "names")),
    "mesh": (("file",), ("name", "scale")),
}
CSG = ("union", "intersection", "difference")
TRANSFORMS = {
    "translate": (("shape", "offset"), ()),
    "rotate": (("shape", "angle"), ("axis", "center")),
    "scale": (("shape", "factor"), ("center",)),
}
KINDS = (*PRIMITIVES, *CSG, *TRANSFORMS)
_DIM = {"rectangle": 2, "disk": 2, "ellipse": 2, "polygon": 2, "triangle": 2,
        "box": 3, "ball": 3, "cylinder": 3, "extrusion": 3, "mesh": 3}


def _suggest(name, valid) -> str:
    close = difflib.get_close_matches(str(name), list(valid), n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


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
            if kind == "difference":
                return difference(*shapes)
            return (Union if kind == "union" else Intersection)(*shapes)
        except ValueError as e:
            raise GeometryError(f"{here}: {e}.") from None
    required, optional = PRIMITIVES.get(kind) or TRANSFORMS[kind]
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
            fn = {"translate": translate, "rotate": rotate, "scale": scale}[kind]
            out = fn(inner, **args)
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
    names = {k: spec[k] for k in ("name", "names") if k in spec}
    if "names" in names and not isinstance(names["names"], Mapping):
        raise GeometryError(
            f"{here}.names: expected a mapping {{default name: new name}}, got {names['names']!r}.")
    c = tuple(coords) if coords is not None else ("x", "y", "z")[: _DIM[kind]]
    if len(c) != _DIM[kind]:
        raise GeometryError(f"{here}: a {_DIM[kind]}-D shape, but the domain's coordinates are {list(c)}.")
    num = {k: _number(v, f"{here}.{k}") for k, v in spec.items() if k not in ("name", "names", "file")}
    if kind == "rectangle":
        return Rectangle(num["lower"], num["upper"], coords=c, **names)
    if kind == "disk":
        return Disk(num["center"], num["radius"], coords=c, **names)
    if kind == "ellipse":
        return Ellipse(num["center"], num["axes"], coords=c, **names)
    if kind == "polygon":
        return Polygon(num["vertices"], coords=c, **names)
    if kind == "triangle":
        if len(num["vertices"]) != 3:
            raise GeometryError(f"{here}.vertices: a triangle has 3 vertices, got {len(num['vertices'])}.")
        return Triangle(*num["vertices"], coords=c, **names)
    if kind == "box":
        return Cuboid(num["lower"], num["upper"], coords=c, **names)
    if kind == "ball":
        return Ball(num["center"], num["radius"], coords=c, **names)
    if kind == "cylinder":
        return Cylinder(num["center"], num["radius"], num["height"], coords=c, **names)
    if kind == "extrusion":
        z = num["z"]
        if not (isinstance(z, list) and len(z) == 2):
            raise GeometryError(f"{here}.z: expected [z0, z1], got {spec['z']!r}.")
        return ExtrudedPolygon(num["vertices"], z[0], z[1], coords=c, **names)
    from .mesh import TriangleMesh

    path = Path(str(spec["file"]))
    if not path.is_absolute() and base_dir is not None and (Path(base_dir) / path).exists():
        path = Path(base_dir) / path
    return TriangleMesh.from_file(path, coords=c, scale=num.get("scale", 1.0), **names)


def resolve_files(params: Mapping, base_dir: str | Path | None) -> dict:
    """``params`` with the mesh files of its geometry trees found relative to ``base_dir``
    (the config file's folder) first, then the current folder, as observation files are:
    a relative ``file`` that exists under ``base_dir`` becomes that path; others are kept
    (and a missing one is reported by `TriangleMesh.from_file`)."""
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

    return {k: walk(v) if is_geometry(v) else v for k, v in params.items()}


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
