"""The bent pipe of scripts/make_meshes.py (a closed, outward-wound surface with its caps
named) and the pipe checks of pinnkit.problems.pipe (flux through a cross-section and the
distance from Poiseuille's profile) on analytic fields."""

import importlib.util
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import trimesh
import yaml

from pinnkit.problems.pipe import disk_rule, poiseuille_error, section_flux

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_meshes", ROOT / "scripts" / "make_meshes.py")
make_meshes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_meshes)


def test_bent_pipe_is_a_closed_solid_with_named_caps(tmp_path):
    v, f, labels = make_meshes.bent_pipe()
    assert 10_000 <= len(f) <= 100_000 and len(f) == 12_384
    m = trimesh.Trimesh(v, f, process=True)
    assert m.is_watertight and m.is_winding_consistent
    # the volume of a 48-gon tube along the centre line (Pappus for the bend), to 0.1 %
    area = 0.5 * 48 * 0.5**2 * math.sin(2 * math.pi / 48)
    assert m.volume == pytest.approx(area * (2 * 3.0 + 0.5 * math.pi * 1.5), rel=1e-3)
    assert {n: int((labels == n).sum()) for n in ("wall", "inlet", "outlet")} == {
        "wall": 12_288, "inlet": 48, "outlet": 48}
    normals = trimesh.Trimesh(v, f, process=False).face_normals
    caps = (("inlet", (-3.0, 0.0, 0.0), (-1, 0, 0)), ("outlet", (1.5, 4.5, 0.0), (0, 1, 0)))
    for name, centre, out in caps:
        cap = labels == name
        np.testing.assert_allclose(normals[cap], np.broadcast_to(out, (int(cap.sum()), 3)), atol=1e-12)
        np.testing.assert_allclose(v[f[cap]].reshape(-1, 3).mean(0), centre, atol=0.2)
        tri = v[f[cap]].reshape(-1, 3)
        assert np.abs((tri - centre) @ np.asarray(out, float)).max() < 1e-12  # flat, in its plane
    # the named STL reads back as one solid per name, and as one closed mesh
    path = tmp_path / "pipe.stl"
    make_meshes.write_named_stl(path, v, f, labels)
    scene = trimesh.load(str(path), force="scene")
    assert {k: len(g.faces) for k, g in scene.geometry.items()} == {"wall": 12_288, "inlet": 48, "outlet": 48}
    whole = trimesh.load(str(path), force="mesh", process=False)
    whole = trimesh.Trimesh(whole.vertices, whole.faces, process=True)
    assert whole.is_watertight and whole.is_winding_consistent and whole.volume == pytest.approx(m.volume)


def test_bent_pipe_refuses_a_bend_tighter_than_the_pipe():
    with pytest.raises(ValueError, match="radius < bend"):
        make_meshes.bent_pipe(radius=0.5, bend=0.4)


NORMAL = np.asarray([1.0, 2.0, -0.5]) / np.linalg.norm([1.0, 2.0, -0.5])
CENTER, R, UMAX = np.asarray([0.3, -1.0, 2.0]), 0.5, 1.7


def _poiseuille(skew=0.0):
    side = np.cross(NORMAL, [0.0, 0.0, 1.0])
    side /= np.linalg.norm(side)

    def predict(x):
        q = x - CENTER
        r2 = np.sum(q * q, 1) - (q @ NORMAL) ** 2
        u = UMAX * (1 - r2 / R**2) * (1 + skew * (q @ side) / R)
        return np.concatenate([u[:, None] * NORMAL[None], np.zeros((len(x), 1))], axis=1)
    return predict


def test_section_flux_and_profile_of_analytic_fields():
    pts, w, r = disk_rule(CENTER, NORMAL, R)
    assert np.sum(w) == pytest.approx(math.pi * R**2, rel=1e-13)
    np.testing.assert_allclose((pts - CENTER) @ NORMAL, 0.0, atol=1e-14)  # in the plane
    np.testing.assert_allclose(np.linalg.norm(pts - CENTER, axis=1), r, rtol=1e-13)
    q = math.pi * R**2 * UMAX / 2
    assert section_flux(_poiseuille(), CENTER, NORMAL, R) == pytest.approx(q, rel=1e-13)
    assert section_flux(_poiseuille(), CENTER, -NORMAL, R) == pytest.approx(-q, rel=1e-13)
    assert poiseuille_error(_poiseuille(), CENTER, NORMAL, R) < 1e-13
    # a profile skewed across the section: the same flux (the skew is odd), 0.2 s (1 - s^2)
    # from Poiseuille's at most (s = r/R; the maximum 0.077 at s = 3^-1/2, the rule's nodes
    # coming within a few per cent of it)
    assert section_flux(_poiseuille(0.2), CENTER, NORMAL, R) == pytest.approx(q, rel=1e-13)
    assert 0.07 < poiseuille_error(_poiseuille(0.2), CENTER, NORMAL, R) <= 0.4 / 3**1.5 + 1e-12
    plug = lambda x: np.tile([*(UMAX * NORMAL), 0.0], (len(x), 1))  # noqa: E731
    assert poiseuille_error(plug, CENTER, NORMAL, R) == pytest.approx(0.5, rel=1e-2)  # u_P peaks at 2 U


