"""Logs on a cluster: piped progress lines with percent and ETA (one rate: steps/s
without compilation), the max_time line's resume command (run here: it resumes), and the
final line's figures for a problem without an exact solution."""

import os
import re
import subprocess
import sys
from pathlib import Path

from pinnkit.cli.main import _numbers, resume_command

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny" / "poisson2d.yaml")
ENV = {**os.environ, "JAX_PLATFORMS": "cpu",  # the compilation cache test_cli.py uses
       "JAX_COMPILATION_CACHE_DIR": os.environ.get("PINNKIT_TEST_JAX_CACHE", "/tmp/pinnkit-test-jax-cache"),
       "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}


def _train(*args):
    cmd = [sys.executable, "-m", "pinnkit.cli", "train", *args, "--no-plots"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=ENV)


def test_piped_progress_max_time_and_the_resume_command(tmp_path):
    """A run far too long for its 3 s budget stops with outcome max_time and prints the
    command that continues it; that command resumes from the checkpoint and goes on."""
    out = tmp_path / "run"
    first = _train(TINY, "--out", str(out), "--set", "train.steps=2000000", "--set", "train.chunk=200",
                   "--set", "train.max_time=3", "--set", "checkpoint.every=0")
    assert first.returncode == 0, first.stderr
    lines = re.findall(r"^step +(\d+)/2000000 \( *([\d.]+)%\)  loss \S+ +[\d.]+ steps/s  ETA (\S+)$",
                       first.stderr, flags=re.M)
    assert lines, first.stderr
    step, pct, _ = lines[-1]
    assert float(pct) == round(100 * int(step) / 2000000, 1)
    assert "step/s" not in first.stderr  # no second rate (tqdm's) anywhere
    m = re.search(r"^pinnkit: max_time at step (\d+)/2000000 ", first.stderr, flags=re.M)
    assert m, first.stderr
    stopped = int(m.group(1))
    cmd = re.search(r"^pinnkit: to continue, run: (pinnkit train .*)$", first.stderr, flags=re.M).group(1)
    assert cmd == resume_command(out)
    argv = cmd.split()[2:]  # the command as printed, run through this interpreter
    again = _train(*argv)
    assert again.returncode == 0, again.stderr
    assert f"resuming from {out / 'checkpoints'}" in again.stderr and f"at step {stopped}/" in again.stderr
    m2 = re.search(r"^pinnkit: max_time at step (\d+)/2000000 ", again.stderr, flags=re.M)
    assert m2 and int(m2.group(1)) > stopped


def test_final_line_figures():
    """The problem's own metrics, by dotted name, when there is no rel. L2 error to print."""
    metrics = {"c_D": 5.57, "c_L": 0.0107, "delta_p": 0.1175, "sides": {"top": 1}, "flag": True}
    assert _numbers(metrics) == {"c_D": 5.57, "c_L": 0.0107, "delta_p": 0.1175, "sides.top": 1.0}
    assert resume_command(Path("runs/my run"), 2) == "pinnkit train --out 'runs/my run' --devices 2 --resume"
