"""Issue 21 through the real command line: never lose a run, bound every input.

Each bad input exits 2 with one paragraph, no traceback, in bounded memory (the child's
peak RSS from `os.wait4`); a failed ``--overwrite`` keeps the old run byte for byte; a
second writer is refused and a stale lock taken over; a finished run resumed keeps its
summary; summary.json is strict JSON; ``os:system`` runs nothing; SIGTERM ends a stuck
run within the grace period, and one during loading ends it at once.

Issue 38: an ``--overwrite`` that diverges at step 0, is stopped by SIGTERM, or is killed
before its first checkpoint keeps (or, on the next command, restores) the old run; the
temporary file of a checkpoint write killed midway is deleted on the next start.
"""

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pinnkit.train import checkpoint as ckpt

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny" / "poisson2d.yaml")
FAST = ["--set", "train.steps=40", "--set", "train.chunk=20", "--set", "checkpoint.every=20",
        "--quiet", "--no-plots"]
ENV = {
    **os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1",
    "JAX_COMPILATION_CACHE_DIR": os.environ.get("PINNKIT_TEST_JAX_CACHE", "/tmp/pinnkit-test-jax-cache"),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}
# The CLI's own footprint (Python, JAX, matplotlib) is ~0.3 GB; an unbounded input
# (an alias bomb, /dev/zero, a 4 TB network) would pass this bound many times over.
MAX_RSS = 1 << 30

PROBLEM_FILE = '''
import threading, time
from pathlib import Path
import numpy as np
from pinnkit.physics.host import HostFunction
from pinnkit.physics.terms import Equation
from pinnkit.problems import PROBLEMS


def infinite_exact():
    """poisson2d whose 'exact' solution is infinite at the corner (0, 0)."""
    ref = HostFunction(lambda z: np.where((z[:, 0] == 0) & (z[:, 1] == 0), np.inf, 0.0)[:, None], 1)
    return PROBLEMS["poisson2d"]().replace(reference=ref)


def stuck(marker: str):
    """poisson2d whose reference never returns (a hung evaluation)."""
    def fn(z):
        Path(marker).write_text("evaluating")
        threading.Event().wait()
    return PROBLEMS["poisson2d"]().replace(reference=HostFunction(fn, 1))


def slow(marker: str):
    """poisson2d that takes a minute to build."""
    Path(marker).write_text("building")
    time.sleep(60)
    return PROBLEMS["poisson2d"]()


def broken():
    """poisson2d whose residual fails when training compiles it."""
    def boom(f, c):
        raise RuntimeError("boom: a bug in the residual")
    p = PROBLEMS["poisson2d"]()
    return p.replace(terms={**p.terms, "pde": Equation(boom)})
'''


# Runs one `pinnkit` process and reports its own peak RSS (RUSAGE_CHILDREN of this
# wrapper covers that child alone) and wall time on the last stderr line.
WRAP = """
import resource, subprocess, sys, time
t0 = time.perf_counter()
r = subprocess.run([sys.executable, "-m", "pinnkit.cli", *sys.argv[1:]])
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(f"\\nWRAP {r.returncode} {rss} {time.perf_counter() - t0:.2f}", file=sys.stderr)
"""


def run_cli(*args, cwd=None, timeout=300):
    """``(returncode, stderr, peak RSS bytes, wall s)`` of one ``pinnkit`` process."""
    r = subprocess.run([sys.executable, "-c", WRAP, *map(str, args)], env=ENV, cwd=cwd,
                       capture_output=True, text=True, timeout=timeout)
    err, _, last = r.stderr.rstrip().rpartition("\nWRAP ")
    rc, rss, wall = last.split()
    return int(rc), err, int(rss), float(wall)


def one_paragraph(err: str) -> bool:
    # one block of lines (no blank line), of a paragraph's length: long paths wrap to more lines
    lines = err.strip().splitlines()
    return bool(lines) and lines[0].startswith("pinnkit: error:") and len(lines) <= 12 and \
        all(ln.strip() for ln in lines) and "Traceback" not in err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def done_run(tmp_path_factory):
    """A finished tiny run (40 steps, checkpoints at 20 and 40) plus a user's notes file."""
    out = tmp_path_factory.mktemp("runs") / "run"
    rc, err, _, _ = run_cli("train", TINY, "--out", out, *FAST)
    assert rc == 0, err
    (out / "notes.txt").write_text("my notes on this run\n")
    return out


# ------------------------------------------------------------------ bad inputs

