"""Hostile inputs through the real ``pinnkit`` command: each must be refused in seconds.

Every case below is a mistake or an attack a user could make (a typo, an impossible value,
a damaged run folder, a file that is not a file, a link out of a run folder, an input that
would build for minutes). Each runs as its own ``python -m pinnkit.cli`` process and must

- exit with status 2,
- print one paragraph on stderr (no blank line inside, at most 12 lines, containing
  ``error:``) and no Python traceback,
- write nothing: a ``--out`` that did not exist is still absent, and the files of a run
  folder the command reads are unchanged (names and SHA-256 of every file),
- use at most ``--max-cpu`` CPU seconds (default 5; user + system time of the child,
  which does not depend on how busy the machine is; Python and jax's import alone take
  about 2.5 s).

``python scripts/probe_inputs.py`` prints one line per case and exits 1 if any fails;
``--only WORD`` runs the cases whose name contains WORD. tests/test_probe_inputs.py runs
the same cases in the suite (without the CPU bound: timings belong to scripts).
The cases that need a trained run share one tiny run trained once (about 20 s).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "configs" / "tiny" / "poisson2d.yaml"
HOLE = ROOT / "configs" / "tiny" / "poisson_hole.yaml"
ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
WALL_LIMIT = 120.0  # a case still running after this is killed and fails (a hang)


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One hostile input. ``argv`` may contain ``{tmp}`` (a fresh folder for this case),
    ``{run}`` (a private copy of the trained tiny run) and ``{cfg}`` (``{tmp}/c.yaml``,
    written from ``config`` when given). ``prepare(tmp, run)`` damages files before the
    command runs. ``fresh`` names paths (relative to ``{tmp}``) that must not exist after."""

    name: str
    argv: tuple[str, ...]
    config: str | None = None
    prepare: object = None
    fresh: tuple[str, ...] = ("out",)
    needs_run: bool = False
    expect: str = ""  # a word the paragraph must contain (the key or file it names)


def _poly(n: int) -> str:
    """A star-free convex polygon with ``n`` vertices on the unit circle (YAML flow list)."""
    import math

    pts = [[round(math.cos(2 * math.pi * k / n), 12), round(math.sin(2 * math.pi * k / n), 12)]
           for k in range(n)]
    return json.dumps(pts)


def _domain_config(domain: str, exact: str = "x*y") -> str:
    return f"""problem:
  name: poisson_domain
  params:
    domain: {domain}
    exact: "{exact}"
network: {{width: 8, depth: 1}}
sampler: {{method: uniform, batch: {{pde: 64, boundary: 32}}}}
optim: {{phases: [{{kind: adam, lr: 1.0e-2}}]}}
train: {{steps: 10, chunk: 5}}
checkpoint: {{every: 0}}
"""


def _header(mutate):
    """A ``prepare`` that rewrites the JSON header line of every checkpoint of the run
    with ``mutate(header) -> new header`` (the payload and its hash stay intact). With
    one valid checkpoint left the commands use it, naming the damaged ones in a warning."""

    def prepare(tmp: Path, run: Path) -> None:
        for ck in (run / "checkpoints").glob("step_*.eqx"):
            line, _, payload = ck.read_bytes().partition(b"\n")
            ck.write_bytes(json.dumps(mutate(json.loads(line))).encode() + b"\n" + payload)

    return prepare


def _set(key, value):
    def mutate(h):
        h = dict(h)
        h[key] = value
        return h

    return mutate


def _drop(key):
    def mutate(h):
        return {k: v for k, v in h.items() if k != key}

    return mutate


def _link_out_of_run(tmp: Path, run: Path) -> None:
    secret = tmp / "secret.txt"
    secret.write_text("SECRET-CONTENT-0123456789\n")
    (run / "notes.txt").symlink_to(secret)


def _linked_out(name: str):
    """``run/name`` moved to ``tmp/elsewhere/name`` and linked back in its place."""
    def prepare(tmp: Path, run: Path) -> None:
        (tmp / "elsewhere").mkdir()
        shutil.move(run / name, tmp / "elsewhere" / name)
        (run / name).symlink_to(tmp / "elsewhere" / name)
    return prepare


