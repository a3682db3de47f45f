"""BVH mesh queries on the host through NVIDIA Warp (the optional ``meshfast`` extra).

`WarpMesh(triangles)` builds Warp's BVH (SAH) once. `query(points)` returns the signed
distance (negative inside, sign from the angle-weighted pseudo-normal of the nearest
feature), the closest point and that face's outward normal; `contains(points)` is the
ray-parity inside test (one ray in a fixed oblique direction, crossings counted through
the BVH: $O(\\log T)$ per point, about 7x cheaper than a distance query). Results are
float64 on the host; Warp computes in float32. The device is Warp's CPU unless
``device="cuda"`` is given and present; a CPU launch runs on one thread.

`require_warp` gives the one-paragraph error when ``warp-lang`` is missing.
"""

from __future__ import annotations

import numpy as np


class MissingBackend(ValueError):
    """The fast mesh backend was asked for but ``warp-lang`` is not installed."""


def require_warp():
    try:
        import warp as wp
    except ImportError as e:
        raise MissingBackend(
            "the mesh backend 'warp' needs the optional package warp-lang (NVIDIA Warp BVH "
            "mesh queries), which is not installed: install it with `pip install "
            "pinnkit[meshfast]` (or `pip install warp-lang`), or set the mesh's backend to "
            "'jax' to use the built-in pure-JAX mesh queries, which are exact but "
            "O(triangles) per point."
        ) from e
    wp.config.quiet = True
    wp.init()
    return wp


def warp_available() -> bool:
    """Whether ``warp-lang`` can be imported (the default mesh backend then uses it)."""
    try:
        require_warp()
    except MissingBackend:
        return False
    return True


# The parity rays point along (0.5773, 0.6123, 0.5404), an oblique direction no mesh edge
# of a CAD export is parallel to in practice (a ray grazing an edge or vertex would count
# it twice or not at all).
_KERNELS: dict = {}


def _kernels(wp):
    if not _KERNELS:

        @wp.kernel
        def query(
            mesh: wp.uint64,
            pts: wp.array(dtype=wp.vec3),
            max_dist: float,
            dist: wp.array(dtype=float),
            close: wp.array(dtype=wp.vec3),
            normal: wp.array(dtype=wp.vec3),
        ):
            i = wp.tid()
            p = pts[i]
            q = wp.mesh_query_point_sign_normal(mesh, p, max_dist)
            if q.result:
                c = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
                dist[i] = q.sign * wp.length(p - c)
                close[i] = c
                normal[i] = wp.mesh_eval_face_normal(mesh, q.face)
            else:  # farther than max_dist: the sign from the ray parity
                n = wp.mesh_query_ray_count_intersections(mesh, p, wp.vec3(0.5773, 0.6123, 0.5404))
                dist[i] = max_dist * (1.0 - 2.0 * float(n % 2))
                close[i] = p
                normal[i] = wp.vec3(0.0, 0.0, 0.0)

        @wp.kernel
        def inside(mesh: wp.uint64, pts: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.int32)):
            i = wp.tid()
            n = wp.mesh_query_ray_count_intersections(mesh, pts[i], wp.vec3(0.5773, 0.6123, 0.5404))
            out[i] = wp.int32(n % 2)

        _KERNELS.update(query=query, inside=inside)
    return _KERNELS


class WarpMesh:
    """A Warp BVH over a closed, outward-wound triangle soup ``triangles`` (T, 3, 3)."""

    def __init__(self, triangles, device: str = "cpu"):
        wp = self.wp = require_warp()
        t = np.asarray(triangles, np.float64).reshape(-1, 3)
        self.device = device
        self.points = wp.array(t.astype(np.float32), dtype=wp.vec3, device=device)
        idx = wp.array(np.arange(t.shape[0], dtype=np.int32), dtype=int, device=device)
        self.mesh = wp.Mesh(points=self.points, indices=idx, bvh_constructor="sah")
        self.kernels = _kernels(wp)

    def _points(self, points):
        x = np.ascontiguousarray(np.asarray(points, np.float32).reshape(-1, 3))
        return self.wp.array(x, dtype=self.wp.vec3, device=self.device), x.shape[0]

    def query(self, points, max_dist: float = 1e30):
        """(signed distance (n,), closest point (n, 3), face normal (n, 3)) as float64.
        Beyond ``max_dist`` from the surface: ``+-max_dist``, the point itself, 0."""
        wp = self.wp
        pts, n = self._points(points)
        d = wp.empty(n, dtype=float, device=self.device)
        c = wp.empty(n, dtype=wp.vec3, device=self.device)
        nm = wp.empty(n, dtype=wp.vec3, device=self.device)
        wp.launch(self.kernels["query"], dim=n, inputs=[self.mesh.id, pts, float(max_dist), d, c, nm],
                  device=self.device)
        wp.synchronize_device(self.device)
        f = np.float64
        return d.numpy().astype(f), c.numpy().astype(f), nm.numpy().astype(f)

    def signed_distance(self, points, max_dist: float = 1e30):
        return self.query(points, max_dist)[0]

    def contains(self, points) -> np.ndarray:
        """Ray-parity inside test, bool (n,)."""
        wp = self.wp
        pts, n = self._points(points)
        out = wp.empty(n, dtype=wp.int32, device=self.device)
        wp.launch(self.kernels["inside"], dim=n, inputs=[self.mesh.id, pts, out], device=self.device)
        wp.synchronize_device(self.device)
        return out.numpy().astype(bool)
