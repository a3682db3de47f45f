"""Geometry inputs answered in seconds and refused when impossible: vector Dirichlet data
under every hard-constraint kind, features below the float resolution, mesh values, and
polygons / CSG trees with many vertices and operands (issue 38)."""

import jax
import numpy as np
import pytest
import yaml

from pinnkit.run.build import build_run
from pinnkit.run.config import from_dict
from pinnkit.train.loss import make_loss
from pinnkit.train.step import chunk_args, initial_state, make_chunk, point_arrays, split_model, train_key


def _config(domain, fields, equations, conditions, batch, hard=True):
    return {
        "problem": {"name": "expression", "params": {
            "domain": domain, "fields": fields, "equations": equations, "conditions": conditions}},
        "network": {"width": 8, "depth": 1, "hard_constraint": hard},
        "sampler": {"method": "uniform", "batch": batch},
        "diffops": {"method": "taylor"},
        "train": {"steps": 1, "chunk": 1}, "checkpoint": {"every": 0}, "eval": {"resolution": 5},
    }


def _lower_step(cfg):
    """Traces and lowers the training chunk (the loss inside ``shard_map``, its gradient
    and the update) as ``pinnkit train`` compiles it, without compiling: a trace-time
    error of the hard constraint shows here in a second."""
    run = build_run(from_dict(cfg))
    params, static = split_model(run)
    ph = run.phases[0]
    state = initial_state(run, ph, params)
    chunk = make_chunk(make_loss(run, static), ph, 1, train_key(run), run=run)
    chunk.lower(point_arrays(run), state, *chunk_args(ph, run.dtype, 1))
    return run


UV = {"pu": "-lap(u)", "pv": "-lap(v)"}
PLATE = {"difference": [{"rectangle": {"lower": [-1, -1], "upper": [1, 1], "name": "outer"}},
                        {"disk": {"center": [0.3, 0.2], "radius": 0.4, "name": "inner"}}]}
BOX = {"x": [-1, 1], "y": [-1, 1]}


@pytest.mark.parametrize("value", [["-y", "x"], [1, "x*y"]])
@pytest.mark.parametrize("kind", ["distance", "box", "initial"])
def test_vector_dirichlet_under_every_hard_constraint_kind(kind, value):
    """``dirichlet: [-y, x]`` on ``[u, v]`` with ``network.hard_constraint`` built and
    traced inside ``shard_map`` (was: "Primitive stack requires varying manual axes to
    match"): constant components mixed with coordinate ones, on a shape (distance
    functions), on a box (the polynomial `HardDirichlet`) and as an initial value."""
    if kind == "distance":
        cfg = _config(PLATE, ["u", "v"], UV, {
            "outer": {"where": "outer", "fields": ["u", "v"], "dirichlet": 0},
            "inner": {"where": "inner", "fields": ["u", "v"], "dirichlet": value}}, {"pu": 32, "pv": 32})
    elif kind == "box":
        cfg = _config(BOX, ["u", "v"], UV, {
            "wall": {"where": "boundary", "fields": ["u", "v"], "dirichlet": value}}, {"pu": 32, "pv": 32})
    else:
        cfg = _config({"x": [-1, 1], "y": [-1, 1], "t": [0, 1]}, ["u", "v"],
                      {"pu": "u_t - lap(u)", "pv": "v_t - lap(v)"},
                      {"start": {"where": "initial", "fields": ["u", "v"], "initial": value}},
                      {"pu": 32, "pv": 32})
    run = _lower_step(cfg)
    hc = run.problem.hard_constraint
    assert hc is not None, "the condition must be imposed exactly, not as a loss term"
    assert type(hc).__name__ == {"distance": "DistanceDirichlet", "box": "HardDirichlet",
                                 "initial": "InitialValue"}[kind]


# --- refused through the real CLI: exit 2, one paragraph naming the key, nothing written ---

def _expr(domain, **extra):
    cfg = {
        "problem": {"name": "expression", "params": {
            "domain": domain, "fields": ["u"], "equations": {"pde": "-lap(u) - 1"},
            "conditions": {"wall": {"where": "boundary", "dirichlet": 0}}}},
        "sampler": {"batch": {"pde": 64, "wall": 64}},
        "train": {"steps": 1, "chunk": 1}, "checkpoint": {"every": 0}, "eval": {"resolution": 5},
    }
    cfg.update(extra)
    return cfg