# a tetrahedron: one vertex far out ({big}), one coordinate of another {bad}
_OBJ = "v 0 0 0\nv {big} 0 0\nv 0 {bad} 0\nv 0 0 1\nf 1 2 3\nf 1 3 4\nf 1 4 2\nf 2 4 3\n"


def _mesh_file(name: str, content: str | bytes):
    def prepare(tmp: Path, run: Path) -> None:
        data = content.encode() if isinstance(content, str) else content
        (tmp / name).write_bytes(data)
    return prepare


def _fifo_config(tmp: Path, run: Path) -> None:
    os.mkfifo(tmp / "fifo.yaml")


def _binary_config(tmp: Path, run: Path) -> None:
    (tmp / "bin.yaml").write_bytes(bytes(range(256)) * 64)


def _csv_secret(tmp: Path, run: Path) -> None:
    (tmp / "pts.csv").write_text("root:x:0:0:root:/root:/bin/bash\n1,2\n")


def _file_as_folder(tmp: Path, run: Path) -> None:
    # Permissions do not stop root (CI runs as root): a regular file where the output's
    # folder should be makes any output under it unwritable for everyone.
    (tmp / "ro").write_text("a file, not a folder\n")


def cases() -> list[Case]:
    t = str(TINY)
    train = ("train", "{cfg}", "--out", "{tmp}/out")
    c = [
        # --- configs: typos, types, values, files that are not configs
        Case("config-unknown-key", ("train", t, "--set", "network.widht=3", "--out", "{tmp}/out"),
             expect="widht"),
        Case("config-wrong-type", ("train", t, "--set", "network.width=wide", "--out", "{tmp}/out"),
             expect="network.width"),
        Case("config-impossible-lr", ("train", t, "--set", "optim.phases.0.lr=-1", "--out", "{tmp}/out"),
             expect="lr"),
        Case("config-missing-file", ("train", "{tmp}/nope.yaml", "--out", "{tmp}/out"), expect="nope.yaml"),
        Case("config-is-a-directory", ("train", str(ROOT / "configs"), "--out", "{tmp}/out"),
             expect="configs"),
        Case("config-is-a-fifo", ("train", "{tmp}/fifo.yaml", "--out", "{tmp}/out"),
             prepare=_fifo_config, expect="fifo.yaml"),
        Case("config-is-a-device", ("train", "/dev/zero", "--out", "{tmp}/out"), expect="/dev/zero"),
        Case("config-is-binary", ("train", "{tmp}/bin.yaml", "--out", "{tmp}/out"),
             prepare=_binary_config, expect="bin.yaml"),
        Case("config-yaml-syntax", train, config="network: {width: 3\n", expect="c.yaml"),
        Case("config-top-level-list", train, config="- 1\n- 2\n", expect="c.yaml"),
        Case("config-duplicate-top-key", train,
             config=TINY.read_text() + "network: {width: 8}\n", expect="network"),
        Case("config-duplicate-inner-key-flow", train,
             config=TINY.read_text().replace("network: {width: 16,", "network: {width: 32, width: 16,"),
             expect="width"),
        Case("config-duplicate-inner-key-block", train,
             config="problem:\n  name: poisson2d\n  name: poisson2d\n", expect="name"),
        Case("config-over-1-mib", train, config=TINY.read_text() + "# " + "x" * 2**20 + "\n",
             expect="MiB"),
        Case("config-unknown-problem", ("train", t, "--set", "problem.name=poison2d", "--out", "{tmp}/out"),
             expect="poison2d"),
        Case("config-python-object-name", ("train", t, "--set", "problem.name=os:system", "--out",
                                           "{tmp}/out"), expect="os:system"),
        # --- expressions
        Case("expr-unknown-symbol", train, config=_domain_config(
            "{rectangle: {lower: [0, 0], upper: [1, 1]}}", "sin(pi*xx)"), expect="xx"),
        Case("expr-import-attack", train, config=_domain_config(
            "{rectangle: {lower: [0, 0], upper: [1, 1]}}", "__import__('os').system('true')"),
            expect="exact"),
        # --- geometry: impossible shapes, inputs that used to build for minutes
        Case("geometry-negative-radius", train,
             config=_domain_config("{disk: {center: [0, 0], radius: -1}}"), expect="radius"),
        Case("geometry-polygon-two-vertices", train,
             config=_domain_config("{polygon: {vertices: [[0, 0], [1, 0]]}}"), expect="polygon"),
        Case("geometry-polygon-crossing", train,
             config=_domain_config("{polygon: {vertices: [[0, 0], [1, 1], [1, 0], [0, 1]]}}"),
             expect="polygon"),
        Case("geometry-hole-below-resolution", train, config=_domain_config(
            "{difference: [{rectangle: {lower: [0, 0], upper: [1, 1]}}, "
            "{disk: {center: [0.5, 0.5], radius: 1.0e-12, name: hole}}]}"), expect="difference.1.disk"),
        Case("geometry-hole-underflow", train, config=_domain_config(
            "{difference: [{rectangle: {lower: [0, 0], upper: [1, 1]}}, "
            "{disk: {center: [0.5, 0.5], radius: 1.0e-300, name: hole}}]}"), expect="difference.1.disk"),
        Case("geometry-mesh-missing", train, config=_domain_config("{mesh: {file: '{tmp}/none.stl'}}"),
             expect="none.stl"),
        Case("geometry-mesh-negative-scale", train, config=_domain_config(
            f"{{mesh: {{file: {ROOT / 'configs' / 'meshes' / 'torus.obj'}, scale: -1}}}}"), expect="scale"),
        Case("geometry-mesh-zero-scale", train, config=_domain_config(
            f"{{mesh: {{file: {ROOT / 'configs' / 'meshes' / 'torus.obj'}, scale: 0}}}}"), expect="scale"),
        Case("geometry-mesh-huge-vertices", train, config=_domain_config("{mesh: {file: '{tmp}/huge.obj'}}"),
             prepare=_mesh_file("huge.obj", _OBJ.format(big="1e308", bad="1")), expect="1e+12"),
        Case("geometry-mesh-nan-vertex", train, config=_domain_config("{mesh: {file: '{tmp}/nan.obj'}}"),
             prepare=_mesh_file("nan.obj", _OBJ.format(big="1", bad="nan")), expect="NaN"),
        Case("geometry-mesh-truncated-stl", train, config=_domain_config("{mesh: {file: '{tmp}/cut.stl'}}"),
             prepare=_mesh_file("cut.stl", b"\0" * 80 + (10).to_bytes(4, "little") + b"\0" * 30),
             expect="truncated"),
        Case("geometry-polygon-over-the-limit", train,
             config=_domain_config(f"{{polygon: {{vertices: {_poly(20001)}}}}}"), expect="20000"),
        Case("geometry-union-over-the-limit", train, config=_domain_config("{union: [" + ", ".join(
            f"{{disk: {{center: [{0.1 * i:.1f}, 0], radius: 0.07}}}}" for i in range(2001)) + "]}"),
             expect="2000"),
        Case("geometry-unknown-boundary", ("train", str(HOLE), "--set",
                                           "problem.params.domain.difference.1.disk.name=interior",
                                           "--out", "{tmp}/out"), expect="interior"),
        # --- run folders: not a run, damaged checkpoint headers, unwritable outputs, links
        Case("eval-not-a-run", ("eval", "{tmp}"), fresh=(), expect="config.yaml"),
        Case("resume-without-checkpoint", ("train", t, "--out", "{tmp}/empty", "--resume"),
             prepare=lambda tmp, run: (tmp / "empty").mkdir(), fresh=(), expect="--resume"),
    ]
    damaged = {
        "header-is-a-list": lambda h: [h],
        "header-is-a-number": lambda h: 7,
        "header-step-string": _set("step", "ten"),
        "header-step-negative": _set("step", -5),
        "header-step-absurd": _set("step", 10**15),
        "header-phase-string": _set("phase", "first"),
        "header-phase-missing": _drop("phase"),
    }
    for label, mutate in damaged.items():
        for cmd in (("eval", "{run}"), ("slim", "{run}", "--out", "{tmp}/out"),
                    ("predict", "{run}", "--grid", "5", "--out", "{tmp}/out.csv")):
            c.append(Case(f"{cmd[0]}-{label}", cmd, prepare=_header(mutate), needs_run=True,
                          fresh=("out", "out.csv"), expect="checkpoint"))
    c += [
        Case("predict-batch-zero", ("predict", "{run}", "--grid", "5", "--batch", "0", "--out",
                                    "{tmp}/out.csv"), needs_run=True, fresh=("out.csv",), expect="--batch"),
        Case("predict-batch-negative", ("predict", "{run}", "--grid", "5", "--batch", "-5", "--out",
                                        "{tmp}/out.csv"), needs_run=True, fresh=("out.csv",),
             expect="--batch"),
        Case("predict-grid-reversed", ("predict", "{run}", "--grid", "x=1:0:5,y=0:1:5", "--out",
                                       "{tmp}/out.csv"), needs_run=True, fresh=("out.csv",), expect="--grid"),
        Case("predict-grid-reversed-alone", ("predict", "{run}", "--grid", "x=1:0:5", "--out",
                                             "{tmp}/out.csv"), needs_run=True, expect="x=1:0:5"),
        Case("predict-grid-too-large", ("predict", "{run}", "--grid", "100000", "--out", "{tmp}/out.csv"),
             needs_run=True, fresh=("out.csv",), expect="--grid"),
        Case("predict-csv-echo", ("predict", "{run}", "--points", "{tmp}/pts.csv", "--out", "{tmp}/out.csv"),
             prepare=_csv_secret, needs_run=True, fresh=("out.csv",), expect="pts.csv"),
        Case("predict-unwritable-out", ("predict", "{run}", "--grid", "5", "--out", "{tmp}/ro/out.csv"),
             prepare=_file_as_folder, needs_run=True, fresh=("ro/out.csv",), expect="out.csv"),
        Case("slim-unwritable-out", ("slim", "{run}", "--out", "{tmp}/ro/slim"), prepare=_file_as_folder,
             needs_run=True, fresh=("ro/slim",), expect="slim"),
    ]
    for name in ("checkpoints", "config.yaml"):  # a run folder whose parts link out of it
        for cmd in (("eval", "{run}"), ("slim", "{run}", "--out", "{tmp}/out")):
            c.append(Case(f"{cmd[0]}-{name.split('.')[0]}-linked-out", cmd, prepare=_linked_out(name),
                          needs_run=True, expect="outside"))
    return c


