"""TriangleMesh through Warp's BVH (in jit and on the host) and the smooth mesh ADF."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.geometry import DistanceDirichlet, TriangleMesh
from pinnkit.geometry.distance import adf
from pinnkit.geometry.mesh import _tri_distance2, _winding

pytest.importorskip("warp")
trimesh = pytest.importorskip("trimesh")


def _torus(major=64, minor=32):
    t = trimesh.creation.torus(major_radius=1.0, minor_radius=0.4, major_sections=major, minor_sections=minor)
    return t.vertices, t.faces


def _brute64(tri, x):
    """The O(T) float64 signed distance, the reference."""
    with jax.enable_x64(True):
        t = jnp.asarray(tri, jnp.float64)

        def sd(p):
            d = jnp.sqrt(jnp.maximum(jnp.min(_tri_distance2(p, t)), 0.0))
            return jnp.where(_winding(p, t) > 0.5, -d, d)

        return np.asarray(jax.jit(lambda x: jax.lax.map(sd, x, batch_size=50))(jnp.asarray(x, jnp.float64)))


def test_warp_sdf_in_jit_is_exact_to_float32_rounding():
    m = TriangleMesh(*_torus(100, 100), backend="warp")  # 20,000 triangles
    x = np.random.default_rng(0).uniform(*m.bbox(), (1000, 3))
    d = np.asarray(jax.jit(jax.vmap(m.sdf))(jnp.asarray(x, jnp.float32)))
    ref = _brute64(m.triangles, x)
    # Warp computes in float32 on coordinates |x| <= 1.4: a few ulp(1.4) = 1.2e-7 each
    assert np.abs(d - ref).max() < 1e-6
    assert np.abs(m.host_signed_distance(x) - ref).max() < 1e-6
    assert np.array_equal(m.host_contains(x), ref < 0)


def test_warp_sdf_gradient_is_the_distance_gradient():
    v, f = _torus()
    mw, mj = TriangleMesh(v, f, backend="warp"), TriangleMesh(v, f, backend="jax")
    x = jnp.asarray(np.random.default_rng(1).uniform(*mw.bbox(), (300, 3)), jnp.float32)
    gw = jax.jit(jax.vmap(jax.grad(mw.sdf)))(x)
    gj = jax.jit(jax.vmap(jax.grad(mj.sdf)))(x)
    d = np.abs(np.asarray(jax.vmap(mj.sdf)(x)))
    far = d > 1e-2  # direction (x - c)/|x - c| from float32 closest points: error ~ 1e-7/|x - c|
    assert np.abs(np.asarray(gw - gj))[far].max() < 1e-4


def test_per_step_interior_sampling_is_the_same_with_either_backend():
    v, f = _torus()
    mw, mj = TriangleMesh(v, f, backend="warp"), TriangleMesh(v, f, backend="jax")
    u = jax.random.uniform(jax.random.key(0), (mw.unit_rows(512, "interior"), 3))
    pw = jax.jit(lambda u: mw.points(u, "interior", 512))(u)
    pj = jax.jit(lambda u: mj.points(u, "interior", 512))(u)
    assert np.array_equal(np.asarray(pw), np.asarray(pj))
    assert (mj.host_signed_distance(np.asarray(pw)) < 0).all()


def test_bad_backend_is_one_paragraph():
    with pytest.raises(ValueError, match="backend must be one of") as e:
        TriangleMesh(*_torus(8, 6), backend="fast")
    assert "\n" not in str(e.value)


def test_mesh_adf_is_zero_on_the_surface_and_a_distance_near_it():
    with jax.enable_x64(True):
        m = TriangleMesh(*_torus(48, 24))
        phi = jax.jit(jax.vmap(adf(m)))
        y = m.sample(jax.random.key(0), 2000, "boundary", jnp.float64)
        assert np.abs(np.asarray(phi(y))).max() < 1e-12
        x = m.sample(jax.random.key(1), 2000, "interior", jnp.float64)
        p, d = np.asarray(phi(x)), -m.host_signed_distance(np.asarray(x))
        assert (p > 0).all()
        near = d < 0.05  # normalised to first order; curved: neighbouring planes add (measured 0.99 ... 1.19)
        assert np.all(p[near] / d[near] > 0.95) and np.all(p[near] / d[near] < 1.25)
        # a weighted plane distance is at most |x - g_i| < R + r_i; R where none is weighted
        r = np.linalg.norm(m.triangles - m.triangles.mean(1, keepdims=True), axis=2).max()
        assert p.max() <= m.smooth.radius + r
        assert np.allclose(p[d > m.smooth.radius + 2 * r], m.smooth.radius)


# each mesh adf (pinnkit.geometry.mesh.MESH_ADFS) on a torus: the potential's on 576 triangles
# (one chunk: its sum over all of them is the cost), the blend's on 2,304
ADF_TORI = [("blend", (48, 24)), ("potential", (24, 12))]


@pytest.mark.parametrize("kind,size", ADF_TORI)
def test_mesh_adf_derivatives_taylor_against_autodiff(kind, size):
    """The hard-constrained network's value, gradient and Laplacian by the Taylor engine
    (the training step's) and by nested autodiff agree to rounding, in float64."""
    from pinnkit.diffops import Autodiff, Layout, Taylor
    from pinnkit.nn.nets import build_mlp_network

    with jax.enable_x64(True):
        m = TriangleMesh(*_torus(*size), adf=kind)
        g = lambda x: jnp.atleast_1d(x[0] * x[2])  # noqa: E731
        hd = DistanceDirichlet(m, ("boundary",), ((0,),), (g,))
        net = build_mlp_network(("x", "y", "z"), ("u",), width=6, depth=2, activation="tanh",
                                init="glorot_normal", bounds=m.bbox(), transform=hd, key=jax.random.key(0),
                                dtype=jnp.float64)
        x = m.sample(jax.random.key(2), 12, "interior", jnp.float64)
        layout = Layout(("x", "y", "z"), ("x", "y", "z"), ("u",))

        def res(f, c):
            return jnp.stack([f["u"], f.partial("u", "x"), f.partial("u", "z"), f.laplacian("u")])

        run = lambda e: np.asarray(jax.jit(jax.vmap(lambda p: e.evaluate(res, net, layout, p, {})))(x))  # noqa: E731
        got, ref = run(Taylor()), run(Autodiff())
        assert np.isfinite(ref).all()
        scale = np.abs(ref).max(axis=0)
        assert (np.abs(got - ref) / scale).max() < 1e-10


@pytest.mark.parametrize("kind,size", ADF_TORI)
def test_hard_constraint_on_a_mesh_meets_its_data_on_the_surface(kind, size):
    with jax.enable_x64(True):
        m = TriangleMesh(*_torus(*size), adf=kind)
        g = lambda x: jnp.atleast_1d(jnp.sin(x[0]) * jnp.cos(x[1]) + x[2])  # noqa: E731
        dd = DistanceDirichlet(m, ("boundary",), ((0,),), (g,))
        y = m.sample(jax.random.key(3), 1000, "boundary", jnp.float64)
        net = jnp.full((1,), 123.0)
        out = jax.vmap(lambda p: dd(p, net))(y)
        assert np.abs(np.asarray(out - jax.vmap(g)(y))).max() < 1e-6


def test_mesh_adf_refuses_a_table_too_large_in_one_paragraph():
    m = TriangleMesh(*_torus(100, 100), adf_radius=1.0)  # 20,000 triangles within reach of a cell
    with pytest.raises(ValueError, match="smaller adf_radius") as e:
        DistanceDirichlet(m, ("boundary",), ((0,),), (None,))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="adf_radius must be a number > 0"):
        TriangleMesh(*_torus(8, 6), adf_radius=-1.0)
