"""Throughput of the Warp BVH mesh backend (pinnkit.geometry.mesh_warp) on icospheres.

Run: taskset -c 1 python scripts/bench_mesh_warp.py   (CPU seconds, time.process_time)
"""

import time

import numpy as np
import trimesh

from pinnkit.geometry.mesh_warp import WarpMesh

for sub in (5, 7):  # 20 * 4**sub triangles: 20,480 and 327,680
    m = trimesh.creation.icosphere(subdivisions=sub)
    w = WarpMesh(m.triangles)
    x = np.random.default_rng(0).uniform(-1.5, 1.5, (200_000, 3))
    w.query(x[:10])  # kernel compiled and cached
    t = time.process_time()
    d = w.query(x)[0]
    dt = time.process_time() - t
    ref = -trimesh.proximity.signed_distance(m, x[:1000])
    err = np.abs(d[:1000] - ref).max()
    print(f"{len(m.faces)} triangles: {len(x) / dt:.3g} queries/s, max |d - trimesh| {err:.2g}")