def test_pipe_section_bad_input():
    with pytest.raises(ValueError, match="non-zero 3-D normal"):
        disk_rule(CENTER, [0.0, 0.0, 0.0], R)
    with pytest.raises(ValueError, match="radius must be > 0"):
        disk_rule(CENTER, NORMAL, -1.0)


# --- the shipped STL as a domain: one boundary piece per named solid -------------------

STL = ROOT / "configs" / "meshes" / "bent_pipe.stl"


def test_shipped_stl_is_the_scripts_output():
    """configs/meshes/bent_pipe.stl is what `make_meshes.py --pipe` writes (same triangles
    in the same named solids, to the file's 9 digits)."""
    v, f, labels = make_meshes.bent_pipe()
    scene = trimesh.load(str(STL), force="scene", process=False)
    assert list(scene.geometry) == ["wall", "inlet", "outlet"]
    for name, g in scene.geometry.items():
        np.testing.assert_allclose(g.vertices[g.faces], v[f[labels == name]], atol=1e-8)


def test_named_solids_are_pieces_sampled_on_their_own_triangles(x64):
    from pinnkit.geometry.mesh import TriangleMesh

    m = TriangleMesh.from_file(STL, backend="jax")
    assert m.labels == ("wall", "inlet", "outlet") and m.sizes == (12_288, 48, 48)
    assert m.pieces() == ("interior", "boundary", "wall", "inlet", "outlet")
    inr = 0.5 * math.cos(math.pi / 48)  # the 48-gon's inradius
    key = jax.random.key(0)
    x = np.asarray(m.sample(key, 400, "inlet", jnp.float64))
    np.testing.assert_allclose(x[:, 0], -3.0, atol=1e-12)  # on the inlet disk's plane
    assert np.hypot(x[:, 1], x[:, 2]).max() <= 0.5 + 1e-12
    assert np.hypot(x[:, 1], x[:, 2]).mean() == pytest.approx(0.5 * 2 / 3, rel=0.05)  # area-uniform
    y = np.asarray(m.sample(key, 400, "outlet", jnp.float64))
    np.testing.assert_allclose(y[:, 1], 4.5, atol=1e-12)
    assert np.hypot(y[:, 0] - 1.5, y[:, 2]).max() <= 0.5 + 1e-12
    w = np.asarray(m.sample(key, 2000, "wall", jnp.float64))
    straight = w[:, 0] < 0  # the inlet leg: on the tube about the x axis
    r = np.hypot(w[straight, 1], w[straight, 2])
    assert straight.sum() > 400 and r.min() >= inr - 1e-9 and r.max() <= 0.5 + 1e-9
    assert (w[:, 0] > -3).all() and (w[:, 1] < 4.5).all()  # no wall point on a cap's plane
    # the normals the do-nothing outflow uses, and the whole surface still closes the solid
    n = jax.vmap(lambda p: m.normal(p, "outlet"))(jnp.asarray(y[:5]))
    np.testing.assert_allclose(n, np.tile([0.0, 1.0, 0.0], (5, 1)), atol=1e-12)
    assert m.host_contains(np.asarray([[-1.0, 0.0, 0.0], [-1.0, 0.6, 0.0]])).tolist() == [True, False]


def test_mesh_names_rename_the_files_solids():
    from pinnkit.geometry.mesh import TriangleMesh

    m = TriangleMesh.from_file(STL, backend="jax", names={"wall": "walls", "outlet": "exit"})
    assert m.labels == ("walls", "inlet", "exit")
    named = r"bent_pipe.stl.*names \['outflow'\] are not boundary names.*'wall', 'inlet', 'outlet'"
    with pytest.raises(ValueError, match=named):
        TriangleMesh.from_file(STL, backend="jax", names={"outflow": "exit"})


