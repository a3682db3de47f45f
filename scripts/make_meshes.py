"""Writes the triangle meshes the configs use (configs/meshes/), with trimesh.

    python scripts/make_meshes.py

``torus.obj``: the torus of major radius 1 and minor radius 0.4 about the z axis,
48 x 24 sections (2,304 triangles), watertight. configs/poisson_mesh.yaml solves on it.
``cube.obj``: the unit cube [0, 1]^3, each face split into 8 x 8 squares of 2 triangles
(768 triangles): flat faces on which an analytic solution can vanish exactly
(configs/tiny/poisson_mesh_cube.yaml, hard constraint against loss term).
``bent_pipe.stl`` (``--pipe`` only: 2.3 MB of text, committed; gzip packs it into 172 kB):
a pipe of radius 0.5 bent by 90 degrees (`bent_pipe`), 12,384 triangles, an ASCII STL with
three named solids ``wall``, ``inlet``, ``outlet`` (the caps), the way CFD tools name an
STL's patches; each is one boundary piece of the domain (configs/pipe_mesh.yaml).
"""

import argparse
import math
from pathlib import Path

import numpy as np
import trimesh

OUT = Path(__file__).resolve().parents[1] / "configs" / "meshes"


def bent_pipe(radius: float = 0.5, bend: float = 1.5, length: float = 3.0, n_theta: int = 48,
              spacing: float | None = None):
    r"""A watertight pipe of ``radius`` along the centre line: straight from
    $(-L, 0, 0)$ to the origin along $x$, a quarter circle of radius ``bend`` about
    $(0, b, 0)$ in the $xy$ plane, straight again from $(b, b, 0)$ to $(b, b + L, 0)$
    along $y$; ``n_theta`` vertices per ring, rings ``spacing`` apart along the centre
    line (default: the ring's own edge length, $2\pi r/n_\theta$), flat caps as fans about
    their centres. Returns ``(vertices (V, 3), faces (F, 3), labels (F,))`` with labels
    ``wall``, ``inlet`` (the cap at $x = -L$, outward normal $-e_x$) and ``outlet`` (at
    $y = b + L$, outward $+e_y$), faces wound outwards."""
    if not (0 < radius < bend and length > 0 and n_theta >= 3):
        raise ValueError(f"bent_pipe needs 0 < radius < bend, length > 0, n_theta >= 3: actual radius="
                         f"{radius}, bend={bend}, length={length}, n_theta={n_theta}")
    h = spacing or 2 * math.pi * radius / n_theta
    n_line, n_bend = max(1, round(length / h)), max(2, round(0.5 * math.pi * bend / h))
    centres, tangents = [], []
    for s in np.linspace(-length, 0.0, n_line + 1):  # inlet leg, along +x
        centres.append((s, 0.0, 0.0)), tangents.append((1.0, 0.0, 0.0))
    for a in np.linspace(0.0, 0.5 * math.pi, n_bend + 1)[1:]:  # the bend, about (0, bend, 0)
        centres.append((bend * math.sin(a), bend * (1 - math.cos(a)), 0.0))
        tangents.append((math.cos(a), math.sin(a), 0.0))
    for s in np.linspace(0.0, length, n_line + 1)[1:]:  # outlet leg, along +y
        centres.append((bend, bend + s, 0.0)), tangents.append((0.0, 1.0, 0.0))
    c, t = np.asarray(centres), np.asarray(tangents)
    ez = np.asarray([0.0, 0.0, 1.0])
    side = np.cross(t, ez)  # in the bend's plane, perpendicular to the centre line
    th = 2 * math.pi * np.arange(n_theta) / n_theta
    ring = np.cos(th)[None, :, None] * ez + np.sin(th)[None, :, None] * side[:, None, :]
    rings = c[:, None, :] + radius * ring
    n_rings = len(c)
    vertices = np.concatenate([rings.reshape(-1, 3), c[[0, -1]]])
    idx = np.arange(n_rings * n_theta).reshape(n_rings, n_theta)
    a, b = idx[:-1], np.roll(idx[:-1], -1, axis=1)  # ring i: vertex j and j + 1
    a2, b2 = idx[1:], np.roll(idx[1:], -1, axis=1)  # ring i + 1
    wall = np.concatenate([np.stack([a, b, b2], -1).reshape(-1, 3), np.stack([a, b2, a2], -1).reshape(-1, 3)])
    first, last = n_rings * n_theta, n_rings * n_theta + 1
    inlet = np.stack([np.full(n_theta, first), np.roll(idx[0], -1), idx[0]], -1)
    outlet = np.stack([np.full(n_theta, last), idx[-1], np.roll(idx[-1], -1)], -1)
    faces = np.concatenate([wall, inlet, outlet])
    labels = np.asarray(["wall"] * len(wall) + ["inlet"] * n_theta + ["outlet"] * n_theta)
    if trimesh.Trimesh(vertices, faces, process=False).volume < 0:  # wound inwards: turn every face
        faces = faces[:, ::-1]
    return vertices, faces, labels


def write_named_stl(path, vertices, faces, labels) -> None:
    """An ASCII STL with one ``solid NAME`` block per label (in order of first appearance):
    the named patches a multi-solid STL carries (trimesh reads it as a scene of those names)."""
    tri = vertices[faces]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    out = []
    for name in dict.fromkeys(labels.tolist()):
        out.append(f"solid {name}")
        for k in np.flatnonzero(labels == name):
            out.append("facet normal {:.6g} {:.6g} {:.6g}\nouter loop".format(*n[k]))
            out += ["vertex {:.9g} {:.9g} {:.9g}".format(*v) for v in tri[k]]
            out.append("endloop\nendfacet")
        out.append(f"endsolid {name}")
    Path(path).write_text("\n".join(out) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipe", action="store_true", help="also write bent_pipe.stl")
    a = ap.parse_args(argv)
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
    if a.pipe:
        v, f, labels = bent_pipe()
        pipe = trimesh.Trimesh(v, f, process=True)
        assert pipe.is_watertight and pipe.is_winding_consistent and pipe.volume > 0
        write_named_stl(OUT / "bent_pipe.stl", v, f, labels)
        counts = ", ".join(f"{n} {int((labels == n).sum())}" for n in dict.fromkeys(labels.tolist()))
        print(f"wrote {OUT / 'bent_pipe.stl'}: {len(f)} triangles ({counts}), volume {pipe.volume:.6f}")


if __name__ == "__main__":
    main()