# --------------------------------------------------------------------------- runner


@dataclass
class Result:
    case: str
    ok: bool
    rc: int | None
    cpu_s: float
    wall_s: float
    problems: list[str] = field(default_factory=list)
    first_line: str = ""


def _snapshot(folder: Path) -> dict[str, str]:
    """Relative path -> SHA-256 (or the link target / 'fifo') of everything under folder."""
    out = {}
    if not folder.exists():
        return out
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_fifo():
            out[rel] = "fifo"
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[rel] = "dir"
    return out


def one_paragraph(err: str) -> list[str]:
    """What is wrong with ``err`` as a one-paragraph error (empty when nothing is)."""
    bad = []
    if "Traceback" in err:
        bad.append("a traceback")
    lines = err.strip().splitlines()
    if not lines:
        return bad + ["no message"]
    if any(not ln.strip() for ln in lines):
        bad.append("more than one paragraph")
    if len(lines) > 12:
        bad.append(f"{len(lines)} lines")
    if "error:" not in err:
        bad.append("no 'error:'")
    return bad


def _run_child(argv: list[str], cwd: Path) -> tuple[int | None, float, float, str]:
    """Exit status, CPU s (user + system), wall s and stderr of one pinnkit process."""
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "pinnkit.cli", *argv], cwd=cwd, env=ENV,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    killer = threading.Timer(WALL_LIMIT, lambda: os.killpg(p.pid, signal.SIGKILL))
    killer.start()
    with p.stderr:  # closed here: Popen.wait is never called, so nothing else would
        err = p.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(p.pid, 0)
    killer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)  # keeps Popen from waiting again
    return p.returncode, usage.ru_utime + usage.ru_stime, time.perf_counter() - t0, err