def test_obj_groups_are_pieces_too(tmp_path):
    from pinnkit.geometry.mesh import TriangleMesh

    box = trimesh.creation.box()
    top = box.face_normals[:, 2] > 0.5
    lines = ["v {:g} {:g} {:g}".format(*v) for v in box.vertices]
    for name, sel in (("sides", ~top), ("lid", top)):
        lines += [f"g {name}", *("f {} {} {}".format(*(f + 1)) for f in box.faces[sel])]
    (tmp_path / "box.obj").write_text("\n".join(lines) + "\n")
    m = TriangleMesh.from_file(tmp_path / "box.obj", backend="jax")
    assert dict(zip(m.labels, m.sizes, strict=True)) == {"sides": 10, "lid": 2}
    assert m.volume == pytest.approx(1.0)
    assert TriangleMesh.from_file(ROOT / "configs/meshes/cube.obj", backend="jax").labels == ("surface",)


def _pipe_config(**params):
    return {"problem": {"name": "pipe_flow", "params": {
        "domain": {"mesh": {"file": str(STL)}}, "Q": 0.2, "nu": 0.05, **params}},
        "sampler": {"batch": {"momentum": 16, "continuity": 16, "wall": 16, "inlet": 16, "outlet": 16}},
        "train": {"steps": 1, "chunk": 1}, "checkpoint": {"every": 0}}


def _refused(tmp_path, cfg, capsys):
    from pinnkit.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    rc = main(["train", str(path), "--out", str(tmp_path / "run"), "--no-plots", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "Traceback" not in err and "\n\n" not in err, err
    assert not (tmp_path / "run").exists()
    return " ".join(err.split()).replace("- ", "-")


def test_a_cap_the_mesh_lacks_is_refused_naming_the_file_and_its_names(tmp_path, capsys):
    flat = _refused(tmp_path, _pipe_config(outlet="exit"), capsys)
    assert "problem.params.outlet" in flat and "bent_pipe.stl" in flat and "'exit'" in flat, flat
    assert "wall, inlet, outlet" in flat.replace("'", ""), flat
    # the same in an expression problem's conditions
    cfg = {"problem": {"name": "expression", "params": {
        "domain": {"mesh": {"file": str(STL)}}, "fields": ["u"], "equations": {"pde": "-lap(u) - 1"},
        "conditions": {"cap": {"where": "inflow", "dirichlet": 0}}}},
        "sampler": {"batch": {"pde": 16, "cap": 16}}, "train": {"steps": 1, "chunk": 1},
        "checkpoint": {"every": 0}}
    flat = _refused(tmp_path, cfg, capsys)
    assert "conditions.cap.where" in flat and "bent_pipe.stl" in flat and "'inflow'" in flat, flat
    assert "Did you mean 'inlet'" in flat, flat


def test_one_piece_in_two_roles_is_refused(tmp_path, capsys):
    flat = _refused(tmp_path, _pipe_config(inlet="wall"), capsys)
    assert "inlet, outlet and wall must be different boundaries" in flat, flat


def test_tiny_pipe_config_runs_and_its_vtu_holds_the_surface(tmp_path):
    """configs/tiny/pipe_mesh.yaml through the CLI: summary.json's pipe figures, then
    ``pinnkit predict --out .vtu`` with the mesh's named surface next to the grid's cells,
    read back with meshio as ParaView's users would."""
    import json

    meshio = pytest.importorskip("meshio")
    from pinnkit.cli import main

    run = tmp_path / "run"
    assert main(["train", str(ROOT / "configs/tiny/pipe_mesh.yaml"), "--out", str(run),
                 "--no-plots", "--quiet"]) == 0
    m = json.loads((run / "summary.json").read_text())["metrics"]
    assert len(m["flux"]) == 2 and m["far_sections"] == [0, 1] and m["radius"] == pytest.approx(0.5)
    assert all(math.isfinite(v) for v in [*m["flux"], m["flux_error"], m["poiseuille_error"]])
    assert main(["predict", str(run), "--grid", "9", "--out", str(tmp_path / "pipe.vtu")]) == 0
    vtu = meshio.read(tmp_path / "pipe.vtu")
    kinds = [c.type for c in vtu.cells]
    assert kinds == ["hexahedron", "triangle"] and len(vtu.cells[1].data) == 12_384
    for k, (name, count) in enumerate((("wall", 12_288), ("inlet", 48), ("outlet", 48))):
        assert int(vtu.cell_data[f"boundary_{name}"][1].sum()) == count
        assert int((vtu.cell_data["boundary"][1] == k).sum()) == count
    on = np.unique(vtu.cells[1].data)  # the surface's vertices carry the fields
    assert np.isfinite(vtu.point_data["u"][on]).all() and np.isfinite(vtu.point_data["p"][on]).all()
    inlet = vtu.cells[1].data[vtu.cell_data["boundary_inlet"][1] == 1]
    np.testing.assert_allclose(vtu.points[np.unique(inlet), 0], -3.0, atol=1e-6)
