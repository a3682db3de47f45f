"""The Warp BVH mesh backend: exact against trimesh's distance, inside test, missing dependency."""

import numpy as np
import pytest

from pinnkit.geometry import mesh_warp

wp = pytest.importorskip("warp")
trimesh = pytest.importorskip("trimesh")


def test_signed_distance_matches_reference_on_1e3_points():
    m = trimesh.creation.icosphere(subdivisions=3)
    x = np.random.default_rng(0).uniform(-1.5, 1.5, (1000, 3))
    d, c, nm = mesh_warp.WarpMesh(m.triangles).query(x)
    ref = -trimesh.proximity.signed_distance(m, x)
    # float32 inputs and arithmetic: |x| <= 2.6, so rounding ~ a few ulp(2.6) ~ 1e-6
    assert np.abs(d - ref).max() < 2e-6
    assert np.allclose(np.linalg.norm(x - c, axis=1), np.abs(d), atol=2e-6)
    assert np.allclose(np.linalg.norm(nm, axis=1), 1, atol=1e-5)


def test_inside_test_on_a_sphere():
    m = trimesh.creation.icosphere(subdivisions=4)
    x = np.random.default_rng(1).uniform(-1.2, 1.2, (2000, 3))
    r = np.linalg.norm(x, axis=1)
    sure = np.abs(r - 1) > 0.01  # the icosphere's chordal error is below 0.01
    inside = mesh_warp.WarpMesh(m.triangles).contains(x)
    assert np.array_equal(inside[sure], (r < 1)[sure])


def test_missing_warp_gives_one_paragraph(monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "warp":
            raise ImportError("no warp")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(mesh_warp.MissingBackend, match="pip install") as e:
        mesh_warp.require_warp()
    assert "\n" not in str(e.value)
    # a mesh falls back to the built-in queries by default, and refuses backend: warp
    from pinnkit.geometry import TriangleMesh

    t = trimesh.creation.icosphere(subdivisions=1)
    assert TriangleMesh(t.vertices, t.faces).backend == "jax"
    with pytest.raises(mesh_warp.MissingBackend, match="pip install"):
        TriangleMesh(t.vertices, t.faces, backend="warp")
