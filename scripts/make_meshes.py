"""Writes the triangle meshes the configs use (configs/meshes/), with trimesh.

    python scripts/make_meshes.py

``torus.obj``: the torus of major radius 1 and minor radius 0.4 about the z axis,
48 x 24 sections (2,304 triangles), watertight. configs/poisson_mesh.yaml solves on it.
``cube.obj``: the unit cube [0, 1]^3, each face split into 8 x 8 squares of 2 triangles
(768 triangles): flat faces on which an analytic solution can vanish exactly
(configs/tiny/poisson_mesh_cube.yaml, hard constraint against loss term).
"""

from pathlib import Path

import trimesh

OUT = Path(__file__).resolve().parents[1] / "configs" / "meshes"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    torus = trimesh.creation.torus(major_radius=1.0, minor_radius=0.4, major_sections=48, minor_sections=24)
    assert torus.is_watertight and torus.is_winding_consistent
    torus.export(OUT / "torus.obj")
    print(f"wrote {OUT / 'torus.obj'}: {len(torus.faces)} triangles, volume {torus.volume:.6f}")
    cube = trimesh.creation.box(bounds=[[0, 0, 0], [1, 1, 1]])
    for _ in range(3):  # 12 -> 768 triangles (each split into 4 per pass)
        cube = cube.subdivide()
    assert cube.is_watertight and cube.is_winding_consistent and len(cube.faces) == 768
    cube.export(OUT / "cube.obj")
    print(f"wrote {OUT / 'cube.obj'}: {len(cube.faces)} triangles, volume {cube.volume:.6f}")


if __name__ == "__main__":
    main()