# "Billion laughs": 9 levels of 9 aliases, 9**9 = 387 million strings once expanded.
BOMB = "problem:\n  name: poisson2d\n  params:\n    a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
BOMB += "".join(f"    {c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi",
                                                                                   strict=True))
FILES = {
    "bomb.yaml": (BOMB, "expands to more than"),
    "dup.yaml": ("network:\n  width: 16\n  depth: 2\n  width: 99\n", "at line 2 and line 4"),
    "self.yaml": ("base: self.yaml\n", "comes back to a file already read"),
    "latin1.yaml": (b"network:\n  width: 16 # caf\xe9\n", "byte 0xe9 at offset 26 \\(line 2, column 18\\)"),
    "big.yaml": ("problem:\n  params:\n    xs: [" + "0, " * 5_800_000 + "0]\n",  # 17 MB, 5.8 M items
                 "configs are limited to 1 MiB"),
    "deep.yaml": ("problem:\n  params:\n    x: " + "[" * 5000 + "]" * 5000 + "\n",
                  "nested deeper than 64|maximum nesting depth"),  # ours or libyaml's limit
    "system.yaml": ("problem:\n  name: 'os:system'\n  params: {command: 'touch PWNED'}\n",
                    "'os' is not a pinnkit problem provider"),
}
SETS = {
    "seed": ("train.seed=1180591620717411303424", "train.seed: 1180591620717411303424 is outside"),
    "seed32": ("train.seed=4294967296", "train.seed: expected an integer from 0 to 4294967295"),
    "lr": ("optim.phases.0.lr=.inf", "optim.phases.0.lr: expected a finite number, got inf"),
    "width": ("network.width=1000000", "Change network.width"),
    "resolution": ("eval.resolution=100000", "Change eval.resolution"),
    "batch": ("sampler.batch.pde=1000000000", "Change sampler.batch.pde"),
    "set_bomb": ("problem.params.x=" + BOMB.split("params:\n")[1].replace("\n    ", ", ")
                 .replace("\n", "").join("{}"), "expands to more than"),
}


def test_bad_inputs_exit_2_fast_in_bounded_memory(tmp_path):
    """Each input exits 2 with one paragraph naming the key or file, peak RSS < 1 GiB, and
    leaves no run folder behind. (Wall times are reported in the assertion message only:
    this machine is shared; ~4-8 s each under load, mostly the CLI's imports.)"""
    import re

    for name, (text, _) in FILES.items():
        (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    os.mkfifo(tmp_path / "fifo.yaml")
    cases = [(name, [name], match) for name, (_, match) in FILES.items()]
    cases += [("fifo", ["fifo.yaml"], "is a FIFO"), ("dev_zero", ["/dev/zero"], "is a character device")]
    cases += [(k, [TINY, "--set", s], match) for k, (s, match) in SETS.items()]

    def one(case):
        name, cfg, match = case
        rc, err, rss, wall = run_cli("train", *cfg, "--out", f"out_{name}", "--quiet", cwd=tmp_path)
        return name, rc, err, rss, wall, match

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, cases))
    for name, rc, err, rss, wall, match in results:
        where = f"{name}: rc {rc}, {rss / 2**20:.0f} MiB, {wall:.1f} s: {err[-1500:]}"
        assert rc == 2 and one_paragraph(err), where
        assert re.search(match, " ".join(err.split())), where
        assert rss < MAX_RSS, where
        assert not (tmp_path / f"out_{name}").exists(), where  # nothing written
    assert not (tmp_path / "PWNED").exists()  # os:system ran nothing


# ------------------------------------------------------------------ run folders


def test_failed_overwrite_keeps_the_old_run_byte_for_byte(done_run, tmp_path):
    before = snapshot(done_run)
    rc, err, _, _ = run_cli("train", TINY, "--set", "problem.params.no_such_param=1", "--overwrite",
                            "--out", done_run, *FAST)
    assert rc == 2 and "no_such_param" in err and one_paragraph(err), err
    assert snapshot(done_run) == before
    # A failure after the new run started writing (its residual breaks at compilation):
    # the old run comes back unchanged, the new run's files are gone.
    (tmp_path / "prob.py").write_text(PROBLEM_FILE)
    (tmp_path / "c.yaml").write_text(f"base: {TINY}\nproblem: {{name: 'prob.py:broken'}}\n")
    rc, err, _, _ = run_cli("train", tmp_path / "c.yaml", "--overwrite", "--out", done_run, *FAST)
    assert rc != 0 and "boom" in err, err
    assert snapshot(done_run) == before


