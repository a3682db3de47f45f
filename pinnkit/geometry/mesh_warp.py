"""BVH mesh queries on the host through NVIDIA Warp (the optional ``meshfast`` extra).

`WarpMesh(triangles)` builds Warp's BVH once; `query(points)` returns the signed distance
(negative inside, sign from the nearest face's normal), the closest point and that face's
outward normal, in float64 on the host (Warp computes in float32). The device is Warp's
CPU unless ``device="cuda"`` is given and present. `require_warp` gives the one-paragraph
error when a config asks for this backend and ``warp-lang`` is missing.
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
            "pinnkit[meshfast]` (or `pip install warp-lang`), or drop the backend setting "
            "to use the built-in pure-JAX mesh queries, which are exact but O(triangles) "
            "per point."
        ) from e
    wp.config.quiet = True
    wp.init()
    return wp


_KERNEL = None


def _kernel(wp):
    global _KERNEL
    if _KERNEL is None:

        @wp.kernel
        def query(
            mesh: wp.uint64,
            pts: wp.array(dtype=wp.vec3),
            dist: wp.array(dtype=float),
            close: wp.array(dtype=wp.vec3),
            normal: wp.array(dtype=wp.vec3),
        ):
            i = wp.tid()
            p = pts[i]
            q = wp.mesh_query_point_sign_normal(mesh, p, 1.0e30)
            c = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
            dist[i] = q.sign * wp.length(p - c)
            close[i] = c
            normal[i] = wp.mesh_eval_face_normal(mesh, q.face)

        _KERNEL = query
    return _KERNEL


class WarpMesh:
    """A Warp BVH over a closed, outward-wound triangle soup ``triangles`` (T, 3, 3)."""

    def __init__(self, triangles, device: str = "cpu"):
        wp = self.wp = require_warp()
        t = np.asarray(triangles, np.float64).reshape(-1, 3)
        self.device = device
        self.points = wp.array(t.astype(np.float32), dtype=wp.vec3, device=device)
        idx = wp.array(np.arange(t.shape[0], dtype=np.int32), dtype=int, device=device)
        self.mesh = wp.Mesh(points=self.points, indices=idx)
        self.kernel = _kernel(wp)

    def query(self, points):
        """(signed distance (n,), closest point (n, 3), face normal (n, 3)) as float64."""
        wp = self.wp
        x = np.asarray(points, np.float32).reshape(-1, 3)
        n = x.shape[0]
        pts = wp.array(x, dtype=wp.vec3, device=self.device)
        d = wp.empty(n, dtype=float, device=self.device)
        c = wp.empty(n, dtype=wp.vec3, device=self.device)
        nm = wp.empty(n, dtype=wp.vec3, device=self.device)
        wp.launch(self.kernel, dim=n, inputs=[self.mesh.id, pts, d, c, nm], device=self.device)
        wp.synchronize_device(self.device)
        f = np.float64
        return d.numpy().astype(f), c.numpy().astype(f), nm.numpy().astype(f)

    def signed_distance(self, points):
        return self.query(points)[0]

    def contains(self, points):
        return self.query(points)[0] < 0
