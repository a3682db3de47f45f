"""The package's arrows: which layers may import which, no import cycles, one place that
writes jax.config, one shard_map in training. Read from the source (ast), so lazy
imports inside functions count as well."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "pinnkit"

# Layers (first: the importer's package) that must never import the others.
_UPHILL = ("pinnkit.train", "pinnkit.run", "pinnkit.problems", "pinnkit.plot", "pinnkit.cli")
NEVER = {
    "pinnkit.train": ("pinnkit.run", "pinnkit.problems", "pinnkit.plot", "pinnkit.cli"),
    "pinnkit.physics": _UPHILL,
    "pinnkit.diffops": _UPHILL,
    "pinnkit.nn": _UPHILL,
    "pinnkit.geometry": _UPHILL,
    "pinnkit.problems": ("pinnkit.run", "pinnkit.cli"),
    "pinnkit.plot": ("pinnkit.run", "pinnkit.cli"),
    # The device mesh evaluates callables and tests for `pinnkit._host.HostFunction`;
    # it never needs physics (a problem reaches it as data).
    "pinnkit.parallel": ("pinnkit.run", "pinnkit.cli", "pinnkit.physics"),
    "pinnkit.gridio": ("pinnkit.run", "pinnkit.plot", "pinnkit.cli"),
}
# No import cycle is accepted (the last one, nn/layers <-> nn/nets, ended when layers
# took over their Taylor rules and build_mlp_network moved to nn/nets.py).
KNOWN_CYCLES: list[set[str]] = []


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def imports(name: str) -> set[str]:
    """The pinnkit modules that module ``name`` imports anywhere in its source, each
    with the packages a Python import initialises on the way (except the importer's own
    ancestors, already initialising, and the root package)."""
    path = MODULES[name]
    package = name if _is_package(name) else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for t in targets:
            if not t.startswith("pinnkit"):
                continue
            while t not in MODULES:  # `import pinnkit.x.y` of a name: the module above it
                t = t.rsplit(".", 1)[0]
            parts = t.split(".")
            for i in range(2, len(parts) + 1):
                mod = ".".join(parts[:i])
                if not (name == mod or name.startswith(mod + ".")):
                    found.add(mod)
    found.discard(name)
    return found


GRAPH = {m: imports(m) for m in MODULES}


@pytest.mark.parametrize("layer", sorted(NEVER))
def test_never_arrows(layer):
    bad = sorted((m, t) for m, ts in GRAPH.items() if m == layer or m.startswith(layer + ".")
                 for t in ts for f in NEVER[layer] if t == f or t.startswith(f + "."))
    assert not bad, f"{layer} must not import {NEVER[layer]}: {bad}"


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    cycles = [c for c in _cycles(GRAPH) if c not in KNOWN_CYCLES]
    assert not cycles, f"import cycles among pinnkit modules: {cycles}"


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


PACKAGES = {}
for _m, _ts in GRAPH.items():
    PACKAGES.setdefault(_package(_m), set()).update(
        _package(t) for t in _ts if t != "pinnkit" and _package(t) != _package(_m))


def test_no_package_cycles():
    """No loop among pinnkit's subpackages (run -> plot is downhill, so plot never reaches
    back into run, problems never into run)."""
    cycles = _cycles({k: v for k, v in PACKAGES.items() if k != "pinnkit"})
    assert not cycles, f"import cycles among pinnkit's packages: {cycles}"


def test_package_graph_sees_function_level_imports():
    """The package graph is built from the module graph, function-level imports included."""
    assert "pinnkit.plot" in PACKAGES["pinnkit.run"]  # run/rundir.py, downhill
    assert "pinnkit.gridio" in PACKAGES["pinnkit.plot"]  # plot/sphere.py, inside a function


def test_the_cycle_finder_finds_cycles():
    """The check can fail: a two-module loop and a three-module loop are found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(map(sorted, _cycles(graph))) == [["a", "b"], ["c", "d", "e"]]