def _refused(tmp_path, cfg, capsys):
    from pinnkit.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run"
    rc = main(["train", str(path), "--out", str(out), "--no-plots", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert "Traceback" not in err and "\n\n" not in err, err
    assert not out.exists(), "a refused config must write nothing"
    return " ".join(err.split()).replace("- ", "-")  # the CLI wraps lines, also at hyphens


def _plate(radius):
    return {"difference": [{"rectangle": {"lower": [0, 0], "upper": [1, 1]}},
                           {"disk": {"center": [0.5, 0.5], "radius": radius, "name": "hole"}}]}


@pytest.mark.parametrize("radius", [1e-12, 1e-300])
def test_a_hole_below_the_float_resolution_is_refused(tmp_path, capsys, radius):
    """A hole of radius 1e-12 (non-finite loss at step 0) or 1e-300 (the distance
    underflows: "successful" with u = 0) in a unit square, in float32."""
    flat = _refused(tmp_path, _expr(_plate(radius)), capsys)
    assert "problem.params.domain.difference.1.disk" in flat, flat
    assert "below the resolution of float32" in flat and "numerics.x64: true" in flat, flat


def test_a_feature_shrunk_by_a_scale_transform_is_refused(tmp_path, capsys):
    tiny = {"union": [{"rectangle": {"lower": [0, 0], "upper": [1, 1]}},
                      {"scale": {"shape": {"disk": {"center": [2, 2], "radius": 1}}, "factor": 1e-9}}]}
    flat = _refused(tmp_path, _expr(tiny), capsys)
    assert "problem.params.domain.union.1.scale.shape.disk" in flat and "2e-09 across" in flat, flat


def test_resolution_is_that_of_the_configs_dtype():
    """float64 (numerics.x64) resolves the 1e-12 hole in a unit square (64 ulp of 1.4:
    2e-14), float32 does not."""
    from pinnkit.geometry.config import GeometryError, build_domain

    with pytest.raises(GeometryError, match="float32"):
        build_domain(_plate(1e-12))
    old = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        assert "hole" in build_domain(_plate(1e-12)).names()
        with pytest.raises(GeometryError, match="below the resolution of float64"):
            build_domain(_plate(1e-15))
    finally:
        jax.config.update("jax_enable_x64", old)


def _box_file(tmp_path, name="box.stl", scale=1.0):
    trimesh = pytest.importorskip("trimesh")
    path = tmp_path / name
    trimesh.creation.box().apply_scale(scale).export(path)
    return path


@pytest.mark.parametrize("scale", [-1, 0, ".nan"])
def test_mesh_scale_must_be_positive(tmp_path, capsys, scale):
    cfg = _expr({"mesh": {"file": str(_box_file(tmp_path)), "scale": scale}})
    text = yaml.safe_dump(cfg).replace("'.nan'", ".nan")
    (tmp_path / "c.yaml").write_text(text)
    flat = _refused(tmp_path, yaml.safe_load(text), capsys)
    assert "problem.params.domain.mesh" in flat and "mesh scale must be finite and > 0" in flat, flat
    assert "watertight" not in flat


def _obj(tmp_path, vertices):
    trimesh = pytest.importorskip("trimesh")
    box = trimesh.creation.box()
    lines = [f"v {a!r} {b!r} {c!r}" for a, b, c in vertices(np.asarray(box.vertices))]
    lines += [f"f {i + 1} {j + 1} {k + 1}" for i, j, k in box.faces]
    path = tmp_path / "box.obj"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_nan_vertex_is_named_not_called_open(tmp_path, capsys):
    def nan_first(v):
        v = v.copy()
        v[0, 1] = np.nan
        return v.tolist()
    flat = _refused(tmp_path, _expr({"mesh": {"file": str(_obj(tmp_path, nan_first))}}), capsys)
    assert "not finite numbers" in flat and "vertex 0" in flat and "watertight" not in flat, flat


def test_overflowing_vertices_are_refused_up_front(tmp_path, capsys, recwarn):
    """1e308 coordinates: was 30 overflow warnings and a message about boundary_value."""
    path = _obj(tmp_path, lambda v: (v * 1e308).tolist())
    flat = _refused(tmp_path, _expr({"mesh": {"file": str(path)}}), capsys)
    assert "beyond +-1e+12" in flat and "mesh.scale" in flat and "boundary_value" not in flat, flat
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_a_truncated_stl_says_truncated(tmp_path, capsys):
    path = _box_file(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    flat = _refused(tmp_path, _expr({"mesh": {"file": str(path)}}), capsys)
    assert "is truncated" in flat and "header counts 12 triangles" in flat, flat
    assert "charset_normalizer" not in flat
