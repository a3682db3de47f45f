"""Domains: every piece lies where it should, boundaries are sampled by measure."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.geometry.domains import Box, Interval, SpaceTime


def _on_face(p, box, axis, side):
    v = box.upper[axis] if side else box.lower[axis]
    return np.isclose(p[:, axis], v)


@pytest.mark.parametrize("lower,upper", [((0.0,), (2.0,)), ((0.0, -1.0), (1.0, 2.0)), ((0, 0, 0), (1, 2, 3))])
def test_box_pieces(lower, upper):
    box = Box(lower, upper)
    key = jax.random.key(0)
    inner = np.asarray(box.sample(key, 2000))
    assert np.all(inner >= np.array(lower)) and np.all(inner <= np.array(upper))
    for name, (axis, side) in box.faces().items():
        p = np.asarray(box.sample(key, 200, name))
        assert _on_face(p, box, axis, side).all(), name
        assert np.all(p >= np.array(lower) - 1e-6) and np.all(p <= np.array(upper) + 1e-6)


def test_boundary_union_is_measure_uniform():
    # Faces of [0,1]x[0,2]: x-faces have length 2, y-faces length 1 -> fractions 1/3, 1/6.
    box = Box((0.0, 0.0), (1.0, 2.0))
    n = 40_000
    p = np.asarray(box.sample(jax.random.key(1), n, "boundary"))
    on_any = np.zeros(n, bool)
    for (axis, side), frac in {(0, 0): 1 / 3, (0, 1): 1 / 3, (1, 0): 1 / 6, (1, 1): 1 / 6}.items():
        on = _on_face(p, box, axis, side)
        on_any |= on
        sigma = np.sqrt(frac * (1 - frac) / n)
        assert abs(on.mean() - frac) < 5 * sigma
    assert on_any.all()
    # Positions along a face are uniform: mean of y on the left face is 1 (5 sigma).
    left = p[_on_face(p, box, 0, 0)]
    assert abs(left[:, 1].mean() - 1.0) < 5 * (2 / np.sqrt(12)) / np.sqrt(len(left))


def test_normals():
    box = Box((0.0, 0.0), (1.0, 1.0))
    cases = {(0.0, 0.3): (-1, 0), (1.0, 0.3): (1, 0), (0.4, 0.0): (0, -1), (0.4, 1.0): (0, 1)}
    for x, n in cases.items():
        np.testing.assert_array_equal(box.normal(jnp.array(x), "boundary"), n)
    np.testing.assert_array_equal(box.normal(jnp.array([1.0, 0.5]), "right"), [1, 0])


def test_spacetime():
    st = SpaceTime(Interval(-1.0, 1.0), 0.0, 2.0)
    assert st.coords == ("t", "x") and st.spatial_coords == ("x",)
    assert "initial" in st.pieces() and "left" in st.pieces()
    p0 = np.asarray(st.sample(jax.random.key(0), 100, "initial"))
    assert np.all(p0[:, 0] == 0.0) and np.all(np.abs(p0[:, 1]) <= 1)
    pl = np.asarray(st.sample(jax.random.key(0), 100, "left"))
    assert np.all(pl[:, 1] == -1.0) and pl[:, 0].min() >= 0 and pl[:, 0].max() <= 2
    np.testing.assert_array_equal(st.normal(jnp.array([0.5, 1.0]), "right"), [0, 1])
    np.testing.assert_array_equal(st.normal(jnp.array([0.0, 0.2]), "initial"), [-1, 0])


def test_grid_and_invalid():
    pts, shape = Box((0, 0), (1, 2)).grid(5)
    assert shape == (5, 5) and pts.shape == (25, 2) and pts[-1].tolist() == [1, 2]
    with pytest.raises(ValueError, match="lower < upper"):
        Box((0.0,), (0.0,))
    with pytest.raises(ValueError, match="unknown domain piece 'lid'"):
        Box((0, 0), (1, 1)).sample(jax.random.key(0), 4, "lid")
    with pytest.raises(ValueError, match="t0 < t1"):
        SpaceTime(Interval(0, 1), 1.0, 0.0)