def _calls(path: Path, dotted: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == dotted:
            lines.append(node.lineno)
    return lines


def test_jax_config_written_only_by_the_cli():
    writers = {str(p.relative_to(ROOT.parent)) for p in ROOT.rglob("*.py") if _calls(p, "jax.config.update")}
    assert writers == {"pinnkit/cli/jaxsetup.py"}, writers


def test_xla_flags_touched_only_by_the_cli():
    """XLA reads XLA_FLAGS once per process: a library module that set it would change
    every later computation's compilation; only the command's setup may."""
    users = {str(p.relative_to(ROOT.parent)) for p in ROOT.rglob("*.py") if "XLA_FLAGS" in p.read_text()}
    assert users == {"pinnkit/cli/jaxsetup.py"}, users


def test_one_shard_map_in_training():
    sites = {(str(p.relative_to(ROOT.parent)), n) for p in (ROOT / "train").rglob("*.py")
             for n in _calls(p, "jax.shard_map")}
    assert len(sites) == 1 and next(iter(sites))[0] == "pinnkit/train/loss.py", sites


def test_training_reads_no_config():
    """No training module touches ``run.config`` or a ``RunConfig``."""
    for path in (ROOT / "train").rglob("*.py"):
        tree = ast.parse(path.read_text())
        attrs = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
        assert not [a for a in attrs if a.endswith(".config") and "jax" not in a], path
        assert "RunConfig" not in path.read_text(), path




def test_no_source_file_over_500_lines_without_a_reason():
    """A longer file states at its top why one algorithm needs it."""
    long = [p for p in ROOT.rglob("*.py") if len(p.read_text().splitlines()) > 500]
    unexplained = {str(p.relative_to(ROOT.parent)) for p in long
                   if "one algorithm" not in "\n".join(p.read_text().splitlines()[:30])}
    assert not unexplained, sorted(unexplained)


# Capability probes and exact-class dispatch in train/ and geometry/: each allowed one
# with why. Training and geometry dispatch on declared (abstract) types instead.
PROBES_ALLOWED = {
    # attributes read by name from a fixed list of the class's own fields
    ("pinnkit/train/windows.py", "getattr(res, k)"),
    ("pinnkit/train/phases/_base.py", "getattr(cfg, k)"),
    ("pinnkit/train/callbacks.py", "getattr(cb, event)"),
    # XLA's memory analysis: its fields differ between jax versions (external API)
    ("pinnkit/train/plan.py", "getattr(mem, f, 0)"),
    # os.O_CLOEXEC is missing on some platforms
    ("pinnkit/train/checkpoint.py", "getattr(os, 'O_CLOEXEC', 0)"),
}
NETWORK_CLASSES = {"Network", "MLP", "ModifiedMLP", "PirateNet", "Normalize", "PeriodicEmbedding",
                   "FourierFeatures", "SphereEmbedding", "HardDirichlet"}


def _probes(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("hasattr", "getattr"):
            out.append(ast.unparse(node))
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) \
                and ast.unparse(node.left.func) == "type":
            out.append(ast.unparse(node))  # type(x) is / == C
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance":
            classes = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)} \
                | {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
            if classes & NETWORK_CLASSES:
                out.append(ast.unparse(node))
    return out


def test_no_capability_probes_in_train_and_geometry():
    found = {(str(p.relative_to(ROOT.parent)), c) for d in ("train", "geometry")
             for p in (ROOT / d).rglob("*.py") for c in _probes(p)}
    assert found <= PROBES_ALLOWED, sorted(found - PROBES_ALLOWED)


def test_the_probe_finder_finds_probes(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("hasattr(x, 'a')\ntype(e) is Normalize\nisinstance(e, Normalize | PeriodicEmbedding)\n"
                   "isinstance(e, dict)\n")
    assert len(_probes(src)) == 3


def _names_imported(name: str) -> list[tuple[str, str]]:
    """``(module, name)`` for every ``from module import name`` in module ``name``'s source
    (relative imports resolved)."""
    package = name if _is_package(name) else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            out += [(base, a.name) for a in node.names]
    return out


# A problem module builds on public names only: what a built-in problem shares with another
# (flow residuals, the energy-balance model) is public in pinnkit.physics, so a user's problem
# can do the same. Allowed, with why:
PRIVATE_ALLOWED: set[tuple[str, str]] = set()  # none left: flow.py reads its YAML with public readers


def test_problems_import_no_private_names_of_other_problems():
    bad = sorted((m, src, n) for m in MODULES if m.startswith("pinnkit.problems.")
                 for src, n in _names_imported(m)
                 if src.startswith("pinnkit.problems") and src != m and n.startswith("_")
                 and (m, src) not in PRIVATE_ALLOWED)
    assert not bad, f"problem modules import private names of other problem modules: {bad}"


def test_hard_constraints_come_from_physics():
    """Problems take their hard constraints from `pinnkit.physics.constraints` (or geometry's
    distance functions), never from the network package."""
    bad = sorted((m, src, n) for m in MODULES if m.startswith("pinnkit.problems")
                 for src, n in _names_imported(m)
                 if src.startswith("pinnkit.nn") and n in {"HardDirichlet", "AbstractHardConstraint"})
    assert not bad, bad


def test_the_private_import_finder_finds_them(tmp_path, monkeypatch):
    src = tmp_path / "m.py"
    src.write_text("from .navier_stokes import _equations, kovasznay\n"
                   "from ..nn.layers import HardDirichlet\n")
    monkeypatch.setitem(MODULES, "pinnkit.problems.m", src)
    assert _names_imported("pinnkit.problems.m") == [
        ("pinnkit.problems.navier_stokes", "_equations"), ("pinnkit.problems.navier_stokes", "kovasznay"),
        ("pinnkit.nn.layers", "HardDirichlet")]


# --- the domain family: abstract or final, sampling kind as a type (issue 34) -------------
# Concrete methods of an abstract domain class that a subclass still overrides, each with
# why it is left. Everything else an abstract class defines is either abstract or final.
OVERRIDES_ALLOWED = {
    # open: the mesh answers the interior test and the grid mask with its spatial index;
    # the shape family would need an abstract interior test every primitive implements
    ("AbstractShape", "candidates", "TriangleMesh"),
    ("AbstractShape", "inside", "TriangleMesh"),
    # hooks of the stacked evaluation (geometry/batched.py): a default "no" that exact
    # shapes and CSG answer
    *(("AbstractShape", "exact_outside", c) for c in
      ("Union", "Rectangle", "Polygon", "Cuboid", "AbstractRound", "Transformed")),
    *(("AbstractShape", "split_trim", c) for c in ("Union", "Intersection", "Difference")),
}


def _domain_classes():
    import pinnkit.geometry.hyperball  # noqa: F401  (every domain module imported)
    import pinnkit.geometry.mesh  # noqa: F401
    import pinnkit.sphere  # noqa: F401
    from pinnkit.geometry.domains import AbstractDomain

    def walk(c):
        for s in c.__subclasses__():
            if s.__module__.startswith("pinnkit."):
                yield s
                yield from walk(s)

    return AbstractDomain, set(walk(AbstractDomain))


def test_domains_are_abstract_or_final():
    base, classes = _domain_classes()
    final_with_subclasses = sorted(c.__name__ for c in classes if not c.__name__.startswith("Abstract")
                                   and any(s.__module__.startswith("pinnkit.") for s in c.__subclasses__()))
    assert not final_with_subclasses
    overridden = set()
    for c in classes | {base}:
        if not c.__name__.startswith("Abstract"):
            continue
        for name, v in vars(c).items():
            if callable(v) and not name.startswith("__") and not getattr(v, "__isabstractmethod__", False):
                overridden |= {(c.__name__, name, s.__name__) for s in classes
                               if issubclass(s, c) and s is not c and name in vars(s)}
    assert overridden <= OVERRIDES_ALLOWED, sorted(overridden - OVERRIDES_ALLOWED)
    assert {m for m, v in vars(base).items() if callable(v) and not getattr(v, "__isabstractmethod__", False)
            and not m.startswith("__")} == {"axis", "check_piece", "sample"}  # helpers, never overridden


def test_every_domain_is_one_sampling_kind():
    """A domain is sampled as its type says: the image of the unit cube or by rejection."""
    from pinnkit.geometry.domains import AbstractRejectionDomain, AbstractUnitCubeDomain

    _, classes = _domain_classes()
    final = [c for c in classes if not c.__name__.startswith("Abstract")]
    kinds = {c.__name__: (issubclass(c, AbstractUnitCubeDomain), issubclass(c, AbstractRejectionDomain))
             for c in final}
    assert all(sum(k) == 1 for k in kinds.values()), kinds
    assert kinds["Box"] == kinds["Sphere"] == kinds["HyperBall"] == (True, False)
    assert kinds["Rectangle"] == kinds["TriangleMesh"] == kinds["Difference"] == (False, True)


def _acceptance_tests(path: Path) -> list[str]:
    """Comparisons that read a domain's acceptance (``d.acceptance(p) < 1.0``)."""
    return [ast.unparse(n) for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Compare)
            and any(isinstance(c, ast.Call) and ast.unparse(c.func).endswith("acceptance")
                    for c in ast.walk(n))]


def test_training_asks_the_domain_type_not_its_acceptance():
    """train/ chooses rejection by `AbstractRejectionDomain`; what a piece with nothing to
    reject does is the geometry's business (geometry/rejection.py)."""
    found = {(str(p.relative_to(ROOT.parent)), c) for p in (ROOT / "train").rglob("*.py")
             for c in _acceptance_tests(p)}
    assert not found, sorted(found)


def test_the_acceptance_finder_finds_them(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("if problem.domain.acceptance(term.where) < 1.0:\n    pass\n"
                   "ok = (p := d.acceptance(q)) >= 1\nx = isinstance(d, AbstractRejectionDomain)\n")
    assert len(_acceptance_tests(src)) == 2


def test_one_sampling_module_per_side():
    """The training side (collocation) and the geometry side (rejection) each have one
    module named for what it does; the old ``sampling.py`` paths only re-export."""
    for old in (ROOT / "train" / "sampling.py", ROOT / "geometry" / "sampling.py"):
        tree = ast.parse(old.read_text())
        body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        assert all(isinstance(n, ast.ImportFrom) and all(a.asname == a.name for a in n.names)
                   for n in body), old