def run_case(case: Case, trained: Path | None, work: Path, max_cpu: float | None) -> Result:
    tmp = Path(tempfile.mkdtemp(prefix=case.name + "-", dir=work))
    run = tmp / "run"
    if case.needs_run:
        shutil.copytree(trained, run, symlinks=True)
    if case.config is not None:
        (tmp / "c.yaml").write_text(case.config.replace("{tmp}", str(tmp)))
    if case.prepare is not None:
        case.prepare(tmp, run)
    before = _snapshot(run)
    argv = [a.replace("{tmp}", str(tmp)).replace("{run}", str(run)).replace("{cfg}", str(tmp / "c.yaml"))
            for a in case.argv]
    rc, cpu, wall, err = _run_child(argv, tmp)
    problems = []
    if rc != 2:
        problems.append(f"exit {rc}")
    problems += one_paragraph(err)
    if case.expect and case.expect not in err:
        problems.append(f"does not name {case.expect!r}")
    if "SECRET-CONTENT" in err or "root:x:0:0" in err:
        problems.append("echoes a file's content")
    written = [f for f in case.fresh if (tmp / f).exists()]
    if written:
        problems.append("wrote " + ", ".join(written))
    if case.needs_run and _snapshot(run) != before:
        problems.append("changed the run folder")
    if max_cpu is not None and cpu > max_cpu:
        problems.append(f"{cpu:.1f} CPU s > {max_cpu:g}")
    for leaked in tmp.rglob("*"):
        if leaked.is_file() and not leaked.is_symlink() and b"SECRET-CONTENT" in leaked.read_bytes() \
                and leaked.name != "secret.txt":
            problems.append(f"copied the secret into {leaked.relative_to(tmp)}")
    first = next((ln for ln in err.splitlines() if "error:" in ln), err.strip()[:100])
    return Result(case.name, not problems, rc, cpu, wall, problems, first[:160])