def test_overwrite_replaces_after_the_first_checkpoint(done_run, tmp_path):
    out = tmp_path / "copy"
    out.mkdir()
    for name, data in snapshot(done_run).items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    rc, err, _, _ = run_cli("train", TINY, "--overwrite", "--out", out, *FAST, "--set", "train.seed=7")
    assert rc == 0, err
    assert not (out / "notes.txt").exists() and not (out / ".pinnkit-replaced").exists()
    assert json.loads((out / "summary.json").read_text())["seed"] == 7
    assert not (out / ".pinnkit.lock").exists()  # released


# ------------------------------------------------------------------ --overwrite that stops

# A replacement that never reaches a scheduled checkpoint: it may only stop, and keep the old run.
NO_CKPT = ["--set", "train.steps=100000", "--set", "optim.phases.0.steps=100000",
           "--set", "train.chunk=20", "--set", "checkpoint.every=100000", "--quiet", "--no-plots"]


def copy_run(src: Path, dest: Path) -> Path:
    for name, data in snapshot(src).items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(data)
    return dest


def hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (hidden ones too: a lock, a folder moved aside)."""
    import hashlib

    return {k: hashlib.sha256(v).hexdigest() for k, v in snapshot(folder).items()}


def start_replacing(out: Path) -> subprocess.Popen:
    """``train --overwrite`` into ``out``, returned once the old run is moved aside."""
    p = subprocess.Popen([sys.executable, "-m", "pinnkit.cli", "train", TINY, "--overwrite",
                          "--out", str(out), *NO_CKPT], env=ENV, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (out / ".pinnkit-replaced").is_dir() and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert (out / ".pinnkit-replaced").is_dir(), p.communicate(timeout=60)[1]
    return p


def test_overwrite_that_diverges_at_step_0_keeps_the_old_run(done_run, tmp_path):
    """lr=1e30: the loss is non-finite in the first chunk, and the run's only checkpoint
    would be the step-0 one written as it stops; that does not replace the old run."""
    out = copy_run(done_run, tmp_path / "copy")
    before = hashes(out)
    rc, err, _, _ = run_cli("train", TINY, "--set", "optim.phases.0.lr=1e30", "--overwrite",
                            "--out", out, *FAST)
    text = " ".join(err.split())
    assert rc == 1 and "nonfinite_loss at step 0/40" in text, err
    assert "--overwrite kept the old run: the new one stopped at step 0" in text, err
    assert "Lower the learning rate" in text and "Traceback" not in err
    assert hashes(out) == before


def test_overwrite_stopped_by_sigterm_right_after_start_keeps_the_old_run(done_run, tmp_path):
    """SIGTERM a few seconds after the old run moved aside (an eval in between): the
    run stops at step 0 or at the end of its first chunk, with no scheduled checkpoint."""
    out = copy_run(done_run, tmp_path / "copy")
    before = hashes(out)
    p = start_replacing(out)
    try:  # a reader meanwhile is told who replaces the run
        rc, err, _, _ = run_cli("eval", out)
        assert rc == 2 and one_paragraph(err), err
        assert f"is being replaced (--overwrite) by process {p.pid} on host" in " ".join(err.split())
    finally:
        p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=300)[1]
    assert p.returncode == 0 and "interrupted at step" in err, err
    assert "--overwrite kept the old run" in " ".join(err.split()), err
    assert hashes(out) == before


def test_overwrite_killed_before_its_first_checkpoint_is_named_then_restored(done_run, tmp_path):
    """SIGKILL leaves the old run in .pinnkit-replaced/: eval names it (and changes
    nothing), a second --overwrite moves it back before replacing it (and, as this one
    diverges, keeps it); killed again, --resume moves it back and continues it. A
    checkpoint write the old run's process was killed in left its temporary file, which
    that next start deletes (pinnkit's own pattern only)."""
    out = copy_run(done_run, tmp_path / "copy")
    before = hashes(out)
    p = start_replacing(out)
    p.kill()
    p.communicate(timeout=60)
    stranded = hashes(out)
    assert any(k.startswith(".pinnkit-replaced/") for k in stranded)
    rc, err, _, _ = run_cli("eval", out)
    text = " ".join(err.split())
    assert rc == 2 and one_paragraph(err), err
    assert "killed before its first checkpoint" in text and f"{out}/.pinnkit-replaced/" in text, err
    assert hashes(out) == stranded  # a reader moves nothing
    rc, err, _, _ = run_cli("train", TINY, "--set", "optim.phases.0.lr=1e30", "--overwrite",
                            "--out", out, *FAST)
    text = " ".join(err.split())
    assert rc == 1 and "an earlier --overwrite was killed" in text, err
    assert "--overwrite kept the old run" in text, err
    assert hashes(out) == before

    p = start_replacing(out)
    p.kill()
    p.communicate(timeout=60)
    aside = out / ".pinnkit-replaced"
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = ckpt.temp_path(aside / "checkpoints" / "step_00000060.eqx", dead.pid)
    leftover.write_bytes(os.urandom(4 << 20))  # what a write killed midway leaves
    ckpt.temp_path(aside / "config.yaml", dead.pid).write_text("half a config")
    keep = [aside / "checkpoints" / ".step_00000060.eqx.tmp", aside / "checkpoints" / "my.eqx.tmp1",
            aside / ".notes.txt.tmp7"]  # look-alikes that are not pinnkit's: left alone
    for k in keep:
        k.write_text("the user's")
    rc, err, _, _ = run_cli("train", "--resume", "--out", out, "--quiet", "--no-plots")
    text = " ".join(err.split())
    assert rc == 0 and "an earlier --overwrite was killed" in text, err
    assert "deleted 2 temporary file(s) (4.0 MiB" in text, err
    after = hashes(out)
    assert sorted(after) == sorted([*before, *(str(k.relative_to(aside)) for k in keep)])
    for name in ("config.yaml", "summary.json", "notes.txt"):  # checkpoint 40 is rewritten
        assert after[name] == before[name], name
    assert ckpt.latest_valid(out / "checkpoints")[1]["step"] == 40


def test_recover_keeps_every_old_file_whenever_the_move_was_killed(tmp_path):
    """`folder.recover` on the three states a kill can leave (no CLI: a SIGKILL between
    two renames cannot be timed): old files half moved aside (or half moved back) into
    .pinnkit-replacing/, and a complete .pinnkit-replaced/ beside a new run's files."""
    from pinnkit.run.folder import recover

    def old_run(d):
        (d / "checkpoints").mkdir(parents=True)
        (d / "checkpoints" / "step_00000040.eqx").write_bytes(b"old checkpoint")
        (d / "config.yaml").write_text("old config")
        (d / "notes.txt").write_text("old notes")
        return hashes(d)

    for state in ("half-moved", "replaced"):
        d = tmp_path / state
        want = old_run(d)
        if state == "half-moved":
            (d / ".pinnkit-replacing").mkdir()
            (d / "checkpoints").rename(d / ".pinnkit-replacing" / "checkpoints")
        else:
            (d / ".pinnkit-replaced").mkdir()
            for name in ("checkpoints", "config.yaml", "notes.txt"):
                (d / name).rename(d / ".pinnkit-replaced" / name)
            (d / "config.yaml").write_text("the new run's config")
            (d / "metrics.jsonl").write_text("{}\n")
        assert recover(d) and hashes(d) == want, state
        assert recover(d) == []  # nothing left aside


def test_a_link_named_like_the_aside_folder_is_refused_not_followed(done_run, tmp_path):
    """``RUN/.pinnkit-replacing -> elsewhere`` would have the next train move elsewhere's
    files into RUN: train and eval exit 2 naming it, and nothing moves on either side."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret.txt").write_text("not pinnkit's")
    out = copy_run(done_run, tmp_path / "copy")
    (out / ".pinnkit-replacing").symlink_to(victim)
    before, theirs = hashes(out), hashes(victim)
    for cmd in (["train", "--resume", "--out", out, *FAST], ["eval", out]):
        rc, err, _, _ = run_cli(*cmd)
        assert rc == 2 and one_paragraph(err), (cmd, err)
        # compared without whitespace: the paragraph may wrap at the path's hyphen
        assert f"{out}/.pinnkit-replacingisalink" in "".join(err.split()), (cmd, err)
        assert hashes(out) == before and hashes(victim) == theirs, cmd


def test_finished_run_resumed_keeps_its_summary(done_run):
    before = (done_run / "summary.json").read_bytes()
    rc, err, _, _ = run_cli("train", "--resume", "--out", done_run, "--quiet", "--no-plots")
    assert rc == 0, err
    assert (done_run / "summary.json").read_bytes() == before
    s = json.loads(before)
    assert s["final_loss"] is not None and s["steps_per_s"] is not None and s["final_terms"]


def test_second_writer_refused_and_stale_lock_taken_over(tmp_path):
    out = tmp_path / "live"
    first = subprocess.Popen([sys.executable, "-m", "pinnkit.cli", "train", TINY, "--out", str(out),
                              "--set", "train.steps=100000", "--set", "optim.phases.0.steps=100000",
                              "--set", "train.chunk=10", "--quiet", "--no-plots"],
                             env=ENV, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 300
        while not (out / "metrics.jsonl").exists() and time.time() < deadline and first.poll() is None:
            time.sleep(0.1)
        rc, err, _, _ = run_cli("train", TINY, "--out", out, "--resume", "auto", *FAST)
        assert rc == 2 and one_paragraph(err), err
        assert f"being written by process {first.pid} on host" in " ".join(err.split()), err
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=300)
    assert first.returncode == 0  # checkpointed and stopped
    assert ckpt.latest_valid(out / "checkpoints") is not None
    # A lock file left by a writer that died (SIGKILL leaves it): taken over with a message.
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / ".pinnkit.lock").write_text(json.dumps({"host": os.uname().nodename, "pid": dead.pid}))
    rc, err, _, _ = run_cli("train", TINY, "--out", stale, *FAST)
    assert rc == 0, err
    warning = " ".join(err.split())
    assert f"pinnkit: warning: the lock {stale / '.pinnkit.lock'} named process {dead.pid}" in warning
    assert "taking it over" in warning and not (stale / ".pinnkit.lock").exists()


def test_summary_is_strict_json_with_nonfinite_flagged(tmp_path):
    (tmp_path / "prob.py").write_text(PROBLEM_FILE)
    (tmp_path / "c.yaml").write_text(f"base: {TINY}\nproblem: {{name: 'prob.py:infinite_exact'}}\n")
    rc, err, _, _ = run_cli("train", tmp_path / "c.yaml", "--out", tmp_path / "r", *FAST)
    assert rc == 0, err

    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    s = json.loads((tmp_path / "r" / "summary.json").read_text(), parse_constant=refuse)
    assert s["rel_l2"]["u"] is None and s["linf"]["u"] is None
    assert s["nonfinite"] == {"rel_l2.u": "nan", "linf.u": "inf"}
    for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=refuse)


# ------------------------------------------------------------------ signals


def test_sigterm_ends_a_stuck_run_within_the_grace_period(tmp_path):
    """The reference never returns at the step-20 evaluation; SIGTERM cannot be honoured
    at a chunk boundary, so the process exits after --grace-period 3 s with status 143
    and the newest checkpoint (step 10, or 20 if written before the evaluation) valid."""
    (tmp_path / "prob.py").write_text(PROBLEM_FILE)
    marker = tmp_path / "marker"
    (tmp_path / "c.yaml").write_text(
        f"base: {TINY}\nproblem: {{name: 'prob.py:stuck', params: {{marker: '{marker}'}}}}\n")
    p = subprocess.Popen([sys.executable, "-m", "pinnkit.cli", "train", str(tmp_path / "c.yaml"),
                          "--out", str(tmp_path / "r"), *FAST, "--set", "train.eval_every=20",
                          "--set", "train.chunk=10", "--set", "checkpoint.every=10",
                          "--grace-period", "3"], env=ENV, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not marker.exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
    assert marker.exists(), p.communicate(timeout=5)[1]
    t0 = time.time()
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=120)[1]
    waited = time.time() - t0
    assert p.returncode == 128 + signal.SIGTERM, err
    assert waited >= 3 and "--grace-period 3" in err and "--resume auto" in err, (waited, err)
    assert ckpt.latest_valid(tmp_path / "r" / "checkpoints")[1]["step"] in (10, 20)


def test_sigterm_while_loading_exits_at_once(tmp_path):
    (tmp_path / "prob.py").write_text(PROBLEM_FILE)
    marker = tmp_path / "marker"
    (tmp_path / "c.yaml").write_text(
        f"base: {TINY}\nproblem: {{name: 'prob.py:slow', params: {{marker: '{marker}'}}}}\n")
    p = subprocess.Popen([sys.executable, "-m", "pinnkit.cli", "train", str(tmp_path / "c.yaml"),
                          "--out", str(tmp_path / "r"), "--quiet"], env=ENV, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.time() + 300
    while not marker.exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=30)[1]  # the factory sleeps 60 s: only an immediate exit fits
    assert p.returncode == 128 + signal.SIGTERM and "before training started" in err, err
    assert not (tmp_path / "r").exists()
