"""The potential-based mesh distance (`pinnkit.geometry.mesh_potential`): its closed form
against quadrature, its normalisation and its independence of the triangulation (the hard
constraint through it: tests/test_mesh_backend.py, with the blend's)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial.legendre import leggauss

from pinnkit.errors import ConfigError
from pinnkit.geometry import TriangleMesh, mesh_potential
from pinnkit.geometry.distance import adf
from pinnkit.geometry.mesh_potential import PotentialADF, _inverse_cube_integrals

trimesh = pytest.importorskip("trimesh")
CUBE = Path(__file__).resolve().parent.parent / "configs" / "meshes" / "cube.obj"


def _quadrature(x, tri, n=120):
    """$\\int_T |x - y|^{-3} dA$ by an n x n Gauss rule on the Duffy square (float64)."""
    u, w = leggauss(n)
    u, w = (u + 1) / 2, w / 2
    s, v = np.meshgrid(u, u, indexing="ij")
    a, b, c = tri
    y = a + s[..., None] * (b - a) + (s * v)[..., None] * (c - b)
    jac = s * np.linalg.norm(np.cross(b - a, c - b))
    return float(np.sum(np.outer(w, w) * jac / np.linalg.norm(y - x, axis=-1) ** 3))


def _integral(x, tri):
    area4 = 2 * np.linalg.norm(np.cross(tri[1] - tri[0], tri[2] - tri[0]))
    j, on = _inverse_cube_integrals(jnp.asarray(x), jnp.asarray(tri[None]), jnp.asarray([area4]))
    assert not bool(on[0])
    return float(j[0])


def test_triangle_integral_against_quadrature():
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        checked = 0
        for _ in range(60):
            tri, x = rng.normal(size=(3, 3)), 1.5 * rng.normal(size=3)
            if np.linalg.norm(x - tri.mean(0)) < 0.5:  # the rule needs the point off the triangle
                continue
            for y in (x, x[::-1]):  # either winding
                tri_y = tri if y is x else tri[::-1]
                ref = _quadrature(x, tri_y)
                assert abs(_integral(x, tri_y) / ref - 1) < 1e-10
            checked += 1
        assert checked > 30
        # in the triangle's plane, outside it (the series branch), and just off the plane
        tri = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0]])
        for h in (0.0, 1e-12, 1e-6, 1e-2):
            x = np.array([1.0, 1.0, h])
            assert abs(_integral(x, tri) / _quadrature(x, tri, 300) - 1) < 1e-10


def test_potential_is_a_distance_at_a_face_and_the_same_for_any_triangulation():
    with jax.enable_x64(True):
        fine = TriangleMesh.from_file(CUBE, adf="potential")  # 768 triangles
        box = trimesh.creation.box(bounds=[[0, 0, 0], [1, 1, 1]])
        coarse = TriangleMesh(box.vertices, box.faces, adf="potential")  # 12
        assert len(fine.triangles) == 768 and len(coarse.triangles) == 12
        x = jnp.asarray(np.random.default_rng(1).random((500, 3)))
        pf, pc = (np.asarray(jax.jit(jax.vmap(adf(m)))(x)) for m in (fine, coarse))
        assert (pf > 0).all()
        assert np.max(np.abs(pf - pc) / pf) < 1e-12  # measured 6.8e-15
        both = jax.jit(jax.vmap(jax.value_and_grad(adf(fine))))
        # above the face z = 0: phi = h + O(h^2), grad phi = the inward normal
        h = np.array([1e-4, 1e-6])
        v, g = both(jnp.asarray([[0.3, 0.6, h[0]], [0.7, 0.2, h[1]]]))
        assert np.all(np.abs(np.asarray(v) / h - 1) < 5 * h)
        assert np.all(np.abs(np.asarray(g) - [0, 0, 1]) < 5 * h[:, None])
        y = fine.sample(jax.random.key(0), 500, "boundary", jnp.float64)  # on it to rounding
        v, g = both(y)
        assert np.abs(np.asarray(v)).max() < 1e-12 and np.isfinite(np.asarray(g)).all()


def test_chunks_sum_to_the_same(monkeypatch):
    with jax.enable_x64(True):
        tri = TriangleMesh.from_file(CUBE).triangles
        x = jnp.asarray(np.random.default_rng(2).random((50, 3)))
        whole = np.asarray(jax.vmap(PotentialADF(tri))(x))
        monkeypatch.setattr(mesh_potential, "CHUNK", 100)  # 8 chunks, the last padded by 32
        chunked = PotentialADF(tri)
        assert chunked.tri.shape == (8, 100, 3, 3)
        assert np.max(np.abs(np.asarray(jax.vmap(chunked)(x)) / whole - 1)) < 1e-13


def test_bad_adf_and_too_many_triangles_are_one_paragraph(monkeypatch):
    box = trimesh.creation.box()
    for bad in ("smooth", 3, None):
        with pytest.raises(ValueError, match="mesh adf must be one of") as e:
            TriangleMesh(box.vertices, box.faces, adf=bad)
        assert "\n" not in str(e.value)
    monkeypatch.setattr(mesh_potential, "MAX_TRIANGLES", 10)
    with pytest.raises(ConfigError, match="limited to 10 triangles: this mesh has 12") as e:
        PotentialADF(box.triangles)
    assert "\n" not in str(e.value)