def train_tiny(work: Path) -> Path:
    """One tiny trained run (20 steps, checkpoints at 10 and 20) for the run-folder cases."""
    out = work / "trained"
    r = subprocess.run([sys.executable, "-m", "pinnkit.cli", "train", str(TINY), "--out", str(out),
                        "--quiet", "--no-plots", "--set", "train.steps=20", "--set", "train.chunk=10",
                        "--set", "checkpoint.every=10"], env=ENV, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"training the tiny run failed:\n{r.stderr}")
    return out


def run_all(only: str = "", workers: int = 2, max_cpu: float | None = None,
            work: Path | None = None) -> list[Result]:
    chosen = [c for c in cases() if only in c.name]
    work = Path(work or tempfile.mkdtemp(prefix="pinnkit-probe-"))
    trained = train_tiny(work) if any(c.needs_run for c in chosen) else None
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda c: run_case(c, trained, work, max_cpu), chosen))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", metavar="WORD", help="run the cases whose name contains WORD")
    ap.add_argument("--max-cpu", type=float, default=5.0, metavar="S", help="CPU seconds per case")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    t0 = time.perf_counter()
    results = run_all(args.only, args.workers, args.max_cpu)
    for r in results:
        mark = "ok  " if r.ok else "FAIL"
        print(f"{mark} {r.case:38s} exit {r.rc}  {r.cpu_s:4.1f} CPU s  {r.wall_s:5.1f} s  "
              + ("; ".join(r.problems) if r.problems else r.first_line[:70]))
    bad = sum(not r.ok for r in results)
    print(f"{len(results) - bad} passed, {bad} failed in {time.perf_counter() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
